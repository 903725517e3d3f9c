"""A case as loaded, the unit every stage of a run passes along: the scheduler, the engines and
the runner take a :class:`LoadedCase`, not a file. It sits just above the case model
(:mod:`farm.cases`) and below the loader (:mod:`farm.suite.loader`) that makes it, so that the
parts of a run can name it without importing how suites are read.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from farm.cases import TestCase
from farm.wording import shown

if TYPE_CHECKING:
    from farm.conversation.goldenfile import GoldenCheck

__all__ = ["LoadedCase"]


@dataclass
class LoadedCase:
    """A case as loaded: either a valid ``case``, or an ``error`` that says what is wrong."""

    id: str
    source: str
    """``file:line`` (or ``<message>``, ``<stdin>:line``)."""
    case: TestCase | None = None
    error: str | None = None
    raw: Any = None
    """The JSON as written, kept only for a case that did not load."""
    base_dir: str | None = None
    """The test file's folder: ``file://`` attachments resolve against it."""
    script: str | None = None
    """``module:function`` for a script test (``-i scripts.<module>``)."""
    data: bytes | None = None
    """A valid case as compact JSON, instead of ``case`` (see :meth:`compact`)."""
    needs: tuple[bool, bool] = (False, False)
    """Whether the case needs a simulator, and a validator (an ``agent`` assertion)."""
    warnings: list[str] = field(default_factory=list)
    """What loads but is not what the author may think (``expected`` beside assertions)."""
    golden: GoldenCheck | None = None
    """The golden conversation this run compares the case with (set by :func:`farm.conversation.golden.attach`)."""
    problems: list[str] = field(default_factory=list)
    """Every problem of a case that did not load, one each (``error`` joins them)."""
    partial: TestCase | None = None
    """A case with problems that still made a model (its unknown or refused fields left out), kept
    until :func:`farm.suite.checks.check_suite` has checked it against the config too."""
    traced: bool = False
    """Whether the case asserts on traces (a run with a remote agent then starts its OTLP receiver)."""

    @property
    def ok(self) -> bool:
        return self.error is None and (self.case is not None or self.data is not None)

    def fail(self, problems: list[str]) -> None:
        """Add ``problems``: the case does not load, and its ``error`` says every one of them.
        Each stays one line, whatever it echoes of the input (see :func:`~farm.wording.shown`)."""
        self.problems.extend(shown(problem) for problem in problems)
        self.error = "; ".join(self.problems)
        self.case, self.data = None, None

    def compact(self) -> LoadedCase:
        """This case holding its JSON (~10x smaller) instead of the validated model, for
        suites of 100k cases in the driver; :meth:`materialized` validates it again."""
        if self.case is None:
            return self
        return LoadedCase(self.id, self.source, None, self.error, self.raw, self.base_dir, self.script, _json(self.case), self.needs, self.warnings, self.golden, traced=self.traced)

    def __getstate__(self) -> dict[str, Any]:
        """A case pickles (to a Ray actor) as :meth:`compact` holds it: its JSON is a third of the
        bytes of its pickled model, and quicker to write and to read back."""
        if self.case is None:
            return self.__dict__
        return {**self.__dict__, "case": None, "data": _json(self.case)}

    def __copy__(self) -> LoadedCase:
        return dataclasses.replace(self)  # a copy keeps the model: only pickling makes it JSON

    def __deepcopy__(self, memo: dict[int, Any]) -> LoadedCase:
        return dataclasses.replace(self, **{f.name: copy.deepcopy(getattr(self, f.name), memo) for f in dataclasses.fields(self)})

    def materialized(self) -> LoadedCase:
        """This case with its validated model (the case itself when it has it)."""
        if self.case is not None or self.data is None:
            return self
        case = TestCase.model_validate_json(self.data)
        return LoadedCase(self.id, self.source, case, self.error, self.raw, self.base_dir, self.script, None, self.needs, self.warnings, self.golden, traced=self.traced)


def _json(case: TestCase) -> bytes:
    """The fields ``case`` was given, defaults too: ``"value": null`` is not the ``equals`` or
    ``json_path`` assertion that leaves ``value`` out."""
    return case.model_dump_json(exclude_unset=True).encode()
