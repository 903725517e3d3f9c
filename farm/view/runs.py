"""The runs list of ``farm view``: one summary per run folder, read as the folder is now.

A finished run is summarised from its cases table (statuses, agents, suites, cost, case time)
and ``run.json`` (engine, start, end, command); a run still going from its ``results.jsonl``,
read on from where the last look stopped, so a page that polls costs only the new lines.
Summaries are kept while the run's files do not change. A run that cannot be read whole is
still one summary: what could be read, and its ``problems``.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from farm.results import RunRecord, Status
from farm.view.folders import ResultsFolder
from farm.view.schema import suite_of
from farm.writers import RunInfo

__all__ = ["RunSummaries", "pass_rate"]

_FAILING = (Status.FAILED.value, Status.ERROR.value, Status.TIMEOUT.value)


def pass_rate(counts: dict[str, int]) -> float | None:
    """Passed over the case runs that were judged: skipped ones and errors of a role (``role_errors``:
    a simulator's or a judge's failure says nothing of the agent) left out, as ``farm report`` and the
    gate count; None when none were."""
    judged = sum(counts.get(status, 0) for status in (Status.PASSED.value, *_FAILING)) - counts.get("role_errors", 0)
    return counts.get(Status.PASSED.value, 0) / judged if judged > 0 else None


class RunSummaries:
    """Summaries of the runs in a results folder, each kept until its run's files change."""

    def __init__(self, folder: ResultsFolder):
        self.folder = folder
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[Any, dict[str, Any]]] = {}
        self._tails: dict[Path, _JsonlTail] = {}

    def all(self) -> list[dict[str, Any]]:
        """Every run's summary, newest first (a run with no start time yet is just starting: first)."""
        runs = [self.one(run) for run in self.folder.runs()]
        return sorted(runs, key=lambda run: (run["started_at"] or float("inf"), run["name"]), reverse=True)

    def one(self, run: RunRecord) -> dict[str, Any]:
        """The summary of ``run``."""
        signature = run.signature()
        with self._lock:
            kept = self._kept.get(run.name)
        if kept and kept[0] == signature:
            return kept[1]
        summary = self._summarise(run)
        with self._lock:
            self._kept[run.name] = (signature, summary)
        return summary

    def _summarise(self, run: RunRecord) -> dict[str, Any]:
        info = run.info
        summary: dict[str, Any] = {
            "name": run.name,
            "run_id": run.run_id,
            "status": run.status,
            "engine": info.engine,
            "started_at": info.started_at,
            "ended_at": info.ended_at,
            "wall_s": info.wall_seconds if info.wall_seconds is not None else (info.ended_at - info.started_at) if info.ended_at and info.started_at else None,
            "input": info.input,
            "runs": info.runs or 1,
            "rescored_from": (info.rescored_from or {}).get("run_id"),
        }
        try:
            if run.finished_tables and summary["status"] != "running":
                summary.update(self._from_cases(run, info))
            else:
                summary.update(self._from_jsonl(run, info))
        except (OSError, ValueError, pa.ArrowException) as exc:  # the reader passes over what it cannot read: a last guard
            summary.update(_nothing())
            summary["problems"] = [*run.problems, f"{run.path} cannot be summarised ({exc})."]
        # several agents' case runs together are no one's pass rate: each agent's own is in per_agent
        summary["pass_rate"] = pass_rate(summary["counts"]) if len(summary["per_agent"]) < 2 else None
        if summary["cost_usd"] is None:
            summary["cost_usd"] = info.cost.get("cost_usd") if info.cost else _number((info.model_extra or {}).get("cost_usd"))
        summary["role_cost_usd"] = info.cost.get("role_cost_usd")
        summary["stop_reason"] = info.stop_reason
        if not summary["agents"]:
            summary["agents"] = list(info.agents or ([info.agent] if info.agent else []))
        if not summary["suites"] and info.input:
            summary["suites"] = [_suite(value, info.cwd) for value in info.inputs or [info.input]]
        summary["suite"] = ", ".join(Path(suite).name for suite in summary["suites"]) or None
        summary.setdefault("problems", run.problems)
        return summary

    def _from_cases(self, run: RunRecord, info: RunInfo) -> dict[str, Any]:
        # run.json's counts and input spare reading the status and source of every case run (of a
        # run of one agent: several agents' figures are each agent's own, from the table)
        counts = info.counts if "total" in info.counts and len(info.agents) == 1 else None
        columns = ["agent", "duration_ms", "cost_usd", "error_role"]
        columns += [] if counts else ["status"]
        columns += [] if info.input else ["source"]
        return _figures(run.cases(columns), counts)

    def _from_jsonl(self, run: RunRecord, info: RunInfo) -> dict[str, Any]:
        with self._lock:
            tail = self._tails.setdefault(run.path, _JsonlTail())
        counts, agents, suites, cost, case_ms = tail.read(run)
        planned = (info.cases or 0) * (info.runs or 1) * max(1, len(info.agents))
        return {
            "counts": counts,
            "agents": sorted(agents),
            "per_agent": [_agent_figures(agent, tally, None, None) for agent, tally in sorted(agents.items())],
            "suites": sorted(suites),
            "cost_usd": cost,
            "case_ms": case_ms,
            "case_p50_ms": None,
            "progress": {"done": counts["total"], "planned": planned or None},
        }


