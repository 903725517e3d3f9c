"""Generation: the cases a generator writes, asked in batches and accepted as they arrive (SPEC 5).

``-i agents:<gen>?count=N`` (or ``scripts:<gen>``) resolves to a suite whose
cases are not there yet: its :class:`CaseStream` produces them while the run
goes. The stream

- asks the generator in batches of ``batch`` cases (default :data:`DEFAULT_BATCH`),
  as many at once as ``parallel`` allows (the generator connector's
  ``max_concurrency``; its rpm/tpm limiter paces the calls on top of that);
- makes every request differ, so that a deterministic model writes new cases: the
  batch number, the batch's slice of the coverage lists (``focus=refunds,travel``),
  ``seed``, and a short list of what is already written, to avoid;
- accepts a case only when it passes ``farm validate``'s checks
  (:func:`farm.suite.loader.parse_cases`, :func:`farm.suite.checks.check_suite`) and is
  no duplicate (same normalised input, turns and simulator goal); an id already
  taken is renamed (``refund-2``). Dropped cases are the generator's fault: they
  are counted in :class:`GenerationStats`, never results;
- appends every accepted case to ``<run_dir>/generated.jsonl`` before yielding
  it (a valid suite; ``--resume`` reads it back and generates only what is
  missing);
- stops at ``count`` cases, when ``patience`` batches in a row added nothing
  new, or when :data:`SAME_FAILURES` batches in a row failed the same way (the
  next would too; :attr:`GenerationStats.stop_reason` says so in one sentence,
  and a row of failures is one problem line, with its count).

Reproducibility: batches answered in parallel make the "avoid" lists depend on
timing, so the role cache of single batch calls alone would not bring back the
same suite. A generation that ran to its end is therefore cached whole, keyed by
the generator (its agent, player, connector, model and prompt), the parameters,
the target and ``seed``: the same command again reads the suite from there and
sends no generator request. ``--no-cache`` (or a generator that samples,
``temperature`` > 0) generates anew.

API (the engine gives ``generate``: one generator role call)::

    stream = suite.stream                   # from farm.inputs.resolve_input
    resumed = stream.open(run_dir)          # cases already in generated.jsonl
    async for cases in stream.batches(generate, on_progress):
        ...                                 # run them
    stream.stats                            # run.json's "generation"
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import itertools
import json
import math
import tempfile
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from farm.agents.transport import DEFAULT_MAX_REPLY_BYTES
from farm.errors import UsageError
from farm.results import add_cost
from farm.results._folder import GENERATED_JSONL
from farm.roles.cache import RoleCache, caches_role, tally
from farm.roles.types import CallTally, RoleRequest

if TYPE_CHECKING:
    from farm.cases import TestCase
    from farm.config import FarmConfig
    from farm.loaded import LoadedCase

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_PATIENCE",
    "DEFAULT_SEED",
    "GENERATED_JSONL",
    "CaseStream",
    "GenerateCall",
    "GenerationStats",
    "check_query",
    "collect",
    "fingerprint",
    "generate_locally",
]

GenerateCall = Callable[[RoleRequest], Awaitable[list[Any]]]
"""One generator role call: the request (its ``metadata`` says what to write) to the raw case
objects of the answer; raises :class:`~farm.roles.types.RoleError` when the generator fails."""

DEFAULT_BATCH = 20
"""Cases asked per generator call. About 20: an LLM's reply of 20 cases (~3-4k tokens) fits the
output limit of common models without being cut off, a malformed or failed reply loses little,
and the first cases arrive after one short call; far fewer would pay the prompt (and its
"avoid" list) over and over for few cases."""

DEFAULT_PATIENCE = 5
"""Batches in a row that add no new valid case before generation stops."""

SAME_FAILURES = 2
"""Batches in a row whose generator call failed the same way before generation stops: a
generator that answers prose, or an error every time, fails every batch alike."""

DEFAULT_SEED = 0
"""The ``seed`` every request carries unless the query or the generator's settings give one."""

