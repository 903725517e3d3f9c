"""What ``farm report`` computes: one or many runs' results, summarised with pyarrow.

:func:`analyse` takes paths — a run folder (``cases.parquet``,
``turns.parquet``, ``assertions.parquet``, ``run.json``), a results folder
whose subfolders are runs, a single Parquet table, or a results JSONL file —
and returns a :class:`Report`:

- the summary of everything read: statuses, pass rate, turns, case time and
  tokens, and the same per run;
- tokens per agent (the target agent's usage, as the cases record it; each
  agent's connector comes from ``run.json``);
- turn latency p50/p95/p99/max per agent and per turn index (exact, from
  ``turns.parquet``'s ``duration_ms``);
- the assertions that failed most (type and message) and the checkpoints
  missed most;
- per case and agent over every run and repetition read: pass rate,
  stability class and the flaky cases (passed in some runs, failed, errored
  or timed out in others; skipped runs do not count);
- the trend: the pass rate per agent per run, oldest first (:mod:`farm.reports.trend`, which
  reads every run as one dataset with :func:`farm.results.read_runs`);
- with two or more runs, the regressions (passed -> failed) and fixes
  (failed -> passed) between the last two by start time: with exactly two
  runs named, between those two, per agent. A case is paired only with the same
  case, by its suite and id (:data:`~farm.results.CASE_KEY`); the comparison says
  how many it paired and left out, and runs with no case in common are not
  compared. A case counts as passed in a run when every non-skipped repetition
  passed, and as failed when any did not.

Every figure is per agent: a case run is keyed by
:data:`~farm.results.CASE_RUN_KEY`, so no row of one agent joins another's.
:mod:`farm.reports.runs` finds and reads the runs (only the columns needed,
and only failed assertion rows), :mod:`farm.reports.models` holds the report;
this module computes it. The work is vectorised (``group_by``, sorting), so
100k cases report in seconds. Lists are cut to ``top`` entries (``top <= 0``: no cut); each list's
``*_total`` says how many there were.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from farm.errors import UsageError
from farm.gate import ended_early
from farm.reports.agentstats import statistics
from farm.reports.models import (
    AssertionFailure,
    CaseChange,
    CaseRate,
    CheckpointMiss,
    Comparison,
    Latency,
    Report,
    Retries,
    RunSummary,
    Stability,
    StatusCounts,
    TokenUsage,
)
from farm.reports.runs import find_runs, load_runs
from farm.reports.stats import paired_sentence
from farm.reports.trend import trend
from farm.results import CASE_KEY, RunRecord, StabilityClass, Status, stability_class
from farm.wording import plural

if TYPE_CHECKING:
    from farm.sequential import Sequential

__all__ = ["analyse", "role_errors"]

QUANTILES = (0.5, 0.95, 0.99)

_CASE = list(CASE_KEY)
"""What names one case across runs: the suite it came from and its id (ids repeat across suites)."""
_CASE_OF_AGENT = [*_CASE, "agent"]
"""One case as one agent ran it: with several agents under test, each agent's tries of a case are apart."""
_FAILING = [Status.FAILED.value, Status.ERROR.value, Status.TIMEOUT.value]
_UNKNOWN_AGENT = "(unknown)"


