"""A suite over its runs for ``farm view``: pass rate, case latency and cost, oldest run first."""

from __future__ import annotations

from typing import Any

__all__ = ["suites", "trend"]


def suites(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every suite the runs ran, with how many runs ran it, most runs first."""
    counted: dict[str, int] = {}
    for summary in summaries:
        for suite in summary["suites"]:
            counted[suite] = counted.get(suite, 0) + 1
    return [{"suite": suite, "runs": runs} for suite, runs in sorted(counted.items(), key=lambda item: (-item[1], item[0]))]


def trend(summaries: list[dict[str, Any]], suite: str) -> dict[str, Any]:
    """One point per run of ``suite``: when it started, its pass rate, median case time and cost."""
    points = [
        {
            "name": summary["name"],
            "started_at": summary["started_at"],
            "agents": summary["agents"],
            "total": summary["counts"]["total"],
            "pass_rate": summary["pass_rate"],
            "case_p50_ms": summary.get("case_p50_ms"),
            "cost_usd": summary["cost_usd"],
            "status": summary["status"],
        }
        for summary in summaries
        if suite in summary["suites"]
    ]
    points.sort(key=lambda point: (point["started_at"] or 0, point["name"]))
    return {"suite": suite, "points": points}
