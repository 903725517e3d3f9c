"""``run.json``: what a run was — its resolved configuration (no secrets), versions, start, end, command line.

:class:`RunInfo` is the record (typed and versioned, like the results);
:func:`write_run_json` writes it so that a reader never sees half a file, and
:func:`read_run_json` reads it back (``--resume`` takes the run's input, agent
and results path from it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from farm.errors import UsageError
from farm.files import atomic_file
from farm.results._folder import RUN_JSON

__all__ = [
    "RUN_JSON",
    "RUN_INFO_VERSION",
    "GateComparison",
    "RunGate",
    "RunInfo",
    "RunOptions",
    "RunPart",
    "read_run_json",
    "write_run_json",
]


RUN_INFO_VERSION = 2
"""Version 2: a typed record, with ``engine`` and ``options`` (version 1 was an untyped dict)."""


class RunOptions(BaseModel):
    """The options of a run that shape its results, as ``run.json`` records them for ``--resume``
    (resolved: the command line's, else the resumed run's, else the defaults). Every field may be
    missing from a file an older farm wrote; keys this record does not know are ignored."""

    timeout: float | None = None
    """``--timeout``: seconds a case may take."""
    turn_timeout: float | None = None
    """``--turn-timeout``: seconds a turn may take."""
    on_missing_input: Literal["skip", "fail"] | None = None
    """``--on-missing-input``: what a case does when the agent awaits input and nothing can answer."""
    simulator: str | None = None
    """The default simulator agent of dynamic cases (``--simulator``, else ``[farm].simulator``)."""
    fail_fast: bool | None = None
    """``--fail-fast``: stop dispatching after the first failed case."""
    match: str | None = None
    """``--run``: the regex case ids were selected with."""
    tags: list[str] | None = None
    """``--tag``: the tags cases were selected with."""
    interactive: bool | None = None
    """``--interactive``: a person answered when the agent awaited input."""
    connector: str | None = None
    """``-c/--connector``: the connector that replaced the target agent's own."""
    golden: str | None = None
    """``--golden``: the folder every case was compared with its golden conversation in."""
    update_golden: str | None = None
    """``--update-golden``: the folder passed cases' conversations were written to as golden files."""
    retries: int | None = None
    """``--retries``: times a case that ended in an agent error or timeout ran again."""
    max_cost: float | None = None
    """``--max-cost``: the run's budget in USD, if any."""
    cache: bool | None = None
    """False with ``--no-cache``: no role call was answered from the role cache."""
    min_pass_rate: float | None = None
    """``--min-pass-rate``: the share of its tries a repeated case must pass (its gate)."""
    baseline: str | None = None
    """``--baseline``: the run folder this run is compared with, or ``last`` (the latest finished run of its input)."""
    adaptive_runs: str | None = None
    """``--runs MIN..MAX`` (``auto`` is ``2..10``): adaptive repeats, each case stopping once its pass
    rate is decided against the gate (docs/adaptive.md); null under ``--runs N``."""
    alpha: float | None = None
    """``--alpha``: the error level of each decision of adaptive repeats."""
    delta: float | None = None
    """``--delta``: the indifference zone's half-width around the gate under adaptive repeats."""
    attribute: bool | None = None
    """``--attribute``: a failed dynamic case that no simulator flag settled asked the attributor whose failure it is."""
    simulator_failures: Literal["failure", "error"] | None = None
    """``--simulator-failures``: what a failed dynamic case blamed on the simulator became."""


class GateComparison(BaseModel):
    """One agent of a run against the baseline run (the paired comparison of docs/results.md)."""

    agent: str
    """The agent of this run."""
    baseline_agent: str
    """The agent of the baseline run it is compared with: the same one, or when each run tested one agent, the baseline's."""
    cases: int
    """Cases both runs judged (at least one try not skipped on each side)."""
    left_out: int = 0
    """Cases only one of the two runs ran (a case is the same case only with the same suite and id): not compared."""
    difference: float
    """Mean over those cases of this run's pass fraction minus the baseline's, in [-1, 1]."""
    difference_interval: list[float]
    """Its 95 % interval."""
    p_value: float
    """Two-sided p-value of the paired test (``test``)."""
    p_adjusted: float
    """Holm-adjusted across the run's agents: what decides."""
    test: str
    """The paired test, as :attr:`farm.reports.stats.PairedDifference.test` names it (``exact McNemar``, ...)."""
    detectable_difference: float | None
    """The smallest difference this many cases detect at 80 % power."""
    worse: bool
    """Significantly worse than the baseline at the 5 % level (``p_adjusted``): the gate fails."""
    sentence: str
    """The comparison in one sentence."""