def analyse(paths: Sequence[str | os.PathLike[str]], top: int = 10) -> Report:
    """Read the results under ``paths`` and summarise them (see the module docstring)."""
    sources, notes = find_runs(paths)
    tables, origin, problems = load_runs(sources)
    if tables.cases.num_rows == 0:
        found = f" ({'; '.join(problems)})" if problems else ""
        raise UsageError(f"Cannot report, as there are no case results in {', '.join(str(p) for p in paths)}{found}.")
    notes = [*notes, *problems]
    cut = top if top > 0 else None
    runs = _runs(tables.cases, origin)
    notes += [_unfinished(run) for run in runs if run.status not in (None, "finished") or run.not_run]
    several = len(pc.unique(tables.cases["agent"])) > 1
    failures, failures_total = _failed_assertions(tables.failed, cut, several)
    misses, misses_total = _missed_checkpoints(tables.failed, cut, several)
    run_order = [run.run_id or "" for run in runs]
    runs_of = {run_id: _declared_runs(source, run_id) for run_id, source in origin.items()}
    rules = {run_id: _rule(source, run_id) for run_id, source in origin.items()}
    agents, comparisons = statistics(_flags(_named_agents(tables.cases)), runs_of, run_order, cut, rules)
    return Report(
        runs=runs,
        summary=_summary_per_agent(tables.cases),
        tokens=_tokens(tables.cases, sources),
        latency_by_agent=_percentiles(pc.fill_null(tables.turns["agent"], _UNKNOWN_AGENT), tables.turns["duration_ms"]),
        latency_by_turn=_latency_by_turn(tables.turns),
        failed_assertions_total=failures_total,
        failed_assertions=failures,
        missed_checkpoints_total=misses_total,
        missed_checkpoints=misses,
        stability=_stability(tables.cases, cut),
        agents=agents,
        comparisons=comparisons,
        comparison=_compare(tables.cases, runs[-2].run_id or "", runs[-1].run_id or "", cut) if len(runs) >= 2 else None,
        notes=notes,
        trend=trend([source.path for source in sources]),
        shared_case_ids=_shared_case_ids(tables.cases),
        **_adaptive(tables.cases, cut),
    )


def _shared_case_ids(cases: pa.Table) -> list[str]:
    """The case ids more than one suite uses."""
    suites = cases.group_by(["case_id"], use_threads=False).aggregate([("suite", "count_distinct")])
    return sorted(suites.filter(pc.greater(suites["suite_count_distinct"], 1))["case_id"].to_pylist())


def _adaptive(cases: pa.Table, cut: int | None) -> dict[str, Any]:
    """Under adaptive repeats, where each case stopped: its last try says (below the gate first)."""
    from farm.reports.models import AdaptiveStop
    from farm.sequential import stop_said

    stopped = cases.filter(pc.is_valid(cases["stopped"])).to_pylist()
    stopped.sort(key=lambda row: (row["verdict"] == "above", row["run_id"] or "", row["agent"] or "", row["case_id"]))
    shown = [
        AdaptiveStop(
            run_id=row["run_id"],
            case_id=row["case_id"],
            suite=row["suite"] or "",
            agent=row["agent"],
            tries=row["tries"] or 0,
            stopped=row["stopped"],
            verdict=row["verdict"],
            said=stop_said(row["stopped"], row["tries"] or 0, row["verdict"]),
        )  # fmt: skip
        for row in (stopped[:cut] if cut else stopped)
    ]
    return {"adaptive": shown, "adaptive_total": len(stopped)}


def _named_agents(cases: pa.Table) -> pa.Table:
    """``cases`` with a null agent read as ``(unknown)``."""
    return cases.set_column(cases.schema.get_field_index("agent"), "agent", pc.fill_null(cases["agent"], _UNKNOWN_AGENT))


def _unfinished(run: RunSummary) -> str:
    """A run that did not run every case it planned, said (its figures are of part of it)."""
    said = f"run {run.run_id} is {run.status}" if run.status != "finished" else f"run {run.run_id} stopped early"
    if not run.not_run:  # stopped after its last case had started: nothing planned is missing
        return f"{said}; its figures are of the {plural(run.counts.total, 'case run')} it ended."
    if run.adaptive:  # how many tries it would have made depends on their results: no total was planned
        return f"{said}: {run.not_run} tries that were due did not run (adaptive repeats); its figures are of the {run.counts.total} that did."
    planned = run.counts.total + (run.not_run or 0)
    return f"{said}: {run.not_run} of {planned} planned case runs did not run; its figures are of those that did."


def _own_info(source: RunRecord, run_id: str) -> bool:
    """Whether ``source`` has a ``run.json`` and it is ``run_id``'s (a results file may hold other runs)."""
    return source.has_info and (source.info.run_id or run_id) == run_id


def _declared_runs(source: RunRecord, run_id: str) -> int | None:
    """The run's ``--runs`` as its ``run.json`` says (None without one, or for another run's file)."""
    runs = source.info.runs if _own_info(source, run_id) and "runs" in source.info.model_fields_set else None
    return runs if runs is not None and runs >= 1 else None


