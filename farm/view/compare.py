"""Two sides side by side for ``farm view``: two runs, or two agents of one run.

A case's outcome on a side is ``passed`` when every judged repetition passed, ``failed`` when
any failed, errored or timed out, ``skipped`` when none was judged (``farm report``'s rule).
Cases are matched by id; those whose outcome changed come first (regressions, then fixes,
then the rest), and the paired statistics are worked out over the cases judged on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from farm.results import Status
from farm.view.cases import RunCases
from farm.view.folders import RunFolder

__all__ = ["Side", "compare"]

_FAILING = pa.array([Status.FAILED.value, Status.ERROR.value, Status.TIMEOUT.value])
_ORDER = {"regression": 0, "fix": 1, "changed": 2, "only_a": 3, "only_b": 4, "same": 5}
MAX_PAGE = 500


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a run, and one of its agents or all of them."""

    run: RunFolder
    agent: str | None = None

    @property
    def label(self) -> str:
        return f"{self.run.name} · {self.agent}" if self.agent else self.run.name


def compare(cases: RunCases, a: Side, b: Side, *, changed_only: bool = False, offset: int = 0, limit: int = 100) -> dict[str, Any]:
    """Side ``a`` against side ``b``: each side's figures, the statistics, and a page of cases,
    changed ones first."""
    left, right = _outcomes(cases, a), _outcomes(cases, b)
    rows = []
    for case_id in sorted(set(left) | set(right)):
        one, two = left.get(case_id), right.get(case_id)
        rows.append({"case_id": case_id, "a": one, "b": two, "change": _change(one, two)})
    rows.sort(key=lambda row: _ORDER[row["change"]])
    tally = {name: 0 for name in _ORDER}
    for row in rows:
        tally[row["change"]] += 1
    listed = [row for row in rows if row["change"] != "same"] if changed_only else rows
    limit = max(1, min(limit, MAX_PAGE))
    paired = [(row["a"]["outcome"], row["b"]["outcome"]) for row in rows if row["a"] and row["b"]]
    return {
        "a": _figures(a, left),
        "b": _figures(b, right),
        "changes": tally,
        "statistics": statistics(a.label, b.label, left, right, paired),
        "total": len(listed),
        "offset": offset,
        "limit": limit,
        "rows": listed[offset : offset + limit],
    }


def _outcomes(cases: RunCases, side: Side) -> dict[str, dict[str, Any]]:
    """Per case id of the side: outcome, repetitions judged and passed, its statuses, name, first error."""
    table = cases.table(side.run).table
    if side.agent:
        table = table.filter(pc.equal(table["agent"], side.agent))
    passed = pc.cast(pc.equal(table["status"], Status.PASSED.value), pa.int64())
    failed = pc.cast(pc.is_in(table["status"], value_set=_FAILING), pa.int64())
    grouped = (
        table.select(["case_id", "name", "status", "error"])
        .append_column("passed", passed)
        .append_column("failed", failed)
        .group_by("case_id")
        .aggregate([("passed", "sum"), ("failed", "sum"), ("status", "distinct"), ("name", "max"), ("error", "max")])
    )
    out = {}
    for row in grouped.to_pylist():
        passes, failures = row["passed_sum"], row["failed_sum"]
        outcome = "failed" if failures else "passed" if passes else "skipped"
        out[row["case_id"]] = {
            "outcome": outcome,
            "passed": passes,
            "judged": passes + failures,
            "statuses": sorted(row["status_distinct"]),
            "name": row["name_max"],
            "error": row["error_max"],
        }
    return out


def _change(one: dict[str, Any] | None, two: dict[str, Any] | None) -> str:
    if one is None:
        return "only_b"
    if two is None:
        return "only_a"
    before, after = one["outcome"], two["outcome"]
    if before == after:
        return "same"
    if before == "passed" and after == "failed":
        return "regression"
    if before == "failed" and after == "passed":
        return "fix"
    return "changed"


def _figures(side: Side, outcomes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    judged = sum(case["judged"] for case in outcomes.values())
    passed = sum(case["passed"] for case in outcomes.values())
    return {
        "label": side.label,
        "run": side.run.name,
        "agent": side.agent,
        "cases": len(outcomes),
        "judged": judged,
        "passed": passed,
        "pass_rate": passed / judged if judged else None,
    }


def statistics(
    name_a: str,
    name_b: str,
    left: dict[str, dict[str, Any]],
    right: dict[str, dict[str, Any]],
    paired: list[tuple[str, str]],
) -> dict[str, Any]:
    """The discordant pairs of the cases judged on both sides: ``a_only`` passed on side a only,
    ``b_only`` on side b only."""
    a_only = sum(1 for one, two in paired if one == "passed" and two == "failed")
    b_only = sum(1 for one, two in paired if one == "failed" and two == "passed")
    return {"paired": len(paired), "a_only": a_only, "b_only": b_only}
