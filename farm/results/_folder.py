"""The run folder: what a run writes where, and what names one case run in it.

A run is a folder under ``results_dir`` named by its run id::

    run.json             the run's record (farm.writers.runinfo)
    results.jsonl        one line per finished case run: the source of truth
    cases.parquet        one row per case run      \\
    turns.parquet        one row per turn           |  consolidated when the run ends
    assertions.parquet   one row per assertion      |  (farm.writers.parquet)
    spans.parquet        one row per span, when the run captured any /
    .parts/              while the run goes: <table>-<number>.parquet, immutable
    generated.jsonl      the cases a generator wrote for the run (-i agents:/scripts:)
    ray.log              Ray's own messages to the driver (the ray engine)

This module is the one place that spells those names: the writers write them, the reader
(:func:`~farm.results.read_run`, :func:`~farm.results.read_runs`), resume, rescore, ``farm report``
and ``farm view`` find them here. It imports nothing heavy: the run path uses it before pyarrow.

A case run is named within its run by :class:`CaseRunKey` (its suite, as :func:`suite_of` reads it
from the case's source, case id, try and agent), and across runs, in every table, by the columns
:data:`CASE_RUN_KEY` (the same with the run id and the attempt). A resume reads the results
JSONL line by line here (:func:`result_lines`, :func:`finished_keys`): the writers and the reader
stand on this module, never it on them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from farm.errors import UsageError

__all__ = [
    "CASE_RUN_KEY",
    "GENERATED_JSONL",
    "LAST_PART_KEY",
    "MARKS",
    "OPTIONAL_TABLES",
    "PARTS_DIR",
    "RAY_LOG",
    "RESULTS_JSONL",
    "RUN_JSON",
    "TABLES",
    "CaseRunKey",
    "finished_keys",
    "finished_tries",
    "part_path",
    "parts",
    "table_of",
    "table_path",
]

RUN_JSON = "run.json"
"""The run's record: its resolved configuration, versions, parts and gate (:class:`~farm.writers.RunInfo`)."""

RESULTS_JSONL = "results.jsonl"
"""The results, one case run a line (unless ``-o`` put them elsewhere: ``run.json``'s ``results``)."""

GENERATED_JSONL = "generated.jsonl"
"""The cases a generator wrote for the run (``-i agents:``/``scripts:``), read back by a resume and a rescore."""

RAY_LOG = "ray.log"
"""Where Ray's own messages to the driver ("A worker died…", "Raylet is terminated…") go."""

PARTS_DIR = ".parts"
"""The folder of the Parquet parts a run still going has written (``<table>-<number>.parquet``)."""

TABLES = ("cases", "turns", "assertions", "spans")
"""The Parquet tables of a run, each in ``<table>.parquet``."""

OPTIONAL_TABLES = frozenset({"spans"})
"""Tables written only by a run that has rows for them: a run that captured no span has no ``spans.parquet``."""

LAST_PART_KEY = b"farm.last_part"
"""Schema metadata key of a consolidated table: the last part number merged into it."""

MARKS = (RUN_JSON, "cases.parquet", RESULTS_JSONL, PARTS_DIR)
"""A folder holding one of these is a run (``.parts/`` alone: a run still going, or killed)."""

_PART_NAME = re.compile(r"^(?P<table>[a-z]+)-(?P<number>\d+)\.parquet$")


def table_path(run_dir: str | os.PathLike[str], table: str) -> Path:
    """The consolidated file of ``table`` (one of :data:`TABLES`) in ``run_dir``."""
    return Path(run_dir) / f"{table}.parquet"


def part_path(run_dir: str | os.PathLike[str], table: str, number: int) -> Path:
    """Part ``number`` of ``table`` in ``run_dir``'s :data:`PARTS_DIR`."""
    return Path(run_dir) / PARTS_DIR / f"{table}-{number:06d}.parquet"


def parts(run_dir: str | os.PathLike[str]) -> dict[str, list[tuple[int, Path]]]:
    """The finished part files of ``run_dir`` by table, each ``(number, path)`` in the order they were
    written; empty when there are none (or consolidation removed them just now)."""
    found: dict[str, list[tuple[int, Path]]] = {}
    try:
        entries = list(os.scandir(Path(run_dir) / PARTS_DIR))
    except OSError:
        return found
    for entry in entries:
        match = _PART_NAME.match(entry.name)
        if match and match["table"] in TABLES:
            found.setdefault(match["table"], []).append((int(match["number"]), Path(entry.path)))
    for listed in found.values():
        listed.sort()
    return found


def table_of(path: str | os.PathLike[str]) -> str | None:
    """The table a file of a run folder holds (``cases.parquet``: ``cases``), None for any other file."""
    name = Path(path).name
    return name.removesuffix(".parquet") if name.endswith(".parquet") and name.removesuffix(".parquet") in TABLES else None