def _rule(source: RunRecord, run_id: str) -> Sequential | None:
    """The run's stopping rule under adaptive repeats, as its ``run.json`` says (None: ``--runs N``,
    no ``run.json``, or another run's file)."""
    from farm.sequential import Sequential

    return Sequential.of_run(source.info.options) if _own_info(source, run_id) else None


def _status_counts(cases: pa.Table) -> StatusCounts:
    counts = StatusCounts(total=cases.num_rows, role_errors=_sum(pc.cast(role_errors(cases), pa.int64())))
    for entry in pc.value_counts(cases["status"]).to_pylist():
        if entry["values"] in Status.__members__.values():
            setattr(counts, entry["values"], entry["counts"])
    if "blame" in cases.column_names:
        counts.blame = {entry["values"]: entry["counts"] for entry in pc.value_counts(cases["blame"].drop_null()).to_pylist()}
    judged = counts.total - counts.skipped - counts.role_errors
    counts.pass_rate = counts.passed / judged if judged else None
    return counts


def _summary(cases: pa.Table, **fields: Any) -> RunSummary:
    turns = _sum(cases["total_turns"])
    total = cases.num_rows
    return RunSummary(
        counts=_status_counts(cases),
        turns=turns,
        avg_turns=turns / total if total else 0.0,
        duration_ms=float(pc.sum(cases["duration_ms"]).as_py() or 0.0),
        prompt_tokens=_sum(cases["prompt_tokens"]),
        completion_tokens=_sum(cases["completion_tokens"]),
        total_tokens=_sum(cases["total_tokens"]),
        retries=_retries(cases),
        cost_usd=pc.sum(cases["cost_usd"]).as_py(),
        role_cost_usd=pc.sum(cases["role_cost_usd"]).as_py(),
        **fields,
    )


def _summary_per_agent(cases: pa.Table, **fields: Any) -> RunSummary:
    """:func:`_summary`, with each agent's own (``per_agent``) when the case runs are of several agents;
    then no pass rate of them all together, which would read as one agent's."""
    named = _named_agents(cases)
    agents = sorted(pc.unique(named["agent"]).to_pylist())
    per_agent = (
        [_summary(named.filter(pc.equal(named["agent"], agent)), agent=agent) for agent in agents] if len(agents) > 1 else []
    )
    summary = _summary(cases, per_agent=per_agent, **fields)
    if per_agent:
        summary.counts.pass_rate = None
    return summary


def _retries(cases: pa.Table) -> Retries:
    retried = pc.greater(cases["retried"], 0)
    return Retries(
        cases=_sum(pc.cast(retried, pa.int64())),
        attempts=_sum(cases["retried"]),
        passed=_sum(pc.cast(pc.and_(retried, pc.equal(cases["status"], Status.PASSED.value)), pa.int64())),
    )


def _sum(column: pa.ChunkedArray) -> int:
    return int(pc.sum(column).as_py() or 0)


def _runs(cases: pa.Table, origin: dict[str, RunRecord]) -> list[RunSummary]:
    starts = {
        row["run_id"]: row["started_at_min"] for row in cases.group_by("run_id").aggregate([("started_at", "min")]).to_pylist()
    }
    runs = []
    for run_id, first_case in starts.items():
        source = origin[run_id]
        started = first_case
        own = _own_info(source, run_id)
        if own and source.info.started_at is not None:
            started = datetime.fromtimestamp(source.info.started_at, UTC)
        agents = (source.info.agents or ([source.info.agent] if source.info.agent else [])) if own else []
        own_cases = cases.filter(pc.equal(cases["run_id"], run_id))
        not_run = ended_early(source.status, source.info, own_cases)[1] if own else None
        runs.append(
            _summary_per_agent(
                own_cases,
                run_id=run_id,
                path=str(source.path),
                started_at=started,
                agent=", ".join(agent for agent in agents if agent) or None,
                status=source.status if own else None,
                not_run=not_run,
                adaptive=bool(own and source.info.options.adaptive_runs),
            )
        )
    # A run with no start time sorts by its id (ids begin with the start time).
    runs.sort(key=lambda run: (run.started_at.timestamp() if run.started_at else -math.inf, run.run_id or ""))
    return runs


