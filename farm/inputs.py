"""What ``-i/--input`` names (docs/reference/cli.md), resolved to a :class:`~farm.suite.loader.Suite`.

=======================  ===============================================
``suite.jsonl``          a JSONL or JSON file
``suites/``              every ``*.jsonl`` in the folder, sorted
``suites/*.jsonl``       every suite file the glob matches, sorted
``-``                    cases as JSONL on stdin
``agents:<id>?k=v``      a generator agent writes the cases
``scripts:<id>?k=v``     a generator script writes the cases
``scripts.<module>``     script tests: each ``test_*(t, ctx)`` is a case
anything else            a direct message: one single-turn case
=======================  ===============================================

A value that looks like a path (:data:`PATH_RULE`) is always read as one, so a mistyped suite
path is an error, never a message sent to the agent. ``-i`` given several times runs every
suite in one run, in order. :func:`expand_inputs` turns the values into the run's sources of
cases (:class:`~farm.suite.sources.CaseSource`), and :func:`load_inputs` asks each for its cases:
``farm test``, ``--dry-run``, ``farm validate``, a resume and a rescore all go through them.
"""

from __future__ import annotations

import glob
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from farm.errors import UsageError
from farm.inputkind import GLOB, PATH_RULE, InputKind, exists, input_kind, looks_like_path, typed_query
from farm.suite.loader import FILE_SUFFIXES, Suite
from farm.suite.sources import CaseSource, Loading, Message, Stdin, SuiteFile
from farm.wording import shown

if TYPE_CHECKING:  # the roles (and the agents' clients beneath them) load with a generator: farm validate needs neither
    from farm.config import FarmConfig
    from farm.generation.sources import generator_metadata
    from farm.roles.cache import RoleCache

__all__ = [
    "PATH_RULE",
    "expand_inputs",
    "generator_metadata",
    "input_kind",
    "input_path",
    "input_text",
    "load_inputs",
    "looks_like_path",
    "resolve_input",
    "source_of",
    "typed_query",
]


def __getattr__(name: str) -> Any:  # a generator's parts load with a generator
    if name == "generator_metadata":
        from farm.generation.sources import generator_metadata

        return generator_metadata
    raise AttributeError(f"module 'farm.inputs' has no attribute {name!r}")



def expand_inputs(values: str | Sequence[str], flag: str = "-i ") -> list[CaseSource]:
    """The run's sources of cases, in order, from the ``-i`` values: a folder becomes its ``*.jsonl`` files
    and a glob its suite files (each sorted), a file named twice runs once. A path that does not
    exist, a folder or glob with no suite file, or stdin, a generator or script tests given
    beside other inputs is a :class:`UsageError` naming the value after ``flag``, before anything is loaded."""
    given = [values] if isinstance(values, str) else list(values)
    out: list[CaseSource] = []
    seen: set[Path] = set()
    for value in given:
        kind = input_kind(value)
        if kind == "message":
            _not_a_suites_name(value, flag)
        found = _suite_files(value, flag) if kind == "file" else [source_of(value, kind)]
        for each in found:
            if each.kind == "file":
                key = Path(each.value).resolve()
                if key in seen:
                    continue
                seen.add(key)
            out.append(each)
    alone = next((each for each in out if each.kind in _ALONE), None)
    if alone is not None and len(out) > 1:
        raise UsageError(f"{flag}{alone.value}: {_ALONE[alone.kind]} runs on its own: give it as the only -i")
    return out


_ALONE = {"stdin": "stdin (-)", "generator": "a generator", "script-tests": "a module of script tests"}


def _not_a_suites_name(value: str, flag: str) -> None:
    """A one-word message that is the name of a suite file here or a folder down (``-i starter``
    beside ``suites/starter.jsonl``) is a :class:`UsageError`: the user meant the suite."""
    if any(c.isspace() for c in value.strip()) or not value.strip():
        return
    for entry in _entries(Path(".")):
        for each in [entry, *(_entries(entry) if entry.is_dir() else [])]:
            if each.is_file() and each.stem == value.strip():
                raise UsageError(
                    f"{flag}{shown(value)}: read as a message, but {shown(str(each))} is a suite file: give its path"
                    f" ({flag}{shown(str(each))}), or a message of more than one word"
                )


def _suite_files(value: str, flag: str) -> list[SuiteFile]:
    """The suite files ``value`` names: itself, a folder's ``*.jsonl``, or a glob's matches. A folder's
    other suite-like files (``.json``, ``.ndjson``: attachments and mocks as often as suites) are not
    run, and its first file says so, a line each."""
    files = [SuiteFile(each) for each in _files(value, flag)]
    path = Path(value)
    if path.is_dir():
        skipped = sorted(child.name for child in path.iterdir() if child.suffix in FILE_SUFFIXES and child.suffix != ".jsonl" and child.is_file())
        notes = tuple(f"{flag}{shown(value)}: {shown(name)} is not run: a folder runs its *.jsonl files (give it as {flag}{shown(str(path / name))} to run it)" for name in skipped)
        files[0] = SuiteFile(files[0].value, notes=notes)
    return files


