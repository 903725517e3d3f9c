"""A console that cannot be driven by what it prints: agent replies and case ids are user
text, so terminal control characters in them are shown as harmless symbols."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

__all__ = ["SafeConsole", "neutralise", "one_line"]

_CONTROLS = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)}
_CONTROLS[0x7F] = 0x2421
_CONTROLS.update({c: 0xFFFD for c in range(0x80, 0xA0)})


def neutralise(text: str) -> str:
    """``text`` with terminal control characters (ESC, OSC, BEL, CR, C1...) shown as
    harmless symbols (ESC as ␛), one for one, so an agent's reply cannot drive the terminal."""
    return text.translate(_CONTROLS)


_BREAKS = {0x0A: 0x240A, 0x09: 0x2409}


def one_line(text: str) -> str:
    """``text`` made safe by :func:`neutralise`, with line breaks and tabs shown as symbols too (␊, ␉): an id or
    a name shown on a line of the farm's cannot start a line of its own, which would read as the farm's."""
    return neutralise(text).translate(_BREAKS)


class SafeConsole:
    """Wraps a :class:`rich.console.Console` (kept as :attr:`raw`): everything it prints is
    neutralised; emoji codes such as ``:100:`` print as they are. Other attributes are the
    wrapped console's."""

    def __init__(self, console: Console):
        self.raw = console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """:meth:`rich.console.Console.print` with every object neutralised first."""
        safe = []
        for item in objects:
            if isinstance(item, Text):
                item = item.copy()
                item.plain = neutralise(item.plain)
            elif isinstance(item, str):
                item = neutralise(item)
            safe.append(item)
        kwargs.setdefault("emoji", False)
        self.raw.print(*safe, **kwargs)
