"""Two engines behind one seam: where a run's conversations happen.

- ``local`` (:mod:`farm.engines.local`): every conversation in this process, on
  asyncio. Nothing to start, so a small run starts at once.
- ``ray`` (``actors/engine.py``): session actors on the embedded local Ray or
  an existing cluster, for runs that want more cores than one process has.

Both take the same :class:`RunPlan` and hand every result to ``on_result``
once, as it finishes; both keep the connectors' limits, separate budgets for
simulators and validators, ``--fail-fast`` and interrupts. What is around a
run (``run.json``, the writers, resume) is the engines' common caller,
:mod:`farm._run.execution`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from farm.engines.scheduler import Job, Scheduler, StopReason, Worker
from farm.errors import EngineLost, UsageError
from farm.feed import CLOSED, CaseFeed
from farm.results import CaseResult, CaseRunKey
from farm.roles.types import CallTally

if TYPE_CHECKING:  # the runner and the case model: importing the scheduler loads neither
    from farm.config import FarmConfig
    from farm.conversation.replay import Replay
    from farm.conversation.runner import RunSettings
    from farm.loaded import LoadedCase
    from farm.sequential import Sequential
    from farm.traces.receiver import SpanSink

__all__ = [
    "AUTO_RAY_FROM",
    "ENGINES",
    "Engine",
    "EngineLost",
    "Job",
    "RunPlan",
    "Scheduler",
    "StopReason",
    "Terminal",
    "Worker",
    "case_cost",
    "choose_engine",
    "make_engine",
]

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


@dataclass
class Terminal:
    """Where a person answers questions in interactive mode."""

    stdin: TextIO
    write: Callable[[str], None]


@dataclass
class RunPlan:
    """Everything an engine needs to run a suite; :func:`farm.run` builds it."""

    config: FarmConfig
    cases: list[LoadedCase]
    settings: RunSettings
    """The runner's settings for the first agent under test (the others' are in ``agent_settings``)."""
    parallel: int
    """Conversations in flight at most: given, else sized from the connectors' limits (:func:`farm.run`)."""
    runs: int = 1
    fail_fast: bool = False
    connector_override: str | None = None
    actors: int | None = None
    """Session actors (the ray engine); None: sized to the cluster."""
    max_attempts: int = 3
    skip_keys: set[CaseRunKey] = field(default_factory=set)
    """Case runs already finished (``--resume``; :meth:`CaseResult.run_key`)."""
    terminal: Terminal | None = None
    """Set in interactive mode: the agent's questions go to a person here."""
    retries: int = 0
    """``--retries``: times a case that ended in an agent error or timeout is run again."""
    max_cost: float | None = None
    """``--max-cost``: USD after which nothing more is dispatched."""
    spent_before: float = 0.0
    """USD the run's earlier parts spent (``--resume``): counted against ``max_cost``."""
    driver_calls: CallTally = field(default_factory=CallTally)
    """Role calls made in this process for the run before it started (the generator's)."""
    replay: Replay | None = None
    """Set by ``farm rescore``: each case replays its recorded conversation instead of calling
    the agent (the local engine only: the ray engine refuses such a plan; roles and assertions
    are the run's own)."""
    agent_settings: dict[str, RunSettings] = field(default_factory=dict)
    """The runner's settings per agent under test, in the order of ``-n``; empty: ``settings``' agent alone."""
    sequential: Sequential | None = None
    """Set under adaptive repeats (``--runs auto``, ``MIN..MAX``): the rule that stops each case."""
    tried_before: dict[CaseRunKey, tuple[str, bool]] = field(default_factory=dict)
    """Under adaptive repeats, on a resume: how each case run in ``skip_keys`` ended (status, a role's error)."""
    feed: CaseFeed = CLOSED
    """What hands over the cases that arrive while the run goes, after ``cases``: a static suite's
    is closed (nothing arrives), a generator's gives each batch as it is accepted."""
    on_progress: Callable[[Any], None] | None = None
    """Told how the feed goes, after each batch (a generation's progress line)."""
    when_idle: Callable[[], None] | None = None
    """Work for the first moment the run's loop has nothing to do, its first requests out (the local
    engine): the Parquet writer's pyarrow, loaded then rather than before the first request."""

    def __post_init__(self) -> None:
        if not self.agent_settings:
            self.agent_settings = {self.settings.agent_id: self.settings}

    @property
    def agents(self) -> list[str]:
        """The agents under test: every case runs on each of them."""
        return list(self.agent_settings)

    def settings_for(self, agent: str) -> RunSettings:
        return self.agent_settings.get(agent, self.settings)

    def scheduler(self, workers: list[Worker]) -> Scheduler:
        """The run's scheduler over ``workers``: its rules are this plan's."""
        from farm.conversation.runner import error_result  # the engines load the runner, not the scheduler

        def make_error(job: Job, message: str) -> CaseResult:
            return error_result(job.payload, self.settings_for(job.agent), message)

        return Scheduler(
            workers,
            make_error=make_error,
            agents=self.agents,
            runs=self.runs,
            fail_fast=self.fail_fast,
            retries=0 if self.replay is not None else self.retries,
            max_attempts=self.max_attempts,
            max_cost=self.max_cost,
            cost_of=case_cost,
            finished_before=self.skip_keys,
            spent=self.spent_before,
            sequential=self.sequential,
            tried_before=self.tried_before,
        )

    @property
    def case_count(self) -> int:
        """Cases of the run (those known so far; a generator may add more)."""
        return max(len(self.cases), self.feed.asked)

    @property
    def cases_to_decide(self) -> int:
        """Under adaptive repeats, the cases (one per agent) this part has to decide: the run's, less
        those a resumed run's earlier parts ended."""
        from farm.engines.scheduler import ended_before

        ended = ended_before(self.sequential, self.tried_before) if self.sequential is not None else 0
        return max(0, self.case_count * len(self.agents) - ended)

    @property
    def total(self) -> int:
        """Case runs to do in this part (those known so far; a generator may add more); under adaptive
        repeats, the most there can be (each case's most tries)."""
        return max(0, self.case_count * self.runs * len(self.agents) - len(self.skip_keys))


