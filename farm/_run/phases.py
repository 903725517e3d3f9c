"""The records the phases of a run hand each other (:mod:`farm._run.running`,
:mod:`farm._run.planning`): :class:`Prepared` after the cases are loaded, :class:`Planned` once
everything the engine needs is decided, and :class:`Rescoring`, what makes a run a rescore."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from farm._run.request import ResolvedOptions
    from farm._run.view import RunView
    from farm.config import FarmConfig
    from farm.conversation.golden import GoldenRecorder
    from farm.conversation.replay import Replay
    from farm.engines import Engine, RunPlan
    from farm.gate import Baseline
    from farm.results import CaseRunKey
    from farm.roles.cache import CallTally
    from farm.suite.loader import Suite
    from farm.traces.receiver import Receiver
    from farm.writers import RunInfo

__all__ = ["Planned", "Prepared", "Rescoring"]


@dataclass(frozen=True)
class Rescoring:
    """What makes a run a rescore (:func:`farm.rescore`): the recorded run whose turns ``replay``
    gives where the agents would be called. It runs on the local engine into a new run folder."""

    source: Path
    """The recorded run's folder."""
    info: RunInfo
    """Its ``run.json``."""
    replay: Replay

    @property
    def source_id(self) -> str:
        return self.info.run_id or self.source.name


@dataclass
class Prepared:
    """A run's cases, loaded and checked, and where it goes: what :func:`~farm._run.planning.plan_run` starts from."""

    options: ResolvedOptions
    cfg: FarmConfig
    previous: RunInfo | None
    agent_id: str | None
    """The first agent under test; None: script tests, which call agents themselves."""
    agents: list[str]
    suite: Suite
    view: RunView
    run_id: str
    run_dir: Path
    driver_calls: CallTally
    rescoring: Rescoring | None = None


@dataclass
class Planned:
    """Everything a run needs, decided: what :func:`~farm._run.running.execute_run` runs."""

    prepared: Prepared
    agent_id: str
    agents: list[str]
    connectors: dict[str, str | None]
    plan: RunPlan
    info: RunInfo
    engine: Engine
    jsonl: Path
    skip_keys: set[CaseRunKey]
    recorder: GoldenRecorder | None
    against: Baseline | None
    """The baseline run the gate compares with (``--baseline``)."""
    hook_info: dict[str, Any]
    """What the hooks, the reporter and the writers' heads are told of the run."""
    receiver: Receiver | None = None
    """The OTLP receiver a remote agent exports its spans to, when the run captures them."""
