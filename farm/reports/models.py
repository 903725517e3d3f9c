"""The report ``farm report`` prints, and ``farm report --json`` writes: pydantic models.

:func:`farm.reports.analysis.analyse` builds a :class:`Report`; the CLI renders
it as tables or dumps it as JSON (``schema_version`` versions that document).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from farm.results import StabilityClass

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "AgentStats",
    "AssertionFailure",
    "CaseDelta",
    "CaseStats",
    "CaseChange",
    "CaseRate",
    "CheckpointMiss",
    "Comparison",
    "Latency",
    "PairedComparison",
    "Report",
    "Retries",
    "RunSummary",
    "Stability",
    "StatusCounts",
    "TrendPoint",
    "TokenUsage",
]

REPORT_SCHEMA_VERSION = 2


class StatusCounts(BaseModel):
    """Case runs per status."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    error: int = 0
    timeout: int = 0
    role_errors: int = 0
    """Of ``error``, the case runs a role failed (simulator, validator, generator, reporter), not the agent."""
    blame: dict[str, int] = Field(default_factory=dict)
    """Failed dynamic case runs by whose failure they are (``agent``, ``simulator``, ``checkpoint``,
    ``unknown``); those ``[farm].simulator_failures = "error"`` made errors included."""
    pass_rate: float | None = None
    """passed / (total - skipped - role_errors); null when nothing ran, and in a summary of several
    agents' case runs (each agent's own is in its ``per_agent`` entry)."""


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
    cost_usd: float | None = None
    """USD the agents under test cost (their connectors' ``price``); null when none had a price."""
    role_cost_usd: float | None = None
    """USD the cases' simulator and validator calls cost, apart from ``cost_usd``; null when no role had a price."""
    status: str | None = None
    """``run.json``'s status (``finished``, ``interrupted``, ``stopped``, ...); null in :attr:`Report.summary`
    and for results without a ``run.json``."""
    not_run: int | None = None
    """Case runs (cases x runs x agents) the run planned that did not run; under adaptive repeats, the
    tries that were due and did not run; null as ``status``."""
    adaptive: bool = False
    """Whether the run repeated its cases adaptively (``--runs auto``, ``MIN..MAX``): how many tries it
    would have made depends on their results."""
    per_agent: list[RunSummary] = Field(default_factory=list)
    """With several agents under test, each one's own figures (``agent`` names it); empty with one."""


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
    cost_usd: float | None = None
    """USD these tokens cost at the connector's ``price``; null without one."""


class Latency(BaseModel):
    """Turn latency of one group (an agent, or a turn index)."""

    group: str
    agent: str | None = None
    """For a turn index, the agent whose turns these are, when the runs tested several (each agent's apart)."""
    turns: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


class AssertionFailure(BaseModel):
    """A failing assertion (type and message) and how often it failed."""

    type: str | None
    message: str | None
    agent: str | None = None
    """The agent it failed on, when the runs tested several (each agent's failures counted apart)."""
    count: int
    cases: int
    """Distinct cases (suite and id) it failed in."""


class CheckpointMiss(BaseModel):
    """A required checkpoint and how often it was not reached."""

    checkpoint_id: str | None
    agent: str | None = None
    """The agent that missed it, when the runs tested several."""
    count: int
    cases: int
    """Distinct cases (suite and id) that missed it."""


class CaseRate(BaseModel):
    """One case over every run and repetition read."""

    case_id: str
    suite: str = ""
    """The file the case came from (its ``source`` without the line); cases are told apart by suite and id."""
    agent: str | None = None
    """The agent under test whose tries these are (each agent's tries of a case are counted apart)."""
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
    """Distinct cases (suite and id) that ran, not only skipped, on any agent."""
    agents: list[str] = Field(default_factory=list)
    """The agents under test whose tries these are. Each agent's tries of a case are counted apart:
    with several agents, ``classes``, ``flaky`` and ``least_stable`` count a case once per agent."""
    repeated: bool
    """Whether any case ran more than once; without that there is nothing to call flaky."""
    classes: dict[StabilityClass, int]
    """Cases per stability class (once per agent that ran them), every class in its order (best first)."""
    classes_by_agent: dict[str, dict[StabilityClass, int]] = Field(default_factory=dict)
    """``classes`` of each agent on its own."""
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
    agent: str | None = None
    """The agent whose outcome changed, when the runs tested several (null when each tested one)."""
    name: str | None = None
    base_status: str
    """The statuses the case had in the base run, comma-separated."""
    head_status: str
    error: str | None = None
    """A head run error, if any."""


