"""What ``farm report`` computes: one or many runs' results, summarised with pyarrow.

:func:`analyse` takes paths — a run folder (``cases.parquet``,
``turns.parquet``, ``assertions.parquet``, ``run.json``), a results folder
whose subfolders are runs, a single Parquet table, or a results JSONL file —
and returns a :class:`Report`:

- the summary of everything read: statuses, pass rate, turns, case time and
  tokens, and the same per run;
- tokens per agent (the target agent's usage, as the cases record it; the
  connector comes from ``run.json``);
- turn latency p50/p95/p99/max per agent and per turn index (exact, from
  ``turns.parquet``'s ``duration_ms``);
- the assertions that failed most (type and message) and the checkpoints
  missed most;
- per case over every run and repetition read: pass rate, stability class
  and the flaky cases (passed in some runs, failed, errored or timed out in
  others; skipped runs do not count);
- with two or more runs, the regressions (passed -> failed) and fixes
  (failed -> passed) between the last two by start time: with exactly two
  runs named, between those two. A case counts as passed in a run when
  every non-skipped repetition passed, and as failed when any did not.

Only the columns needed are read, and only failed assertion rows; the work
is vectorised (``group_by``, sorting), so 100k cases report in seconds.
Lists are cut to ``top`` entries (``top <= 0``: no cut); each list's
``*_total`` says how many there were.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, Field, ValidationError

from farm.errors import UsageError
from farm.results import CaseResult, Status, stability_class
from farm.writers import (
    ASSERTIONS_SCHEMA,
    CASES_SCHEMA,
    RUN_JSON,
    TURNS_SCHEMA,
    read_jsonl_results,
    read_run_json,
    rows_from_result,
)

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "AssertionFailure",
    "CaseChange",
    "CaseRate",
    "CheckpointMiss",
    "Comparison",
    "Latency",
    "Report",
    "RunSource",
    "Retries",
    "RunSummary",
    "Stability",
    "StatusCounts",
    "TokenUsage",
    "analyse",
    "find_runs",
]

REPORT_SCHEMA_VERSION = 1
QUANTILES = (0.5, 0.95, 0.99)

_KEY = ["run_id", "run_index", "attempt", "case_id"]
_CASE_COLUMNS = [
    *_KEY, "name", "status", "agent", "total_turns", "duration_ms",
    "prompt_tokens", "completion_tokens", "total_tokens", "started_at", "error", "source", "retried",
]  # fmt: skip
_ADDED_LATER = {"retried": 0}
"""Case columns a run of an older farm lacks, and the value they read as."""
_CASE = ["suite", "case_id"]
"""What names one case across runs: the suite file it came from and its id (ids repeat across suites)."""
_TURN_COLUMNS = [*_KEY, "turn", "duration_ms"]
_ASSERTION_COLUMNS = ["run_id", "case_id", "scope", "checkpoint_id", "type", "passed", "message", "required"]
_FAILING = [Status.FAILED.value, Status.ERROR.value, Status.TIMEOUT.value]
_UNKNOWN_AGENT = "(unknown)"


# --- the report --------------------------------------------------------------


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
    stability_class: str | None
    """``stable`` (100%), ``mostly_stable`` (>= 80%), ``unstable`` (>= 50%), ``highly_unstable`` (> 0%)
    or ``consistently_failing`` (0%); as the console."""
    statuses: dict[str, int] = Field(default_factory=dict)


class Stability(BaseModel):
    """Pass rates per case across runs and repetitions."""

    cases: int
    """Distinct cases (suite and id) that ran, not only skipped."""
    repeated: bool
    """Whether any case ran more than once; without that there is nothing to call flaky."""
    classes: dict[str, int]
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


# --- finding and reading runs ------------------------------------------------


@dataclass
class RunSource:
    """Where one run's (or one file's) results are."""

    path: Path
    cases: Path
    turns: Path | None = None
    assertions: Path | None = None
    jsonl: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    """``run.json`` when there is one."""


def find_runs(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[RunSource], list[str]]:
    """The result sources under ``paths`` and notes on folders passed over.

    Raises :class:`~farm.errors.UsageError` when a path does not exist or no
    results are found at all.
    """
    if not paths:
        raise UsageError("Cannot report, as no path was given; name a run folder, a results folder or a results file.")
    sources: list[RunSource] = []
    notes: list[str] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise UsageError(f"Cannot report on {path}, as it does not exist.")
        if path.is_file():
            sources.append(_file_source(path))
        elif (path / "cases.parquet").is_file():
            sources.append(_run_source(path))
        else:
            runs = sorted(child for child in path.iterdir() if (child / "cases.parquet").is_file())
            waiting = sorted(
                child.name for child in path.iterdir()
                if child.is_dir() and not (child / "cases.parquet").exists() and (child / ".parts").is_dir()
            )  # fmt: skip
            if waiting:
                notes.append(
                    f"Skipped {len(waiting)} run folder(s) with no cases.parquet yet (still running, or killed "
                    f"before consolidating; `farm test --resume` finishes them): {', '.join(waiting[:5])}"
                    + (" …" if len(waiting) > 5 else "")
                )
            if not runs:
                here = "it or its subfolders"
                if (path / ".parts").is_dir():
                    here = "it (its .parts/ are not consolidated yet: resume the run with `farm test --resume`)"
                raise UsageError(f"Cannot report on {path}, as there is no cases.parquet in {here}.")
            sources.extend(_run_source(run) for run in runs)
    unique: dict[Path, RunSource] = {}
    for source in sources:
        unique.setdefault(source.cases.resolve(), source)
    return list(unique.values()), notes


def _run_source(folder: Path) -> RunSource:
    info: dict[str, Any] = {}
    if (folder / RUN_JSON).is_file():
        try:
            info = read_run_json(folder).model_dump()
        except UsageError:
            info = {}
    turns, assertions = folder / "turns.parquet", folder / "assertions.parquet"
    return RunSource(
        path=folder,
        cases=folder / "cases.parquet",
        turns=turns if turns.is_file() else None,
        assertions=assertions if assertions.is_file() else None,
        info=info,
    )


def _file_source(path: Path) -> RunSource:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return RunSource(path=path, cases=path, jsonl=True)
    if suffix != ".parquet":
        raise UsageError(f"Cannot report on {path}, as it is neither a .parquet nor a .jsonl file.")
    if (
        path.name in ("cases.parquet", "turns.parquet", "assertions.parquet")
        and (path.parent / "cases.parquet").is_file()
    ):
        return _run_source(path.parent)
    try:
        names = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"Cannot report on {path}, as it is not a readable Parquet file ({exc}).") from None
    if "status" not in names:
        raise UsageError(f"Cannot report on {path}, as it is not a cases table (it has no status column).")
    return RunSource(path=path, cases=path)


@dataclass
class _Tables:
    cases: pa.Table
    turns: pa.Table
    failed: pa.Table
    """Assertion rows that did not pass."""


def _projected(schema: pa.Schema, columns: list[str]) -> pa.Schema:
    return pa.schema([schema.field(name) for name in columns])


def _read(path: Path, schema: pa.Schema, columns: list[str], filters: Any = None) -> pa.Table:
    try:
        present = set(pq.read_schema(path).names)
        missing = [name for name in columns if name not in present and name not in _ADDED_LATER]
        if missing:
            raise UsageError(
                f"Cannot report on {path}, as it lacks the columns {', '.join(missing)}; "
                "it was not written by this version of the farm."
            )
        table = pq.read_table(path, columns=[name for name in columns if name in present], filters=filters)
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"Cannot report on {path}, as it cannot be read ({exc}).") from None
    for name in columns:
        if name not in present:
            table = table.append_column(name, pa.array([_ADDED_LATER[name]] * table.num_rows, schema.field(name).type))
    return table.select(columns).cast(_projected(schema, columns))


def _read_jsonl(path: Path) -> tuple[pa.Table, pa.Table, pa.Table]:
    cases: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    assertions: list[dict[str, Any]] = []
    for number, record in enumerate(read_jsonl_results(path), 1):
        try:
            result = CaseResult.model_validate(record)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"])
            raise UsageError(
                f"Cannot report on {path}, as result {number} is not a case result ({where}: {problem['msg']})."
            ) from None
        case_row, turn_rows, assertion_rows = rows_from_result(result)
        cases.append(case_row)
        turns.extend(turn_rows)
        assertions.extend(row for row in assertion_rows if not row["passed"])
    return (
        pa.Table.from_pylist(cases, schema=CASES_SCHEMA).select(_CASE_COLUMNS),
        pa.Table.from_pylist(turns, schema=TURNS_SCHEMA).select(_TURN_COLUMNS),
        pa.Table.from_pylist(assertions, schema=ASSERTIONS_SCHEMA).select(_ASSERTION_COLUMNS),
    )


def _load(sources: list[RunSource]) -> tuple[_Tables, dict[str, RunSource]]:
    cases, turns, failed = [], [], []
    origin: dict[str, RunSource] = {}
    turn_schema = _projected(TURNS_SCHEMA, _TURN_COLUMNS)
    assertion_schema = _projected(ASSERTIONS_SCHEMA, _ASSERTION_COLUMNS)
    for source in sources:
        if source.jsonl:
            case_table, turn_table, failed_table = _read_jsonl(source.cases)
        else:
            case_table = _read(source.cases, CASES_SCHEMA, _CASE_COLUMNS)
            turn_table = _read(source.turns, TURNS_SCHEMA, _TURN_COLUMNS) if source.turns else turn_schema.empty_table()
            failed_table = (
                _read(source.assertions, ASSERTIONS_SCHEMA, _ASSERTION_COLUMNS, filters=pc.field("passed") == False)  # noqa: E712
                if source.assertions
                else assertion_schema.empty_table()
            )
        for run_id in pc.unique(case_table["run_id"]).to_pylist():
            origin.setdefault(run_id, source)
        cases.append(case_table)
        turns.append(turn_table)
        failed.append(failed_table)
    all_cases = pa.concat_tables(cases).combine_chunks()
    source = pc.fill_null(all_cases["source"], "")
    all_cases = all_cases.append_column("suite", pc.replace_substring_regex(source, pattern=r":\d+$", replacement=""))
    return (
        _Tables(
            cases=all_cases,
            turns=pa.concat_tables(turns).combine_chunks(),
            failed=pa.concat_tables(failed).combine_chunks(),
        ),
        origin,
    )


# --- the analysis ------------------------------------------------------------


def analyse(paths: Sequence[str | os.PathLike[str]], top: int = 10) -> Report:
    """Read the results under ``paths`` and summarise them (see the module docstring)."""
    sources, notes = find_runs(paths)
    tables, origin = _load(sources)
    if tables.cases.num_rows == 0:
        raise UsageError(f"Cannot report, as there are no case results in {', '.join(str(p) for p in paths)}.")
    cut = top if top > 0 else None
    runs = _runs(tables.cases, origin)
    failures, failures_total = _failed_assertions(tables.failed, cut)
    misses, misses_total = _missed_checkpoints(tables.failed, cut)
    return Report(
        runs=runs,
        summary=_summary(tables.cases),
        tokens=_tokens(tables.cases, sources),
        latency_by_agent=_latency_by_agent(tables),
        latency_by_turn=_percentiles(tables.turns["turn"], tables.turns["duration_ms"]),
        failed_assertions_total=failures_total,
        failed_assertions=failures,
        missed_checkpoints_total=misses_total,
        missed_checkpoints=misses,
        stability=_stability(tables.cases, cut),
        comparison=_compare(tables.cases, runs[-2].run_id or "", runs[-1].run_id or "", cut) if len(runs) >= 2 else None,
        notes=notes,
    )


def _status_counts(statuses: pa.ChunkedArray | pa.Array) -> StatusCounts:
    counts = StatusCounts(total=len(statuses))
    for entry in pc.value_counts(statuses).to_pylist():
        if entry["values"] in Status.__members__.values():
            setattr(counts, entry["values"], entry["counts"])
    ran = counts.total - counts.skipped
    counts.pass_rate = counts.passed / ran if ran else None
    return counts


def _summary(cases: pa.Table, **fields: Any) -> RunSummary:
    turns = _sum(cases["total_turns"])
    total = cases.num_rows
    return RunSummary(
        counts=_status_counts(cases["status"]),
        turns=turns,
        avg_turns=turns / total if total else 0.0,
        duration_ms=float(pc.sum(cases["duration_ms"]).as_py() or 0.0),
        prompt_tokens=_sum(cases["prompt_tokens"]),
        completion_tokens=_sum(cases["completion_tokens"]),
        total_tokens=_sum(cases["total_tokens"]),
        retries=_retries(cases),
        **fields,
    )


def _retries(cases: pa.Table) -> Retries:
    retried = pc.greater(cases["retried"], 0)
    return Retries(
        cases=_sum(pc.cast(retried, pa.int64())),
        attempts=_sum(cases["retried"]),
        passed=_sum(pc.cast(pc.and_(retried, pc.equal(cases["status"], Status.PASSED.value)), pa.int64())),
    )


def _sum(column: pa.ChunkedArray) -> int:
    return int(pc.sum(column).as_py() or 0)


def _runs(cases: pa.Table, origin: dict[str, RunSource]) -> list[RunSummary]:
    starts = {
        row["run_id"]: row["started_at_min"]
        for row in cases.group_by("run_id").aggregate([("started_at", "min")]).to_pylist()
    }
    runs = []
    for run_id, first_case in starts.items():
        source = origin[run_id]
        started = first_case
        info_start = source.info.get("started_at") if source.info.get("run_id", run_id) == run_id else None
        if isinstance(info_start, (int, float)):
            started = datetime.fromtimestamp(info_start, UTC)
        runs.append(
            _summary(
                cases.filter(pc.equal(cases["run_id"], run_id)),
                run_id=run_id,
                path=str(source.path),
                started_at=started,
                agent=source.info.get("agent"),
            )
        )
    # A run with no start time sorts by its id (ids begin with the start time).
    runs.sort(key=lambda run: (run.started_at.timestamp() if run.started_at else -math.inf, run.run_id or ""))
    return runs


def _tokens(cases: pa.Table, sources: list[RunSource]) -> list[TokenUsage]:
    connectors: dict[str, set[str]] = {}
    for source in sources:
        info = source.info
        agent = info.get("agent")
        if not agent:
            continue
        configured = ((info.get("config") or {}).get("agents") or {}).get(agent) or {}
        connector = info.get("connector") or configured.get("connector")
        if connector:
            connectors.setdefault(agent, set()).add(connector)
    grouped = (
        cases.set_column(cases.schema.get_field_index("agent"), "agent", pc.fill_null(cases["agent"], _UNKNOWN_AGENT))
        .group_by("agent")
        .aggregate([([], "count_all"), ("prompt_tokens", "sum"), ("completion_tokens", "sum"), ("total_tokens", "sum")])
        .sort_by([("total_tokens_sum", "descending"), ("agent", "ascending")])
    )
    return [
        TokenUsage(
            agent=row["agent"],
            connector=", ".join(sorted(connectors[row["agent"]])) if row["agent"] in connectors else None,
            cases=row["count_all"],
            prompt_tokens=row["prompt_tokens_sum"] or 0,
            completion_tokens=row["completion_tokens_sum"] or 0,
            total_tokens=row["total_tokens_sum"] or 0,
        )
        for row in grouped.to_pylist()
    ]


def _latency_by_agent(tables: _Tables) -> list[Latency]:
    if tables.turns.num_rows == 0:
        return []
    agents = tables.cases.select([*_KEY, "agent"])
    joined = tables.turns.select([*_KEY, "duration_ms"]).join(agents, keys=_KEY, join_type="left outer")
    return _percentiles(pc.fill_null(joined["agent"], _UNKNOWN_AGENT), joined["duration_ms"])


def _percentiles(keys: pa.ChunkedArray, values: pa.ChunkedArray) -> list[Latency]:
    """Exact p50/p95/p99/max of ``values`` per distinct key, in key order."""
    table = pa.table({"key": keys, "value": values}).filter(pc.is_valid(values))
    if table.num_rows == 0:
        return []
    table = table.sort_by([("key", "ascending"), ("value", "ascending")]).combine_chunks()
    ordered = table["value"].chunk(0)
    runs = pc.run_end_encode(table["key"].chunk(0))
    out, start = [], 0
    for key, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True):
        group = ordered.slice(start, end - start)
        p50, p95, p99 = pc.quantile(group, q=list(QUANTILES), interpolation="linear").to_pylist()
        out.append(
            Latency(group=str(key), turns=end - start, p50_ms=p50, p95_ms=p95, p99_ms=p99, max_ms=group[-1].as_py())
        )
        start = end
    return out


def _top(table: pa.Table, keys: list[str], cut: int | None) -> tuple[list[dict[str, Any]], int]:
    grouped = table.group_by(keys).aggregate([([], "count_all"), ("case_id", "count_distinct")])
    grouped = grouped.sort_by([("count_all", "descending"), ("case_id_count_distinct", "descending")])
    rows = grouped.slice(0, cut).to_pylist() if cut else grouped.to_pylist()
    return rows, grouped.num_rows


def _failed_assertions(failed: pa.Table, cut: int | None) -> tuple[list[AssertionFailure], int]:
    assertions = failed.filter(pc.not_equal(failed["scope"], "checkpoint"))
    rows, total = _top(assertions, ["type", "message"], cut)
    return [
        AssertionFailure(type=r["type"], message=r["message"], count=r["count_all"], cases=r["case_id_count_distinct"])
        for r in rows
    ], total


def _missed_checkpoints(failed: pa.Table, cut: int | None) -> tuple[list[CheckpointMiss], int]:
    missed = failed.filter(pc.and_(pc.equal(failed["scope"], "checkpoint"), pc.fill_null(failed["required"], True)))
    rows, total = _top(missed, ["checkpoint_id"], cut)
    return [
        CheckpointMiss(checkpoint_id=r["checkpoint_id"], count=r["count_all"], cases=r["case_id_count_distinct"])
        for r in rows
    ], total


def _flags(cases: pa.Table) -> pa.Table:
    status = cases["status"]
    return cases.append_column("is_pass", pc.cast(pc.equal(status, Status.PASSED.value), pa.int64())).append_column(
        "is_fail", pc.cast(pc.is_in(status, value_set=pa.array(_FAILING)), pa.int64())
    )


def _stability(cases: pa.Table, cut: int | None) -> Stability:
    per_case = (
        _flags(cases)
        .group_by(_CASE)
        .aggregate([([], "count_all"), ("is_pass", "sum"), ("is_fail", "sum"), ("name", "max")])
    )
    passes, failures = per_case["is_pass_sum"], per_case["is_fail_sum"]
    runs = pc.add(passes, failures)
    per_case = per_case.append_column("runs", runs).append_column(
        "pass_rate", pc.if_else(pc.greater(runs, 0), pc.divide(pc.cast(passes, pa.float64()), runs), None)
    )
    ran = per_case.filter(pc.greater(per_case["runs"], 0))
    rate = ran["pass_rate"]
    classes = {
        "stable": pc.sum(pc.greater_equal(rate, 1.0)).as_py() or 0,
        "mostly_stable": pc.sum(pc.and_(pc.greater_equal(rate, 0.8), pc.less(rate, 1.0))).as_py() or 0,
        "unstable": pc.sum(pc.and_(pc.greater_equal(rate, 0.5), pc.less(rate, 0.8))).as_py() or 0,
        "highly_unstable": pc.sum(pc.and_(pc.greater(rate, 0.0), pc.less(rate, 0.5))).as_py() or 0,
        "consistently_failing": pc.sum(pc.less_equal(rate, 0.0)).as_py() or 0,
    }
    worst_first = [("pass_rate", "ascending"), ("case_id", "ascending"), ("suite", "ascending")]
    flaky = ran.filter(pc.and_(pc.greater(ran["is_pass_sum"], 0), pc.greater(ran["is_fail_sum"], 0))).sort_by(
        worst_first
    )
    unstable = ran.filter(pc.less(rate, 1.0)).sort_by(worst_first)
    flaky_rows = (flaky.slice(0, cut) if cut else flaky).to_pylist()
    unstable_rows = (unstable.slice(0, cut) if cut else unstable).to_pylist()
    statuses = _statuses_of(cases, {(row["suite"], row["case_id"]) for row in flaky_rows + unstable_rows})
    max_runs = pc.max(per_case["count_all"]).as_py() or 0
    return Stability(
        cases=ran.num_rows,
        repeated=max_runs > 1,
        classes=classes,
        flaky_total=flaky.num_rows,
        flaky=[_case_rate(row, statuses) for row in flaky_rows],
        least_stable=[_case_rate(row, statuses) for row in unstable_rows],
    )


def _statuses_of(cases: pa.Table, keys: set[tuple[str, str]]) -> dict[tuple[str, str], dict[str, int]]:
    if not keys:
        return {}
    ids = sorted({case_id for _, case_id in keys})
    chosen = cases.filter(pc.is_in(cases["case_id"], value_set=pa.array(ids, pa.string())))
    out: dict[tuple[str, str], dict[str, int]] = {}
    for row in chosen.group_by([*_CASE, "status"]).aggregate([([], "count_all")]).to_pylist():
        key = (row["suite"], row["case_id"])
        if key in keys:
            out.setdefault(key, {})[row["status"]] = row["count_all"]
    return out


def _case_rate(row: dict[str, Any], statuses: dict[tuple[str, str], dict[str, int]]) -> CaseRate:
    rate = row["pass_rate"]
    counts = statuses.get((row["suite"], row["case_id"]), {})
    return CaseRate(
        case_id=row["case_id"],
        suite=row["suite"],
        name=row["name_max"],
        runs=row["runs"],
        passes=row["is_pass_sum"],
        failures=row["is_fail_sum"],
        skips=row["count_all"] - row["runs"],
        pass_rate=rate,
        stability_class=_stability_class(rate),
        statuses=dict(sorted(counts.items())),
    )


def _stability_class(rate: float | None) -> str | None:
    return None if rate is None else stability_class(rate)


def _outcomes(cases: pa.Table, run_id: str, prefix: str) -> pa.Table:
    """Per case of one run: passes, failures, its statuses and an error, columns prefixed."""
    run = _flags(cases.filter(pc.equal(cases["run_id"], run_id)))
    grouped = run.group_by(_CASE).aggregate(
        [("is_pass", "sum"), ("is_fail", "sum"), ("status", "distinct"), ("error", "max"), ("name", "max")]
    )
    return pa.table(
        {
            "suite": grouped["suite"],
            "case_id": grouped["case_id"],
            f"{prefix}_pass": grouped["is_pass_sum"],
            f"{prefix}_fail": grouped["is_fail_sum"],
            f"{prefix}_status": pc.binary_join(grouped["status_distinct"], ", "),
            f"{prefix}_error": grouped["error_max"],
            f"{prefix}_name": grouped["name_max"],
        }
    )


def _compare(cases: pa.Table, base: str, head: str, cut: int | None) -> Comparison:
    both = _outcomes(cases, base, "base").join(_outcomes(cases, head, "head"), keys=_CASE, join_type="inner")
    base_ok = pc.and_(pc.equal(both["base_fail"], 0), pc.greater(both["base_pass"], 0))
    head_ok = pc.and_(pc.equal(both["head_fail"], 0), pc.greater(both["head_pass"], 0))
    base_bad, head_bad = pc.greater(both["base_fail"], 0), pc.greater(both["head_fail"], 0)
    regressions = both.filter(pc.and_(base_ok, head_bad)).sort_by([("case_id", "ascending"), ("suite", "ascending")])
    fixes = both.filter(pc.and_(base_bad, head_ok)).sort_by([("case_id", "ascending"), ("suite", "ascending")])

    def changes(table: pa.Table) -> list[CaseChange]:
        rows = (table.slice(0, cut) if cut else table).to_pylist()
        return [
            CaseChange(
                case_id=row["case_id"],
                suite=row["suite"],
                name=row["head_name"] or row["base_name"],
                base_status=row["base_status"],
                head_status=row["head_status"],
                error=row["head_error"],
            )
            for row in rows
        ]

    return Comparison(
        base_run=base,
        head_run=head,
        regressions_total=regressions.num_rows,
        fixes_total=fixes.num_rows,
        regressions=changes(regressions),
        fixes=changes(fixes),
    )
