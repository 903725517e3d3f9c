"""One case of a run as ``farm view`` shows it: every repetition (``--runs``) with its turns,
tool calls, the spans the agent made (a waterfall), simulator reasoning, assertions and
checkpoints, and the case's stability class.

Only the rows of the case are read from the turns and assertions tables (a filter on
``case_id``), so a case page costs the same in a run of ten cases or of a hundred thousand.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from farm.results import RunRecord, Status, stability_class
from farm.results._reader import SUITE
from farm.view.folders import NotFound

__all__ = ["case_detail"]

_JSON_COLUMNS = ("expected", "actual")


def case_detail(run: RunRecord, case_id: str, agent: str | None = None, suite: str | None = None) -> dict[str, Any]:
    """The case ``case_id`` of ``run`` (of ``agent`` and of ``suite`` only, when given): its
    repetitions, oldest first, each with its own turns and checks only (a case run is keyed by its
    suite and agent too). A case of several agents is one agent's at a time: without ``agent``, the
    run's first; ``agents`` names them all. An id in several of the run's suites is one suite's case
    at a time likewise: without ``suite``, the first by name; ``suites`` names them all."""
    cases = run.case_rows("cases", case_id, agent, suite)
    if cases.num_rows == 0:
        raise NotFound(f"There is no case {case_id!r} in run {run.name!r}" + (f" for agent {agent!r}" if agent else "") + (f" in suite {suite!r}." if suite is not None else "."))
    suites = sorted(set(cases[SUITE].to_pylist()))
    if suite is None:
        suite = suites[0]
        cases = cases.filter(pc.equal(cases[SUITE], suite))
    agents = _agents(run, cases)
    if agent is None and len(agents) > 1:
        agent = agents[0]
        cases = cases.filter(pc.equal(cases["agent"], agent))
    turn_rows = _by_run(run.case_rows("turns", case_id, agent, suite).to_pylist())
    span_rows = _by_run(run.case_rows("spans", case_id, agent, suite).to_pylist())
    assertion_rows = _by_run(run.case_rows("assertions", case_id, agent, suite).to_pylist())
    repetitions = []
    for case in sorted(cases.to_pylist(), key=lambda row: (row["agent"] or "", row["run_index"], row["attempt"])):
        key = _case_run(case)
        case["started_at"] = case["started_at"].timestamp() if case["started_at"] else None
        checks = sorted(assertion_rows.get(key, []), key=_check_order)
        for check in checks:
            for name in _JSON_COLUMNS:
                check[name] = _parsed(check[name])
        steps = sorted(turn_rows.get(key, []), key=lambda row: row["turn"])
        spans = _spans_by_turn(span_rows.get(key, []))
        for step in steps:
            step["spans"] = spans.get(step["turn"], [])
            for call in step["tool_calls"] or []:
                call["args"], call["result"] = _parsed(call["args"]), _parsed(call["result"])
            step["input"] = _parsed_input(step["input"])
        repetitions.append({"case": case, "turns": steps, "checks": checks})
    return {
        "run": run.name, "case_id": case_id, "suite": suite, "suites": suites, "agent": agent, "agents": agents, "repetitions": repetitions,
        "stability": _stability(cases), "stopped": _stopped(cases),
    }  # fmt: skip


def _spans_by_turn(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Each turn's spans as a waterfall: by start time, each with its ``depth`` (how many of the
    turn's spans it is under) and ``offset_ms`` (from the turn's first span)."""
    turns: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        row["attributes"] = _parsed(row["attributes"])
        row["start"] = row["start"].timestamp() if row["start"] else 0.0
        turns.setdefault(row["turn"], []).append(row)
    for spans in turns.values():
        parents = {span["span_id"]: span["parent_span_id"] for span in spans}
        for span in spans:
            depth, parent = 0, span["parent_span_id"]
            while parent in parents and depth < len(spans):
                depth, parent = depth + 1, parents[parent]
            span["depth"] = depth
        spans.sort(key=lambda span: (span["start"], span["depth"]))  # a parent before a child that starts in its millisecond
        first = spans[0]["start"]
        for span in spans:
            span["offset_ms"] = round((span["start"] - first) * 1000, 3)
    return turns


def _stopped(cases: pa.Table) -> str | None:
    """Under adaptive repeats, where the case stopped ("stopped after 2 tries: above the gate"), as
    its last try says; None otherwise (a run written before adaptive repeats has no such column)."""
    from farm.sequential import stop_said

    if "stopped" not in cases.column_names:
        return None
    last = [row for row in cases.select(["stopped", "tries", "verdict"]).to_pylist() if row["stopped"]]
    return stop_said(last[-1]["stopped"], last[-1]["tries"] or 0, last[-1]["verdict"]) if last else None


def _agents(run: RunRecord, cases: pa.Table) -> list[str]:
    """The agents that ran the case, in the order the run names them (run.json's ``agents``)."""
    present = {name for name in cases["agent"].to_pylist() if name}
    named = run.info.agents if run.has_info else []
    return [name for name in named if name in present] + sorted(present.difference(named))


def _case_run(row: dict[str, Any]) -> tuple[str | None, int, int]:
    """Which case run of the case a row belongs to: its agent, repetition and attempt."""
    return row["agent"], row["run_index"], row["attempt"]


def _by_run(rows: list[dict[str, Any]]) -> dict[tuple[str | None, int, int], list[dict[str, Any]]]:
    grouped: dict[tuple[str | None, int, int], list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(_case_run(row), []).append(row)
    return grouped


def _check_order(row: dict[str, Any]) -> tuple[int, int, int]:
    """Turn assertions in turn order, then final assertions, then checkpoints."""
    scope = {"turn": 0, "final": 1, "checkpoint": 2}.get(row["scope"], 3)
    return (scope, row["turn"] if row["turn"] is not None and scope == 0 else 0, row["position"] or 0)


def _parsed(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _parsed_input(text: str | None) -> Any:
    """A structured input (JSON text in the table) as its value; plain text as it is."""
    if text and text[:1] in "[{":
        return _parsed(text)
    return text


def _stability(cases: Any) -> dict[str, Any] | None:
    """Pass rate and class over the case's judged repetitions (skipped ones excluded); None when
    they are several agents' (each agent's tries are apart: ask for one agent's case)."""
    if len(set(cases["agent"].to_pylist())) > 1:
        return None
    statuses = cases["status"].to_pylist()
    judged = [status for status in statuses if status != Status.SKIPPED.value]
    if not judged:
        return None
    rate = judged.count(Status.PASSED.value) / len(judged)
    return {"runs": len(judged), "passed": judged.count(Status.PASSED.value), "pass_rate": rate, "class": stability_class(rate).value}
