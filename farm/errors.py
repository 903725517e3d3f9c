"""Errors the farm reports to users as one sentence (exit code 2), never a traceback."""

from __future__ import annotations

__all__ = ["FarmError", "UsageError", "InputError"]


class FarmError(Exception):
    """Base of every error the farm reports to a user."""


class UsageError(FarmError):
    """A command line, config or reference the farm cannot use; nothing was run."""


class InputError(FarmError):
    """Test input that cannot be loaded; ``problems`` lists ``file:line: what is wrong``."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        head = problems[0] if problems else "the input cannot be loaded"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(head + more)
