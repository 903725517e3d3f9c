"""The ``traceparent`` of the turn being run, for the requests of a remote agent (W3C Trace Context).

A context variable, as the current span is: each conversation's task has its own, so a request
names its own case run's trace and turn. Set by :class:`farm.traces.capture.CaseTrace` while a
traced turn calls its agent; read by :func:`farm.agents.retry.request_json`. Light on purpose: the
agents' clients import it whether or not a run captures traces.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["TRACEPARENT", "new_span_id", "new_trace_id", "parent_of_requests"]

TRACEPARENT: ContextVar[str | None] = ContextVar("farm_traceparent", default=None)
"""``00-<trace id>-<turn span id>-01`` while a traced turn calls its agent; None otherwise."""


def new_trace_id() -> str:
    """A random trace id, 32 hex digits (never all zeros, which W3C reserves)."""
    return f"{random.getrandbits(128) or 1:032x}"


def new_span_id() -> str:
    """A random span id, 16 hex digits (never all zeros)."""
    return f"{random.getrandbits(64) or 1:016x}"


@contextmanager
def parent_of_requests(trace_id: str, span_id: str) -> Iterator[None]:
    """Inside: the agent's requests name the span ``span_id`` of trace ``trace_id`` (hex) as their parent."""
    token = TRACEPARENT.set(f"00-{trace_id}-{span_id}-01")
    try:
        yield
    finally:
        TRACEPARENT.reset(token)
