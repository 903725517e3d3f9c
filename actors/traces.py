"""A remote agent's spans on the ray engine: one address to export to, whichever actor runs the case.

The run's OTLP receiver (:mod:`farm.traces.receiver`) stays in the driver, on the address the
header printed; it passes each request's spans on to the run's :class:`TraceDesk`, an actor that
keeps them by trace id in a :class:`~farm.traces.capture.Collector`. A session actor tells the desk
which traces it runs (:meth:`DeskSpans.watch`, not waited for) and, after each turn of a case that
asserts on traces, asks it once for that turn's spans (:meth:`DeskSpans.settle`). The word that a
session watches a trace and the trace's first spans travel apart, so the desk holds a span of a
trace nobody watches yet for :data:`HOLD_S` before it drops it.
"""

from __future__ import annotations

from typing import Any

import ray

from farm.results import SpanRecord
from farm.traces.capture import Collector

__all__ = ["HOLD_S", "DeskSpans", "Forward", "TraceDesk", "desk_name", "start_desk"]

HOLD_S = 30.0
"""How long the desk holds the spans of a trace no session watches yet (seconds)."""


def desk_name(run_id: str) -> str:
    return f"farm-traces-{run_id}"


@ray.remote(num_cpus=0, max_concurrency=1000)
class TraceDesk:
    """The run's received spans, by trace id, for the session actors to ask."""

    def __init__(self) -> None:
        self.collector = Collector(hold=HOLD_S)

    async def add_all(self, spans: list[tuple[int, SpanRecord]]) -> int:
        return self.collector.add_all(spans)

    async def watch(self, trace_id: int) -> None:
        self.collector.watch(trace_id)

    async def settle(self, trace_id: int, turn_span_id: str, wait: float, quiet: float, arrived: bool) -> list[SpanRecord]:
        return await self.collector.settle(trace_id, turn_span_id, wait, quiet, arrived)

    async def forget(self, trace_id: int) -> None:
        self.collector.forget(trace_id)


def start_desk(run_id: str) -> Any:
    """The run's desk, on this (the driver's) node: the receiver that feeds it runs here."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    return TraceDesk.options(name=desk_name(run_id), scheduling_strategy=here).remote()


class Forward:
    """The receiver's sink on the ray engine: each request's spans, passed on to the run's desk
    (not waited for: the receiver answers the exporter at once). A request that comes before the
    desk started (no case has run yet, so no span is of this run) is dropped."""

    def __init__(self, run_id: str):
        self.name = desk_name(run_id)
        self._desk: Any = None

    def add_all(self, spans: list[tuple[int, SpanRecord]]) -> int:
        desk = self._find()
        if desk is None:
            return 0
        desk.add_all.remote(spans)
        return len(spans)

    def _find(self) -> Any:
        if self._desk is None:
            try:
                self._desk = ray.get_actor(self.name)
            except ValueError:  # not started yet
                return None
        return self._desk


class DeskSpans:
    """A session actor's view of the desk (:class:`farm.traces.capture.ReceivedSpans`): one call
    waited for per traced turn (:meth:`settle`); the others are sent and not waited for."""

    def __init__(self, name: str):
        self.desk = ray.get_actor(name)

    def watch(self, trace_id: int) -> None:
        self.desk.watch.remote(trace_id)

    async def settle(self, trace_id: int, turn_span_id: str, wait: float, quiet: float = 0.2, arrived: bool = False) -> list[SpanRecord]:
        spans: list[SpanRecord] = await self.desk.settle.remote(trace_id, turn_span_id, wait, quiet, arrived)
        return spans

    def forget(self, trace_id: int) -> None:
        self.desk.forget.remote(trace_id)
