"""What ``farm view`` makes of a case's ``source``."""

from __future__ import annotations

import re

__all__ = ["suite_of"]

_LINE = re.compile(r":\d+$")


def suite_of(source: str) -> str:
    """The suite a case came from: its ``source`` (``file:line``) without the line."""
    return _LINE.sub("", source)