def _nothing() -> dict[str, Any]:
    """The figures of a run none of whose cases could be read."""
    counts = {"total": 0, **{status.value: 0 for status in Status}}
    return {
        "counts": counts, "agents": [], "per_agent": [], "suites": [], "cost_usd": None, "case_ms": 0.0, "case_p50_ms": None,
        "progress": None,
    }  # fmt: skip


def _figures(table: pa.Table, counts: dict[str, int] | None) -> dict[str, Any]:
    """The run's figures from its cases table (``counts``: run.json's, when the table's status was not read),
    and each agent's own (``per_agent``)."""
    counts = _counts(table["status"]) if counts is None else {"total": counts.get("total", 0), **{s.value: counts.get(s.value, 0) for s in Status}}
    counts["role_errors"] = _role_errors(table)
    suites = []
    if "source" in table.column_names:
        files = pc.replace_substring_regex(table["source"], pattern=r":\d+$", replacement="")
        suites = sorted(value for value in pc.unique(files).to_pylist() if value)
    agents = sorted(value for value in pc.unique(table["agent"]).to_pylist() if value)
    per_agent = []
    for agent in agents:
        rows = table.filter(pc.equal(table["agent"], agent)) if len(agents) > 1 else table
        own = {**_counts(rows["status"]), "role_errors": _role_errors(rows)} if "status" in rows.column_names else counts
        per_agent.append(_agent_figures(agent, own, _cost(rows), _median(rows)))
    return {
        "counts": counts,
        "agents": agents,
        "per_agent": per_agent,
        "suites": suites,
        "cost_usd": _cost(table),
        "case_ms": _number(pc.sum(table["duration_ms"]).as_py()) or 0.0,
        "case_p50_ms": _median(table),
        "progress": None,
    }


def _agent_figures(agent: str, counts: dict[str, int], cost: float | None, median: float | None) -> dict[str, Any]:
    """One agent's figures in a run: its statuses, pass rate, cost and median case time."""
    return {"agent": agent, "counts": counts, "pass_rate": pass_rate(counts), "cost_usd": cost, "case_p50_ms": median}


def _role_errors(table: pa.Table) -> int:
    """Case runs that a role's failure made errors (``error_role`` set; a table of an older run may lack it)."""
    if "error_role" not in table.column_names:
        return 0
    return int(pc.sum(pc.is_valid(table["error_role"]).cast(pa.int64())).as_py() or 0)


def _counts(statuses: pa.ChunkedArray) -> dict[str, int]:
    counted = Counter(dict(zip(*_value_counts(statuses), strict=True)))
    return {"total": len(statuses), **{status.value: counted.get(status.value, 0) for status in Status}}


def _cost(table: pa.Table) -> float | None:
    costs = table["cost_usd"]
    return _number(pc.sum(costs).as_py()) if costs.null_count < len(costs) else None


def _median(table: pa.Table) -> float | None:
    return _number(pc.quantile(table["duration_ms"], q=0.5).to_pylist()[0]) if table.num_rows else None


def _number(value: Any) -> float | None:
    """``value`` when it is a finite number (a NaN cannot be sent as JSON), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _value_counts(column: pa.ChunkedArray) -> tuple[list[str], list[int]]:
    counted = pc.value_counts(column)
    return counted.field("values").to_pylist(), counted.field("counts").to_pylist()


def _suite(given: str, cwd: str | None) -> str:
    """One ``-i`` input of a run as the cases name their source: a relative file path made absolute
    from the folder the run started in (``cwd``); anything else (a message, ``agents:<id>``) as it is."""
    if given.endswith((".jsonl", ".json")) and cwd and not Path(given).is_absolute():
        return str(Path(cwd) / given)
    return given


class _JsonlTail:
    """Tallies of a growing ``results.jsonl``, read on from the last complete line seen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.offset = 0
        self.counts = {"total": 0, **{status.value: 0 for status in Status}, "role_errors": 0}
        self.agents: dict[str, dict[str, int]] = {}
        """Each agent's own status counts."""
        self.suites: set[str] = set()
        self.cost: float | None = None
        self.case_ms = 0.0

    def read(self, run: RunRecord) -> tuple[dict[str, int], dict[str, dict[str, int]], set[str], float | None, float]:
        with self._lock:
            records, offset = run.results_after(self.offset)
            if offset < self.offset:  # rewritten: start again
                self._reset()
            for record in records:
                self._add(record)
            self.offset = offset
            agents = {agent: dict(counts) for agent, counts in self.agents.items()}
            return dict(self.counts), agents, set(self.suites), self.cost, self.case_ms

    def _add(self, record: dict[str, Any]) -> None:
        status = record.get("status")
        role_error = int(status == Status.ERROR.value and record.get("error_role") is not None)
        self.counts["total"] += 1
        self.counts["role_errors"] += role_error
        if status in self.counts:
            self.counts[status] += 1
        if isinstance(record.get("agent"), str):
            own = self.agents.setdefault(record["agent"], {"total": 0, **{status.value: 0 for status in Status}, "role_errors": 0})
            own["total"] += 1
            own["role_errors"] += role_error
            if status in own:
                own[status] += 1
        if isinstance(record.get("source"), str):
            self.suites.add(suite_of(record["source"]))
        cost, duration = _number(record.get("cost_usd")), _number(record.get("duration_ms"))
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        if duration is not None:
            self.case_ms += duration
