"""The run-wide settings that shape every conversation of a run: what the runner is told besides
the case (:class:`RunSettings`), and their defaults. :func:`farm._run.setup.run_settings` builds
them from a run's resolved options."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from farm.config import DEFAULT_INPUT_TOOLS

__all__ = ["DEFAULT_CASE_TIMEOUT", "DEFAULT_TURN_TIMEOUT", "MAX_TOOL_STEPS", "RunSettings"]

MAX_TOOL_STEPS = 8
DEFAULT_CASE_TIMEOUT = 300.0
"""``--timeout``'s default: 5 minutes a case."""
DEFAULT_TURN_TIMEOUT = 120.0
"""``--turn-timeout``'s default: 2 minutes a turn."""


@dataclass
class RunSettings:
    """Run-wide settings that shape every conversation."""

    agent_id: str = ""
    run_id: str = ""
    on_missing_input: Literal["skip", "fail"] = "skip"
    case_timeout: float = DEFAULT_CASE_TIMEOUT
    turn_timeout: float = DEFAULT_TURN_TIMEOUT
    interactive: bool = False
    default_simulator: str | None = None
    input_tools: tuple[str, ...] = DEFAULT_INPUT_TOOLS
    agent_tool_mocks: dict[str, Any] = field(default_factory=dict)
    max_tool_steps: int | None = None
    """The agent's ``max_tool_steps`` (a case's own wins; default :data:`MAX_TOOL_STEPS`)."""
    worker: str | None = None
    cache: bool = True
    """Whether role calls go through the role cache (``--no-cache``: False)."""
    traces: bool = False
    """Capture every case run's spans, as ``[farm].traces = true`` asks; a case that asserts on
    traces is captured anyway (:mod:`farm.traces.capture`)."""
    max_spans: int = 1000
    """The most of the agent's spans a case run keeps (``[farm].max_spans``); the rest are counted."""
    trace_wait: float = 2.0
    """Seconds a remote agent's spans of a turn may take to reach the receiver (``[farm].trace_wait``)."""
    trace_receiver: str | None = None
    """The URL of the run's OTLP receiver, when a remote agent's spans come back through one."""
    exported: bool = False
    """Whether the run sends each case run out as a trace (``--otlp``): every case run then has a
    trace id and each turn a span id, named in a remote agent's ``traceparent``, and an in-process
    agent's spans are captured to go out beneath their turns (docs/traces.md)."""
    simulator_failures: Literal["failure", "error"] = "failure"
    """What a failed dynamic case blamed on the simulator becomes (``[farm].simulator_failures``):
    a ``failure``, or an ``error`` of the simulator (the farm's own part failed)."""
    attribute: bool = False
    """Whether a failed dynamic case that no simulator flag settles asks the attributor whose
    failure it is (``--attribute``)."""
    attributor: str | None = None
    """The attributor's agent id (``[farm].attributor``)."""
    clock: Callable[[], float] = time.perf_counter
    """What a turn's ``duration_ms`` is measured with; a rescore gives a clock that replays the recorded times."""