BATCHES_IN_FLIGHT = 8
"""Batches in flight when the generator's connector sets no ``max_concurrency`` or ``rpm``."""

AVOID_CASES = 40
"""How many of the latest accepted cases a request lists to avoid."""
AVOID_CHARS = 2000
"""At most this much text of them (ids and the first words of inputs)."""
AVOID_WORDS = 8

PROBLEMS_KEPT = 100
"""Problem lines and renames kept in :class:`GenerationStats` (the counts count all)."""

_SETTINGS = ("count", "batch", "patience", "seed")
"""Query keys that steer generation and are not coverage lists."""

ENTRY_VERSION = 1
"""The shape of a whole-generation cache entry; another version is a miss."""


@dataclass
class GenerationStats:
    """What a generation did, as ``run.json`` records it (``generation``)."""

    asked: int
    """Cases asked for (``count``)."""
    kept: int = 0
    """Valid, distinct cases accepted (those already in ``generated.jsonl`` on resume included)."""
    duplicates: int = 0
    """Cases dropped as the same as an earlier one (normalised input, turns, simulator goal)."""
    malformed: int = 0
    """Cases dropped because they failed ``farm validate``'s checks."""
    renamed: int = 0
    """Cases kept under a new id, because theirs was taken by a different case."""
    batches: int = 0
    """Generator requests answered (from the generator or the role cache); yields of a script."""
    calls: int = 0
    """Requests that reached the generator (not answered by the role cache): repeats of an answer
    that held no JSON and of a failed request included, and those still in flight when enough
    cases had arrived."""
    cost_usd: float | None = None
    """What those requests cost, in USD at the generator connector's ``price``; null without one."""
    stop_reason: str | None = None
    """One sentence when fewer cases than asked were generated, saying why."""
    cached: bool = False
    """Whether the whole generation was read from the role cache (no generator request)."""
    problems: list[str] = field(default_factory=list)
    """The first :data:`PROBLEMS_KEPT` dropped cases, one line each (``agents:gen batch 7, case 3: ...``)."""
    renames: list[str] = field(default_factory=list)
    """The first :data:`PROBLEMS_KEPT` renames (``refund -> refund-2 (agents:gen batch 7, case 3)``)."""

    def as_record(self) -> dict[str, Any]:
        """The record ``run.json`` keeps."""
        return dataclasses.asdict(self)

    def progress_text(self) -> str:
        """``generated 340/1000``, for the progress line."""
        return f"generated {self.kept}/{self.asked}"


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


def _as_list(value: Any) -> list[Any] | None:
    """A coverage list: a list, or text with commas (``refunds,travel``)."""
    if isinstance(value, list):
        return value
    if isinstance(value, str) and "," in value:
        return [part.strip() for part in value.split(",") if part.strip()]
    return None


DOCUMENTED = frozenset({*_SETTINGS, "focus", "complexity"})
"""Parameters every generator is told of (docs/generation.md), besides the settings."""


def check_query(where: str, query: dict[str, Any], known: set[str], strict: bool) -> None:
    """Raise :class:`UsageError` for a parameter the generator does not know; ``where`` names
    where it was given (``-i agents:gen``).

    ``known``: what it reads besides :data:`DOCUMENTED` (its ``generate`` table, its prompt's
    placeholders). A name close to a known one is a typo, always; with ``strict`` (the farm writes
    the generator's prompt, so nothing else reaches the model) any other name that is no coverage
    list is unknown too."""
    from farm.wording import nearest, shown

    names = known | DOCUMENTED
    for key, value in query.items():
        if key in names:
            continue
        hint = nearest(key, names)
        if hint:
            raise UsageError(f"{where}: unknown parameter '{shown(key)}'{hint}")
        if strict and _as_list(value) is None:
            raise UsageError(
                f"{where}: unknown parameter '{shown(key)}': the generator's prompt has no {{{shown(key)}}}"
                f" and it is no coverage list (known: {', '.join(sorted(names))})"
            )