MESSAGE = "<message>"
"""The ``source`` of a direct message's case (the suite of a run that does not say its message)."""

STDIN = "<stdin>"
"""The suite of cases read from stdin (``-i -``)."""


LINE = re.compile(r":\d+$")
"""The line at the end of a ``source`` (``s.jsonl:12``)."""
GENERATORS = ("agents:", "scripts:")
"""How the source of a generated case starts (``agents:<id> batch 1, case 2``)."""


def suite_of(source: str | None) -> str:
    """The suite of a case within its run, from its ``source``: the file without its line
    (``suites/a.jsonl:3`` is ``suites/a.jsonl``, as the run names it), ``<stdin>``, ``<message>``,
    or the generator of a generated case (``agents:<id> batch 1, case 2`` is ``agents:<id>``);
    ``""`` without a source. What, with the case id, names a case within its run."""
    where = LINE.sub("", source or "")
    if where.startswith(GENERATORS):
        return where.split(" ", 1)[0]
    return where



class CaseRunKey(NamedTuple):
    """What names one case run within its run: the case (its suite and id: ids may repeat across a
    run's suites), which try of it (``run_index``, under ``--runs``), on which agent. The suite is
    :func:`suite_of` the case's source. The scheduler's jobs, a resume's
    finished case runs, a rescore's recorded conversations and a result
    (:meth:`~farm.results.CaseResult.run_key`) are keyed by it."""

    suite: str
    case_id: str
    run_index: int
    agent: str


CASE_RUN_KEY = ("run_id", "agent", "suite", "case_id", "run_index", "attempt")
"""The columns that name one case run in every table and every figure: :class:`CaseRunKey` with the
run it belongs to and its attempt. A run may test several agents, each of its suites may have a case
of the same id (every suite its ``greet``), each case runs ``--runs`` times on each agent, and a
retried case has several attempts."""


# --- what a run has finished (a resume) ------------------------------------------


def finished_keys(path: str | os.PathLike[str], agent: str | None = None, unless: Collection[str] = ()) -> set[CaseRunKey]:
    """The :class:`CaseRunKey` of every result in the results JSONL ``path``: what a resume need not
    run again. ``agent``: the agent of a result that names none; ``unless``: statuses whose results
    are run again (``--retry-errors``: ``error``, ``timeout``).

    Reads line by line (no list of all results), skipping a torn last line; a result with no case
    id is a :class:`~farm.errors.UsageError`.
    """
    keys: set[CaseRunKey] = set()
    for number, record in result_lines(path):
        case_id = record.get("id")
        if not isinstance(case_id, str):
            raise UsageError(f"Cannot resume from {path}:{number}, as the result on that line has no case id.")
        if record.get("status") not in unless:
            keys.add(_key(record, case_id, agent))
    return keys


def finished_tries(path: str | os.PathLike[str], agent: str | None = None, unless: Collection[str] = ()) -> dict[CaseRunKey, tuple[str, bool]]:
    """:func:`finished_keys` with how each ended: its status, and whether a role's error made it
    an ``error`` (a resume under adaptive repeats counts a case's tries from them)."""
    tries: dict[CaseRunKey, tuple[str, bool]] = {}
    for _, record in result_lines(path):
        status = str(record.get("status"))
        if isinstance(record.get("id"), str) and status not in unless:
            tries[_key(record, record["id"], agent)] = (status, status == "error" and record.get("error_role") is not None)
    return tries


def _key(record: dict[str, Any], case_id: str, agent: str | None) -> CaseRunKey:
    """:meth:`~farm.results.CaseResult.run_key` of a result line, read without validating the whole record."""
    source = record.get("source")
    return CaseRunKey(suite_of(source if isinstance(source, str) else None), case_id, int(record.get("run_index", 0)), str(record.get("agent") or agent or ""))


def result_lines(path: str | os.PathLike[str], lines: Iterable[bytes] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of each result line in ``path`` (``lines``: its lines, already
    read), read line by line (no list of all results), skipping a torn last line; any other
    undecodable line raises :class:`~farm.errors.UsageError` naming it."""
    if lines is None:
        with open(path, "rb") as file:
            yield from result_lines(path, file)
        return
    bad: tuple[int, str] | None = None
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if bad is not None:
            raise UsageError(
                f"Cannot read results from {path}:{bad[0]}, as that line is not a JSON object "
                f"({bad[1]}) and is not the last line; only a torn last line is skipped."
            )
        try:
            record = json.loads(raw)
        except ValueError as exc:  # UnicodeDecodeError included: a cut can split a character
            bad = (number, str(exc))
            continue
        if not isinstance(record, dict):
            bad = (number, f"a JSON {type(record).__name__}")
            continue
        yield number, record
