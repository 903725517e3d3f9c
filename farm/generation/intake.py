"""Acceptance and dedupe: where a generator's raw cases come in.

A case is accepted only when it passes ``farm validate``'s checks
(:func:`farm.suite.loader.parse_cases`, :func:`farm.suite.checks.check_suite`) and is no
duplicate (:func:`fingerprint`: the same normalised input, turns and simulator goal); an id
already taken is renamed (``refund-2``). Dropped cases are the generator's fault: they are
counted in :class:`~farm.generation.stats.GenerationStats`, never results. Every accepted case is
appended to ``generated.jsonl`` before it is handed on. The cases are spread evenly over the
slices of the coverage lists (:class:`Slice`): a batch's cases beyond its slice's share are not kept.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from farm.generation.stats import PROBLEMS_KEPT, GenerationStats
from farm.secrets import process_scrubber
from farm.suite.checks import check_suite
from farm.suite.loader import Suite, parse_cases

if TYPE_CHECKING:
    from farm.cases import TestCase
    from farm.config import FarmConfig
    from farm.generation.store import GeneratedFile
    from farm.loaded import LoadedCase

__all__ = ["AVOID_CASES", "AVOID_CHARS", "Intake", "OnProblem", "Slice", "fingerprint", "plan_slices"]

AVOID_CASES = 40
"""How many of the latest accepted cases a request lists to avoid."""
AVOID_CHARS = 2000
"""At most this much text of them (ids and the first words of inputs)."""
AVOID_WORDS = 8

OnProblem = Callable[[str], None] | None
"""Hears each dropped case's line (as :class:`~farm.generation.stats.GenerationStats` keeps the first)."""


def _normal(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return " ".join(text.split()).casefold()


def fingerprint(case: TestCase) -> bytes:
    """What makes two generated cases the same: the normalised input (whitespace collapsed,
    case folded), the turns' inputs and the simulator's goal."""
    goal = case.simulator.options.metadata.get("goal") if case.simulator is not None else None
    turns = [_normal(t.input) for t in case.turns] if case.turns is not None else None
    shape = [_normal(case.input) if case.input is not None else None, turns, _normal(goal) if goal is not None else None]
    return hashlib.blake2b(json.dumps(shape, ensure_ascii=False).encode(), digest_size=16).digest()


def _first_words(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    words = text.split()
    return " ".join(words[:AVOID_WORDS]) + ("…" if len(words) > AVOID_WORDS else "")


def _summary(case: TestCase) -> str:
    """``id: first words of the input`` for a request's "avoid" list."""
    first = case.input if case.turns is None else (case.turns[0].input if case.turns else None)
    if first is None and case.simulator is not None:
        first = case.simulator.options.metadata.get("goal")
    return f"{case.id}: {_first_words(first)}"


def _bounded(recent: deque[str]) -> Iterator[str]:
    """The latest summaries, newest first, within :data:`AVOID_CHARS`."""
    used = 0
    for line in reversed(recent):
        used += len(line) + 2
        if used > AVOID_CHARS:
            return
        yield line


@dataclass
class Slice:
    """One cell of the coverage cross product and its bookkeeping."""

    values: dict[str, Any]
    quota: int
    kept: int = 0
    asked: int = 0
    """Cases asked by batches of this slice still in flight."""

    @property
    def tags(self) -> list[str]:
        return [f"{k}:{v}" for k, v in self.values.items()]


def plan_slices(coverage: dict[str, list[Any]], asked: int) -> list[Slice]:
    """The cells of the coverage lists' cross product (one with no lists), ``asked`` shared evenly."""
    keys = list(coverage)
    cells = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*coverage.values())] or [{}]
    base, extra = divmod(asked, len(cells))
    return [Slice(values, base + (1 if i < extra else 0)) for i, values in enumerate(cells)]


