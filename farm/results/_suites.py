"""Which suite a case run belongs to: what every comparison of runs pairs cases by.

A case in one run is the same case in another when both have the same suite and the same id
(:data:`~farm.results.CASE_KEY`): ids repeat across suites (every suite may have its ``greet``), so an id alone
would pair two different cases. The suite is where the case came from, read from the record's
``source`` with what the run's ``run.json`` says of where it ran:

- a suite file (``file:line``, a relative file relative to the run's ``cwd``): the file, relative
  to the project folder, which is the folder of the run's ``farm.toml`` (``config.path``), else
  the run's ``cwd``. So ``s.jsonl`` and its absolute path are one suite, and so are two checkouts
  of a project on two machines. A file outside the project folder keeps its absolute path;
- a direct message (``<message>``): the message itself (the run's ``input``): two runs of one
  message pair, two runs of different messages do not;
- cases on stdin (``<stdin>:line``): ``<stdin>``;
- generated cases (``agents:<id> batch 1, case 2``, ``scripts:<ref> ...``): the generator,
  ``agents:<id>``, as a suite file edited between two runs stays one suite. The cases a generated
  run wrote to its ``generated.jsonl`` (read back by ``--resume``, or by ``farm rescore``) are
  that run's generator's too;
- no source (a results file of another tool): ``""``.

A case of a ``farm rescore`` run is the case it judged again, whatever file the edited suite was
read from: it keeps the suite it had in the run rescored (:meth:`RunRecord.cases`).

Without a ``run.json`` (a results file) a file is taken as the record names it.

Within one run a case run is named by its suite as :func:`suite_of` reads it from the ``source``
alone (the same run reads the same inputs when it is resumed): the scheduler, a resume, a rescore's
lookup of the recorded conversation, the golden files and every report of the run tell two suites'
``greet`` apart by it. The cases a generated run reads back from its ``generated.jsonl`` on a
resume name their generator in their source (``agents:<id> generated.jsonl:3``), so they keep the
suite they had when they were generated.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from pathlib import PurePath
from typing import TYPE_CHECKING

from farm.inputkind import input_kind
from farm.results._folder import GENERATED_JSONL, GENERATORS, LINE, MESSAGE, STDIN, suite_of

if TYPE_CHECKING:
    from farm.writers.runinfo import RunInfo

__all__ = ["LINE", "MESSAGE", "STDIN", "Suites", "same_suite", "suite_matcher", "suite_of"]

def same_suite(earlier: str, now: str) -> bool:
    """Whether ``earlier``, a suite as an earlier part of a run named it (:func:`suite_of`), is the
    suite ``now`` names: the same, or one file named from two folders (a resume from another folder
    reads ``suites/a.jsonl`` as ``/project/suites/a.jsonl``): one path ends with the other."""
    if earlier == now:
        return True
    if not earlier or not now or any(each.startswith(("<", *GENERATORS)) for each in (earlier, now)):
        return False
    a, b = os.path.normpath(earlier), os.path.normpath(now)
    longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
    return not os.path.isabs(shorter) and longer.endswith(os.sep + shorter)


def suite_matcher(suites: Collection[str]) -> Callable[[str], str]:
    """What an earlier part's suite is among this part's ``suites`` (:func:`same_suite`; itself
    when none or several match), so that a resume's keys are this part's."""
    known = set(suites)

    def match(earlier: str) -> str:
        if earlier in known:
            return earlier
        found = [suite for suite in known if same_suite(earlier, suite)]
        return found[0] if len(found) == 1 else earlier

    return match


class Suites:
    """The suites of one run's case records, each source worked out once.

    ``info``: the run's ``run.json``; ``input_of``: the ``input`` of the run whose folder holds a
    given ``generated.jsonl`` (None when it cannot be read)."""

    def __init__(self, info: RunInfo, input_of: Callable[[str], str | None]):
        self._cwd = info.cwd
        config_path = info.config.get("path")
        project = str(PurePath(config_path).parent) if isinstance(config_path, str) and config_path else info.cwd
        self._project = _absolute(project, info.cwd) if project else None
        self._input = _message(info)
        self._input_of = input_of
        self._known: dict[str, str] = {}

    def of(self, source: str | None) -> str:
        """The suite of a case whose record's ``source`` is ``source``."""
        where = LINE.sub("", source or "")
        known = self._known.get(where)
        if known is None:
            known = self._known[where] = self._suite(where)
        return known

    def _suite(self, where: str) -> str:
        if not where:
            return ""
        if where == MESSAGE:
            return self._input or MESSAGE
        if where == STDIN or where.startswith(GENERATORS):
            return suite_of(where)  # "agents:gen batch 1, case 2": the generator
        path = _absolute(where, self._cwd)
        if PurePath(path).name == GENERATED_JSONL:
            generator = self._input_of(str(PurePath(path).parent))
            if generator is not None and generator.startswith(GENERATORS):
                return generator.split("?", 1)[0]
        return self._in_project(path)

    def _in_project(self, path: str) -> str:
        """``path`` relative to the project folder when it is inside it; else as it is."""
        if self._project is None or not os.path.isabs(path):
            return path
        try:
            inside = os.path.commonpath([self._project, path]) == self._project
        except ValueError:  # another drive
            return path
        return os.path.relpath(path, self._project) if inside else path


def _message(info: RunInfo) -> str | None:
    """The run's direct message: its ``input``, or of several inputs the one that is a message."""
    if len(info.inputs) < 2:
        return info.input
    return next((value for value in info.inputs if input_kind(value) == "message"), info.input)


def _absolute(path: str, cwd: str | None) -> str:
    """``path`` made absolute from ``cwd`` (when known) and normalised (``./a/../s.jsonl`` is ``s.jsonl``);
    the files are not looked at: a run is read where its files may no longer be."""
    if cwd and not os.path.isabs(path):
        path = os.path.join(cwd, path)
    return os.path.normpath(path)
