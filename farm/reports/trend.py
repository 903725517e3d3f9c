"""The trend of ``farm report``: the pass rate per agent per run, oldest run first.

Read with :func:`farm.results.read_runs`, as one dataset of every run's cases, of which only the
columns the figure needs are read: a results folder of a thousand runs gives its trend in about a
second (benchmarks/trend.py). The pass rate is the one every summary shows
(:class:`~farm.reports.models.StatusCounts`): passed over the case runs that were judged, not
skipped and not an error a role made.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from farm.reports.models import TrendPoint
from farm.results import read_runs
from farm.results._dataset import RUN_STARTED_AT, RUN_VERDICT

__all__ = ["trend"]

_RUN = ["run_id", RUN_STARTED_AT, RUN_VERDICT, "agent"]


def trend(paths: Sequence[str | os.PathLike[str]]) -> list[TrendPoint]:
    """The pass rate of each agent in each run under ``paths``, by the runs' start (a run that does
    not say when it started first, then by run id)."""
    cases = read_runs(paths).to_table(columns=[*_RUN, "status", "error_role"])
    if not cases.num_rows:
        return []
    status = cases["status"]
    role_error = pc.and_(pc.equal(status, "error"), pc.is_valid(cases["error_role"]))
    judged = pc.and_not(pc.not_equal(status, "skipped"), role_error)
    counts = pa.table(
        {
            **{name: cases[name] for name in _RUN},
            "passed": pc.cast(pc.equal(status, "passed"), pa.int64()),
            "judged": pc.cast(judged, pa.int64()),
        }
    )
    grouped = counts.group_by(_RUN, use_threads=False).aggregate([("passed", "sum"), ("judged", "sum")])
    points = [
        TrendPoint(
            run_id=row["run_id"],
            started_at=row[RUN_STARTED_AT],
            agent=row["agent"] or "",
            passed=row["passed_sum"],
            judged=row["judged_sum"],
            pass_rate=row["passed_sum"] / row["judged_sum"] if row["judged_sum"] else None,
            verdict=row[RUN_VERDICT],
        )
        for row in grouped.to_pylist()
    ]
    points.sort(key=lambda point: (point.started_at is not None, point.started_at.timestamp() if point.started_at else 0.0, point.run_id, point.agent))
    return points