def _tokens(cases: pa.Table, sources: list[RunRecord]) -> list[TokenUsage]:
    connectors: dict[str, set[str]] = {}
    for source in sources:
        if not source.has_info:
            continue
        for agent in source.info.agents or ([source.info.agent] if source.info.agent else []):
            connector = source.connector_of(agent)
            if agent and connector:
                connectors.setdefault(agent, set()).add(connector)
    grouped = (
        _named_agents(cases)
        .group_by("agent")
        .aggregate(
            [
                ([], "count_all"),
                ("prompt_tokens", "sum"),
                ("completion_tokens", "sum"),
                ("total_tokens", "sum"),
                ("cost_usd", "sum"),
            ]
        )
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
            cost_usd=row["cost_usd_sum"],
        )
        for row in grouped.to_pylist()
    ]


def _latency_by_turn(turns: pa.Table) -> list[Latency]:
    """Per turn index; with several agents, per agent and turn index (one agent's slow turns are its own)."""
    agents = pc.unique(pc.fill_null(turns["agent"], _UNKNOWN_AGENT)).to_pylist()
    if len(agents) <= 1:
        return _percentiles(turns["turn"], turns["duration_ms"])
    out: list[Latency] = []
    for agent in sorted(agents):
        own = turns.filter(pc.equal(pc.fill_null(turns["agent"], _UNKNOWN_AGENT), agent))
        out.extend(latency.model_copy(update={"agent": agent}) for latency in _percentiles(own["turn"], own["duration_ms"]))
    return out


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
        out.append(Latency(group=str(key), turns=end - start, p50_ms=p50, p95_ms=p95, p99_ms=p99, max_ms=group[-1].as_py()))
        start = end
    return out


def _top(table: pa.Table, keys: list[str], cut: int | None, several: bool) -> tuple[list[dict[str, Any]], int]:
    """The rows of ``table`` counted by ``keys`` (and by agent, with ``several`` agents), most first:
    ``count``, the rows, and ``cases``, the distinct cases among them (by suite and id: two suites'
    ``greet`` are two cases)."""
    if several:
        table, keys = _named_agents(table), [*keys, "agent"]
    per_case = table.group_by([*keys, *_CASE]).aggregate([([], "count_all")])
    counted = per_case.group_by(keys).aggregate([("count_all", "sum"), ([], "count_all")])
    grouped = pa.table({**{key: counted[key] for key in keys}, "count": counted["count_all_sum"], "cases": counted["count_all"]})
    grouped = grouped.sort_by([("count", "descending"), ("cases", "descending")])
    rows = grouped.slice(0, cut).to_pylist() if cut else grouped.to_pylist()
    return rows, grouped.num_rows


def _failed_assertions(failed: pa.Table, cut: int | None, several: bool) -> tuple[list[AssertionFailure], int]:
    assertions = failed.filter(pc.not_equal(failed["scope"], "checkpoint"))
    rows, total = _top(assertions, ["type", "message"], cut, several)
    return [
        AssertionFailure(
            type=r["type"], message=r["message"], agent=r.get("agent"), count=r["count"], cases=r["cases"]
        )
        for r in rows
    ], total


def _missed_checkpoints(failed: pa.Table, cut: int | None, several: bool) -> tuple[list[CheckpointMiss], int]:
    missed = failed.filter(pc.and_(pc.equal(failed["scope"], "checkpoint"), pc.fill_null(failed["required"], True)))
    rows, total = _top(missed, ["checkpoint_id"], cut, several)
    return [
        CheckpointMiss(
            checkpoint_id=r["checkpoint_id"], agent=r.get("agent"), count=r["count"], cases=r["cases"]
        )
        for r in rows
    ], total


def _flags(cases: pa.Table) -> pa.Table:
    status = cases["status"]
    # a case farm rescore could not judge (rescorable false) neither passed nor failed: it was not judged;
    # nor was one a role failed (a dead simulator, a judge that answered no JSON): the agent's figures leave it out
    role_error = role_errors(cases)
    judged = pc.and_(pc.invert(pc.fill_null(pc.equal(cases["rescorable"], False), False)), pc.invert(role_error))
    return (
        cases.append_column("is_pass", pc.cast(pc.equal(status, Status.PASSED.value), pa.int64()))
        .append_column("is_fail", pc.cast(pc.and_(pc.is_in(status, value_set=pa.array(_FAILING)), judged), pa.int64()))
        .append_column("is_role_error", pc.cast(role_error, pa.int64()))
    )


