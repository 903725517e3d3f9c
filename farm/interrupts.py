"""Ctrl-C and SIGTERM during a run: one ``KeyboardInterrupt``, raised where the run can take it.

Python runs a signal handler in the main thread between any two bytecodes, so a plain
``KeyboardInterrupt`` can fall in the middle of a step that must happen whole: a result
written to the results file but not yet counted in the summary (the gate then counts one
case fewer than the file holds), or a case that ended taken off its queue but not yet
written (lost, though it ran). :func:`uninterrupted` marks such a step; an interrupt that
comes during one is raised as the step ends.

Python also swallows an exception raised where nothing can catch it (a weakref callback, a
``__del__``: "Exception ignored in ..."), and an interrupt that lands there would be lost
with the run going on to its end. The engines' loops call :func:`redeliver` at each turn:
an interrupt raised and never taken is raised again there.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Interrupts", "interrupts_ignored", "quiet_interrupts", "redeliver", "uninterrupted"]

_held = 0
"""How deep the main thread is in :func:`uninterrupted` steps."""
_waiting = False
"""An interrupt came during such a step and is raised as the outermost one ends."""
_untaken = False
"""An interrupt was raised and the run has not taken it (:meth:`Interrupts.take`)."""


class Interrupts:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt`` once; later ones, while the run is
    cleaning up, are ignored, so a second Ctrl-C never cuts the clean-up short.

    SIGINT is set too because a process started in the background by a shell script
    inherits SIGINT ignored, and ``kill -INT`` must still stop it. Only the main thread
    may set handlers; elsewhere (a notebook's helper thread) nothing changes.
    """

    def __init__(self) -> None:
        self.fired = False
        self.previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        global _waiting, _untaken
        if self.fired:
            return
        self.fired = True
        _untaken = True
        if _held:
            _waiting = True
            return
        raise KeyboardInterrupt()

    def take(self) -> None:
        """The run caught the interrupt: :func:`redeliver` raises it no more."""
        global _untaken
        _untaken = False

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self.previous = {sig: signal.signal(sig, self._handler) for sig in (signal.SIGTERM, signal.SIGINT)}
        return self

    def rearm(self) -> None:
        """Set the handlers again: ``ray.init`` replaces the SIGTERM handler with its own."""
        for sig in self.previous:
            signal.signal(sig, self._handler)

    def __exit__(self, *exc: object) -> None:
        global _waiting, _untaken
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        _waiting = _untaken = False


def redeliver() -> None:
    """At a point of a run's loop where an interrupt may be raised: raise one that came and was
    lost (swallowed where it landed), as the run has not taken it. Outside a step of
    :func:`uninterrupted`, which raises a held one itself."""
    if _untaken and not _held and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt()


@contextmanager
def uninterrupted() -> Iterator[None]:
    """The block happens whole: an interrupt that comes during it is raised as it ends (in place
    of an error of the block's own, which it then carries as its context)."""
    global _held, _waiting
    if threading.current_thread() is not threading.main_thread():  # handlers run in the main thread only
        yield
        return
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if not _held and _waiting:
            _waiting = False
            raise KeyboardInterrupt()


@contextmanager
def interrupts_ignored() -> Iterator[None]:
    """SIGINT and SIGTERM ignored while the block runs (saying how an interrupted run ended: a second
    Ctrl-C must not cut that short either); the handlers come back after it."""
    with Interrupts() as interrupts:
        interrupts.fired = True  # as after the first: every one is ignored
        yield


def quiet_interrupts(loop: asyncio.AbstractEventLoop) -> None:
    """Let ``loop`` say nothing of an interrupt that ended one of its tasks (a library's, which
    nobody awaits once the run stops): the run says it was interrupted, in its own words, and a
    "Task exception was never retrieved" traceback would follow the user's Ctrl-C."""

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if not isinstance(context.get("exception"), KeyboardInterrupt):
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