def _files(value: str, flag: str) -> list[str]:
    """The suite files ``value`` names: itself, a folder's ``*.jsonl``, or a glob's matches."""
    path = Path(value)
    if path.is_dir():
        files = sorted(str(path / child.name) for child in path.iterdir() if child.suffix == ".jsonl" and child.is_file())
        if not files:
            raise UsageError(f"{flag}{shown(value)}: the folder has no *.jsonl file")
        return files
    if exists(value):
        return [value]
    if GLOB.search(value):
        files = sorted(match for match in glob.glob(value, recursive=True) if match.endswith(FILE_SUFFIXES) and Path(match).is_file())
        if not files:
            raise UsageError(f"{flag}{shown(value)}: no .jsonl or .json file matches the pattern")
        return files
    raise UsageError(f"{flag}{shown(value)}: no such file or folder{_nearest_path(value)}; a value that looks like a path is read as one (quote a message with a space in it)")


def _nearest_path(value: str) -> str:
    """`` (did you mean 'suites/smoke.jsonl'?)``: the closest suite file or folder near ``value``,
    written as ``value`` is (relative stays relative), by its whole path or by its name."""
    from difflib import SequenceMatcher

    wanted = Path(value)
    folder = wanted.parent
    while str(folder) not in (".", "/") and not folder.is_dir():
        folder = folder.parent
    candidates: list[Path] = []
    for entry in _entries(folder):
        candidates.append(entry)
        if entry.is_dir():
            candidates += [child for child in _entries(entry) if child.is_file()]

    def score(path: Path) -> float:
        whole = SequenceMatcher(None, str(wanted), str(path)).ratio()
        name = SequenceMatcher(None, wanted.name, path.name).ratio()
        return max(whole - 0.75, name - 0.88)

    best = max(candidates, key=score, default=None)
    return f" (did you mean '{shown(str(best))}'?)" if best is not None and score(best) >= 0 else ""


def _entries(folder: Path, most: int = 500) -> list[Path]:
    """The suite files and folders in ``folder`` (not hidden), at most ``most``."""
    out: list[Path] = []
    try:
        for child in folder.iterdir():
            if child.name.startswith("."):
                continue
            if child.is_dir() or child.suffix in FILE_SUFFIXES:
                out.append(child if str(folder) != "." else Path(child.name))
            if len(out) >= most:
                break
    except OSError:
        pass
    return out


def input_text(values: str | Sequence[str]) -> str:
    """The ``-i`` values as the run names them in one line: the value when one, else them joined."""
    return values if isinstance(values, str) else ", ".join(values)


def input_path(values: str | Sequence[str]) -> Path | None:
    """The first input's file, when it names one (for finding ``farm.toml`` beside it); a folder's
    own path, and a glob's up to its first pattern."""
    for value in [values] if isinstance(values, str) else values:
        if input_kind(value) != "file":
            continue
        match = GLOB.search(value)
        path = Path(value[: match.start()] or ".") if match else Path(value)
        return path / "_" if path.is_dir() else path  # farm.toml is looked for from the file's folder
    return None


def source_of(value: str, kind: InputKind | None = None) -> CaseSource:
    """The source one input names (``kind``: as :func:`~farm.inputkind.input_kind` says, when known);
    a generator's and script tests' load what they need when they are loaded."""
    kind = kind or input_kind(value)
    if kind == "file":
        return SuiteFile(value)
    if kind == "message":
        return Message(value)
    if kind == "stdin":
        return Stdin(value)
    if kind == "generator":
        from farm.generation.sources import GeneratorAgent, GeneratorScript

        return GeneratorAgent(value) if value.startswith("agents:") else GeneratorScript(value)
    from farm.roles.scripttests import ScriptTests

    return ScriptTests(value)


def resolve_input(
    value: str, config: FarmConfig, agent_id: str | None, stdin: TextIO | None = None, compact: bool = False, cache: RoleCache | None = None
) -> Suite:
    """The suite ``value`` names (its source's cases, :class:`~farm.suite.sources.Loading` says the
    rest). A generator (``agents:``, ``scripts:``) gives a suite with no cases yet and its
    :class:`~farm.generation.feed.GeneratedFeed` as ``feed``."""
    return source_of(value).load(Loading(config, agent_id, stdin, compact, cache))


def load_inputs(
    inputs: Sequence[CaseSource],
    config: FarmConfig,
    agent_id: str | None,
    stdin: TextIO | None = None,
    compact: bool = False,
    cache: RoleCache | None = None,
    simulator: str | None = None,
) -> Suite:
    """The cases of every source of ``inputs`` (as :func:`expand_inputs` made them), as one suite in
    their order. A case id may repeat across suites: a case is named by its suite and id
    (:func:`~farm.results._suites.suite_of`), and every suite may have its ``greet``. An id repeated
    within one suite is a problem of the later case, as the loader finds it in a file; so is a
    second direct message (both are the case ``message`` of the suite ``<message>``)."""
    loading = Loading(config, agent_id, stdin, compact, cache, simulator)
    if len(inputs) == 1:
        return inputs[0].load(loading)
    from farm.results._suites import suite_of

    suites = [each.load(loading) for each in inputs]
    first: dict[tuple[str, str], str] = {}
    cases = []
    for suite in suites:
        for loaded in suite.cases:
            key = (suite_of(loaded.source), loaded.id)
            if key in first:
                loaded.fail([f"field 'id': duplicate id '{shown(loaded.id)}' (first at {shown(first[key])})"])
                loaded.id = f"{loaded.id}@{loaded.source}"
            else:
                first[key] = loaded.source
            cases.append(loaded)
    return Suite(cases, input_text([each.value for each in inputs]), notes=[note for suite in suites for note in suite.notes])


