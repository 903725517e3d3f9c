"""The ``traceparent`` of the turn being run, for the requests of a remote agent (W3C Trace Context).

A context variable, as the current span is: each conversation's task has its own, so a request
names its own case run's trace and turn. Set by :class:`farm.traces.capture.CaseTrace` while a
traced turn calls its agent; read by :func:`farm.agents.retry.request_json`. Light on purpose: the
agents' clients import it whether or not a run captures traces.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["TRACEPARENT"]

TRACEPARENT: ContextVar[str | None] = ContextVar("farm_traceparent", default=None)
"""``00-<trace id>-<turn span id>-01`` while a traced turn calls its agent; None otherwise."""
