"""How a source hands a run its cases: one :class:`CaseFeed` per suite.

A suite's cases are there at once (``Suite.cases``); its feed hands over the rest as they arrive.
A static suite's feed (:data:`CLOSED`, a file's, a message's, stdin's) is closed from the start:
nothing more comes, so the engine closes its scheduler at once. A generator's feed
(:class:`farm.generation.feed.GeneratedFeed`) hands over each accepted batch while the run goes,
and keeps what the generation adds to the run: ``generated.jsonl``, run.json's ``generation``, its
progress and closing lines, its role calls. The run asks every feed the same questions
(:mod:`farm._run.running`); the engines pump every feed the same way (:mod:`farm.engines.feed`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # importing the engines' plan loads neither the case model nor the console
    from rich.console import Console

    from farm.config import FarmConfig
    from farm.loaded import LoadedCase
    from farm.roles.types import CallTally
    from farm.writers import RunInfo

__all__ = ["CLOSED", "CaseFeed", "Closed", "Keep", "RunEnd"]

Keep = Callable[[list["LoadedCase"]], list["LoadedCase"]]
"""The run's selection (``--run``, ``--tag``) of cases that arrive."""


@dataclass(frozen=True)
class RunEnd:
    """What a run tells its feed once it ended (:meth:`CaseFeed.after_run`)."""

    run_dir: Path
    summary: Any
    """The run's :class:`~farm.summary.Summary`."""
    previous: RunInfo | None
    """The resumed run's ``run.json``."""
    console: Console
    quiet: bool
    resumed: bool
    """The run is a resume (``--resume``): its folder stays, whatever this part ran."""
    count: Callable[[CallTally], None]
    """Adds role calls made while the run went to its summary and ``run.json``."""
    remove: Callable[[], None]
    """Removes the run's folder (a run that ran nothing)."""


class CaseFeed(Protocol):
    """The cases a suite hands a run after those it has at once, and what they add to the run."""

    @property
    def closed(self) -> bool:
        """Nothing will arrive: the scheduler is closed at once (a static suite's feed)."""
        ...

    @property
    def asked(self) -> int:
        """Cases the run counts on from the feed (0: none beyond the suite's)."""
        ...

    @property
    def failure(self) -> str | None:
        """Why the feed stopped handing over cases before the run had all it counts on (a
        generator's error): the run then stopped early; None when it did not fail."""
        ...

    def open(self, run_dir: Path, keep: Keep | None) -> list[LoadedCase]:
        """Get ready for a run into ``run_dir``, ``keep`` selecting what arrives; the cases there at
        once beyond the suite's (a resumed run's generated ones)."""
        ...

    def batches(self, generate: Any, on_progress: Callable[[Any], None]) -> AsyncIterator[list[LoadedCase]]:
        """The cases that arrive, a list per batch; ``generate`` answers a generator's role calls,
        ``on_progress`` hears how it goes after each batch."""
        ...

    def here(self, config: FarmConfig, cache: bool, console: Console, quiet: bool, keep: Keep) -> list[LoadedCase]:
        """A dry run's: every case that would arrive, made here, the progress on ``console``."""
        ...

    def record(self, previous: RunInfo | None) -> dict[str, Any] | None:
        """``run.json``'s ``generation``: what made the cases so far (with ``previous``'s parts)."""
        ...

    def watch(self, info: RunInfo, view: Any, previous: RunInfo | None) -> Callable[[Any], None] | None:
        """What hears the feed's progress while the run goes: keeps ``info`` and shows it on ``view``."""
        ...

    def after_run(self, end: RunEnd) -> bool:
        """Once the run ended: what the feed adds to its record and its closing lines; True when a
        failure of the feed cut the suite short (never a green run)."""
        ...


class Closed:
    """A static suite's feed: its cases were all handed over at once, nothing arrives."""

    closed = True
    asked = 0
    failure = None

    def open(self, run_dir: Path, keep: Keep | None) -> list[LoadedCase]:
        return []

    async def batches(self, generate: Any, on_progress: Callable[[Any], None]) -> AsyncIterator[list[LoadedCase]]:
        return
        yield  # an async generator that yields nothing

    def here(self, config: FarmConfig, cache: bool, console: Console, quiet: bool, keep: Keep) -> list[LoadedCase]:
        return []

    def record(self, previous: RunInfo | None) -> dict[str, Any] | None:
        return None

    def watch(self, info: RunInfo, view: Any, previous: RunInfo | None) -> Callable[[Any], None] | None:
        return None

    def after_run(self, end: RunEnd) -> bool:
        return False


CLOSED: CaseFeed = Closed()
"""The feed of every static suite."""
