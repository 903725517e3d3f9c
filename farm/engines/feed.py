"""Cases that arrive while a run goes, handed to the scheduler as they come: every suite's
:class:`~farm.feed.CaseFeed`, the same way.

A static suite's feed is closed (its cases were all there at once): its end is handed over at
once. A generator's hands over each batch as it is accepted; the generation itself is
engine-agnostic, here is only how its batches reach the pump. The local engine runs :func:`pump`
as a task on its own loop; the ray engine runs it on a thread of the driver (:class:`ThreadFeed`),
its generator calls going to a role pool, so that the driver's ``ray.wait`` loop only drains a
queue.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from farm.loaded import LoadedCase

if TYPE_CHECKING:
    from farm.feed import CaseFeed
    from farm.generation import GenerateCall

__all__ = ["ThreadFeed", "pump"]


async def pump(
    feed: CaseFeed,
    generate: GenerateCall,
    put: Callable[[Arrival], None],
    on_progress: Callable[[Any], None] | None = None,
) -> None:
    """Hand every batch of ``feed`` to ``put`` as it arrives, then None (the end) whatever
    happens; a failure of the feed itself (a bug: a generator's own errors end it with a
    reason) is handed over before the end, to be raised where the run is pumped."""
    try:
        async for batch in feed.batches(generate, on_progress or (lambda progress: None)):
            put(batch)
    except Exception as exc:  # noqa: BLE001 - raised again by the pump
        put(exc)
    finally:
        put(None)


Arrival = list[LoadedCase] | Exception | None
"""What the feed hands over: a batch of cases, a failure of the generation, or None at the end."""


class ThreadFeed:
    """:func:`pump` on a thread of its own, with its own event loop; batches wait in a queue. A
    closed feed needs no thread: its end is there at once."""

    def __init__(
        self,
        feed: CaseFeed,
        generate: Callable[[], GenerateCall],
        on_progress: Callable[[Any], None] | None = None,
    ):
        self._queue: queue.SimpleQueue[Arrival] = queue.SimpleQueue()
        self.open = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        if feed.closed:
            self._queue.put(None)
            return

        def main() -> None:
            async def go() -> None:
                self._loop = asyncio.get_running_loop()
                self._task = asyncio.current_task()
                await pump(feed, generate(), self._queue.put, on_progress)

            try:
                asyncio.run(go())
            except asyncio.CancelledError:  # closed by the run
                pass

        self._thread = threading.Thread(target=main, name="farm-generation", daemon=True)
        self._thread.start()

    def take(self, wait: float = 0.0) -> list[list[LoadedCase]]:
        """The batches that arrived, waiting up to ``wait`` seconds for the first; :attr:`open`
        turns False once the last has been taken."""
        out: list[list[LoadedCase]] = []
        try:
            item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            while True:
                if item is None:
                    self.open = False
                    break
                if isinstance(item, Exception):
                    raise item
                out.append(item)
                item = self._queue.get_nowait()
        except queue.Empty:
            pass
        return out

    def close(self) -> None:
        """Stop generating (the run stopped): cancel what is in flight and wait for the thread."""
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not task.done():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop has closed meanwhile
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)