def role_errors(cases: pa.Table) -> pa.ChunkedArray | pa.Array:
    """Per case run: an error of a role, not of the agent (``error_role`` set; runs before it was recorded: none)."""
    if "error_role" not in cases.column_names:
        return pa.array([False] * cases.num_rows, pa.bool_())
    return pc.and_(pc.equal(cases["status"], Status.ERROR.value), pc.is_valid(cases["error_role"]))


def _stability(cases: pa.Table, cut: int | None) -> Stability:
    cases = _named_agents(cases)  # a case of two agents is two cases here: one passing on A, failing on B is not flaky
    per_case = (
        _flags(cases)
        .group_by(_CASE_OF_AGENT)
        .aggregate([([], "count_all"), ("is_pass", "sum"), ("is_fail", "sum"), ("name", "max")])
    )
    passes, failures = per_case["is_pass_sum"], per_case["is_fail_sum"]
    runs = pc.add(passes, failures)
    per_case = per_case.append_column("runs", runs).append_column(
        "pass_rate", pc.if_else(pc.greater(runs, 0), pc.divide(pc.cast(passes, pa.float64()), runs), None)
    )
    ran = per_case.filter(pc.greater(per_case["runs"], 0))
    rate = ran["pass_rate"]
    by_agent: dict[str, Counter[StabilityClass]] = {}
    for agent, value in zip(ran["agent"].to_pylist(), rate.to_pylist(), strict=True):
        by_agent.setdefault(agent, Counter())[stability_class(value)] += 1
    counted = sum(by_agent.values(), Counter[StabilityClass]())
    classes = {name: counted[name] for name in StabilityClass}
    worst_first = [("pass_rate", "ascending"), ("case_id", "ascending"), ("suite", "ascending"), ("agent", "ascending")]
    flaky = ran.filter(pc.and_(pc.greater(ran["is_pass_sum"], 0), pc.greater(ran["is_fail_sum"], 0))).sort_by(worst_first)
    unstable = ran.filter(pc.less(rate, 1.0)).sort_by(worst_first)
    flaky_rows = (flaky.slice(0, cut) if cut else flaky).to_pylist()
    unstable_rows = (unstable.slice(0, cut) if cut else unstable).to_pylist()
    statuses = _statuses_of(cases, {(row["suite"], row["case_id"], row["agent"]) for row in flaky_rows + unstable_rows})
    max_runs = pc.max(per_case["count_all"]).as_py() or 0
    return Stability(
        cases=ran.group_by(_CASE).aggregate([]).num_rows,
        agents=sorted(by_agent),
        classes_by_agent={agent: {name: count[name] for name in StabilityClass} for agent, count in sorted(by_agent.items())},
        repeated=max_runs > 1,
        classes=classes,
        flaky_total=flaky.num_rows,
        flaky=[_case_rate(row, statuses) for row in flaky_rows],
        least_stable=[_case_rate(row, statuses) for row in unstable_rows],
    )


def _statuses_of(cases: pa.Table, keys: set[tuple[str, str, str]]) -> dict[tuple[str, str, str], dict[str, int]]:
    if not keys:
        return {}
    ids = sorted({case_id for _, case_id, _ in keys})
    chosen = cases.filter(pc.is_in(cases["case_id"], value_set=pa.array(ids, pa.string())))
    out: dict[tuple[str, str, str], dict[str, int]] = {}
    for row in chosen.group_by([*_CASE_OF_AGENT, "status"]).aggregate([([], "count_all")]).to_pylist():
        key = (row["suite"], row["case_id"], row["agent"])
        if key in keys:
            out.setdefault(key, {})[row["status"]] = row["count_all"]
    return out


