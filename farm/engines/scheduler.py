"""The scheduler: the one bookkeeping of a run, shared by both engines.

Pure (no Ray, no asyncio): each engine is a thin pump that starts what the
scheduler assigns and hands it back what happened.

    add(cases)            -> results of the cases that did not load (report them); the rest
                             become jobs, one per (suite, case, run index, agent) not finished before
    close()               -> no more cases will arrive (a generator is done)
    assign(now)           -> (worker, job) pairs to start: the oldest job first, on the least-loaded
                             worker that serves its agent, never beyond a worker's slots
    finished(job, result) -> the results to report: none when ``--retries`` queues the job again or
                             the job was reported already; ``--fail-fast`` and ``--max-cost`` stop here
    lost(job, now)        -> its worker died: queued again as attempt + 1 (the worker benched for a
                             while, or until rest(worker): it answers again), or given up as an error result
    crashed(job, text)    -> the farm failed while running the job: an error result
    dropped(job)          -> the job was queued on a worker when the run stopped and never began
    stop(reason)          -> dispatch nothing more; returns the jobs that will never start
    done                  -> nothing pending or running, and no more cases will arrive

Adaptive repeats (``sequential``): a case's first ``least`` tries are queued at once; each time
none of its tries is in flight the rule (:class:`farm.sequential.Sequential`) decides whether it
stops, and the case's last result says why (``stopped``, ``tries``); else its next try is queued.
A resume counts the tries it finished before (``tried_before``) and goes on from there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from farm.results import CaseResult, RetriedAttempt, Status
from farm.results._folder import CaseRunKey
from farm.results._suites import suite_of

if TYPE_CHECKING:
    from farm.loaded import LoadedCase
    from farm.sequential import Sequential, Stop

__all__ = ["CaseTries", "Job", "Scheduler", "StopReason", "Worker", "ended_before", "tried_cases"]


@dataclass
class Job:
    """One run of one case on one agent; ``attempt`` counts from 1."""

    key: CaseRunKey
    payload: LoadedCase
    attempt: int = 1
    retried: list[RetriedAttempt] = field(default_factory=list)
    """Earlier attempts that ended in an agent error or timeout (``--retries``)."""
    order: int = 0
    """Place in the run's order: a job queued again keeps its place and goes before later ones."""

    @property
    def agent(self) -> str:
        return self.key.agent

    @property
    def run_index(self) -> int:
        return self.key.run_index

    @property
    def deaths(self) -> int:
        """Attempts lost with their worker (``--retries`` attempts apart)."""
        return self.attempt - 1 - len(self.retried)

    def again(self, result: CaseResult) -> Job:
        """The next attempt, after ``result`` ended in an agent error or timeout."""
        failed = RetriedAttempt(attempt=self.attempt, status=result.status, error=result.error)
        return Job(self.key, self.payload, self.attempt + 1, [*self.retried, failed], self.order)

    def final(self, result: CaseResult) -> CaseResult:
        """``result`` as this job's reported result: its run index, attempt and retried attempts."""
        result.run_index, result.attempt, result.retried = self.key.run_index, self.attempt, list(self.retried)
        return result


@dataclass(frozen=True)
class Worker:
    """Where jobs run: the local engine's one loop, or one session actor."""

    name: str
    slots: int
    """Jobs it holds at once (those it runs and those queued on it, ready to start)."""
    agents: frozenset[str] | None = None
    """The agents whose jobs it takes; None: every agent."""

    def serves(self, agent: str) -> bool:
        return self.agents is None or agent in self.agents


class StopReason(StrEnum):
    """Why a run dispatched no more."""

    FAIL_FAST = "fail_fast"
    """``--fail-fast``: a case failed."""
    MAX_COST = "max_cost"
    """``--max-cost``: the run's spend reached the budget."""
    UNREACHABLE = "unreachable"
    """The agent's connector never answered and its connections kept failing (a case ended ``unreachable``)."""
    GENERATOR_FAILED = "generator_failed"
    """A generated suite's generator failed before it wrote every case asked (the run records it; no scheduler stops for it)."""
    REQUESTED = "requested"
    """The caller asked (an interrupt, a lost engine)."""


MakeError = Callable[["Job", str], CaseResult]


