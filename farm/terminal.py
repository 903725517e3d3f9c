"""Interactive mode's question to a person at the terminal, for either engine.

:func:`ask_on_terminal` shows the agent's question, its hint and the input the
run would send, and reads one line back (Enter keeps the proposed input). It
blocks, so an engine calls it from a thread of its own, one question at a time.
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Callable
from typing import TextIO

from farm.roles.types import HumanRequest

__all__ = ["TerminalAsker", "ask_on_terminal"]


def _readline(stdin: TextIO, timeout: float) -> str | None:
    ready, _, _ = select.select([stdin], [], [], timeout)
    if not ready:
        return None
    line = stdin.readline()
    return None if line == "" else line.rstrip("\n")


def ask_on_terminal(request: HumanRequest, stdin: TextIO, write: Callable[[str], None]) -> str | None:
    """The person's answer, the proposed input for an empty line, or None when nobody
    answered within ``request.timeout``."""
    write(f"\n[{request.case_id}] turn {request.turn}: the agent asks: {request.question}")
    if request.hint:
        write(f"  hint: {request.hint}")
    if request.proposed not in (None, ""):
        write(f"  next input: {request.proposed!r} (Enter keeps it, or type a replacement)")
    write(f"  your answer ({int(request.timeout)}s): ")
    line = _readline(stdin, request.timeout)
    if line is None:
        return None
    if line.strip() == "":
        return request.proposed if isinstance(request.proposed, str) else None
    return line


class TerminalAsker:
    """Interactive mode on the local engine: one question at a time to the person at ``stdin``,
    off the event loop."""

    def __init__(self, stdin: TextIO, write: Callable[[str], None]):
        self.stdin, self.write = stdin, write
        self.lock = asyncio.Lock()

    async def __call__(self, request: HumanRequest) -> str | None:
        async with self.lock:
            return await asyncio.to_thread(ask_on_terminal, request, self.stdin, self.write)
