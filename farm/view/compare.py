"""Two sides side by side for ``farm view``: two runs, or two agents of one run.

A case's outcome on a side is ``passed`` when every judged repetition passed, ``failed`` when
any failed, errored or timed out, ``skipped`` when none was judged (``farm report``'s rule).
Cases are matched by suite and id (:data:`~farm.results.CASE_KEY`, the suite as the reader works it
out: two suites that each have a ``greet`` have two cases), and by agent too when neither side
names one and a run tested several (each agent's case against the same agent's: no row mixes two
agents); those whose outcome changed come first (regressions, then fixes, then the rest). Two
sides with no case in common are not compared: the page says so, with no difference and no p-value. The statistics are :mod:`farm.reports.stats`'s, as ``farm report`` gives them:
each side's pass rate with its 95 % interval (clustered by case under ``--runs``), and the
paired difference over the cases judged on both sides (its interval, p-value and sentence): that of
:func:`~farm.reports.stats.paired_cases`, which counts a case adaptive repeats stopped by its unbiased
estimate, as the gate's ``--baseline`` does.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from farm.reports.analysis import role_errors
from farm.reports.stats import CaseResult, clustered_interval, difference_sentence, paired_cases, paired_sentence, wilson_interval
from farm.results import CASE_KEY, RunRecord, Status
from farm.sequential import Sequential
from farm.view.cases import RunCases

__all__ = ["Comparisons", "Side"]

_FAILING = pa.array([Status.FAILED.value, Status.ERROR.value, Status.TIMEOUT.value])
_ORDER = {"regression": 0, "fix": 1, "changed": 2, "only_a": 3, "only_b": 4, "same": 5}
MAX_PAGE = 500


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a run, and one of its agents or all of them."""

    run: RunRecord
    agent: str | None = None

    @property
    def label(self) -> str:
        return f"{self.run.name} · {self.agent}" if self.agent else self.run.name


