"""A generator's :class:`~farm.feed.CaseFeed`: its :class:`~farm.generation.stream.CaseStream`'s
batches handed to the run as they are accepted, and what a generation adds to the run: its
``generated.jsonl``, ``run.json``'s ``generation``, the progress line and the dropped cases' lines,
its role calls and its closing line; a dry run's generation, here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from farm.errors import UsageError
from farm.wording import plural

if TYPE_CHECKING:
    from rich.console import Console

    from farm.config import FarmConfig
    from farm.feed import Keep, RunEnd
    from farm.generation.stats import GenerationStats
    from farm.generation.stream import CaseStream
    from farm.loaded import LoadedCase
    from farm.roles.cache import CallTally
    from farm.writers import RunInfo

__all__ = ["GeneratedFeed", "GenerationShown", "generation_record", "say_dropped"]


class GeneratedFeed:
    """The cases of ``stream``, batch by batch as the run goes (none is there at once)."""

    closed = False

    def __init__(self, stream: CaseStream):
        self.stream = stream

    @property
    def asked(self) -> int:
        return self.stream.asked

    @property
    def failure(self) -> str | None:
        return self.stream.error

    def open(self, run_dir: Path, keep: Keep | None) -> list[LoadedCase]:
        """Start (or continue) ``generated.jsonl``: a resumed run's cases, selected, are there at once."""
        from farm.agents.transport import preload

        preload()  # the generator's first request would import the HTTP transport inside the run
        resumed = self.stream.open(run_dir)
        self.stream.keep = keep
        return keep(resumed) if keep is not None else resumed

    def batches(self, generate: Any, on_progress: Callable[[Any], None]) -> AsyncIterator[list[LoadedCase]]:
        return self.stream.batches(generate, on_progress)

    def here(self, config: FarmConfig, cache: bool, console: Console, quiet: bool, keep: Keep) -> list[LoadedCase]:
        """A dry run's generation: the stream run to its end, here, its progress on ``console``."""
        from contextlib import nullcontext

        from farm.generation.stream import generate_locally

        stream = self.stream
        status = console.status("") if console.is_terminal and not quiet else nullcontext()
        try:
            with status as shown:
                cases = generate_locally(
                    stream,
                    config,
                    cache,
                    on_progress=lambda stats: shown.update(stats.progress_text()) if shown else None,
                    on_problem=say_dropped(console, quiet),
                )
        except KeyboardInterrupt:
            stream.close()
            if not quiet:
                console.print(
                    f"\ninterrupted while generating: {stream.stats.kept} of {stream.asked} cases generated",
                    highlight=False,
                    soft_wrap=True,
                )
            raise
        kept = keep(cases)
        self._said(console, quiet)
        return kept

    def record(self, previous: RunInfo | None) -> dict[str, Any] | None:
        return generation_record(self.stream.stats, previous)

    def watch(self, info: RunInfo, view: Any, previous: RunInfo | None) -> Callable[[Any], None] | None:
        return GenerationShown(info, view, previous)

    def after_run(self, end: RunEnd) -> bool:
        """The generator's calls counted for the run (made while it went); a run that kept no case
        leaves no folder (a resume's stays) and is a :class:`UsageError`; the closing line."""
        end.count(self._calls(end.previous))
        if self.stream.stats.kept == 0 and not end.resumed:
            end.remove()  # nothing ran: no folder is left as if it had (exit 2)
        self._said(end.console, end.quiet)
        return self.failure is not None

    def _calls(self, previous: RunInfo | None) -> CallTally:
        """The generator's calls of this part, and what those of a resumed run's earlier parts cost."""
        from farm.results import add_cost
        from farm.roles.cache import CallTally

        calls = self.stream.role_calls
        earlier = ((previous.generation if previous is not None else None) or {}).get("cost_usd")
        return CallTally(calls.role_calls, calls.cache_hits, add_cost(calls.cost_usd, earlier), calls.requests)

    def _said(self, console: Console, quiet: bool) -> None:
        """After a generation: what it did in one line, and why it has fewer cases than asked. A
        generator that wrote no case at all is a :class:`UsageError`."""
        stream, stats = self.stream, self.stream.stats
        if stats.kept == 0:
            raise UsageError(f"-i {stream.origin}: no case to run: {stats.stop_reason or 'the generator wrote none'}")
        if quiet:
            if stats.stop_reason:
                console.print(f"[yellow]{escape(stats.stop_reason)}[/yellow]", highlight=False, soft_wrap=True)
            return
        if stats.cached:
            line = f"{plural(stats.kept, 'generated case')}, from the role cache (generated before by the same generator, parameters and seed; --no-cache generates anew)"
        else:
            line = (
                f"{plural(stats.kept, 'generated case')} in {plural(stats.batches, 'batch')} ({plural(stats.calls, 'generator call')}); "
                f"dropped {plural(stats.duplicates, 'duplicate')} and {stats.malformed} malformed; {stats.renamed} renamed"
            )
        console.print(escape(line), highlight=False, soft_wrap=True)
        if stats.stop_reason:
            console.print(f"[yellow]{escape(stats.stop_reason)}[/yellow]", highlight=False, soft_wrap=True)


def say_dropped(console: Console, quiet: bool) -> Callable[[str], None]:
    """Prints a dropped generated case's line."""
    if quiet:
        return lambda line: None
    from farm.console.safe import one_line

    return lambda line: console.print(
        f"[yellow]dropped:[/yellow] {escape(one_line(line))}", highlight=False, emoji=False, soft_wrap=True
    )


class GenerationShown:
    """Told after every batch of a generation that streams into the run: keeps ``run.json``'s
    ``generation`` (with a resumed run's earlier counts), shows it on the progress line and
    prints each dropped case's line. On the ray engine it is called from the generation's thread."""

    def __init__(self, info: RunInfo, view: Any, previous: RunInfo | None):
        self.info = info
        self.view = view
        self.previous = previous
        self.say = say_dropped(view.console, not view.show)
        self.shown = 0

    def __call__(self, stats: GenerationStats) -> None:
        self.info.generation = generation_record(stats, self.previous)
        self.info.cases = stats.kept
        self.view.generation(stats.progress_text())
        for line in stats.problems[self.shown :]:
            self.say(line)
        self.shown = len(stats.problems)


def generation_record(stats: GenerationStats, previous: RunInfo | None) -> dict[str, Any]:
    """``run.json``'s ``generation``: ``stats``, with the counts and cost of a resumed run's earlier parts."""
    from farm.results import add_cost

    record = stats.as_record()
    earlier = (previous.generation if previous is not None else None) or {}
    for key in ("duplicates", "malformed", "renamed", "batches", "calls"):
        record[key] += int(earlier.get(key, 0))
    record["cost_usd"] = add_cost(record["cost_usd"], earlier.get("cost_usd"))
    return record