def _case_rate(row: dict[str, Any], statuses: dict[tuple[str, str, str], dict[str, int]]) -> CaseRate:
    rate = row["pass_rate"]
    counts = statuses.get((row["suite"], row["case_id"], row["agent"]), {})
    return CaseRate(
        case_id=row["case_id"],
        suite=row["suite"],
        agent=row["agent"],
        name=row["name_max"],
        runs=row["runs"],
        passes=row["is_pass_sum"],
        failures=row["is_fail_sum"],
        skips=row["count_all"] - row["runs"],
        pass_rate=rate,
        stability_class=_stability_class(rate),
        statuses=dict(sorted(counts.items())),
    )


def _stability_class(rate: float | None) -> StabilityClass | None:
    return None if rate is None else stability_class(rate)


def _outcomes(run: pa.Table, prefix: str) -> pa.Table:
    """Per case and agent of one run: passes, failures, its statuses and an error, columns prefixed."""
    grouped = (
        _flags(run)
        .group_by(_CASE_OF_AGENT)
        .aggregate([("is_pass", "sum"), ("is_fail", "sum"), ("status", "distinct"), ("error", "max"), ("name", "max")])
    )
    return pa.table(
        {
            "suite": grouped["suite"],
            "case_id": grouped["case_id"],
            "agent": grouped["agent"],
            f"{prefix}_pass": grouped["is_pass_sum"],
            f"{prefix}_fail": grouped["is_fail_sum"],
            f"{prefix}_status": pc.binary_join(grouped["status_distinct"], ", "),
            f"{prefix}_error": grouped["error_max"],
            f"{prefix}_name": grouped["name_max"],
        }
    )


def _run_cases(cases: pa.Table, run_id: str) -> pa.Table:
    return _named_agents(cases.filter(pc.equal(cases["run_id"], run_id)))


def _compare(cases: pa.Table, base: str, head: str, cut: int | None) -> Comparison:
    """Regressions and fixes from ``base`` to ``head``, each agent's apart; two runs of one agent
    each are matched whatever their agents are called (a new agent against the old). A case is
    paired only with the same case, by suite and id (:data:`~farm.results.CASE_KEY`): two suites
    that each have a ``greet`` have two cases, and a case only one run ran is left out and counted."""
    base_cases, head_cases = _run_cases(cases, base), _run_cases(cases, head)
    one_each = len(pc.unique(base_cases["agent"])) == 1 and len(pc.unique(head_cases["agent"])) == 1
    if one_each:
        head_agent = head_cases["agent"][0].as_py() if head_cases.num_rows else None
        base_cases = base_cases.set_column(
            base_cases.schema.get_field_index("agent"), "agent", pa.array([head_agent] * base_cases.num_rows, pa.string())
        )
    base_outcomes, head_outcomes = _outcomes(base_cases, "base"), _outcomes(head_cases, "head")
    both = base_outcomes.join(head_outcomes, keys=_CASE_OF_AGENT, join_type="inner")  # the same case only
    left_out = base_outcomes.num_rows + head_outcomes.num_rows - 2 * both.num_rows
    base_ok = pc.and_(pc.equal(both["base_fail"], 0), pc.greater(both["base_pass"], 0))
    head_ok = pc.and_(pc.equal(both["head_fail"], 0), pc.greater(both["head_pass"], 0))
    base_bad, head_bad = pc.greater(both["base_fail"], 0), pc.greater(both["head_fail"], 0)
    order = [("case_id", "ascending"), ("suite", "ascending"), ("agent", "ascending")]
    regressions = both.filter(pc.and_(base_ok, head_bad)).sort_by(order)
    fixes = both.filter(pc.and_(base_bad, head_ok)).sort_by(order)

    def changes(table: pa.Table) -> list[CaseChange]:
        rows = (table.slice(0, cut) if cut else table).to_pylist()
        return [
            CaseChange(
                case_id=row["case_id"],
                suite=row["suite"],
                agent=None if one_each else row["agent"],
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
        paired=both.num_rows,
        left_out=left_out,
        sentence=paired_sentence(f"Run {base}", f"run {head}", both.num_rows, left_out),
        regressions_total=regressions.num_rows,
        fixes_total=fixes.num_rows,
        regressions=changes(regressions),
        fixes=changes(fixes),
    )