@dataclass
class CaseTries:
    """One case on one agent under adaptive repeats: its tries so far, and whether it stopped."""

    done: set[int] = field(default_factory=set)
    """Run indices reported (this part's and, on a resume, the earlier parts')."""
    in_flight: set[int] = field(default_factory=set)
    """Run indices queued or running."""
    passes: int = 0
    tries: int = 0
    """Tries the agent made (a role's error says nothing of the agent, a skipped try is no try)."""
    broken: bool = False
    """A try ended in an error or a timeout: the case fails its gate whatever follows."""
    skipped: bool = False
    stopped: Stop | None = None

    def count(self, run_index: int, status: str, role_error: bool) -> None:
        self.done.add(run_index)
        self.in_flight.discard(run_index)
        self.skipped = self.skipped or status == Status.SKIPPED.value
        self.tries += status != Status.SKIPPED.value and not role_error
        self.passes += status == Status.PASSED.value
        self.broken = self.broken or status in (Status.ERROR.value, Status.TIMEOUT.value)

    @property
    def over(self) -> bool:
        return self.stopped is not None or self.skipped


def tried_cases(tried_before: Mapping[CaseRunKey, tuple[str, bool]]) -> dict[tuple[str, str, str], CaseTries]:
    """Per (suite, case id, agent), the tries a resumed run's earlier parts finished (``tried_before``:
    per (suite, case id, run index, agent), the status and whether a role's error ended it)."""
    out: dict[tuple[str, str, str], CaseTries] = {}
    for (suite, case_id, run_index, agent), (status, role_error) in tried_before.items():
        out.setdefault((suite, case_id, agent), CaseTries()).count(run_index, status, role_error)
    return out


def ended_before(sequential: Sequential, tried_before: Mapping[CaseRunKey, tuple[str, bool]]) -> int:
    """Cases (one per agent) that a resumed run's earlier parts ended under adaptive repeats: decided,
    or skipped. The scheduler never tries them again (:meth:`Scheduler.add`)."""
    ended = 0
    for state in tried_cases(tried_before).values():
        first = set(range(sequential.least)) <= state.done
        ended += state.skipped or (first and sequential.decide(state.passes, state.tries, state.broken) is not None)
    return ended


def _no_cost(result: CaseResult) -> float:
    return 0.0