class RunGate(BaseModel):
    """The run's gate (``--min-pass-rate``, ``--baseline``): what ``farm test`` exits with, and why."""

    min_pass_rate: float
    """The share of its tries (not skipped) a case must pass."""
    baseline: str | None = None
    """The baseline run folder; null when none was asked for or ``last`` found none."""
    baseline_run_id: str | None = None
    """The baseline's run id."""
    verdict: Literal["passed", "failed"]
    """``failed`` when a case is below its gate, errored or timed out, an agent is significantly worse
    than the baseline, or the run stopped before every case ran; else ``passed``."""
    sentence: str
    """The verdict in words, with the comparison's sentences: the console summary's last line."""
    cases: int = 0
    """Cases judged, per agent (a case on two agents counts twice)."""
    below: int = 0
    """Of them, those below their gate, or with an error or a timeout."""
    flaky: int = 0
    """Of them, those that passed their gate while failing some tries."""
    comparisons: list[GateComparison] = Field(default_factory=list)
    """Per agent, the comparison with the baseline."""
    stopped: str | None = None
    """Why the run ended before every case ran (``interrupted``, ``max_cost``, ``fail_fast``,
    ``unreachable``, ``generator_failed``, ``stopped``, ...): the gate fails; null when it ran them all."""
    not_run: int = 0
    """Case runs (cases x runs x agents) planned that did not run."""


class RunPart(BaseModel):
    """One part of a run: its first, or a ``--resume`` that went on with it."""

    started_at: float
    """Unix time the part started."""
    ended_at: float | None = None
    """Unix time it ended; None while it runs, or when its process was killed (until a resume
    sets it to the last change of the results file: when the part last wrote a result)."""
    command: list[str] = Field(default_factory=list)
    """Its command line (or ``farm.run(...)`` for the Python API)."""
    engine: str | None = None
    """``local`` or ``ray``: the engine that ran its cases."""

    @property
    def wall_seconds(self) -> float:
        """Seconds from its start to its end (0 while it has none)."""
        return max(0.0, self.ended_at - self.started_at) if self.ended_at is not None else 0.0


