"""The run's tally: how many case runs ended how, counted one result at a time.

:class:`Summary` is fed one :class:`~farm.results.CaseResult` at a time and
keeps counters and one small pass tally per case (its suite and id: an id may repeat across a
run's suites), never the results
themselves, so memory stays flat however many cases run. ``execute`` returns
the run's summary, and every writer that reports counts (the console, the
NDJSON events, the HTML and JUnit reports) counts with one of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from farm.results import CaseResult, StabilityClass, Status, add_cost, stability_class
from farm.results._suites import same_suite

if TYPE_CHECKING:
    from farm.roles.cache import CallTally

__all__ = ["AgentCounts", "CaseStability", "Summary", "TriedCase"]


@dataclass(slots=True)
class TriedCase:
    """How far one case of one agent got under adaptive repeats."""

    results: int = 0
    """Its tries that ended, whatever their status."""
    skipped: bool = False
    """One of them was skipped: the case is not judged, and stops at its first tries."""
    stopped: bool = False
    """The rule stopped it (decided above or below its gate, or at the most tries)."""

    def count(self, status: str, stopped: str | None) -> None:
        """One more of its tries ended with ``status``; ``stopped``: why the case stopped, if it did."""
        self.results += 1
        self.skipped = self.skipped or status == Status.SKIPPED.value
        self.stopped = self.stopped or stopped is not None


@dataclass(slots=True)
class _Tally:
    runs: int = 0
    passes: int = 0
    broken: int = 0
    """Runs that ended in an error or a timeout (a role's error too: it fails the case's gate)."""
    source: str | None = None
    """Where the case came from (its first run's ``source``): with its id, it pairs the case with a baseline's."""
    stopped: str | None = None
    """Under adaptive repeats: why the case stopped (its last try's ``stopped``)."""
    verdict: str | None = None
    """Under adaptive repeats: ``above`` or ``below`` the gate (its last try's ``verdict``)."""


@dataclass(frozen=True)
class CaseStability:
    """How one case fared over ``--runs N`` repetitions (skipped runs not counted)."""

    runs: int
    passes: int
    pass_rate: float
    """``passes / runs``, from 0.0 to 1.0."""
    stability_class: StabilityClass
    """``stable`` (100%), ``mostly_stable`` (>= 80%), ``unstable`` (>= 50%), ``highly_unstable`` or ``consistently_failing`` (0%)."""
    pass_at_k: float
    """pass@k with k = ``runs``: 1.0 if any run passed, else 0.0."""


@dataclass
class AgentCounts:
    """How one agent under test fared in a run: case runs per status, and what it cost."""

    counts: dict[Status, int] = field(default_factory=lambda: {status: 0 for status in Status})
    cost_usd: float | None = None
    """USD the agent's calls cost; None when its connector has no ``price``."""

    @property
    def total(self) -> int:
        """Case runs counted, whatever their status."""
        return sum(self.counts.values())

    blames: dict[str, int] = field(default_factory=dict)
    """The agent's failed dynamic case runs by their ``blame``."""
    role_errors: int = 0
    """Of the errors, those a role made (simulator, judge, generator, reporter): not the agent's."""

    @property
    def pass_rate(self) -> float | None:
        """``passed / (total - skipped - role errors)``: a figure about the agent, so a case a role
        could not judge is left out; None when nothing was judged."""
        ran = self.total - self.counts[Status.SKIPPED] - self.role_errors
        return self.counts[Status.PASSED] / ran if ran else None

    def count_dict(self) -> dict[str, int]:
        """``{"total": n, "passed": n, ...}`` with the status names as keys."""
        return {"total": self.total, **{status.value: self.counts[status] for status in Status}}


@dataclass
class Summary:
    """Counts of a run, accumulated one result at a time with :meth:`add`."""

    counts: dict[Status, int] = field(default_factory=lambda: {status: 0 for status in Status})
    total_turns: int = 0
    duration_ms: float = 0.0
    """Sum of the cases' own durations (the summary block's "total time")."""
    wall_seconds: float | None = None
    """Wall-clock time of the whole run, when the caller measured it."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    first_start: float | None = None
    """Unix time the earliest case started (None when no case said)."""
    last_end: float | None = None
    """Unix time the latest case ended: its start plus its duration."""
    tallies: dict[tuple[str, str, str], _Tally] = field(default_factory=dict)
    """Per agent under test, suite and case id: runs that were not skipped, and how many of them passed."""
    tried: dict[tuple[str, str, str], TriedCase] = field(default_factory=dict)
    """Per agent under test, suite and case id: its tries that ended, skipped ones included, and whether
    adaptive repeats stopped it (what :func:`farm.gate.tries_due` counts the tries due from)."""
    role_calls: int = 0
    """Calls the role cache could answer (roles, and an agent under test with ``cache = true``)."""
    cache_hits: int = 0
    """Of ``role_calls``, those the role cache answered."""
    not_rescorable: int = 0
    """Case runs a rescore could not judge (``rescorable: false``): their inputs changed, or they
    need turns the run did not record. Always 0 for a live run."""
    cost_usd: float | None = None
    """USD the agents under test cost (their connectors' ``price``); None when none has a price."""
    role_cost_usd: float | None = None
    """USD the role calls cost (simulator, validator; generator and reporter through :meth:`add_calls`),
    apart from ``cost_usd``; None when no role connector has a price."""
    agents: dict[str, AgentCounts] = field(default_factory=dict)
    """Per agent under test (``""`` for results that name none), in the order they first came."""
    blames: dict[str, int] = field(default_factory=dict)
    """Failed dynamic case runs by their ``blame`` (``agent``, ``simulator``, ...), those that
    ``[farm].simulator_failures = "error"`` made errors included."""
    role_errors: int = 0
    """Of the errors, those a role made (``error_role``: simulator, judge, generator, reporter). They fail
    the run like any error, but figures about the agent (pass rates, stability) leave them out."""

    def add(self, result: CaseResult) -> None:
        """Count one finished case run."""
        status = Status(result.status)
        self.counts[status] += 1
        self.total_turns += result.total_turns or len(result.turns)
        self.duration_ms += result.duration_ms
        self.prompt_tokens += result.usage.prompt_tokens
        self.completion_tokens += result.usage.completion_tokens
        self.total_tokens += result.usage.total_tokens
        self.role_calls += result.role_calls
        self.cache_hits += result.cache_hits
        self.not_rescorable += result.rescorable is False
        self.cost_usd = add_cost(self.cost_usd, result.cost_usd)
        self.role_cost_usd = add_cost(self.role_cost_usd, result.role_cost_usd)
        agent = self.agents.get(result.agent or "")
        if agent is None:
            agent = self.agents[result.agent or ""] = AgentCounts()
        agent.counts[status] += 1
        if result.blame:
            self.blames[result.blame] = self.blames.get(result.blame, 0) + 1
            agent.blames[result.blame] = agent.blames.get(result.blame, 0) + 1
        role_error = status is Status.ERROR and result.error_role is not None
        self.role_errors += role_error
        agent.role_errors += role_error
        agent.cost_usd = add_cost(agent.cost_usd, result.cost_usd)
        if result.started_at is not None:
            end = result.started_at + result.duration_ms / 1000
            if self.first_start is None or result.started_at < self.first_start:
                self.first_start = result.started_at
            if self.last_end is None or end > self.last_end:
                self.last_end = end
        key = (result.agent or "", self._suite(result.suite), result.id)
        tried = self.tried.get(key)
        if tried is None:
            tried = self.tried[key] = TriedCase()
        tried.count(status.value, result.stopped)
        if status is not Status.SKIPPED:
            tally = self.tallies.get(key)
            if tally is None:
                tally = self.tallies[key] = _Tally(source=result.source)
            tally.runs += not role_error  # a try a role could not judge says nothing of the agent
            tally.passes += status is Status.PASSED
            tally.broken += status in (Status.ERROR, Status.TIMEOUT)
            if result.verdict is not None:
                tally.stopped, tally.verdict = result.stopped, result.verdict

    def add_calls(self, calls: CallTally) -> None:
        """Count role calls made outside any case: the generator's before the run, the reporter's after it."""
        self.role_calls += calls.role_calls
        self.cache_hits += calls.cache_hits
        self.role_cost_usd = add_cost(self.role_cost_usd, calls.cost_usd)

    @property
    def total(self) -> int:
        """Case runs counted, whatever their status."""
        return sum(self.counts.values())

    @property
    def passed(self) -> int:
        """Case runs that passed."""
        return self.counts[Status.PASSED]

    @property
    def failed(self) -> int:
        """Case runs that failed (an assertion, a checkpoint, a golden comparison, ...)."""
        return self.counts[Status.FAILED]

    @property
    def skipped(self) -> int:
        """Case runs that were skipped (e.g. the agent awaited input and nothing could answer)."""
        return self.counts[Status.SKIPPED]

    @property
    def errors(self) -> int:
        """Case runs that ended in an error (``not_rescorable`` ones included)."""
        return self.counts[Status.ERROR]

    @property
    def timeouts(self) -> int:
        """Case runs that hit the case or turn timeout."""
        return self.counts[Status.TIMEOUT]

    @property
    def pass_rate(self) -> float | None:
        """``passed / (total - skipped - role errors)``: a role's error is not the agent's failure;
        None when nothing was judged."""
        ran = self.total - self.skipped - self.role_errors
        return self.passed / ran if ran else None

    @property
    def avg_turns(self) -> float:
        """Turns per case run; 0.0 when nothing was counted."""
        return self.total_turns / self.total if self.total else 0.0

    @property
    def span_seconds(self) -> float | None:
        """From the first case's start to the last case's end; None when no case gave its start."""
        if self.first_start is None or self.last_end is None:
            return None
        return self.last_end - self.first_start

    @property
    def repeated(self) -> bool:
        """Whether any case was judged (not skipped, no role's error) more than once."""
        return any(tally.runs > 1 for tally in self.tallies.values())

    def role_cache(self) -> dict[str, int]:
        """``{"role_calls": n, "cache_hits": n}``, as ``run.json`` and the ``summary`` event hold them."""
        return {"role_calls": self.role_calls, "cache_hits": self.cache_hits}

    def count_dict(self) -> dict[str, int]:
        """``{"total": n, "passed": n, ...}`` with the status names as keys."""
        return {"total": self.total, **{status.value: self.counts[status] for status in Status}}

    @property
    def several_agents(self) -> bool:
        """Whether results of more than one agent under test were counted."""
        return len(self.agents) > 1

    def cost(self) -> dict[str, float | None]:
        """``{"cost_usd": ..., "role_cost_usd": ...}``, as ``run.json`` holds them (null: no price)."""
        return {"cost_usd": self.cost_usd, "role_cost_usd": self.role_cost_usd}

    def agent_counts(self) -> dict[str, dict[str, float | int | None]]:
        """Per agent: its status counts, ``pass_rate`` and ``cost_usd``, as ``run.json`` holds them."""
        return {
            agent: {**entry.count_dict(), "pass_rate": entry.pass_rate, "cost_usd": entry.cost_usd}
            for agent, entry in self.agents.items()
        }

    @property
    def exit_code(self) -> int:
        """0 when nothing failed, errored or timed out; else 1."""
        return 0 if self.failed + self.errors + self.timeouts == 0 else 1

    _suites: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    """Each suite a result named, as the tallies name it."""

    def _suite(self, named: str) -> str:
        """The suite ``named`` as the tallies name it: a resume from another folder names an earlier
        part's suite file by another path (:func:`~farm.results._suites.same_suite`), and it is one suite."""
        known = self._suites.get(named)
        if known is None:
            earlier = [suite for suite in set(self._suites.values()) if same_suite(suite, named)]
            known = self._suites[named] = earlier[0] if len(earlier) == 1 else named
        return known

    @property
    def several_suites(self) -> bool:
        """Whether the cases counted came from more than one suite (whose ids may repeat)."""
        return len({suite for _, suite, _ in self.tried}) > 1

    def _agent_tallies(self, agent: str | None) -> list[tuple[tuple[str, str], _Tally]]:
        if agent is None:
            agent = next(iter(self.agents), "")
        return [((suite, case_id), tally) for (of, suite, case_id), tally in self.tallies.items() if of == agent and tally.runs]

    def stability(self, agent: str | None = None) -> dict[tuple[str, str], CaseStability]:
        """Per case (its suite and id) that ``agent`` ran at least once (not skipped): pass rate, class
        and pass@k. ``agent`` None: the first agent counted (the only one, unless the run tested several)."""
        out = {}
        for key, tally in self._agent_tallies(agent):
            rate = tally.passes / tally.runs
            out[key] = CaseStability(
                runs=tally.runs,
                passes=tally.passes,
                pass_rate=rate,
                stability_class=stability_class(rate),
                pass_at_k=1.0 if tally.passes else 0.0,
            )
        return out

    def stability_counts(self, agent: str | None = None) -> dict[StabilityClass, int]:
        """Cases of ``agent`` (as in :meth:`stability`) per :class:`~farm.results.StabilityClass`, every
        class in its order (best first), 0 for a class no case is in; cases that only ever skipped are
        not counted."""
        counts = dict.fromkeys(StabilityClass, 0)
        for _, tally in self._agent_tallies(agent):
            counts[stability_class(tally.passes / tally.runs)] += 1
        return counts
