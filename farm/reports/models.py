"""The report ``farm report`` prints, and ``farm report --json`` writes: pydantic models.

:func:`farm.reports.analysis.analyse` builds a :class:`Report`; the CLI renders
it as tables or dumps it as JSON (``schema_version`` versions that document).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from farm.results import StabilityClass

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "AssertionFailure",
    "CaseChange",
    "CaseRate",
    "CheckpointMiss",
    "Comparison",
    "Latency",
    "Report",
    "Retries",
    "RunSummary",
    "Stability",
    "StatusCounts",
    "TokenUsage",
]

REPORT_SCHEMA_VERSION = 1


class StatusCounts(BaseModel):
    """Case runs per status."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    error: int = 0
    timeout: int = 0
    pass_rate: float | None = None
    """passed / (total - skipped); null when nothing ran."""


class Retries(BaseModel):
    """How often ``--retries`` was needed: a case run that ended in an agent error or timeout, run again."""

    cases: int = 0
    """Case runs that needed at least one retry."""
    attempts: int = 0
    """Attempts run again, over all of them."""
    passed: int = 0
    """Of ``cases``, those that passed after a retry."""


class RunSummary(BaseModel):
    """One run (or, for the whole report, everything read)."""

    run_id: str | None = None
    """Null in :attr:`Report.summary`, which covers every run."""
    path: str | None = None
    """The folder or file it was read from."""
    started_at: datetime | None = None
    """``run.json``'s start, else the earliest case start."""
    agent: str | None = None
    """The agent under test according to ``run.json``."""
    counts: StatusCounts = Field(default_factory=StatusCounts)
    turns: int = 0
    avg_turns: float = 0.0
    duration_ms: float = 0.0
    """Sum of the case runs' durations."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    retries: Retries = Field(default_factory=Retries)
    """How often ``--retries`` was needed."""


class TokenUsage(BaseModel):
    """Tokens one agent used over the case runs read."""

    agent: str
    connector: str | None = None
    """From ``run.json``'s configuration; null when unknown, several comma-separated when runs differ."""
    role: str = "target"
    """``target``: the agent under test (simulator and validator usage is not in the results)."""
    cases: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Latency(BaseModel):
    """Turn latency of one group (an agent, or a turn index)."""

    group: str
    turns: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


class AssertionFailure(BaseModel):
    """A failing assertion (type and message) and how often it failed."""

    type: str | None
    message: str | None
    count: int
    cases: int
    """Distinct case ids it failed in."""


class CheckpointMiss(BaseModel):
    """A required checkpoint and how often it was not reached."""

    checkpoint_id: str | None
    count: int
    cases: int


class CaseRate(BaseModel):
    """One case over every run and repetition read."""

    case_id: str
    suite: str = ""
    """The file the case came from (its ``source`` without the line); cases are told apart by suite and id."""
    name: str | None = None
    runs: int
    """Case runs that were not skipped."""
    passes: int
    failures: int
    """Runs that failed, errored or timed out."""
    skips: int
    pass_rate: float | None
    stability_class: StabilityClass | None
    """``stable`` (100%), ``mostly_stable`` (>= 80%), ``unstable`` (>= 50%), ``highly_unstable`` (> 0%)
    or ``consistently_failing`` (0%); as the console."""
    statuses: dict[str, int] = Field(default_factory=dict)


class Stability(BaseModel):
    """Pass rates per case across runs and repetitions."""

    cases: int
    """Distinct cases (suite and id) that ran, not only skipped."""
    repeated: bool
    """Whether any case ran more than once; without that there is nothing to call flaky."""
    classes: dict[StabilityClass, int]
    """Cases per stability class, every class in its order (best first)."""
    flaky_total: int
    flaky: list[CaseRate]
    """Passed in some runs and failed, errored or timed out in others; lowest pass rate first."""
    least_stable: list[CaseRate]
    """Cases with the lowest pass rate (below 100%) first."""


class CaseChange(BaseModel):
    """A case whose outcome changed between two runs."""

    case_id: str
    suite: str = ""
    """As in :class:`CaseRate`."""
    name: str | None = None
    base_status: str
    """The statuses the case had in the base run, comma-separated."""
    head_status: str
    error: str | None = None
    """A head run error, if any."""


class Comparison(BaseModel):
    """Regressions and fixes from ``base_run`` to ``head_run``."""

    base_run: str
    head_run: str
    regressions_total: int
    fixes_total: int
    regressions: list[CaseChange]
    fixes: list[CaseChange]


class Report(BaseModel):
    """Everything ``farm report`` prints; ``--json`` prints this."""

    schema_version: int = REPORT_SCHEMA_VERSION
    runs: list[RunSummary]
    """Each run read, in start order."""
    summary: RunSummary
    tokens: list[TokenUsage]
    latency_by_agent: list[Latency]
    latency_by_turn: list[Latency]
    failed_assertions_total: int
    failed_assertions: list[AssertionFailure]
    missed_checkpoints_total: int
    missed_checkpoints: list[CheckpointMiss]
    stability: Stability
    comparison: Comparison | None = None
    """Null with fewer than two runs."""
    notes: list[str] = Field(default_factory=list)
    """Things the reader should know, e.g. a folder skipped because it has no tables yet."""