class Intake:
    """The accepted cases of one generation, and what it did (``stats``, ``error``).

    ``origin``: ``agents:<id>`` or ``scripts:<ref>``, naming the problems; ``slices``: the
    coverage cells, each with its share of ``asked``.
    """

    def __init__(self, origin: str, config: FarmConfig, asked: int, slices: list[Slice], store: GeneratedFile):
        self.origin = origin
        self.config = config
        self.asked = asked
        self.slices = slices
        self.store = store
        self.stats = GenerationStats(asked=asked)
        self.error: str | None = None
        """Why the generator failed, when a failure stopped generation (or may yet)."""
        self.default_simulator: str | None = None
        """The run's default simulator (``--simulator``), for the checks of dynamic cases."""
        self._fingerprints: set[bytes] = set()
        self._resumed: set[bytes] = set()
        self._ids: set[str] = set()
        self._suffix: dict[str, int] = {}
        self._recent: deque[str] = deque(maxlen=AVOID_CASES)

    @property
    def full(self) -> bool:
        """Whether every case asked is kept."""
        return self.stats.kept >= self.asked

    def resume(self, cases: list[LoadedCase]) -> None:
        """Count a resumed run's cases (``generated.jsonl``'s) as kept: they are not generated again."""
        for loaded in cases:
            case = loaded.materialized().case
            assert case is not None
            self._remember(case, None, resumed=True)
        self.stats.kept = len(cases)

    def avoid(self) -> list[str]:
        """The latest accepted cases, newest first, for a request to avoid."""
        return list(_bounded(self._recent))

    def stop(self, reason: str) -> None:
        self.stats.stop_reason = f"generated {self.stats.kept} of the {self.asked} cases asked: {reason}"

    def problem(self, line: str, on_problem: OnProblem) -> None:
        if len(self.stats.problems) < PROBLEMS_KEPT:
            self.stats.problems.append(line)
        if on_problem is not None:
            on_problem(line)

    def take(self, items: list[Any], number: int, cell: Slice | None, on_problem: OnProblem) -> list[LoadedCase]:
        """The accepted cases of batch ``number`` (of ``cell``, or of the slices their tags name),
        appended to ``generated.jsonl``."""
        items = process_scrubber().scrub_json(items)  # user input, on its way to files and the console
        parsed = [self._parse(raw, f"batch {number}, case {index}", cell) for index, raw in enumerate(items, start=1)]
        check_suite(Suite(parsed), self.config, default_simulator=self.default_simulator)  # once a batch: it resolves paths
        accepted = []
        for loaded in parsed:
            if self.full or (cell is not None and cell.kept >= cell.quota):
                break  # the slices stay even: a batch's cases beyond its slice's share are not kept
            if (kept := self._accept(loaded, cell, on_problem)) is not None:
                accepted.append(kept)
        if accepted:
            self.store.write(accepted)
        return [c.compact() for c in accepted]

    def _remember(self, case: TestCase, cell: Slice | None, resumed: bool = False) -> None:
        """Count ``case`` as kept, for its slice: ``cell``, or the one its tags name."""
        mark = fingerprint(case)
        self._fingerprints.add(mark)
        if resumed:
            self._resumed.add(mark)
        self._ids.add(case.id)
        self._recent.append(_summary(case))
        if cell is None:
            tags = set(case.tags)
            cell = next((c for c in self.slices if set(c.tags) <= tags), None)
        if cell is not None:
            cell.kept += 1

    def _parse(self, raw: Any, where: str, cell: Slice | None) -> LoadedCase:
        """``raw`` as a loaded case: its id given when missing, its slice's tags added."""
        if isinstance(raw, dict):
            raw = dict(raw)
            if raw.get("id") in (None, ""):
                raw["id"] = "gen-" + where.replace("batch ", "b").replace(", case ", "-")
            if cell is not None and cell.values:
                own = raw.get("tags")
                own = [own] if isinstance(own, str) else own if isinstance(own, list) else []
                raw["tags"] = [*own, *(t for t in cell.tags if t not in own)]
        return parse_cases([(f"{self.origin} {where}", raw)], str(self.config.base_dir))[0]

    def _accept(self, loaded: LoadedCase, cell: Slice | None, on_problem: OnProblem) -> LoadedCase | None:
        """``loaded`` (checked) as an accepted case, renamed if its id is taken; None when it is dropped."""
        if not loaded.ok or loaded.case is None:
            self.stats.malformed += 1
            self.problem(f"{loaded.source}: {loaded.error}", on_problem)
            return None
        case = loaded.case
        mark = fingerprint(case)
        if mark in self._fingerprints:
            if mark not in self._resumed:
                self.stats.duplicates += 1
            return None
        if case.id in self._ids:
            n = self._suffix.get(case.id, 2)
            while f"{case.id}-{n}" in self._ids:
                n += 1
            self._suffix[case.id] = n + 1
            new_id = f"{case.id}-{n}"
            if len(self.stats.renames) < PROBLEMS_KEPT:
                self.stats.renames.append(f"{case.id} -> {new_id} ({loaded.source})")
            self.stats.renamed += 1
            case = case.model_copy(update={"id": new_id})
            loaded.case, loaded.id = case, new_id
        self._remember(case, cell)
        self.stats.kept += 1
        return loaded
