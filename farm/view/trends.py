"""A suite over its runs for ``farm view``: pass rate, case latency and cost, oldest run first.

A suite that runs on several agents has one trend per agent (each point that agent's own figures
in one run): the agent asked for, else the one that ran it most often. Two agents' figures are never one point."""

from __future__ import annotations

from collections import Counter
from pathlib import PurePath
from typing import Any

__all__ = ["suites", "trend"]


def suites(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every suite the runs ran, with how many runs ran it, most runs first."""
    counted: dict[str, int] = {}
    for summary in summaries:
        for suite in summary["suites"]:
            counted[suite] = counted.get(suite, 0) + 1
    return [{"suite": suite, "runs": runs} for suite, runs in sorted(counted.items(), key=lambda item: (-item[1], item[0]))]


def trend(summaries: list[dict[str, Any]], suite: str, agent: str | None = None) -> dict[str, Any]:
    """One point per run of ``suite``: when it started, its pass rate, median case time and cost;
    of ``agent`` when given or when the runs tested several agents (then the one in most runs; ``agents``
    lists them in that order). ``suite`` may be a suite's file name alone when no other suite has that name."""
    suite = _named(summaries, suite)
    runs = [summary for summary in summaries if suite in summary["suites"]]
    counted = Counter(name for summary in runs for name in summary["agents"])
    agents = sorted(counted, key=lambda name: (-counted[name], name))
    chosen = agent or (agents[0] if len(agents) > 1 else None)
    points = [_point(summary, chosen) for summary in runs if chosen is None or chosen in summary["agents"]]
    points.sort(key=lambda point: (point["started_at"] or 0, point["name"]))
    return {"suite": suite, "agent": chosen, "agents": agents, "points": points}


def _named(summaries: list[dict[str, Any]], suite: str) -> str:
    """The suite ``suite`` names: itself when a run ran it, else the one suite whose file name it is."""
    known = {name for summary in summaries for name in summary["suites"]}
    if suite in known:
        return suite
    same_name = [name for name in known if PurePath(name).name == suite]
    return same_name[0] if len(same_name) == 1 else suite


def _point(summary: dict[str, Any], agent: str | None) -> dict[str, Any]:
    # a run of one agent: its own figures are the run's (whose cost may come from run.json)
    several = len(summary.get("per_agent", [])) > 1
    own = next((figures for figures in summary["per_agent"] if figures["agent"] == agent), None) if several else None
    figures = own if own is not None else {key: summary[key] for key in ("counts", "pass_rate", "cost_usd")} | {"case_p50_ms": summary.get("case_p50_ms")}
    return {
        "name": summary["name"],
        "started_at": summary["started_at"],
        "agents": [agent] if own is not None else summary["agents"],
        "total": figures["counts"]["total"],
        "pass_rate": figures["pass_rate"],
        "case_p50_ms": figures["case_p50_ms"],
        "cost_usd": figures["cost_usd"],
        "status": summary["status"],
    }
