"""One generation as the run sees it: :class:`CaseStream`, whose cases arrive while the run goes,
from the source that has them (the generation cache, a generator script or a generator agent);
:func:`collect` and :func:`generate_locally` run one to its end."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.agents.transport import DEFAULT_MAX_REPLY_BYTES
from farm.aio import run_sync
from farm.errors import UsageError
from farm.generation.agent import AgentBatches, GenerateCall, parallel_of
from farm.generation.cache import WholeGeneration
from farm.generation.intake import Intake, plan_slices
from farm.generation.query import Settings
from farm.generation.script import ScriptBatches
from farm.generation.stats import GenerationStats
from farm.generation.store import GeneratedFile
from farm.ratelimit import local_limiters
from farm.roles.cache import RoleCache
from farm.roles.services import LocalRoles
from farm.roles.types import CallTally

if TYPE_CHECKING:
    from farm.config import FarmConfig
    from farm.loaded import LoadedCase

__all__ = ["CaseStream", "collect", "generate_locally"]


class CaseStream:
    """The cases of one generator, produced batch by batch (see :mod:`farm.generation`).

    ``origin``: ``agents:<id>`` or ``scripts:<ref>`` (names the problems); ``agent_id``: the
    generator agent (None for a script); ``script``: the generator function of a ``scripts:``
    generator; ``params``: the typed query merged over the generator's ``generate`` settings;
    ``metadata``: what every request carries (:func:`farm.generation.sources.generator_metadata`);
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
        self.settings = Settings.of(origin, params, metadata)
        self.parallel = parallel_of(config, agent_id)
        self.max_reply_bytes = DEFAULT_MAX_REPLY_BYTES
        """The largest reply a script generator may give at once, counted as JSON (an HTTP reply's default bound)."""
        self.role_calls = CallTally()
        """The generator's role calls and the role cache's hits among them (``run.json``'s ``role_cache``)."""
        self.keep: Callable[[list[LoadedCase]], list[LoadedCase]] | None = None
        """The run's selection (``--run``, ``--tag``) of the accepted cases it yields; every
        accepted case is written to ``generated.jsonl`` all the same."""
        self._cache = cache
        self._generated = GeneratedFile()
        self._intake = Intake(origin, config, self.settings.asked, plan_slices(self.settings.coverage, self.settings.asked), self._generated)

    @property
    def asked(self) -> int:
        """Cases to generate (``count``)."""
        return self.settings.asked

    @property
    def metadata(self) -> dict[str, Any]:
        """What every request carries."""
        return self.settings.metadata

    @property
    def stats(self) -> GenerationStats:
        """What the generation did so far (``run.json``'s ``generation``)."""
        return self._intake.stats

    @property
    def error(self) -> str | None:
        """Why the generator failed, when a failure stopped generation."""
        return self._intake.error

    @property
    def default_simulator(self) -> str | None:
        """The run's default simulator (``--simulator``), for the checks of dynamic cases."""
        return self._intake.default_simulator

    @default_simulator.setter
    def default_simulator(self, name: str | None) -> None:
        self._intake.default_simulator = name

    def open(self, run_dir: Path) -> list[LoadedCase]:
        """Start (or continue) ``run_dir/generated.jsonl``; returns the cases already there (a
        resumed run's), which count as kept and are not generated again."""
        resumed = self._generated.open(run_dir, self.origin, str(self.config.base_dir))
        self._intake.resume(resumed)
        return resumed

    def _whole_key(self) -> str | None:
        """The key of the whole generation's cache entry; None when it is not cached."""
        whole = WholeGeneration.of(self._cache, self.config, self.agent_id, self.settings)
        return whole.key if whole is not None else None

    def close(self) -> None:
        """Close ``generated.jsonl`` (the stream closes it when it ends)."""
        self._generated.close()

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
        intake = self._intake
        try:
            if intake.full:
                return
            whole = WholeGeneration.of(self._cache, self.config, self.agent_id, self.settings)
            source: AsyncIterator[list[LoadedCase]]
            if whole is not None and (head := whole.head()) is not None:
                source = whole.cases(intake, head, self.settings.batch, on_problem)
            elif self.script is not None:
                source = ScriptBatches(intake, self.settings, self.script, self.max_reply_bytes).cases(on_problem)
            else:
                assert self.agent_id is not None
                source = AgentBatches(intake, self.settings, self.agent_id, self.parallel, self.role_calls).cases(generate, on_problem)
            async for accepted in source:
                on_progress(intake.stats)
                if accepted and self.keep is not None:
                    accepted = self.keep(accepted)
                if accepted:
                    yield accepted
            on_progress(intake.stats)
            if not intake.full and intake.stats.stop_reason is None:
                intake.stats.stop_reason = f"generated {intake.stats.kept} of the {self.asked} cases asked: the generator wrote no more"
            if whole is not None and not intake.stats.cached and intake.error is None:
                whole.store(intake, self._generated)
        finally:
            self.close()


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
    async def run() -> list[LoadedCase]:
        roles = LocalRoles(config, limiter_for=local_limiters(config), cache=RoleCache.for_config(config) if cache else None)
        try:
            return await _drain(stream, roles.generate, on_progress, on_problem)
        finally:
            await roles.aclose()

    return _checked(stream, run_sync(run()))
