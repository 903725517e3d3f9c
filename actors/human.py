"""Interactive mode: a person at the driver's terminal answers agents that run inside Ray actors.

Session actors ask the :class:`HumanDesk` actor; a thread in the driver
(:class:`TerminalDesk`) takes one question at a time, shows the agent's
question and hint on the terminal, and sends the person's line back. A
question nobody answers within the case's ``interactive.timeout`` gets None
(the case is then skipped or failed, as ``--on-missing-input`` says).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from typing import Any, TextIO

import ray

from farm.roles.types import HumanRequest
from farm.terminal import ask_on_terminal

__all__ = ["HumanDesk", "TerminalDesk"]


@ray.remote(num_cpus=0, max_concurrency=1000)
class HumanDesk:
    def __init__(self) -> None:
        self._questions: asyncio.Queue[tuple[int, HumanRequest]] = asyncio.Queue()
        self._waiting: dict[int, asyncio.Future[str | None]] = {}
        self._ids = itertools.count(1)

    async def ask(self, request: HumanRequest) -> str | None:
        qid = next(self._ids)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._waiting[qid] = future
        await self._questions.put((qid, request))
        try:
            return await asyncio.wait_for(future, request.timeout)
        except TimeoutError:
            return None
        finally:
            self._waiting.pop(qid, None)

    async def next_question(self, wait: float) -> tuple[int, HumanRequest] | None:
        """The oldest question still waiting for an answer, or None after ``wait`` seconds."""
        deadline = asyncio.get_running_loop().time() + wait
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return None
            try:
                qid, request = await asyncio.wait_for(self._questions.get(), remaining)
            except TimeoutError:
                return None
            if qid in self._waiting:  # not timed out meanwhile
                return qid, request

    async def answer(self, qid: int, text: str | None) -> None:
        future = self._waiting.get(qid)
        if future is not None and not future.done():
            future.set_result(text)


class TerminalDesk:
    """Serves a :class:`HumanDesk` from the driver's terminal, in a background thread."""

    def __init__(self, desk: Any, stdin: TextIO, write: Callable[[str], None]):
        self.desk = desk
        self.stdin = stdin
        self.write = write
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="farm-human-desk", daemon=True)

    def start(self) -> TerminalDesk:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                item = ray.get(self.desk.next_question.remote(0.5))
            except Exception:  # the run is ending and the desk is gone
                return
            if item is None:
                continue
            qid, request = item
            self.desk.answer.remote(qid, ask_on_terminal(request, self.stdin, self.write))
