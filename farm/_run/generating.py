"""A run's generated cases, as the console shows them: a dry run's generation, the progress of
one that streams into the run, what ``run.json`` records of it, and its closing line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from farm.errors import UsageError
from farm.wording import plural

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from farm.config import FarmConfig
    from farm.generation import CaseStream, GenerationStats
    from farm.roles.cache import CallTally
    from farm.suite.loader import Suite
    from farm.writers import RunInfo

__all__ = ["GenerationShown", "generate", "generated", "generation_record", "generator_calls", "plural", "say_dropped"]


def generate(suite: Suite, cfg: FarmConfig, cache: bool, console: Console, quiet: bool, match: str | None, tags: Sequence[str]) -> None:
    """A dry run's generation: the suite's stream run to its end into ``suite.cases``, here."""
    from contextlib import nullcontext

    from farm.generation import generate_locally
    from farm.suite.loader import Suite

    stream = suite.stream
    assert stream is not None
    status = console.status("") if console.is_terminal and not quiet else nullcontext()
    try:
        with status as shown:
            cases = generate_locally(stream, cfg, cache, on_progress=lambda stats: shown.update(stats.progress_text()) if shown else None, on_problem=say_dropped(console, quiet))
    except KeyboardInterrupt:
        stream.close()
        if not quiet:
            console.print(f"\ninterrupted while generating: {stream.stats.kept} of {stream.asked} cases generated", highlight=False, soft_wrap=True)
        raise
    suite.cases = Suite(cases).select(match, tags or []).cases
    generated(stream, console, quiet)


def say_dropped(console: Console, quiet: bool) -> Callable[[str], None]:
    """Prints a dropped generated case's line."""
    if quiet:
        return lambda line: None
    from farm.console.safe import one_line

    return lambda line: console.print(f"[yellow]dropped:[/yellow] {escape(one_line(line))}", highlight=False, emoji=False, soft_wrap=True)


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


def generator_calls(stream: CaseStream, previous: RunInfo | None) -> CallTally:
    """The generator's calls of this part, and what those of a resumed run's earlier parts cost."""
    from farm.results import add_cost
    from farm.roles.cache import CallTally

    calls = stream.role_calls
    earlier = ((previous.generation if previous is not None else None) or {}).get("cost_usd")
    return CallTally(calls.role_calls, calls.cache_hits, add_cost(calls.cost_usd, earlier), calls.requests)


def generated(stream: CaseStream, console: Console, quiet: bool) -> None:
    """After a generation: what it did in one line, and why it has fewer cases than asked. A
    generator that wrote no case at all is a :class:`UsageError`."""
    stats = stream.stats
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