def case_cost(result: CaseResult) -> float:
    """What a finished case spent, in USD: the agent's and its roles' (0 where nothing is priced)."""
    return (result.cost_usd or 0.0) + (result.role_cost_usd or 0.0)


class Engine(Protocol):
    """Runs a :class:`RunPlan`'s conversations."""

    name: str
    starting: str | None
    """What the live bar says while :meth:`start` runs ("starting Ray…"), or None when it is instant."""

    def start(self, run_dir: Path | None = None) -> dict[str, Any]:
        """Get ready (the ray engine starts or joins Ray); returns what ``run.json`` records of it.
        ``run_dir``: the run folder, for the engine's own log (the ray engine's ``ray.log``)."""
        ...

    def run(self, plan: RunPlan, on_result: Callable[[CaseResult], None]) -> StopReason | None:
        """Run every job of ``plan``; hand each result to ``on_result`` once, as it finishes.

        Once the plan's scheduler stops (``fail_fast``, ``max_cost``, an endpoint that never answers)
        nothing more starts and what is in flight finishes; returns why it stopped early, if it did.
        ``KeyboardInterrupt`` cancels what is in flight and propagates; :class:`EngineLost` says
        the engine is gone.
        """
        ...

    def close(self) -> None:
        """Stop what :meth:`start` started."""
        ...

    def span_sink(self, run_id: str) -> SpanSink:
        """Where the run's OTLP receiver hands a remote agent's spans, so that the session running
        each case finds its own (docs/traces.md); asked before :meth:`start`, once per run at most."""
        ...


def choose_engine(name: str, *, address: str | None, conversations: int, cpus: int | None = None, resources: bool = False) -> str:
    """The engine for ``--engine name``: ``auto`` is ``ray`` with an address (``--address`` or
    ``RAY_ADDRESS``), for an agent that declares ``resources`` (they mean placing its slots on
    Ray), or for a run large enough that more cores pay; else ``local``."""
    if name not in ("auto", *ENGINES):
        raise UsageError(f"--engine: '{name}' is not one of: auto, {', '.join(ENGINES)}")
    if name != "auto":
        if name == "local" and address:
            raise UsageError(
                "--address joins a Ray cluster, which the local engine does not use; drop --address or use --engine ray"
            )
        return name
    if address or os.environ.get("RAY_ADDRESS") or resources:
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