class Comparison(BaseModel):
    """Regressions and fixes from ``base_run`` to ``head_run``, on the cases both ran."""

    base_run: str
    head_run: str
    paired: int = 0
    """Cases both runs ran: the same suite and case id (and agent, when a run tested several)."""
    left_out: int = 0
    """Cases only one of the runs ran: not compared. With ``paired`` 0, nothing is."""
    sentence: str = ""
    """What the two runs are compared on, in one sentence."""
    regressions_total: int
    fixes_total: int
    regressions: list[CaseChange]
    fixes: list[CaseChange]


class CaseStats(BaseModel):
    """One case of one agent in one run, over its tries (``--runs``)."""

    case_id: str
    suite: str = ""
    name: str | None = None
    agent: str
    tries: int
    """Tries that were judged (not skipped)."""
    passes: int
    pass_rate: float
    interval: tuple[float, float]
    """95 % Wilson interval ``[low, high]`` of the case's pass rate."""
    pass_at_k: float | None = None
    """Chance that at least one of k tries passes (the agent's ``k``); null when the case has fewer tries."""
    pass_hat_k: float | None = None
    """Chance that all k tries pass; null likewise."""


class AgentStats(BaseModel):
    """One agent under test in one run: its pass rate with a confidence interval, pass@k, pass^k and cost."""

    run_id: str
    agent: str
    cases: int
    """Distinct cases judged at least once."""
    tries: int
    """Case runs judged (skipped ones and those a rescore could not judge left out)."""
    passes: int
    pass_rate: float | None
    """``passes / tries``; null when nothing was judged."""
    interval: tuple[float, float]
    """95 % interval ``[low, high]`` of the pass rate: Wilson's, clustered by case when cases ran more than once
    (:func:`farm.reports.stats.clustered_interval`)."""
    interval_method: Literal["wilson", "wilson-clustered"]
    """``wilson`` (one try per case) or ``wilson-clustered`` (tries of one case counted as one cluster)."""
    k: int | None = None
    """The k of ``pass_at_k``/``pass_hat_k``: the run's ``--runs`` (from ``run.json``, else the most tries any case
    has); null when it is 1."""
    k_cases: int = 0
    """Cases with at least k tries, which ``pass_at_k`` and ``pass_hat_k`` average over."""
    pass_at_k: float | None = None
    """Mean over those cases of the unbiased estimate of "at least one of k tries passes"."""
    pass_hat_k: float | None = None
    """Mean over those cases of the unbiased estimate of "all k tries pass" (reliability)."""
    cost_usd: float | None = None
    """USD the agent cost over the run; null when its connector has no ``price``."""
    role_cost_usd: float | None = None
    """USD its cases' simulator and validator calls cost; null when no role had a price."""
    cost_per_case_usd: float | None = None
    """``cost_usd`` per case run (a case tried three times is three case runs)."""
    role_errors: int = 0
    """Case runs left out of these figures: they ended in an error of a role (a simulator that died, a judge
    that answered no JSON), which says nothing about the agent."""
    flaky_total: int = 0
    """Cases that passed some tries and not others."""
    flaky: list[CaseStats] = Field(default_factory=list)
    """Those cases, lowest pass rate first."""


class CaseDelta(BaseModel):
    """A case that went better or worse from A to B in a :class:`PairedComparison`."""

    case_id: str
    suite: str = ""
    name: str | None = None
    a_passes: int
    a_tries: int
    b_passes: int
    b_tries: int
    a_estimate: float | None = None
    """Where adaptive repeats stopped the case on side A: the unbiased estimate of its pass rate that
    the comparison counts (its pass fraction is biased by the early stop); null under ``--runs N``."""
    b_estimate: float | None = None
    """The same on side B."""


