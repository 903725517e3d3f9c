"""The generation cache as a source of cases.

Batches answered in parallel make the "avoid" lists depend on timing, so the role cache of
single batch calls alone would not bring back the same suite. A generation that ran to its end
is therefore cached whole, keyed by the generator (its agent, player, connector, model and
prompt), the parameters, the target and ``seed``: the same command again reads the suite from
there and sends no generator request. ``--no-cache`` (or a generator that samples,
``temperature`` > 0) generates anew.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.files import atomic_file
from farm.generation.agent import generator_parts
from farm.roles.cache import RoleCache, caches_role
from farm.roles.player import RolePlayer

if TYPE_CHECKING:
    from farm.config import FarmConfig
    from farm.generation.intake import Intake, OnProblem
    from farm.generation.query import Settings
    from farm.generation.store import GeneratedFile
    from farm.loaded import LoadedCase

__all__ = ["ENTRY_VERSION", "WholeGeneration"]

ENTRY_VERSION = 1
"""The shape of a whole-generation cache entry; another version is a miss."""


def _prompt_text(config: FarmConfig, path: str | None) -> str | None:
    if not path:
        return None
    try:
        return RolePlayer.prompt_from(path, config.base_dir)
    except OSError:
        return None


def _chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while chunk := list(itertools.islice(items, size)):
        yield chunk


class WholeGeneration:
    """The cache entry of one generation: a head line (its version, the counts and the stop
    reason) and ``generated.jsonl``'s lines."""

    def __init__(self, cache: RoleCache, key: str):
        self.cache = cache
        self.key = key
        self.path: Path = cache.path(key).with_suffix(".jsonl")

    @classmethod
    def of(cls, cache: RoleCache | None, config: FarmConfig, agent_id: str | None, settings: Settings) -> WholeGeneration | None:
        """The entry of the generator ``agent_id`` asked ``settings``; None without a cache, for a
        script, or for a generator whose calls the role cache does not keep (one that samples)."""
        if cache is None or agent_id is None or agent_id not in config.agents:
            return None
        agent, player, connector = generator_parts(config, agent_id)
        if not caches_role(agent, player, connector):
            return None
        shape = {
            "generation": ENTRY_VERSION,
            "agent": agent.model_dump(mode="json"),
            "player": player.model_dump(mode="json"),
            "connector": connector.model_dump(mode="json", include={"base_url", "model", "params"}) if connector else None,
            "prompt": _prompt_text(config, agent.prompt),
            "metadata": settings.metadata,
            "coverage": settings.coverage,
            "batch": settings.batch,
            "patience": settings.patience,
        }
        text = json.dumps(shape, sort_keys=True, ensure_ascii=False, default=str)
        return cls(cache, hashlib.sha256(text.encode("utf-8")).hexdigest())

    def head(self) -> dict[str, Any] | None:
        """The entry's head line, or None when there is no entry (of this version)."""
        try:
            with open(self.path, encoding="utf-8") as file:
                head = json.loads(file.readline())
        except (OSError, ValueError):
            return None
        if not isinstance(head, dict) or head.get("version") != ENTRY_VERSION:
            return None
        return head

    async def cases(self, intake: Intake, head: dict[str, Any], batch: int, on_problem: OnProblem) -> AsyncIterator[list[LoadedCase]]:
        """The entry's cases, taken in by ``intake`` ``batch`` at a time."""
        intake.stats.cached = True
        with open(self.path, encoding="utf-8") as file:
            file.readline()
            lines = (json.loads(line) for line in file if line.strip())
            for number, chunk in enumerate(_chunks(lines, batch), start=1):
                yield intake.take(chunk, number, None, on_problem)
                if intake.full:
                    return
        if not intake.full and head.get("stop_reason"):
            intake.stats.stop_reason = head["stop_reason"]

    def store(self, intake: Intake, generated: GeneratedFile) -> None:
        """Keep the suite as generated (``generated.jsonl``'s lines), written atomically."""
        try:
            body = generated.lines()
            if body is None:
                return
            head = json.dumps({"version": ENTRY_VERSION, "asked": intake.asked, "kept": intake.stats.kept, "stop_reason": intake.stats.stop_reason})
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(self.path, fsync=False) as out:
                out.write(self.cache.scrubber.scrub(head + "\n" + body))
        except OSError:
            pass  # the next run generates again
