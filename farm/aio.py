"""Running a coroutine to its end from synchronous code, whether or not an event loop runs here.

``asyncio.run`` refuses to start inside a running loop (a notebook cell, an async
application calling :func:`farm.run`). :func:`run_sync` then runs the coroutine
on a loop of its own in a helper thread and waits for it, so the same call works
everywhere.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``; in a thread of its own when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc

    # the caller's context variables (a role-call tally) hold in the helper thread too
    thread = threading.Thread(target=contextvars.copy_context().run, args=(target,), name="farm-run-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
