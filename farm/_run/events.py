"""NDJSON events for tools and dashboards: what ``farm test --json`` prints on stdout.

One JSON object per line, flushed as it is written, so a consumer reading the
pipe sees each case the moment it finishes. Every event carries ``event``
(its kind), ``run_id`` and ``time`` (Unix seconds, float). Consumers must
ignore keys they do not know: events gain keys, never lose or retype them.

``run_start`` — first line of every stream::

    {"event": "run_start", "run_id": "...", "time": 1714000000.0,
     "schema_version": 3, ...info}

  ``info`` is whatever :meth:`EventWriter.start` was given (e.g. ``agent``,
  ``input``, ``cases``); when ``start`` is never called the event is emitted
  with no extra keys just before the first other event.

``case_start`` — optional (see below)::

    {"event": "case_start", "run_id": "...", "time": ..., "suite": "suites/a.jsonl",
     "case_id": "c1", "name": "Refund" | null, "run_index": 0, "attempt": 1}

``turn`` — optional (see below)::

    {"event": "turn", "run_id": "...", "time": ..., "suite": "suites/a.jsonl",
     "case_id": "c1", "run_index": 0, "attempt": 1, "turn": <TurnResult JSON: turn, input,
     input_source, output, tool_calls[], assertions[], duration_ms, usage, ...>}

``case_result`` — one per finished case run::

    {"event": "case_result", "run_id": "...", "time": ..., "suite": "suites/a.jsonl",
     "case": <CaseResult JSON>}

  ``suite`` is the case's suite within the run (its file without the line, ``<stdin>``,
  ``<message>``, or its generator ``agents:<id>``): a case id may repeat across the run's
  suites, and ``suite``, ``case_id``, ``run_index``, ``attempt`` and the agent name one case run.

  ``case`` is exactly a ``results.jsonl`` line (:class:`farm.results.CaseResult`).

``summary`` — last line, written by :meth:`EventWriter.close`::

    {"event": "summary", "run_id": "...", "time": ...,
     "counts": {"total": 6, "passed": 3, "failed": 1, "skipped": 1, "error": 1, "timeout": 0},
     "pass_rate": 0.6 | null, "total_turns": 11, "duration_ms": 5230.5,
     "tokens": {"prompt": 900, "completion": 300, "total": 1200},
     "wall_seconds": 12.3, "exit_code": 1, "gate": {...} | absent}

  ``pass_rate`` is passed / (total - skipped - a role's errors), null when nothing was judged
  and when the run tested several agents (each agent's is in ``agents``, never a pooled one);
  ``exit_code`` is what ``farm test`` exits with: its ``gate`` (``run.json``'s,
  :class:`farm.writers.runinfo.RunGate`: a case passes when at least
  ``--min-pass-rate`` of its tries passed, and the run is not significantly worse
  than ``--baseline``; a rescore is judged by its run's ``--min-pass-rate``, with no
  baseline) decides it, 0 when passed; a run that stopped early fails its gate (1), an
  interrupted one exits 130. ``counts`` and the figures beside them are the whole run's, a
  ``--resume``'s earlier parts included (their ``case_result`` events are not said again).

``case_start`` and ``turn`` are documented so consumers can handle them, but
``farm test`` does not emit them today: a conversation runs whole on one Ray
actor and only its result crosses back to the driver (no per-turn round
trips). A driver that does see them can call :meth:`EventWriter.case_start`
and :meth:`EventWriter.turn`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TextIO

from farm.gate import gate_exit_code
from farm.results import SCHEMA_VERSION, CaseResult, TurnResult
from farm.summary import Summary
from farm.writers.runinfo import RunGate

__all__ = ["EventWriter", "for_run"]


class EventWriter:
    """A :class:`~farm.writers.ResultWriter` that prints NDJSON events to ``stream``.

    ``close`` writes the ``summary`` event and flushes ``stream`` but does not
    close it (it is usually stdout). Memory stays flat: results are counted,
    not kept.
    """

    label = "Events"

    def __init__(
        self,
        stream: TextIO,
        run_id: str,
        *,
        clock: Callable[[], float] = time.time,
        gate: Callable[[], RunGate | None] | None = None,
    ):
        self.stream = stream
        self.gate = gate
        """The run's gate once decided (``summary``'s ``gate`` and ``exit_code``); None: none."""
        self.run_id = run_id
        self.path = getattr(stream, "name", "<stream>")
        self._clock = clock
        self._started_at = clock()
        self._summary = Summary()
        self._announced = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self, info: dict[str, Any] | None = None) -> None:
        """Emit ``run_start`` with ``info``'s keys; only the first call (or event) emits it."""
        if self._announced:
            return
        self._announced = True
        self._emit("run_start", {"schema_version": SCHEMA_VERSION, **(info or {})})

    def case_start(self, case_id: str, name: str | None = None, run_index: int = 0, attempt: int = 1, *, suite: str = "") -> None:
        """Emit ``case_start`` (optional: for drivers that learn when a case begins); ``suite``:
        the case's suite within the run (:func:`~farm.results._suites.suite_of` of its source)."""
        self._emit("case_start", {"suite": suite, "case_id": case_id, "name": name, "run_index": run_index, "attempt": attempt})

    def turn(self, case_id: str, turn: TurnResult, run_index: int = 0, attempt: int = 1, *, suite: str = "") -> None:
        """Emit ``turn`` (optional: for drivers that see turns as they happen); ``suite`` as for :meth:`case_start`."""
        self._emit(
            "turn",
            {
                "suite": suite,
                "case_id": case_id,
                "run_index": run_index,
                "attempt": attempt,
                "turn": turn.model_dump(mode="json"),
            },
        )

    def write(self, result: CaseResult) -> None:
        self._emit("case_result", {"suite": result.suite, "case": result.model_dump(mode="json")})
        self._summary.add(result)

    def count_earlier(self, result: CaseResult) -> None:
        """Count a result of the run's earlier parts (``--resume``) in ``summary``, which sums up the
        whole run as its gate does, without an event for it (it was said when it ran)."""
        self._summary.add(result)

    def flush(self) -> None:
        if not self._closed:
            self.stream.flush()

    def close(self) -> None:
        """Emit ``summary`` (and ``run_start`` if nothing was emitted yet); safe to call twice."""
        if self._closed:
            return
        summary = self._summary
        gate = self.gate() if self.gate is not None else None
        self._emit(
            "summary",
            {
                "counts": summary.count_dict(),
                "pass_rate": None if summary.several_agents else summary.pass_rate,  # never pooled over agents: see "agents"
                "total_turns": summary.total_turns,
                "duration_ms": summary.duration_ms,
                "tokens": {
                    "prompt": summary.prompt_tokens,
                    "completion": summary.completion_tokens,
                    "total": summary.total_tokens,
                },
                **summary.role_cache(),
                **summary.cost(),
                **({"agents": summary.agent_counts()} if summary.several_agents else {}),
                "wall_seconds": round(self._clock() - self._started_at, 3),
                "exit_code": summary.exit_code if gate is None else gate_exit_code(gate),
                **({"gate": gate.model_dump(mode="json")} if gate is not None else {}),
            },
        )
        self._closed = True

    def _emit(self, event: str, fields: dict[str, Any]) -> None:
        if self._closed:
            raise ValueError(f"Cannot emit a {event} event, as the event writer for run {self.run_id} has been closed.")
        if not self._announced and event != "run_start":
            self.start()
        record = {"event": event, "run_id": self.run_id, "time": self._clock()}
        record.update((key, value) for key, value in fields.items() if key not in record)
        self.stream.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.stream.flush()


def for_run(asked: bool, run_id: str, info: dict[str, Any], gate: Callable[[], RunGate | None] | None) -> EventWriter:
    """``--json``'s writer (:data:`farm.writers.extra.EXTRA_WRITERS`): the events on standard output,
    its ``run_start`` already said with ``info``."""
    import sys

    events = EventWriter(sys.stdout, run_id, gate=gate)
    events.start(info)
    return events