class RunInfo(BaseModel):
    """What one run was, as ``run.json`` holds it. Every field but ``run_id`` may be missing
    from a file an older farm or another tool wrote."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = RUN_INFO_VERSION
    """The version of this record's shape (:data:`RUN_INFO_VERSION`)."""
    run_id: str = ""
    """The run's id: the folder's name unless ``-o`` put the results elsewhere."""
    status: Literal["running", "finished", "interrupted", "stopped", "not_started", "failed"] = "running"
    """``running`` until the run ends; ``interrupted`` by Ctrl-C/SIGTERM, ``stopped`` when the engine
    itself was lost or ``--max-cost`` was spent (``--resume`` finishes all three); ``not_started`` when
    the engine could not start, ``failed`` when it failed while running (a fault of the farm)."""
    engine: str | None = None
    """``local`` or ``ray``: the engine that ran the cases (the latest part's); ``--resume`` goes
    on with it unless ``--engine`` says otherwise."""
    started_at: float | None = None
    """Unix time the run (its first part) started."""
    ended_at: float | None = None
    """Unix time it ended (its latest part); None while running."""
    command: list[str] = Field(default_factory=list)
    """The command line that started the run (or ``farm.run(...)`` for the Python API); each
    part's is in ``parts``."""
    parts: list[RunPart] = Field(default_factory=list)
    """Every part of the run, in order: the first, then each ``--resume``."""
    wall_seconds: float | None = None
    """The run's wall time: its parts' summed (the time between them, when nothing ran, is not in it)."""
    input: str | None = None
    """The ``-i`` input: a file, a folder, a glob, a message, ``agents:<id>``, ``scripts:<id>``; several, joined by ``, ``."""
    inputs: list[str] = Field(default_factory=list)
    """Every ``-i`` value, in order, as given (a run recorded before they were kept has ``input`` alone)."""
    cwd: str | None = None
    """The folder the run started in: a relative ``input`` is relative to it (``--resume`` and
    ``farm rescore`` find the suite from anywhere)."""
    agent: str | None = None
    """The agent under test (the first, when several are)."""
    agents: list[str] = Field(default_factory=list)
    """Every agent under test, in the order of ``-n``: each case ran on each of them."""
    connector: str | None = None
    """The first agent's connector (after ``-c``); ``connectors`` has every agent's."""
    connectors: dict[str, str | None] = Field(default_factory=dict)
    """Per agent under test, the connector that served it (after ``-c``); null for one that needs none."""
    cases: int = 0
    """Cases in the suite (before ``--runs``)."""
    runs: int = 1
    """``--runs``: times every case runs."""
    parallel: int | None = None
    """Conversations in flight at most."""
    results: str | None = None
    """Path of the results JSONL."""
    options: RunOptions = Field(default_factory=RunOptions)
    """The run options that shape the results (timeouts, on_missing_input, simulator, ...), for ``--resume``."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The resolved configuration, with no secrets."""
    versions: dict[str, str] = Field(default_factory=dict)
    """Versions of the farm, Python and (on the ray engine) Ray."""
    ray: dict[str, Any] | None = None
    """The Ray cluster the ray engine ran on: address, nodes, CPUs."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Statuses of the whole run (every part, after a resume): total, passed, failed, skipped, errors, timeouts."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds from the start: engine ready, cases started, first and last result, outputs closed."""
    role_cache: dict[str, int] = Field(default_factory=dict)
    """``role_calls`` (calls the role cache could answer: the cases' simulator and validator calls,
    the generator's and the reporter's) and ``cache_hits`` (those it answered), every part included."""
    cost: dict[str, float | None] = Field(default_factory=dict)
    """``cost_usd`` (the agents under test) and ``role_cost_usd`` (simulator, validator, generator and
    reporter calls), in USD at the connectors' prices, every part included; null where no connector has a
    ``price`` (:meth:`farm.summary.Summary.cost`)."""
    agent_counts: dict[str, dict[str, float | int | None]] = Field(default_factory=dict)
    """Per agent under test: its status counts and ``cost_usd`` (:meth:`farm.summary.Summary.agent_counts`)."""
    generation: dict[str, Any] | None = None
    """For generated cases (``-i agents:``/``scripts:``): what the generation did, as
    :class:`farm.generation.GenerationStats` records it (asked, kept, duplicates, malformed,
    renamed, batches, calls, stop_reason, ...); null for a suite that was not generated."""
    rescored_from: dict[str, str] | None = None
    """For a ``farm rescore`` run: the source run's ``run_id`` and ``run_dir``, whose recorded
    conversations it re-evaluated; null for a live run."""
    stop_reason: str | None = None
    """Why the run dispatched no more before every case ran: ``max_cost`` (``--max-cost`` reached;
    resume with a larger budget), ``fail_fast``, ``unreachable``, ``generator_failed`` (a generated
    suite's generator failed before it wrote every case asked); null when it ran everything (or was
    interrupted). A run stopped with case runs left out has ``status`` ``stopped``."""
    not_rescorable: int | None = None
    """For a ``farm rescore`` run: case runs that could not be rescored (rerun them)."""
    gate: RunGate | None = None
    """The run's gate: threshold, baseline, verdict and its sentence; null until the run ends."""

    def recorded_parts(self) -> list[RunPart]:
        """The parts of the run so far; for a record written before parts were kept, its one
        part as its own start, end, command and engine say."""
        if self.parts or self.started_at is None:
            return [part.model_copy() for part in self.parts]
        return [RunPart(started_at=self.started_at, ended_at=self.ended_at, command=list(self.command), engine=self.engine)]


def write_run_json(run_dir: str | os.PathLike[str], info: RunInfo | dict[str, Any]) -> Path:
    """Write ``info`` to ``run_dir/run.json`` atomically (tmp file, fsync, rename); return its path.

    ``run_dir`` is created if needed. Call it again to update the file (e.g.
    with the end time): a reader sees the old or the new file, never a mix.
    """
    if isinstance(info, dict):
        info = RunInfo.model_validate(info)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RUN_JSON
    text = json.dumps(info.model_dump(mode="json"), indent=2, ensure_ascii=False, default=str) + "\n"
    with atomic_file(path) as file:
        file.write(text)
    return path


def read_run_json(run_dir: str | os.PathLike[str]) -> RunInfo:
    """The info in ``run_dir/run.json``; :class:`~farm.errors.UsageError` when missing or unreadable."""
    path = Path(run_dir) / RUN_JSON
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"Cannot read the run's info, as {path} does not exist; is {run_dir} a run folder?") from None
    try:
        info = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"Cannot read the run's info, as {path} is not valid JSON ({exc}).") from None
    if not isinstance(info, dict):
        raise UsageError(f"Cannot read the run's info, as {path} holds a JSON {type(info).__name__}, not an object.")
    try:
        return RunInfo.model_validate(info)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the record"
        raise UsageError(f"Cannot read the run's info, as {path}: {where}: {first['msg']}.") from None