def _int_setting(name: str, value: Any, origin: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UsageError(f"-i {origin}: '{name}' must be a whole number of at least {least}, not {value!r}")
    return value


@dataclass
class _Slice:
    """One cell of the coverage cross product and its bookkeeping."""

    values: dict[str, Any]
    quota: int
    kept: int = 0
    asked: int = 0
    """Cases asked by batches of this slice still in flight."""

    @property
    def tags(self) -> list[str]:
        return [f"{k}:{v}" for k, v in self.values.items()]


@dataclass
class _Ask:
    number: int
    slice: _Slice
    count: int


@dataclass
class _Failures:
    """The batches in a row whose generator call failed the same way: one problem line for them
    all, said when the row ends (a row that stops generation is said by its stop reason)."""

    origin: str
    error: str | None = None
    first: int = 0
    count: int = 0

    def batch(self, number: int, error: str | None) -> str | None:
        """One batch's outcome (``error``: None when the call answered); the line of the row it ends."""
        if error is not None and error == self.error:
            self.count += 1
            return None
        which = f"batch {self.first}" if self.count == 1 else f"{self.count} batches in a row from batch {self.first}"
        ended = f"{self.origin} {which}: the generator failed: {self.error}" if self.count else None
        self.error, self.first, self.count = error, number, int(error is not None)
        return ended


class CaseStream:
    """The cases of one generator, produced batch by batch (see the module's docstring).

    ``origin``: ``agents:<id>`` or ``scripts:<ref>`` (names the problems); ``agent_id``: the
    generator agent (None for a script); ``script``: the generator function of a ``scripts:``
    generator; ``params``: the typed query merged over the generator's ``generate`` settings;
    ``metadata``: what every request carries (:func:`farm.inputs.generator_metadata`);
    ``cache``: the role cache, for the whole-generation entry (None: ``--no-cache``).
    """

    def __init__(
        self,
        origin: str,
        config: FarmConfig,
        params: dict[str, Any],
        metadata: dict[str, Any],
        *,
        agent_id: str | None = None,
        script: Callable[..., Any] | None = None,
        cache: RoleCache | None = None,
    ):
        self.origin = origin
        self.config = config
        self.agent_id = agent_id
        self.script = script
        self.asked: int = _int_setting("count", params.get("count", metadata.get("count", 5)), origin, 1)
        self.batch = _int_setting("batch", params.get("batch", DEFAULT_BATCH), origin, 1)
        self.patience = _int_setting("patience", params.get("patience", DEFAULT_PATIENCE), origin, 1)
        self.seed = params.get("seed", DEFAULT_SEED)
        coverage = {k: v for k, v in params.items() if k not in _SETTINGS and _as_list(v)}
        self.coverage: dict[str, list[Any]] = {k: _as_list(v) or [] for k, v in coverage.items()}
        self.metadata = {k: v for k, v in metadata.items() if k not in coverage and k not in ("batch", "patience")}
        self.metadata.update(count=self.asked, seed=self.seed)
        self.parallel = self._parallel()
        self.max_reply_bytes = DEFAULT_MAX_REPLY_BYTES
        """The largest reply a script generator may give at once, counted as JSON (an HTTP reply's default bound)."""
        self.default_simulator: str | None = None
        """The run's default simulator (``--simulator``), for the checks of dynamic cases."""
        self.role_calls = CallTally()
        """The generator's role calls and the role cache's hits among them (``run.json``'s ``role_cache``)."""
        self.keep: Callable[[list[LoadedCase]], list[LoadedCase]] | None = None
        """The run's selection (``--run``, ``--tag``) of the accepted cases it yields; every
        accepted case is written to ``generated.jsonl`` all the same."""
        self.stats = GenerationStats(asked=self.asked)
        self._cache = cache if cache is not None and agent_id is not None and self._caches() else None
        self._fingerprints: set[bytes] = set()
        self._resumed: set[bytes] = set()
        self._ids: set[str] = set()
        self._suffix: dict[str, int] = {}
        self._recent: deque[str] = deque(maxlen=AVOID_CASES)
        self._file: IO[str] | None = None
        self._path: Path | None = None
        self._slices = self._plan_slices()
        self._error: str | None = None
        self._number = 0
        self._received = 0
        self._accepted = 0

    # -- setup ---------------------------------------------------------------------------------

    def _player(self) -> tuple[Any, Any, Any]:
        """The generator agent, the agent that plays it, and its connector (or None)."""
        from farm.roles.player import player_of

        assert self.agent_id is not None
        agent = self.config.agent(self.agent_id)
        player = player_of(self.config, agent)
        name = player.connector or agent.connector
        return agent, player, self.config.connectors.get(name) if name else None

    def _parallel(self) -> int:
        if self.agent_id is None or self.agent_id not in self.config.agents:
            return 1
        from farm.ratelimit import default_parallel

        _, _, connector = self._player()
        limit = default_parallel(connector) if connector is not None and (connector.max_concurrency or connector.rpm) else BATCHES_IN_FLIGHT
        return max(1, limit)

    def _caches(self) -> bool:
        if self.agent_id not in self.config.agents:
            return False
        agent, player, connector = self._player()
        return caches_role(agent, player, connector)

    def _plan_slices(self) -> list[_Slice]:
        keys = list(self.coverage)
        cells = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*self.coverage.values())] or [{}]
        base, extra = divmod(self.asked, len(cells))
        return [_Slice(values, base + (1 if i < extra else 0)) for i, values in enumerate(cells)]

    def open(self, run_dir: Path) -> list[LoadedCase]:
        """Start (or continue) ``run_dir/generated.jsonl``; returns the cases already there (a
        resumed run's), which count as kept and are not generated again."""
        from farm.suite.loader import load_text

        path = Path(run_dir) / GENERATED_JSONL
        path.parent.mkdir(parents=True, exist_ok=True)
        resumed: list[LoadedCase] = []
        if path.exists():
            text = path.read_text(encoding="utf-8")
            whole = text[: text.rfind("\n") + 1]  # a line torn by a crash was never accepted
            if whole != text:
                with open(path, "r+", encoding="utf-8") as file:
                    file.truncate(len(whole.encode("utf-8")))
            # named by their generator, as when they were generated: a case keeps its suite (suite_of) on a resume
            resumed = [c for c in load_text(whole, f"{self.origin} {GENERATED_JSONL}", str(self.config.base_dir), compact=True).cases if c.ok]
        for loaded in resumed:
            case = loaded.materialized().case
            assert case is not None
            self._remember(case, None, resumed=True)
        self.stats.kept = len(resumed)
        self._path = path
        self._file = open(path, "a", encoding="utf-8")
        return resumed

    def close(self) -> None:
        """Close ``generated.jsonl`` (the stream closes it when it ends)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    # -- accepting cases ---------------------------------------------------------------------------

    def _remember(self, case: TestCase, cell: _Slice | None, resumed: bool = False) -> None:
        """Count ``case`` as kept, for its slice: ``cell``, or the one its tags name."""
        mark = fingerprint(case)
        self._fingerprints.add(mark)
        if resumed:
            self._resumed.add(mark)
        self._ids.add(case.id)
        self._recent.append(_summary(case))
        if cell is None:
            tags = set(case.tags)
            cell = next((c for c in self._slices if set(c.tags) <= tags), None)
        if cell is not None:
            cell.kept += 1

    def _problem(self, line: str, on_problem: Callable[[str], None] | None) -> None:
        if len(self.stats.problems) < PROBLEMS_KEPT:
            self.stats.problems.append(line)
        if on_problem is not None:
            on_problem(line)

    def _parse(self, raw: Any, where: str, cell: _Slice | None) -> LoadedCase:
        """``raw`` as a loaded case: its id given when missing, its slice's tags added."""
        from farm.suite.loader import parse_cases

        if isinstance(raw, dict):
            raw = dict(raw)
            if raw.get("id") in (None, ""):
                raw["id"] = "gen-" + where.replace("batch ", "b").replace(", case ", "-")
            if cell is not None and cell.values:
                own = raw.get("tags")
                own = [own] if isinstance(own, str) else own if isinstance(own, list) else []
                raw["tags"] = [*own, *(t for t in cell.tags if t not in own)]
        return parse_cases([(f"{self.origin} {where}", raw)], str(self.config.base_dir))[0]

    def _accept(self, loaded: LoadedCase, cell: _Slice | None, on_problem: Callable[[str], None] | None) -> LoadedCase | None:
        """``loaded`` (checked) as an accepted case, renamed if its id is taken; None when it is dropped."""
        if not loaded.ok or loaded.case is None:
            self.stats.malformed += 1
            self._problem(f"{loaded.source}: {loaded.error}", on_problem)
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

    def _write(self, accepted: list[LoadedCase]) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile("w+", encoding="utf-8")  # a dry run: the cache entry's source
        for loaded in accepted:
            assert loaded.case is not None
            self._file.write(json.dumps(loaded.case.model_dump(mode="json", exclude_unset=True), ensure_ascii=False) + "\n")  # as given
        self._file.flush()

    def _take(self, items: list[Any], number: int, cell: _Slice | None, on_problem: Callable[[str], None] | None) -> list[LoadedCase]:
        """The accepted cases of one batch, appended to ``generated.jsonl``."""
        from farm.secrets import process_scrubber
        from farm.suite.checks import check_suite
        from farm.suite.loader import Suite

        items = process_scrubber().scrub_json(items)  # user input, on its way to files and the console
        parsed = [self._parse(raw, f"batch {number}, case {index}", cell) for index, raw in enumerate(items, start=1)]
        check_suite(Suite(parsed), self.config, default_simulator=self.default_simulator)  # once a batch: it resolves paths
        accepted = []
        for loaded in parsed:
            if self.stats.kept >= self.asked or (cell is not None and cell.kept >= cell.quota):
                break  # the slices stay even: a batch's cases beyond its slice's share are not kept
            if (kept := self._accept(loaded, cell, on_problem)) is not None:
                accepted.append(kept)
        if accepted:
            self._write(accepted)
        return [c.compact() for c in accepted]

    # -- the stream ----------------------------------------------------------------------------

    async def batches(
        self,
        generate: GenerateCall,
        on_progress: Callable[[GenerationStats], None] = lambda stats: None,
        on_problem: Callable[[str], None] | None = None,
    ) -> AsyncIterator[list[LoadedCase]]:
        """Accepted cases, a list per batch as each is accepted (already appended to
        ``generated.jsonl``). ``generate`` answers the generator's requests (a ``scripts:``
        generator ignores it); ``on_progress`` hears the stats after every batch; ``on_problem``
        each dropped case's line."""
        try:
            if self.stats.kept >= self.asked:
                return
            key = self._whole_key()
            source: AsyncIterator[list[LoadedCase]]
            if key is not None and (entry := self._load_whole(key)) is not None:
                source = self._from_cache(entry, on_problem)
            elif self.script is not None:
                source = self._from_script(on_problem)
            else:
                source = self._from_agent(generate, on_problem)
            async for accepted in source:
                on_progress(self.stats)
                if accepted and self.keep is not None:
                    accepted = self.keep(accepted)
                if accepted:
                    yield accepted
            on_progress(self.stats)
            if self.stats.kept < self.asked and self.stats.stop_reason is None:
                self.stats.stop_reason = f"generated {self.stats.kept} of the {self.asked} cases asked: the generator wrote no more"
            if key is not None and not self.stats.cached and self._error is None:
                self._store_whole(key)
        finally:
            self.close()

    @property
    def error(self) -> str | None:
        """Why the generator failed, when a failure stopped generation."""
        return self._error

    def _stop(self, reason: str) -> None:
        self.stats.stop_reason = f"generated {self.stats.kept} of the {self.asked} cases asked: {reason}"

    def _next_ask(self) -> _Ask | None:
        """The next batch to ask for, or None while the batches in flight may be enough."""
        # Cases in flight count at the share of answers kept so far (malformed and repeated ones
        # are dropped), so that the last batches ask for enough and no extra round is needed.
        rate = max(0.5, self._accepted / self._received) if self._received else 1.0
        cell = max(self._slices, key=lambda c: (c.quota - c.kept - rate * c.asked, -self._slices.index(c)))
        needed = cell.quota - cell.kept - rate * cell.asked
        if needed <= 0:
            return None
        count = min(self.batch, math.ceil(needed / rate))
        cell.asked += count
        self._number += 1
        return _Ask(self._number, cell, count)

    def _request(self, ask: _Ask) -> RoleRequest:
        assert self.agent_id is not None
        metadata = {
            **self.metadata,
            **ask.slice.values,
            "count": ask.count,
            "total": self.asked,
            "batch_number": ask.number,
            "slice": ask.slice.values,
            "avoid": list(_bounded(self._recent)),
        }
        return RoleRequest(self.agent_id, [], metadata)

    async def _call(self, generate: GenerateCall, request: RoleRequest) -> tuple[list[Any], str | None, int]:
        with tally() as calls:
            try:
                items, error = await generate(request), None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the generator's failure (a RoleError; on Ray, a lost pool)
                items, error = [], _scrubbed(str(exc) or type(exc).__name__)
        self.role_calls.add(calls.role_calls, calls.cache_hits, calls.cost_usd, calls.requests)
        self.stats.cost_usd = add_cost(self.stats.cost_usd, calls.cost_usd)
        return items if isinstance(items, list) else [items], error, calls.requests

    async def _from_agent(self, generate: GenerateCall, on_problem: Callable[[str], None] | None) -> AsyncIterator[list[LoadedCase]]:
        pending: dict[asyncio.Task[tuple[list[Any], str | None, int]], _Ask] = {}
        self._number = self._first_number() - 1
        streak = 0
        failures = _Failures(self.origin)
        try:
            while self.stats.kept < self.asked:
                while len(pending) < self.parallel and (ask := self._next_ask()) is not None:
                    pending[asyncio.ensure_future(self._call(generate, self._request(ask)))] = ask
                if not pending:
                    break
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=lambda t: pending[t].number):
                    ask = pending.pop(task)
                    ask.slice.asked -= ask.count
                    items, error, sent = task.result()
                    self.stats.batches += 1
                    self.stats.calls += sent
                    if (ended := failures.batch(ask.number, error)) is not None:
                        self._problem(ended, on_problem)
                    if error is not None:
                        self._error = error
                    accepted = self._take(items, ask.number, ask.slice, on_problem)
                    self._received += len(items)
                    self._accepted += len(accepted)
                    streak = 0 if accepted else streak + 1
                    if accepted:
                        self._error = None
                    yield accepted
                    if self.stats.kept >= self.asked:
                        return
                    if failures.count >= min(SAME_FAILURES, self.patience):
                        in_a_row = f" {failures.count} batches in a row" if failures.count > 1 else ""
                        self._stop(f"the generator failed{in_a_row}: {error}")
                        return
                    if streak >= self.patience:
                        if self._error is not None:
                            self._stop(f"the generator failed: {self._error}")
                        else:
                            self._stop(f"the last {streak} batches repeated earlier cases" if not self.stats.malformed else f"the last {streak} batches added no new valid case")
                        return
        finally:
            self.stats.calls += sum(1 for task in pending if not task.done())  # sent, then no longer needed
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    def _first_number(self) -> int:
        """Batch numbers go on after a resumed run's, so its requests are new ones."""
        return 1 + self.stats.kept // self.batch if self.stats.kept else 1

    async def _from_script(self, on_problem: Callable[[str], None] | None) -> AsyncIterator[list[LoadedCase]]:
        assert self.script is not None
        metadata = {**self.metadata, "slice": {}, **{k: v for k, v in self.coverage.items()}}
        try:
            produced = self.script(metadata)
            if inspect.isawaitable(produced):
                produced = await produced
        except Exception as exc:
            self._script_failed(exc)
            return
        number = streak = 0
        async for item in _items(produced):
            if isinstance(item, _Failure):
                self._script_failed(item.exc)
                return
            number += 1
            self.stats.batches += 1
            if not _within(item, self.max_reply_bytes):
                verb = "yielded" if inspect.isgenerator(produced) or inspect.isasyncgen(produced) else "returned"
                self._error = f"the generator script {verb} more than {self.max_reply_bytes} bytes at once (the bound of a reply, max_reply_bytes)"
                self._stop(self._error)
                await _close(produced)
                return
            cases = item
            if isinstance(cases, dict) and isinstance(cases.get("cases"), list):
                cases = cases["cases"]
            if not isinstance(cases, list):
                if not isinstance(cases, dict):
                    verb = "yielded" if inspect.isgenerator(produced) or inspect.isasyncgen(produced) else "returned"
                    self._error = f"the generator script {verb} {type(cases).__name__}, not cases"
                    self._stop(self._error)
                    return
                cases = [cases]
            accepted = self._take(cases, number, None, on_problem)
            streak = 0 if accepted else streak + len(cases)
            yield accepted
            if self.stats.kept >= self.asked:
                await _close(produced)
                return
            if streak >= self.patience * self.batch:  # a script that repeats itself forever still ends
                self._stop(f"the last {streak} cases the script yielded added no new valid case")
                await _close(produced)
                return

    def _script_failed(self, exc: BaseException) -> None:
        self._error = _scrubbed(f"the generator script failed: {type(exc).__name__}: {exc}")
        self._stop(self._error)

    # -- the whole generation in the role cache ----------------------------------------------

    def _whole_key(self) -> str | None:
        if self._cache is None:
            return None
        agent, player, connector = self._player()
        shape = {
            "generation": ENTRY_VERSION,
            "agent": agent.model_dump(mode="json"),
            "player": player.model_dump(mode="json"),
            "connector": connector.model_dump(mode="json", include={"base_url", "model", "params"}) if connector else None,
            "prompt": self._prompt_text(agent.prompt),
            "metadata": self.metadata,
            "coverage": self.coverage,
            "batch": self.batch,
            "patience": self.patience,
        }
        text = json.dumps(shape, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _prompt_text(self, path: str | None) -> str | None:
        if not path:
            return None
        from farm.roles.player import RolePlayer

        try:
            return RolePlayer.prompt_from(path, self.config.base_dir)
        except OSError:
            return None

    def _entry_path(self, key: str) -> Path:
        assert self._cache is not None
        return self._cache.path(key).with_suffix(".jsonl")

    def _load_whole(self, key: str) -> dict[str, Any] | None:
        path = self._entry_path(key)
        try:
            with open(path, encoding="utf-8") as file:
                head = json.loads(file.readline())
        except (OSError, ValueError):
            return None
        if not isinstance(head, dict) or head.get("version") != ENTRY_VERSION:
            return None
        return {"path": path, **head}

    async def _from_cache(self, entry: dict[str, Any], on_problem: Callable[[str], None] | None) -> AsyncIterator[list[LoadedCase]]:
        self.stats.cached = True
        with open(entry["path"], encoding="utf-8") as file:
            file.readline()
            lines = (json.loads(line) for line in file if line.strip())
            for number, chunk in enumerate(_chunks(lines, self.batch), start=1):
                yield self._take(chunk, number, None, on_problem)
                if self.stats.kept >= self.asked:
                    return
        if self.stats.kept < self.asked and entry.get("stop_reason"):
            self.stats.stop_reason = entry["stop_reason"]

    def _store_whole(self, key: str) -> None:
        """Keep the suite as generated (``generated.jsonl``'s lines), written atomically."""
        from farm.files import atomic_file

        assert self._cache is not None
        if self._file is None and self._path is None:
            return
        head = json.dumps({"version": ENTRY_VERSION, "asked": self.asked, "kept": self.stats.kept, "stop_reason": self.stats.stop_reason})
        path = self._entry_path(key)
        try:
            if self._path is not None:
                self.close()
                body = self._path.read_text(encoding="utf-8")
            else:
                assert self._file is not None
                self._file.seek(0)
                body = self._file.read()
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(path, fsync=False) as out:
                out.write(self._cache.scrubber.scrub(head + "\n" + body))
        except OSError:
            pass  # the next run generates again


def _scrubbed(text: str) -> str:
    """A generator's error, which may echo what it was sent, without secrets."""
    from farm.secrets import process_scrubber

    return process_scrubber().scrub(text)


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


_END = object()


async def _items(produced: Any) -> AsyncIterator[Any]:
    """What a script generator produced, item by item: an async generator's, a generator's
    (each ``next`` in a thread, so a slow script blocks no conversation), or one value."""
    try:
        if inspect.isasyncgen(produced):
            async for item in produced:
                yield item
        elif inspect.isgenerator(produced):
            while (item := await asyncio.to_thread(next, produced, _END)) is not _END:
                yield item
        else:
            yield produced
    except Exception as exc:
        yield _Failure(exc)


async def _close(produced: Any) -> None:
    if inspect.isasyncgen(produced):
        await produced.aclose()
    elif inspect.isgenerator(produced):
        produced.close()


def _within(value: Any, limit: int) -> bool:
    """Whether ``value`` (what a script produced) takes at most ``limit`` bytes as JSON, about;
    counted without writing it out, and stopping as soon as it is over."""
    used = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            used += len(item) + 2 if item.isascii() else len(item.encode("utf-8", "replace")) + 2
        elif isinstance(item, dict):
            used += 2 + 2 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            used += 2 + len(item)
            stack.extend(item)
        else:
            used += 8
        if used > limit:
            return False
    return True


def _chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while chunk := list(itertools.islice(items, size)):
        yield chunk


def _bounded(recent: deque[str]) -> Iterator[str]:
    """The latest summaries, newest first, within :data:`AVOID_CHARS`."""
    used = 0
    for line in reversed(recent):
        used += len(line) + 2
        if used > AVOID_CHARS:
            return
        yield line


async def _drain(
    stream: CaseStream, generate: GenerateCall, on_progress: Callable[[GenerationStats], None], on_problem: Callable[[str], None] | None
) -> list[LoadedCase]:
    out: list[LoadedCase] = []
    async for cases in stream.batches(generate, on_progress, on_problem):
        out.extend(cases)
    return out


def _checked(stream: CaseStream, cases: list[LoadedCase]) -> list[LoadedCase]:
    if stream.error is not None and stream.stats.kept == 0:
        raise UsageError(f"-i {stream.origin}: {stream.error if stream.script else 'the generator failed: ' + stream.error}")
    return cases


def collect(
    stream: CaseStream,
    generate: GenerateCall,
    on_progress: Callable[[GenerationStats], None] = lambda stats: None,
    on_problem: Callable[[str], None] | None = None,
) -> list[LoadedCase]:
    """Run ``stream`` to its end and return the cases it accepted (not those ``open`` returned).

    A generator that failed before writing any case is a :class:`~farm.errors.UsageError`
    naming it (nothing runs); one that failed later leaves the cases it wrote and the reason in
    ``stream.stats.stop_reason``."""
    from farm.aio import run_sync

    return _checked(stream, run_sync(_drain(stream, generate, on_progress, on_problem)))


def generate_locally(
    stream: CaseStream,
    config: FarmConfig,
    cache: bool = True,
    on_progress: Callable[[GenerationStats], None] = lambda stats: None,
    on_problem: Callable[[str], None] | None = None,
) -> list[LoadedCase]:
    """:func:`collect` with this process's role players (:class:`~farm.roles.services.LocalRoles`):
    the generator's calls go through the role cache (unless ``cache`` is False) and its
    connector's limiter."""
    from farm.aio import run_sync
    from farm.ratelimit import local_limiters
    from farm.roles.services import LocalRoles

    async def run() -> list[LoadedCase]:
        roles = LocalRoles(config, limiter_for=local_limiters(config), cache=RoleCache.for_config(config) if cache else None)
        try:
            return await _drain(stream, roles.generate, on_progress, on_problem)
        finally:
            await roles.aclose()

    return _checked(stream, run_sync(run()))
