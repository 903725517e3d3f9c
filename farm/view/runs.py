"""The runs list of ``farm view``: one summary per run folder, read as the folder is now.

A finished run is summarised from its cases table (statuses, agents, suites, cost, case time)
and ``run.json`` (engine, start, end, command); a run still going from its ``results.jsonl``,
read on from where the last look stopped, so a page that polls costs only the new lines.
Summaries are kept while the run's files do not change.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from farm.results import Status
from farm.view.folders import ResultsFolder, RunFolder, read_columns, run_info
from farm.view.schema import CASES, suite_of

__all__ = ["RunSummaries", "pass_rate"]

_FAILING = (Status.FAILED.value, Status.ERROR.value, Status.TIMEOUT.value)


def pass_rate(counts: dict[str, int]) -> float | None:
    """Passed over the case runs that were judged (skipped ones excluded); None when none were."""
    judged = sum(counts.get(status, 0) for status in (Status.PASSED.value, *_FAILING))
    return counts.get(Status.PASSED.value, 0) / judged if judged else None


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

    def one(self, run: RunFolder) -> dict[str, Any]:
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

    def _summarise(self, run: RunFolder) -> dict[str, Any]:
        info = run_info(run.path)
        status = info.get("status") or ("finished" if (run.path / "cases.parquet").is_file() else "running")
        summary: dict[str, Any] = {
            "name": run.name,
            "run_id": info.get("run_id") or run.name,
            "status": status,
            "engine": info.get("engine"),
            "started_at": info.get("started_at"),
            "ended_at": info.get("ended_at"),
            "wall_s": _wall_seconds(info),
            "input": info.get("input"),
            "runs": info.get("runs") or 1,
            "rescored_from": (info.get("rescored_from") or {}).get("run_id"),
        }
        if (run.path / "cases.parquet").is_file() and status != "running":
            summary.update(self._from_cases(run, info))
        else:
            summary.update(self._from_jsonl(run, info))
        summary["pass_rate"] = pass_rate(summary["counts"])
        cost: dict[str, Any] = info["cost"] if isinstance(info.get("cost"), dict) else {}
        if summary["cost_usd"] is None:
            summary["cost_usd"] = _number(cost.get("cost_usd")) if cost else _number(info.get("cost_usd"))
        summary["role_cost_usd"] = _number(cost.get("role_cost_usd"))
        summary["stop_reason"] = info.get("stop_reason")
        if not summary["agents"]:
            summary["agents"] = list(info.get("agents") or ([info["agent"]] if info.get("agent") else []))
        if not summary["suites"] and info.get("input"):
            summary["suites"] = [_suite(info)]
        summary["suite"] = ", ".join(Path(suite).name for suite in summary["suites"]) or None
        return summary

    def _from_cases(self, run: RunFolder, info: dict[str, Any]) -> dict[str, Any]:
        # run.json's counts and input spare reading the status and source of every case run
        counts = info.get("counts") if isinstance(info.get("counts"), dict) and "total" in info["counts"] else None
        columns = ["agent", "duration_ms", "cost_usd"]
        columns += [] if counts else ["status"]
        columns += [] if info.get("input") else ["source"]
        return _figures(read_columns(run.table_files("cases"), CASES, columns), counts)

    def _from_jsonl(self, run: RunFolder, info: dict[str, Any]) -> dict[str, Any]:
        path = run.path / "results.jsonl"
        with self._lock:
            tail = self._tails.setdefault(path, _JsonlTail(path))
        counts, agents, suites, cost, case_ms = tail.read()
        planned = (info.get("cases") or 0) * (info.get("runs") or 1) * max(1, len(info.get("agents") or []))
        return {
            "counts": counts,
            "agents": sorted(agents),
            "suites": sorted(suites),
            "cost_usd": cost,
            "case_ms": case_ms,
            "case_p50_ms": None,
            "progress": {"done": counts["total"], "planned": planned or None},
        }


def _figures(table: pa.Table, counts: dict[str, int] | None) -> dict[str, Any]:
    if counts is None:
        counted = Counter(dict(zip(*_value_counts(table["status"]), strict=True)))
        counts = {"total": table.num_rows, **{status.value: counted.get(status.value, 0) for status in Status}}
    else:
        counts = {"total": counts.get("total", 0), **{status.value: counts.get(status.value, 0) for status in Status}}
    costs = table["cost_usd"]
    suites = []
    if "source" in table.column_names:
        files = pc.replace_substring_regex(table["source"], pattern=r":\d+$", replacement="")
        suites = sorted(value for value in pc.unique(files).to_pylist() if value)
    return {
        "counts": counts,
        "agents": sorted(value for value in pc.unique(table["agent"]).to_pylist() if value),
        "suites": suites,
        "cost_usd": pc.sum(costs).as_py() if costs.null_count < len(costs) else None,
        "case_ms": pc.sum(table["duration_ms"]).as_py() or 0.0,
        "case_p50_ms": pc.quantile(table["duration_ms"], q=0.5).to_pylist()[0] if table.num_rows else None,
        "progress": None,
    }


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _value_counts(column: pa.ChunkedArray) -> tuple[list[str], list[int]]:
    counted = pc.value_counts(column)
    return counted.field("values").to_pylist(), counted.field("counts").to_pylist()


def _suite(info: dict[str, Any]) -> str:
    """The run's ``-i`` input as the cases name their source: a relative file path made absolute
    from the folder the run started in; anything else (a message, ``agents:<id>``) as it is."""
    given = str(info["input"])
    if given.endswith((".jsonl", ".json")) and info.get("cwd") and not Path(given).is_absolute():
        return str(Path(info["cwd"]) / given)
    return given


class _JsonlTail:
    """Tallies of a growing ``results.jsonl``, read on from the last complete line seen."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.offset = 0
        self.counts = {"total": 0, **{status.value: 0 for status in Status}}
        self.agents: set[str] = set()
        self.suites: set[str] = set()
        self.cost: float | None = None
        self.case_ms = 0.0

    def read(self) -> tuple[dict[str, int], set[str], set[str], float | None, float]:
        with self._lock:
            try:
                with open(self.path, "rb") as file:
                    if file.seek(0, 2) < self.offset:  # rewritten: start again
                        self._reset()
                    file.seek(self.offset)
                    data = file.read()
            except OSError:
                data = b""
            end = data.rfind(b"\n") + 1  # a line still being written waits for its newline
            for line in data[:end].splitlines():
                self._add(line)
            self.offset += end
            return dict(self.counts), set(self.agents), set(self.suites), self.cost, self.case_ms

    def _add(self, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return
        if not isinstance(record, dict):
            return
        status = record.get("status")
        self.counts["total"] += 1
        if status in self.counts:
            self.counts[status] += 1
        if record.get("agent"):
            self.agents.add(record["agent"])
        if record.get("source"):
            self.suites.add(suite_of(record["source"]))
        if isinstance(record.get("cost_usd"), int | float):
            self.cost = (self.cost or 0.0) + record["cost_usd"]
        if isinstance(record.get("duration_ms"), int | float):
            self.case_ms += record["duration_ms"]


def _wall_seconds(info: dict[str, Any]) -> float | None:
    """The run's wall time: its parts' summed (``wall_seconds``); for a record without it, end minus start."""
    recorded = info.get("wall_seconds")
    if isinstance(recorded, (int, float)):
        return float(recorded)
    started, ended = info.get("started_at"), info.get("ended_at")
    return ended - started if isinstance(started, (int, float)) and isinstance(ended, (int, float)) else None
