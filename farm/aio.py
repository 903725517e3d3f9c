"""Running a coroutine to its end from synchronous code, whether or not an event loop runs here.

``asyncio.run`` refuses to start inside a running loop (a notebook cell, an async
application calling :func:`farm.run`). :func:`run_sync` then runs the coroutine
on a loop of its own in a helper thread and waits for it, so the same call works
everywhere.

``run_sync(coro, idle=work)`` also calls ``work`` once, the first time the loop has nothing
to do and nothing to send: asyncio waits in its selector with a timeout of zero while any
callback is ready, and blocks there only when none is; a socket still connecting, or with
bytes waiting to go, is registered for writing (:class:`_IdleSelector`). A run uses that
moment, its first requests sent and their replies not yet back, for work it would otherwise
do before them. Under another event loop policy (uvloop's) the loop is the policy's and
``work`` is not called: what it prepares is done where it is needed.
"""

from __future__ import annotations

import asyncio
import contextvars
import selectors
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T], idle: Callable[[], None] | None = None) -> T:
    """``asyncio.run(coro)``; in a thread of its own when this thread already runs a loop.
    ``idle``: called once, when the loop first has nothing to do (see the module docstring)."""

    def run() -> T:
        if idle is None or not _default_loops():
            return asyncio.run(_quietly(coro))
        with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(_IdleSelector(idle))) as runner:
            return runner.run(_quietly(coro))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run()
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = run()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc

    # the caller's context variables (a role-call tally) hold in the helper thread too
    thread = threading.Thread(target=contextvars.copy_context().run, args=(target,), name="farm-run-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


async def _quietly(coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` on a loop that leaves an interrupt to the run to tell (:func:`farm.interrupts.quiet_interrupts`)."""
    from farm.interrupts import quiet_interrupts

    quiet_interrupts(asyncio.get_running_loop())
    return await coro


def _default_loops() -> bool:
    """Whether this process makes asyncio's own selector loops: not where a user chose other loops
    (uvloop's policy), which the idle work then leaves as they are, nor on Windows (Proactor)."""
    return sys.platform != "win32" and type(asyncio.get_event_loop_policy()) is asyncio.DefaultEventLoopPolicy


class _IdleSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]  # an alias of the platform's best
    """The platform's selector, calling ``work`` the first time its loop would block (nothing
    ready) with no socket waiting to be written to (nothing connecting, nothing left to send).

    ``work`` failing is not the run's failure: what it prepares is done again, and fails
    with its own message, where it is needed."""

    def __init__(self, work: Callable[[], None]):
        super().__init__()
        self._work: Callable[[], None] | None = work

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        work = self._work
        if work is not None and (timeout is None or timeout > 0) and not self._sending():
            self._work = None
            try:
                work()
            except Exception:  # noqa: BLE001, S110 - done again where it is needed, and said there
                pass
            timeout = 0  # time went by: what became ready meanwhile is taken at once
        return super().select(timeout)

    def _sending(self) -> bool:
        return any(key.events & selectors.EVENT_WRITE for key in self.get_map().values())
