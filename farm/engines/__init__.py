"""Two engines behind one seam: where a run's conversations happen.

- ``local`` (:mod:`farm.engines.local`): every conversation in this process, on
  asyncio. Nothing to start, so a small run starts at once.
- ``ray`` (``actors/engine.py``): session actors on the embedded local Ray or
  an existing cluster, for runs that want more cores than one process has.

Both take the same :class:`RunPlan` and hand every result to ``on_result``
once, as it finishes; both keep the connectors' limits, separate budgets for
simulators and validators, ``--fail-fast`` and interrupts. What is around a
run (``run.json``, the writers, resume) is the engines' common caller,
:mod:`farm.execution`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from farm.config import FarmConfig
from farm.errors import UsageError
from farm.loader import LoadedCase
from farm.results import CaseResult, RetriedAttempt
from farm.rolecache import CallTally
from farm.runner import RunSettings

if TYPE_CHECKING:
    from farm.replay import Replay

__all__ = ["AUTO_RAY_FROM", "ENGINES", "Engine", "EngineLost", "Job", "RunPlan", "Terminal", "choose_engine", "make_engine"]

ENGINES = {
    "local": "farm.engines.local:LocalEngine",
    "ray": "farm.actors.engine:RayEngine",
}
"""Engine name → ``module:class``, imported only when picked (``farm/`` never imports Ray itself)."""

AUTO_RAY_FROM = 20_000
"""Conversations (cases × runs) from which ``--engine auto`` picks ``ray`` on a machine with more
than :data:`AUTO_RAY_MIN_CPUS` CPUs (benchmarks/README.md, "Choosing the engine")."""

AUTO_RAY_MIN_CPUS = 4
"""Below this many CPUs one process is as fast as Ray for any run measured here."""


class EngineLost(Exception):
    """The engine itself went away mid-run (the Ray node running the farm stopped): no case's
    fault. The results so far are kept; the cases in flight are left for ``--resume``."""


@dataclass
class Terminal:
    """Where a person answers questions in interactive mode."""

    stdin: TextIO
    write: Callable[[str], None]


@dataclass
class Job:
    """One run of one case: ``key`` is ``(case id, run index)``; ``attempt`` counts from 1."""

    key: tuple[str, int]
    payload: LoadedCase
    attempt: int = 1
    retried: list[RetriedAttempt] = field(default_factory=list)
    """Earlier attempts that ended in an agent error or timeout (``--retries``)."""

    def again(self, result: CaseResult) -> Job:
        """The next attempt, after ``result`` ended in an agent error or timeout."""
        failed = RetriedAttempt(attempt=self.attempt, status=result.status, error=result.error)
        return Job(self.key, self.payload, self.attempt + 1, [*self.retried, failed])

    def final(self, result: CaseResult) -> CaseResult:
        """``result`` as this job's reported result: its run index, attempt and retried attempts."""
        result.run_index, result.attempt, result.retried = self.key[1], self.attempt, list(self.retried)
        return result


@dataclass
class RunPlan:
    """Everything an engine needs to run a suite; :func:`farm.run` builds it."""

    config: FarmConfig
    cases: list[LoadedCase]
    settings: RunSettings
    parallel: int = 64
    runs: int = 1
    fail_fast: bool = False
    connector_override: str | None = None
    actors: int | None = None
    """Session actors (the ray engine); None: sized to the cluster."""
    max_attempts: int = 3
    skip_keys: set[tuple[str, int]] = field(default_factory=set)
    """``(case id, run index)`` already finished (``--resume``)."""
    terminal: Terminal | None = None
    """Set in interactive mode: the agent's questions go to a person here."""
    retries: int = 0
    """``--retries``: times a case that ended in an agent error or timeout is run again."""
    driver_calls: CallTally = field(default_factory=CallTally)
    """Role calls made in this process for the run before it started (the generator's)."""
    replay: Replay | None = None
    """Set by ``farm rescore``: each case replays its recorded conversation instead of calling
    the agent (the local engine only: the ray engine refuses such a plan; roles and assertions
    are the run's own)."""

    def should_retry(self, job: Job, result: CaseResult) -> bool:
        """Whether ``result`` (of ``job``) ended in an agent error or timeout with retries left."""
        return result.agent_failed and len(job.retried) < self.retries

    def jobs(self) -> Iterator[Job]:
        """Every case run still to do, run by run, in suite order."""
        for run_index in range(self.runs):
            for loaded in self.cases:
                key = (loaded.id, run_index)
                if key not in self.skip_keys:
                    yield Job(key, loaded)

    @property
    def total(self) -> int:
        return len(self.cases) * self.runs - len(self.skip_keys)

    def needs_roles(self) -> tuple[bool, bool]:
        """Whether any case needs a simulator, and any an ``agent`` assertion (a validator)."""
        return any(c.needs[0] for c in self.cases), any(c.needs[1] for c in self.cases)


class Engine(Protocol):
    """Runs a :class:`RunPlan`'s conversations."""

    name: str
    starting: str | None
    """What the live bar says while :meth:`start` runs ("starting Ray…"), or None when it is instant."""

    def start(self, run_dir: Path | None = None) -> dict[str, Any]:
        """Get ready (the ray engine starts or joins Ray); returns what ``run.json`` records of it.
        ``run_dir``: the run folder, for the engine's own log (the ray engine's ``ray.log``)."""
        ...

    def run(self, plan: RunPlan, on_result: Callable[[CaseResult], None], should_stop: Callable[[], bool] = lambda: False) -> None:
        """Run every job of ``plan``; hand each result to ``on_result`` once, as it finishes.

        Once ``should_stop()`` is true (or, with ``fail_fast``, a case failed) nothing
        more starts and what is in flight finishes. ``KeyboardInterrupt`` cancels
        what is in flight and propagates; :class:`EngineLost` says the engine is gone.
        """
        ...

    def close(self) -> None:
        """Stop what :meth:`start` started."""
        ...


def choose_engine(name: str, *, address: str | None, conversations: int, cpus: int | None = None) -> str:
    """The engine for ``--engine name``: ``auto`` is ``ray`` with an address (``--address`` or
    ``RAY_ADDRESS``), or for a run large enough that more cores pay; else ``local``."""
    if name not in ("auto", *ENGINES):
        raise UsageError(f"--engine: '{name}' is not one of: auto, {', '.join(ENGINES)}")
    if name != "auto":
        if name == "local" and address:
            raise UsageError("--address joins a Ray cluster, which the local engine does not use; drop --address or use --engine ray")
        return name
    if address or os.environ.get("RAY_ADDRESS"):
        return "ray"
    cpus = cpus or os.cpu_count() or 1
    return "ray" if cpus >= AUTO_RAY_MIN_CPUS and conversations >= AUTO_RAY_FROM else "local"


def make_engine(name: str, **options: Any) -> Engine:
    """The engine called ``name``, with its options (``address`` for ``ray``)."""
    module, _, cls = ENGINES[name].partition(":")
    try:
        engine_cls = getattr(importlib.import_module(module), cls)
    except ImportError as exc:  # pragma: no cover - both are part of the distribution
        raise UsageError(f"--engine {name}: cannot import {module} ({exc})") from None
    return engine_cls(**options)