class PairedComparison(BaseModel):
    """A and B on the cases both ran: which got better or worse, and whether that is more than noise."""

    kind: Literal["agents", "runs"]
    """``agents``: two agents of one run; ``runs``: the same cases in two runs."""
    a: str
    """A's name: an agent (``run id (agent)`` when the report reads several runs), or a run id (with its
    agent when the runs tested different or several agents)."""
    b: str
    a_run: str
    b_run: str
    a_agent: str
    b_agent: str
    cases: int
    """Cases both judged."""
    b_better: int
    """Cases where B's pass rate is higher than A's (with one try each: B passes, A fails)."""
    b_worse: int
    """Cases where B's pass rate is lower (with one try each: A passes, B fails)."""
    same: int
    """Cases where both did equally well."""
    difference: float
    """The mean over the cases of B's pass fraction minus A's (a fraction; the console shows percentage
    points): positive when B passes more often. Where adaptive repeats stopped a case, its unbiased
    estimate stands for its pass fraction (``test`` says so), as in the gate's ``--baseline``."""
    difference_interval: tuple[float, float]
    """95 % interval ``[low, high]`` of ``difference`` (mean +- Student's t times its standard error)."""
    test: str
    """The test behind ``p_value``: ``exact McNemar`` (one try per case on each side),
    ``paired t and Cochran-Mantel-Haenszel`` (repeated tries: both tests, the larger p) or, where a side
    ran adaptive repeats, ``paired t of unbiased estimates (adaptive repeats)``."""
    p_value: float
    """Two-sided p of ``test``: how often a difference this large would show between two sides that pass
    every case equally often."""
    p_adjusted: float
    """``p_value`` Holm-adjusted for the report's comparisons (the same with one comparison): it decides."""
    significant: bool
    """``p_adjusted`` below 0.05: significant at the 5 % level."""
    detectable_difference: float | None = None
    """The smallest ``|difference|`` these cases would detect with 80 % power at the 5 % level (a fraction);
    null with fewer than two cases."""
    sentence: str
    """What the comparison says, in one sentence."""
    better: list[CaseDelta] = Field(default_factory=list)
    worse: list[CaseDelta] = Field(default_factory=list)


class AdaptiveStop(BaseModel):
    """One case of a run under adaptive repeats (``--runs auto``, ``MIN..MAX``): where it stopped."""

    run_id: str | None = None
    case_id: str
    suite: str = ""
    agent: str | None = None
    tries: int
    """The tries the decision counted."""
    stopped: str
    """``decided_above``, ``decided_below`` or ``max_tries`` (no decision within the most tries)."""
    verdict: str | None = None
    """``above`` or ``below`` the gate."""
    said: str
    """The same in words: "stopped after 2 tries: above the gate"."""


class TrendPoint(BaseModel):
    """One agent's pass rate in one run: a point of the trend over the runs read (:func:`farm.results.read_runs`)."""

    run_id: str
    started_at: datetime | None = None
    """The run's start (``run.json``); null when it does not say."""
    agent: str
    passed: int
    judged: int
    """Case runs that count towards the pass rate: not skipped, and not an error a role made."""
    pass_rate: float | None = None
    """``passed / judged``; null when nothing was judged."""
    verdict: str | None = None
    """The run's gate verdict (``passed``, ``failed``); null when the run recorded none."""


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
    agents: list[AgentStats] = Field(default_factory=list)
    """Per run and agent under test: pass rate with its interval, pass@k, pass^k, cost, flaky cases."""
    comparisons: list[PairedComparison] = Field(default_factory=list)
    """Paired comparisons: every two agents of a run, and the same cases in the last two runs."""
    comparison: Comparison | None = None
    """Null with fewer than two runs."""
    notes: list[str] = Field(default_factory=list)
    """Things the reader should know, e.g. a folder skipped because it has no tables yet."""
    adaptive: list[AdaptiveStop] = Field(default_factory=list)
    """Under adaptive repeats, where each case stopped (those below their gate first; ``--top`` of them)."""
    adaptive_total: int = 0
    """Cases that stopped under adaptive repeats (``adaptive`` may show fewer)."""
    trend: list[TrendPoint] = Field(default_factory=list)
    """The pass rate per agent per run, oldest run first."""
    shared_case_ids: list[str] = Field(default_factory=list)
    """Case ids that more than one suite of the runs read uses (sorted): each of them names two
    cases or more, so a row of one names its suite too, even where the other suites' cases are not listed."""