class Comparisons:
    """Comparisons of two sides, the last few kept (while both runs' files stay as they were) so
    that the next page of one costs a slice."""

    def __init__(self, cases: RunCases, keep: int = 4):
        self.cases = cases
        self._keep = keep
        self._kept: OrderedDict[tuple[Any, ...], tuple[pa.Table, dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def page(self, a: Side, b: Side, *, changed_only: bool = False, offset: int = 0, limit: int = 100) -> dict[str, Any]:
        """Side ``a`` against side ``b``: each side's figures, the statistics, and a page of cases,
        changed ones first. The matching and ordering are done on Arrow tables; only the page's
        rows become Python objects."""
        marker = (a.run.name, a.agent, a.run.signature(), b.run.name, b.agent, b.run.signature())
        with self._lock:
            kept = self._kept.get(marker)
        if kept is None:
            kept = _matched(self.cases, a, b)
            with self._lock:
                self._kept[marker] = kept
                while len(self._kept) > self._keep:
                    self._kept.popitem(last=False)
        both, head = kept
        listed = both.filter(pc.not_equal(both["change"], "same")) if changed_only else both
        limit = max(1, min(limit, MAX_PAGE))
        offset = max(0, offset)
        page = listed.slice(offset, limit).to_pylist()
        ids = [row["case_id"] for row in page]
        details_a, details_b = _details(self.cases, a, ids), _details(self.cases, b, ids)
        return {
            **head,
            "total": listed.num_rows,
            "offset": offset,
            "limit": limit,
            "rows": [_row(row, details_a, details_b) for row in page],
        }


def _matched(cases: RunCases, a: Side, b: Side) -> tuple[pa.Table, dict[str, Any]]:
    """Both sides' cases matched by suite and id, changed ones first, and what the page shows above them."""
    keys = [*CASE_KEY, "agent"] if _by_agent(cases, a, b) else list(CASE_KEY)
    left, right = _outcomes(cases, a, keys), _outcomes(cases, b, keys)
    both = left.join(right, keys=keys, join_type="full outer", left_suffix="_a", right_suffix="_b")
    change = _changes(both["outcome_a"], both["outcome_b"])
    both = both.append_column("change", change).append_column("order", pc.index_in(change, value_set=_CHANGES))
    both = both.sort_by([("order", "ascending"), *((key, "ascending") for key in keys)])
    counted = pc.value_counts(both["change"])
    tally = {name: 0 for name in _ORDER}
    tally.update(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True))
    pairs = _pairs(both, _rule(a), _rule(b))
    b_only = sum(case_b.better_than(case_a) for case_a, case_b in pairs)
    a_only = sum(case_a.better_than(case_b) for case_a, case_b in pairs)
    label_a, label_b = _labels(cases, a, b)
    in_both = both.num_rows - tally["only_a"] - tally["only_b"]
    said = paired_sentence(label_a, label_b, in_both, tally["only_a"] + tally["only_b"])
    head = {
        "a": _figures(a, label_a, left),
        "b": _figures(b, label_b, right),
        "changes": tally,
        "statistics": statistics(label_a, label_b, left, right, pairs, a_only, b_only)
        if in_both
        else _not_compared(left, right, said),
    }
    head["statistics"]["pairing"] = said
    return both, head


_CHANGES = pa.array(list(_ORDER))


def _pairs(both: pa.Table, rule_a: Sequential | None, rule_b: Sequential | None) -> list[tuple[CaseResult, CaseResult]]:
    """The cases judged on both sides, as :func:`~farm.reports.stats.paired_cases` counts them."""
    tries_a = pc.cast(pc.add(both["passed_a"], both["failed_a"]), pa.int64())
    tries_b = pc.cast(pc.add(both["passed_b"], both["failed_b"]), pa.int64())
    judged = pc.fill_null(pc.and_(pc.greater(tries_a, 0), pc.greater(tries_b, 0)), False)
    columns = (both["passed_a"], tries_a, both["stopped_a"], both["passed_b"], tries_b, both["stopped_b"])
    rows = zip(*(pc.filter(column, judged).to_pylist() for column in columns), strict=True)
    return [
        (CaseResult.of(passed_a, n_a, stopped_a, rule_a), CaseResult.of(passed_b, n_b, stopped_b, rule_b))
        for passed_a, n_a, stopped_a, passed_b, n_b, stopped_b in rows
    ]


def _rule(side: Side) -> Sequential | None:
    """The side's run's stopping rule under adaptive repeats (None: ``--runs N``)."""
    return Sequential.of_run(side.run.info.options) if side.run.has_info else None


def _by_agent(cases: RunCases, a: Side, b: Side) -> bool:
    """Whether cases are matched per agent: neither side names its agent and a run tested several."""
    if a.agent or b.agent:
        return False
    return any(len(cases.table(side.run).facets["agent"]) > 1 for side in (a, b))


def _outcomes(cases: RunCases, side: Side, keys: list[str]) -> pa.Table:
    """Per case (per ``keys``) of the side: its outcome and how many repetitions passed, failed and were skipped."""
    table = cases.table(side.run).table
    if side.agent:
        table = table.filter(pc.equal(table["agent"], side.agent))
    status = table["status"]
    # a try a role broke (a dead simulator, a judge that answered no JSON) judged nothing of the agent:
    # left out, as the gate and farm report leave it out
    failing = pc.and_(pc.is_in(status, value_set=_FAILING), pc.invert(role_errors(table)))
    grouped = pa.table({
        "suite": table["suite"],
        "case_id": table["case_id"],
        "agent": pc.fill_null(table["agent"], ""),
        "passed": pc.cast(pc.equal(status, Status.PASSED.value), pa.int32()),
        "failed": pc.cast(failing, pa.int32()),
        "skipped": pc.cast(pc.equal(status, Status.SKIPPED.value), pa.int32()),
        "stopped": table["stopped"],
    }).group_by(keys).aggregate([("passed", "sum"), ("failed", "sum"), ("skipped", "sum"), ("stopped", "max")])  # fmt: skip
    passes, failures = grouped["passed_sum"], grouped["failed_sum"]
    outcome = pc.if_else(pc.greater(failures, 0), "failed", pc.if_else(pc.greater(passes, 0), "passed", "skipped"))
    return pa.table({
        **{key: grouped[key] for key in keys},
        "outcome": outcome,
        "passed": passes,
        "failed": failures,
        "skipped": grouped["skipped_sum"],
        "stopped": grouped["stopped_max"],
    })  # fmt: skip


def _details(cases: RunCases, side: Side, ids: list[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Name and first failure of the cases ``ids`` on the side, by suite, case id and agent (only the
    page's cases are looked up)."""
    table = cases.table(side.run).table
    chosen = table.filter(pc.is_in(table["case_id"], value_set=pa.array(ids, pa.string())))
    if side.agent:
        chosen = chosen.filter(pc.equal(chosen["agent"], side.agent))
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in chosen.select(["suite", "case_id", "agent", "name", "error"]).to_pylist():
        kept = out.setdefault((row["suite"], row["case_id"], row["agent"] or ""), {"name": row["name"], "error": None})
        kept["error"] = kept["error"] or row["error"]
    return out


def _changes(before: pa.ChunkedArray, after: pa.ChunkedArray) -> pa.ChunkedArray:
    """What happened to each case from side a to side b (a name of ``_ORDER``)."""
    regression = pc.and_(pc.equal(before, "passed"), pc.equal(after, "failed"))
    fix = pc.and_(pc.equal(before, "failed"), pc.equal(after, "passed"))
    change = pc.if_else(pc.equal(before, after), "same", pc.if_else(regression, "regression", pc.if_else(fix, "fix", "changed")))
    return pc.if_else(pc.is_null(before), "only_b", pc.if_else(pc.is_null(after), "only_a", change))


def _row(
    row: dict[str, Any],
    details_a: dict[tuple[str, str, str], dict[str, Any]],
    details_b: dict[tuple[str, str, str], dict[str, Any]],
) -> dict[str, Any]:
    def side(suffix: str, details: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, Any] | None:
        if row[f"outcome{suffix}"] is None:
            return None
        counts = {status: row[f"{status}{suffix}"] for status in ("passed", "failed", "skipped")}
        return {
            "outcome": row[f"outcome{suffix}"],
            "passed": counts["passed"],
            "judged": counts["passed"] + counts["failed"],
            "statuses": [status for status, count in counts.items() if count],
            **_detail(details, row["suite"], row["case_id"], row.get("agent")),
        }

    agent = row.get("agent") or None
    return {
        "suite": row["suite"], "case_id": row["case_id"], "agent": agent,
        "a": side("_a", details_a), "b": side("_b", details_b), "change": row["change"],
    }  # fmt: skip


def _detail(details: dict[tuple[str, str, str], dict[str, Any]], suite: str, case_id: str, agent: str | None) -> dict[str, Any]:
    """The side's name and first failure of the case (of ``agent``, when rows are matched per agent)."""
    if agent is not None:
        return details.get((suite, case_id, agent), {"name": None, "error": None})
    found = [detail for (in_suite, each, _), detail in details.items() if (in_suite, each) == (suite, case_id)]
    return found[0] if found else {"name": None, "error": None}


def _labels(cases: RunCases, a: Side, b: Side) -> tuple[str, str]:
    """The sides' names: each run's with its agent when the two sides are of different agents (as ``farm
    report`` names them, a run of one agent too); a side that names its agent, with it; else the run's name."""
    agent_a, agent_b = a.agent or _only_agent(cases, a), b.agent or _only_agent(cases, b)
    if agent_a and agent_b and agent_a != agent_b:
        return f"{a.run.name} · {agent_a}", f"{b.run.name} · {agent_b}"
    return a.label, b.label


def _only_agent(cases: RunCases, side: Side) -> str | None:
    """The one agent the side's run tested (None when it tested several)."""
    agents = [facet["value"] for facet in cases.table(side.run).facets["agent"]]
    if not agents and side.run.has_info:  # case rows that name no agent: run.json's
        agents = side.run.info.agents or ([side.run.info.agent] if side.run.info.agent else [])
    return agents[0] if len(agents) == 1 else None


def _figures(side: Side, label: str, outcomes: pa.Table) -> dict[str, Any]:
    passed = int(pc.sum(outcomes["passed"]).as_py() or 0)
    judged = passed + int(pc.sum(outcomes["failed"]).as_py() or 0)
    return {
        "label": label,
        "run": side.run.name,
        "agent": side.agent,
        "cases": outcomes.num_rows,
        "judged": judged,
        "passed": passed,
        "pass_rate": passed / judged if judged else None,
    }


def statistics(
    name_a: str,
    name_b: str,
    left: pa.Table,
    right: pa.Table,
    pairs: list[tuple[CaseResult, CaseResult]],
    a_only: int,
    b_only: int,
) -> dict[str, Any]:
    """Each side's pass rate interval (95 %, clustered by case when a case ran more than once) and
    :func:`~farm.reports.stats.paired_cases` over ``pairs``, the cases judged on both sides (a's, b's):
    ``a_only`` did better on side a, ``b_only`` on side b, with the sentence ``farm report`` says."""
    paired = paired_cases(pairs)
    return {
        "paired": paired.cases,
        "a_only": a_only,
        "b_only": b_only,
        "interval_a": _interval(left),
        "interval_b": _interval(right),
        "repeated": paired.test != "exact McNemar" and paired.cases > 0,
        "difference": paired.difference,
        "difference_interval": list(paired.interval),
        "test": paired.test,
        "p_value": paired.p_value,
        "significant": paired.significant,
        "detectable_difference": paired.detectable_difference,
        "sentence": difference_sentence(name_a, name_b, paired),
    }  # fmt: skip


def _not_compared(left: pa.Table, right: pa.Table, sentence: str) -> dict[str, Any]:
    """What the page shows of two sides with no case in common: each side's own interval, and the
    sentence that says they are not compared (no difference, no p-value)."""
    return {
        "paired": 0, "a_only": 0, "b_only": 0, "interval_a": _interval(left), "interval_b": _interval(right),
        "repeated": False, "difference": None, "difference_interval": None, "test": None, "p_value": None,
        "significant": False, "detectable_difference": None, "sentence": sentence,
    }  # fmt: skip


def _interval(outcomes: pa.Table) -> list[float] | None:
    passes = outcomes["passed"].to_pylist()
    tries = pc.add(outcomes["passed"], outcomes["failed"]).to_pylist()
    if not any(tries):
        return None
    if max(tries) == 1:  # one try per case: the clustered interval is Wilson's, and this is cheaper
        return list(wilson_interval(sum(passes), sum(tries)))
    return list(clustered_interval(list(zip(passes, tries, strict=True))))