class Scheduler:
    """Which job runs where, what is queued again, and when the run stops dispatching.

    ``make_error(job, message)`` builds the error result of a job that cannot run (it did not
    load, its worker died too often, the farm failed); ``cost_of(result)`` is a finished job's
    spend in USD, counted against ``max_cost``.
    """

    def __init__(
        self,
        workers: Sequence[Worker],
        *,
        make_error: MakeError,
        agents: Sequence[str] = ("",),
        runs: int = 1,
        fail_fast: bool = False,
        retries: int = 0,
        max_attempts: int = 3,
        max_cost: float | None = None,
        cost_of: Callable[[CaseResult], float] = _no_cost,
        finished_before: Iterable[CaseRunKey] = (),
        spent: float = 0.0,
        sequential: Sequential | None = None,
        tried_before: Mapping[CaseRunKey, tuple[str, bool]] | None = None,
    ):
        if not workers or any(w.slots < 1 for w in workers):
            raise ValueError("a scheduler needs workers with at least one slot each")
        self.workers = {w.name: w for w in workers}
        self.agents = tuple(agents)
        for agent in self.agents:
            if not any(w.serves(agent) for w in workers):
                raise ValueError(f"no worker serves agent {agent!r}")
        self.make_error = make_error
        self.runs = runs
        self.fail_fast = fail_fast
        self.retries = retries
        self.max_attempts = max_attempts
        self.max_cost = max_cost
        self.cost_of = cost_of
        self.spent = spent
        """USD the run has spent: its earlier parts' and the jobs finished since."""
        self.reported: set[CaseRunKey] = {CaseRunKey(*key) for key in finished_before}
        self.pending: dict[str, deque[Job]] = {agent: deque() for agent in self.agents}
        self.running: dict[CaseRunKey, tuple[str, Job]] = {}
        self.load: dict[str, int] = dict.fromkeys(self.workers, 0)
        self.benched: dict[str, float] = {}
        """Workers that just lost a job, and until when they get no new one."""
        self.stop_reason: StopReason | None = None
        if max_cost is not None and spent >= max_cost:
            self.stop(StopReason.MAX_COST)
        self.open = True
        """Whether more cases may still arrive (:meth:`close` ends it)."""
        self.cases = 0
        """Cases added so far."""
        self._order = 0
        self.sequential = sequential
        """Set under adaptive repeats: the rule that decides when a case stops."""
        self.case_tries: dict[tuple[str, str, str], CaseTries] = tried_cases(tried_before or {})
        """Under adaptive repeats, per (suite, case id, agent): its tries."""

    # -- what comes in --------------------------------------------------------

    def add(self, cases: Iterable[LoadedCase]) -> list[CaseResult]:
        """Queue every run of ``cases`` on every agent that is not finished already; returns the
        results to report at once: those of cases that did not load."""
        out: list[CaseResult] = []
        batch = list(cases)
        self.cases += len(batch)
        if self.sequential is not None:
            return self._add_adaptive(batch)
        suites = [suite_of(loaded.source) for loaded in batch]
        for run_index in range(self.runs):
            for loaded, suite in zip(batch, suites, strict=True):
                for agent in self.agents:
                    key = CaseRunKey(suite, loaded.id, run_index, agent)
                    if key in self.reported:
                        continue
                    self._order += 1
                    job = Job(key, loaded, order=self._order)
                    if not loaded.ok:
                        out.extend(self._report(job, self.make_error(job, loaded.error or "the case did not load")))
                    elif not self.stopped:
                        self.pending[agent].append(job)
        return out

    def _add_adaptive(self, batch: list[LoadedCase]) -> list[CaseResult]:
        """:meth:`add` under adaptive repeats: each case's tries as far as they are due (one error
        result for a case that did not load: it fails its gate, and more tries would say the same)."""
        out: list[CaseResult] = []
        for loaded in batch:
            suite = suite_of(loaded.source)
            for agent in self.agents:
                state = self.case_tries.setdefault((suite, loaded.id, agent), CaseTries())
                if not loaded.ok:
                    if not state.done:
                        job = self._job(CaseRunKey(suite, loaded.id, 0, agent), loaded)
                        out.extend(self._report(job, self.make_error(job, loaded.error or "the case did not load")))
                    continue
                if not state.over and not state.in_flight and set(range(self.sequential.least)) <= state.done:  # type: ignore[union-attr]
                    self._decide(state)  # a resume: a case the earlier part decided stays so
                self._top_up(state, loaded, suite, agent)
        return out

    def _job(self, key: CaseRunKey, loaded: LoadedCase) -> Job:
        self._order += 1
        return Job(key, loaded, order=self._order)

    def _top_up(self, state: CaseTries, loaded: LoadedCase, suite: str, agent: str) -> None:
        """Queue the case's tries that are due: those below ``least`` not yet run, else (none in
        flight, the case not stopped) the next one."""
        if self.stopped or state.over or self.sequential is None:
            return
        missing = [i for i in range(self.runs) if i not in state.done and i not in state.in_flight]
        due = [i for i in missing if i < self.sequential.least] or (missing[:1] if not state.in_flight else [])
        for run_index in due:
            state.in_flight.add(run_index)
            self.pending[agent].append(self._job(CaseRunKey(suite, loaded.id, run_index, agent), loaded))

    def _decide(self, state: CaseTries) -> Stop | None:
        assert self.sequential is not None
        state.stopped = self.sequential.decide(state.passes, state.tries, state.broken) if not state.skipped else None
        return state.stopped

    def _tried(self, job: Job, result: CaseResult) -> None:
        """Under adaptive repeats, count ``result`` and, none of the case's tries in flight, decide:
        the result says why the case stopped, else its next try is queued."""
        state = self.case_tries.setdefault((job.key.suite, job.key.case_id, job.agent), CaseTries())
        state.count(job.run_index, str(result.status), result.status is Status.ERROR and result.error_role is not None)
        if state.in_flight or state.over:
            return
        stopped = self._decide(state)
        if stopped is not None:
            assert self.sequential is not None
            result.stopped, result.tries = stopped, state.tries
            result.verdict = self.sequential.verdict(stopped, state.passes, state.tries)
        else:
            self._top_up(state, job.payload, job.key.suite, job.agent)

    def close(self) -> None:
        """No more cases will arrive."""
        self.open = False

    # -- what goes out --------------------------------------------------------

    def assign(self, now: float = 0.0) -> list[tuple[str, Job]]:
        """Jobs to start now, oldest first, each on the least-loaded worker that serves its agent
        and is not benched at ``now`` (when every such worker is benched, the job waits: sent to a
        worker that is still restarting, it would only spend an attempt)."""
        out: list[tuple[str, Job]] = []
        if self.stopped:
            return out
        while True:
            best: tuple[int, str, str] | None = None  # (order, agent, worker)
            for agent, queue in self.pending.items():
                if queue and (best is None or queue[0].order < best[0]):
                    worker = self._free_worker(agent, now)
                    if worker is not None:
                        best = (queue[0].order, agent, worker)
            if best is None:
                return out
            _, agent, worker = best
            job = self.pending[agent].popleft()
            self.running[job.key] = (worker, job)
            self.load[worker] += 1
            out.append((worker, job))

    def _free_worker(self, agent: str, now: float) -> str | None:
        rested = (w for w in self.workers.values() if w.serves(agent) and self.benched.get(w.name, 0.0) <= now)
        choice = min(
            (w for w in rested if self.load[w.name] < w.slots), key=lambda w: (self.load[w.name] / w.slots, w.name), default=None
        )
        return choice.name if choice else None

    def bench(self, worker: str, until: float) -> None:
        """``worker`` gets no new job before ``until`` (it may be restarting, or its node gone)."""
        self.benched[worker] = until

    def rest(self, worker: str) -> None:
        """``worker``, benched after a death, answers again (it restarted): it takes jobs at once."""
        self.benched.pop(worker, None)

    # -- what happened --------------------------------------------------------

    def finished(self, job: Job, result: CaseResult) -> list[CaseResult]:
        """``job`` ended with ``result``: what to report (once per job), or nothing when the
        agent failed and ``--retries`` runs it again."""
        self._release(job)
        self.spent += self.cost_of(result)
        if self.max_cost is not None and self.spent >= self.max_cost:
            self.stop(StopReason.MAX_COST)
        if result.agent_failed and len(job.retried) < self.retries and not self.stopped and job.key not in self.reported:
            self.pending[job.agent].appendleft(job.again(result))
            return []
        return self._report(job, job.final(result))

    def lost(self, job: Job, now: float = 0.0, bench_for: float = 0.0) -> list[CaseResult]:
        """The worker running ``job`` died: the job runs again (attempt + 1) unless it has died
        ``max_attempts`` times, when its error is reported. The worker gets no new job for ``bench_for``
        seconds (it may still be restarting, or its node going away)."""
        worker = self._release(job)
        if worker is not None and bench_for > 0:
            self.benched[worker] = now + bench_for
        if job.key in self.reported:
            return []
        if job.deaths + 1 >= self.max_attempts:
            if self.stopped:
                return []  # left for --resume
            message = f"the worker running this case died {job.attempt} time(s); gave up after {job.attempt} attempts"
            return self._report(job, job.final(self.make_error(job, message)))
        if not self.stopped:
            self.pending[job.agent].appendleft(Job(job.key, job.payload, job.attempt + 1, list(job.retried), job.order))
        return []

    def crashed(self, job: Job, error: str) -> list[CaseResult]:
        """The farm itself failed while running ``job`` (a bug, not the case's fault)."""
        self._release(job)
        return self._report(job, job.final(self.make_error(job, f"internal error while running the case: {error}")))

    def dropped(self, job: Job) -> None:
        """``job`` was queued on its worker when the run stopped, and never began."""
        self._release(job)

    def returned(self, job: Job) -> None:
        """``job`` never began: its worker was not ready for it (an actor that restarted while idle).
        It is queued again first, as it was: no attempt is spent."""
        self._release(job)
        if not self.stopped and job.key not in self.reported:
            self.pending[job.agent].appendleft(job)

    def stop(self, reason: StopReason = StopReason.REQUESTED) -> list[Job]:
        """Dispatch nothing more (the first reason is kept); returns the jobs that will never start."""
        if self.stop_reason is None:
            self.stop_reason = reason
        dropped = [job for queue in self.pending.values() for job in queue]
        for queue in self.pending.values():
            queue.clear()
        return dropped

    # -- state ----------------------------------------------------------------

    @property
    def stopped(self) -> bool:
        return self.stop_reason is not None

    @property
    def queued(self) -> int:
        return sum(len(q) for q in self.pending.values())

    @property
    def done(self) -> bool:
        """Nothing runs and nothing more will: every job is finished, or the run stopped."""
        return not self.running and (self.stopped or (not self.open and not self.queued))

    def _release(self, job: Job) -> str | None:
        entry = self.running.pop(job.key, None)
        if entry is None:
            return None
        self.load[entry[0]] -= 1
        return entry[0]

    def _report(self, job: Job, result: CaseResult) -> list[CaseResult]:
        if job.key in self.reported:
            return []
        self.reported.add(job.key)
        if self.sequential is not None:
            self._tried(job, result)
        if result.ended_by == "unreachable":
            self.stop(StopReason.UNREACHABLE)
        if self.fail_fast and not result.status.ok:
            self.stop(StopReason.FAIL_FAST)
        return [result]
