"""Where a run's cases come from: each ``-i`` value is one or more :class:`CaseSource`\\ s
(:func:`farm.inputs.expand_inputs`), and a run asks each for its cases.

==========================  ====================================  ======================
source                      its cases                             where
==========================  ====================================  ======================
:class:`SuiteFile`          a suite file's (one of a folder's,    here
                            or of a glob's)
:class:`Message`            one single-turn case                  here
:class:`Stdin`              JSONL on stdin                        here
a generator agent, a        none yet: a feed that hands them      :mod:`farm.generation.sources`
script generator            over as the run goes (and the
                            generation cache, when it ran before)
script tests                one case per ``test_*`` function      :mod:`farm.roles.scripttests`
==========================  ====================================  ======================
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TextIO

from farm.suite.loader import SMALL_SUITE, Suite, load_file, load_message, load_stdin

if TYPE_CHECKING:
    from farm.config import FarmConfig
    from farm.inputkind import InputKind

__all__ = ["CaseSource", "Loading", "Message", "Stdin", "SuiteFile"]


@dataclass(frozen=True)
class Loading:
    """What a source may use to give its cases."""

    config: FarmConfig
    agent_id: str | None = None
    """The (first) agent under test: a generator writes cases for it."""
    stdin: TextIO | None = None
    """Where :class:`Stdin` reads (None: ``sys.stdin``)."""
    compact: bool = False
    """Keep the cases of a file or stdin as JSON once there are more than
    :data:`~farm.suite.loader.SMALL_SUITE` (for big runs)."""
    cache: Any = None
    """The role cache a generator's whole generation is kept in (a :class:`~farm.roles.cache.RoleCache`;
    None: ``--no-cache``)."""
    simulator: str | None = None
    """The run's default simulator (``--simulator``): a generator checks its dynamic cases with it."""


class CaseSource(Protocol):
    """One source of a run's cases."""

    @property
    def value(self) -> str:
        """How the run names it: a file's path as given or found (relative stays relative), or the ``-i`` value."""
        ...

    @property
    def kind(self) -> InputKind:
        """What kind of thing it is (:func:`farm.inputkind.input_kind`)."""
        ...

    def load(self, loading: Loading) -> Suite:
        """Its cases: all of them (its feed closed), or, for a generator, none yet and the ``feed``
        that hands them over as they arrive (:mod:`farm.feed`)."""
        ...


@dataclass(frozen=True)
class SuiteFile:
    """A suite file: ``.jsonl``, ``.json`` (a case, an array, or ``{"cases": [...]}``)."""

    value: str
    kind: Literal["file"] = "file"
    notes: tuple[str, ...] = ()
    """What the run should say of how the file was found (a folder's files it does not run)."""

    def load(self, loading: Loading) -> Suite:
        suite = load_file(Path(self.value), display=self.value, compact=loading.compact, small=SMALL_SUITE)
        suite.notes += self.notes
        return suite


@dataclass(frozen=True)
class Message:
    """A direct message: one single-turn case with no assertions."""

    value: str
    kind: Literal["message"] = "message"

    def load(self, loading: Loading) -> Suite:
        return load_message(self.value)


@dataclass(frozen=True)
class Stdin:
    """Cases as JSONL on stdin (``-i -``)."""

    value: str = "-"
    kind: Literal["stdin"] = "stdin"

    def load(self, loading: Loading) -> Suite:
        return load_stdin(loading.stdin or sys.stdin, loading.compact, SMALL_SUITE)
