"""One run, start to end, on either engine: ``run.json``, every result written as it arrives,
interrupts, and ``--resume``.

:func:`execute` writes ``run.json`` at the start and again at the end, starts the
engine, hands it the plan, and writes each result to the JSONL file, the Parquet
parts and the extra writers as it arrives. The results JSONL is the source of
truth: on ``--resume`` the Parquet tables are rebuilt from it (so a crash that
lost Parquet parts loses nothing), and the summary, ``run.json``'s counts and
the exit code cover the whole run, earlier parts included. An interrupt (Ctrl-C,
or SIGTERM as ``ray job stop`` sends it) at any moment, start-up included, keeps
every finished result and raises :class:`RunInterrupted` naming the folder to resume.
"""

from __future__ import annotations

import gc
import platform
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from farm._run import YOUNG_THRESHOLD
from farm._version import __version__
from farm.engines import Engine, RunPlan, StopReason, case_cost
from farm.errors import EngineLost, RunError
from farm.interrupts import Interrupts, uninterrupted
from farm.results import CaseResult, CaseRunKey
from farm.results._folder import PARTS_DIR, TABLES, table_path
from farm.secrets import Scrubber
from farm.summary import Summary
from farm.writers import JSONLWriter, MultiWriter, ParquetWriter, ResultWriter, RunInfo, read_jsonl_results, write_run_json
from farm.writers.base import CountsEarlier
from farm.writers.runinfo import RunGate, RunPart

__all__ = ["RunInterrupted", "RunOutputs", "RunStopped", "execute"]


class RunInterrupted(RunError):
    """Ctrl-C or SIGTERM stopped the run; what finished is kept."""

    def __init__(self, run_dir: Path, done: int, total: int, summary: Summary):
        super().__init__(f"interrupted after {done} of {total} case runs")
        self.run_dir = run_dir
        self.done = done
        self.total = total
        self.summary = summary


class RunStopped(RunInterrupted):
    """The engine went away (:class:`~farm.engines.EngineLost`); what finished is kept."""

    def __init__(self, run_dir: Path, done: int, total: int, summary: Summary, reason: str):
        super().__init__(run_dir, done, total, summary)
        self.reason = reason


@dataclass
class RunOutputs:
    run_dir: Path
    jsonl: Path
    reports: Sequence[ResultWriter] = ()
    """Report files (JUnit, HTML) fed with every result of the run, earlier parts included on resume."""
    streams: Sequence[ResultWriter] = ()
    """Live outputs (NDJSON events) fed with the results of this part only; one that sums the run up
    at its end (:class:`CountsEarlier`) counts the earlier parts' too."""
    resume: bool = False
    gate: Callable[[Summary, str | None, int], RunGate] | None = None
    """Decides the run's gate (:mod:`farm.gate`) from the whole run's summary once every result is in,
    why it stopped early (if it did) and the case runs not run, before the outputs close: ``run.json``
    and the NDJSON ``summary`` event carry it. An interrupted run's is decided too, a failed gate."""


_collector_lock = threading.Lock()
_collector_runs = 0
"""Runs in this process inside :func:`_collector_for_the_run` (concurrent ``farm.run`` calls)."""
_collector_restore: tuple[int, ...] | None = None
"""The thresholds to restore when the last of them ends; None when the process's own policy stands."""


@contextmanager
def _collector_for_the_run() -> Iterator[None]:
    """The garbage collector's settings while the cases run; the process's own come back after.

    - What is loaded before the cases run (libraries, models, the suite) lives for the whole
      run: it is frozen out of the collector's passes, each full pass of which, several in a
      long run, would walk all of it again.
    - Each case allocates many short-lived objects (requests, replies, results) that reference
      counting frees: a young pass every :data:`YOUNG_THRESHOLD` allocations, not 700, finds the
      same few cycles in a few passes. At 7,000 a 1000-case run still spent ~60 ms in ~15 passes
      and the older ones they feed (at 100,000: ~3 ms; a 20k-case run's peak memory +6 MiB).

    The first of concurrent runs sets them and the last restores them. A process that froze
    its own heap keeps its own policy.
    """
    global _collector_runs, _collector_restore
    with _collector_lock:
        if _collector_runs == 0 and not gc.get_freeze_count():
            _collector_restore = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(YOUNG_THRESHOLD, *_collector_restore[1:])
        _collector_runs += 1
    try:
        yield
    finally:
        with _collector_lock:
            _collector_runs -= 1
            if _collector_runs == 0 and _collector_restore is not None:
                gc.set_threshold(*_collector_restore)
                gc.unfreeze()
                _collector_restore = None


def _earlier_results(outputs: RunOutputs) -> list[CaseResult]:
    """The results of the run's earlier parts, once each, from the JSONL (the source of truth)."""
    if not (outputs.resume and outputs.jsonl.exists()):
        return []
    seen: set[CaseRunKey] = set()
    earlier: list[CaseResult] = []
    for record in read_jsonl_results(outputs.jsonl):
        result = CaseResult.model_validate(record)
        key = result.run_key()
        if key not in seen:
            seen.add(key)
            earlier.append(result)
    return earlier


def _fresh_parquet(run_dir: Path) -> ParquetWriter:
    """A Parquet writer on ``run_dir`` with no tables or parts left from before (they are rebuilt)."""
    for table in TABLES:
        whole = table_path(run_dir, table)
        whole.unlink(missing_ok=True)
        for cut_short in run_dir.glob(f".{whole.name}.*.tmp"):  # atomic_file's, of a write cut short
            cut_short.unlink(missing_ok=True)
    shutil.rmtree(run_dir / PARTS_DIR, ignore_errors=True)
    return ParquetWriter(run_dir)


def _begin_part(info: RunInfo, started: float, engine: str, results: Path) -> RunPart:
    """Add the part that starts now to ``info`` (after a resumed run's earlier ones), which keeps
    the first part's start and command as the run's own. An earlier part that never ended (its
    process was killed) ended when it last wrote a result: the results file's last change, before
    this part writes to it; so its time counts in the run's ``wall_seconds``."""
    for earlier in info.parts:
        if earlier.ended_at is None:
            last_write = results.stat().st_mtime if results.exists() else earlier.started_at
            earlier.ended_at = min(max(earlier.started_at, last_write), started)
    part = RunPart(started_at=started, command=list(info.command), engine=engine)
    info.parts.append(part)
    info.started_at, info.command = info.parts[0].started_at, list(info.parts[0].command)
    info.status, info.engine, info.ended_at = "running", engine, None
    return part


def execute(
    plan: RunPlan,
    outputs: RunOutputs,
    engine: Engine,
    *,
    info: RunInfo,
    on_result: Callable[[CaseResult], None] = lambda r: None,
    on_phase: Callable[[str], None] = lambda phase: None,
) -> Summary:
    """Run ``plan`` on ``engine`` and write its results; returns the whole run's :class:`Summary`.

    ``info`` is the run's record as far as the caller knows it (``command``: this part's; ``parts``: a resumed
    run's earlier ones); this adds this part, fills in the rest (status, engine, versions, counts, timings) and
    writes it to ``run.json``. ``on_phase`` hears what the run is waiting for (``"starting Ray…"``).
    """
    part = _Part(plan, outputs, engine, info, on_result)
    with Interrupts() as interrupts:
        try:
            part.start(on_phase, interrupts)
            part.run()
        except KeyboardInterrupt:
            interrupts.take()
            part.interrupted = True
        except EngineLost as exc:
            part.lost = str(exc)
        finally:
            part.close()
    return part.outcome()


class _Part:
    """One part of a run (the first, or a ``--resume``) as :func:`execute` runs it: the writers and
    the summary every result goes to, the timings, and how the part ended."""

    def __init__(
        self, plan: RunPlan, outputs: RunOutputs, engine: Engine, info: RunInfo, on_result: Callable[[CaseResult], None]
    ):
        self.plan, self.outputs, self.engine, self.info, self.on_result = plan, outputs, engine, info, on_result
        self.started = time.time()
        self.part = _begin_part(info, self.started, engine.name, outputs.jsonl)
        info.versions = {"farm": __version__, "python": platform.python_version()}
        info.results, info.parallel, info.runs, info.cases = str(outputs.jsonl), plan.parallel, plan.runs, len(plan.cases)
        self.timings: dict[str, float] = {}
        info.timings = self.timings
        write_run_json(outputs.run_dir, info)
        self.summary = Summary()
        self.writers, parquet = _writers(plan, outputs, self.summary)
        plan.when_idle = parquet.prepare
        self.done_before = self.summary.total
        self.interrupted = False
        self.lost: str | None = None
        self.ended = False
        """The engine ran the plan to its end (or to a stop it chose)."""

    def elapsed(self) -> float:
        return round(time.time() - self.started, 3)

    def record(self, result: CaseResult) -> None:
        with uninterrupted():  # in the results file and in the summary (and so the gate), or in neither
            self.writers.write(result)
            self.summary.add(result)
        self.on_result(result)
        self.timings["last_result_s"] = self.elapsed()
        self.timings.setdefault("first_result_s", self.timings["last_result_s"])

    def start(self, on_phase: Callable[[str], None], interrupts: Interrupts) -> None:
        """Start the engine (Ray, when it is the ray engine), saying so."""
        if self.engine.starting:
            on_phase(self.engine.starting)
        ready = self.engine.start(self.outputs.run_dir)
        interrupts.rearm()
        self.timings["engine_ready_s"] = self.elapsed()
        self.info.ray = ready.get("ray")
        self.info.versions.update(ready.get("versions", {}))
        write_run_json(self.outputs.run_dir, self.info)
        on_phase("running")
        self.timings["cases_started_s"] = self.elapsed()

    def run(self) -> None:
        """Pump the plan through the engine, then decide the gate."""
        with _collector_for_the_run():
            stop_reason = self.engine.run(self.plan, self.record)
        if stop_reason is None and self.plan.feed.failure is not None:  # the generator's error cut the suite short
            stop_reason = StopReason.GENERATOR_FAILED
        self.info.stop_reason = stop_reason.value if stop_reason is not None else None
        self.ended = True
        if self.outputs.gate is not None:
            self.info.gate = self.outputs.gate(self.summary, self.info.stop_reason, self.not_run())

    def not_run(self) -> int:
        """The case runs that were due and did not run: under adaptive repeats, only those
        :func:`~farm.gate.tries_due` counts (a decided case's remaining tries were never due)."""
        if self.plan.sequential is not None:
            from farm.gate import tries_due

            planned = self.plan.case_count * len(self.plan.agents)
            return tries_due(self.summary.tried.values(), planned, self.plan.sequential.least)
        return max(0, self.done_before + self.plan.total - self.summary.total)

    def close(self) -> None:
        """Close the writers and the engine, and write ``run.json`` as the part ended."""
        try:
            if (self.interrupted or self.lost) and self.outputs.gate is not None:  # never a green gate for part of a run
                self.info.gate = self.outputs.gate(self.summary, "interrupted" if self.interrupted else "stopped", self.not_run())
            self.writers.close()
            self.timings["closed_s"] = self.elapsed()
            self.info.status = _status(
                self.info, interrupted=self.interrupted, lost=self.lost is not None, ended=self.ended, left_out=self.not_run()
            )
            self.info.ended_at = self.part.ended_at = time.time()
            _record_counts(self.info, self.summary, self.plan)
            write_run_json(self.outputs.run_dir, self.info)
        finally:
            self.engine.close()

    def outcome(self) -> Summary:
        """The run's summary; a lost engine or an interrupt raised, with what was done."""
        if self.lost is not None:
            raise RunStopped(
                self.outputs.run_dir, self.summary.total, self.done_before + self.plan.total, self.summary, self.lost
            )
        if self.interrupted:
            raise RunInterrupted(self.outputs.run_dir, self.summary.total - self.done_before, self.plan.total, self.summary)
        return self.summary


def _writers(plan: RunPlan, outputs: RunOutputs, summary: Summary) -> tuple[MultiWriter, ParquetWriter]:
    """The run's writers, scrubbed of the config's secrets; a resumed run's earlier results are
    written to the fresh Parquet tables and the reports first, and counted in ``summary``."""
    earlier = _earlier_results(outputs)
    parquet = _fresh_parquet(outputs.run_dir)
    scrubber = Scrubber.from_config(plan.config)  # no secret of the run's config reaches an output
    replayed = MultiWriter([parquet, *outputs.reports], scrubber)
    counted = [stream.count_earlier for stream in outputs.streams if isinstance(stream, CountsEarlier)]
    for result in earlier:
        replayed.write(result)
        summary.add(result)
        for count in counted:  # not said again as live, but in the stream's whole-run summary
            count(result)
        plan.spent_before += case_cost(result)
    summary.add_calls(plan.driver_calls)  # the generator's, before the run
    return MultiWriter(
        [JSONLWriter(outputs.jsonl, append=outputs.resume), parquet, *outputs.reports, *outputs.streams], scrubber
    ), parquet


def _status(
    info: RunInfo, *, interrupted: bool, lost: bool, ended: bool, left_out: int
) -> Literal["interrupted", "stopped", "finished", "not_started", "failed"]:
    """``run.json``'s ``status`` once the part ended: how it ended, or where the engine failed. A run
    that stopped early (its ``stop_reason``: ``--max-cost``, ``--fail-fast``, its generator's error, an
    unreachable agent) with case runs ``left_out`` is ``stopped``, never ``finished``: ``--baseline last``
    and ``farm view`` take it for what it is."""
    if interrupted:
        return "interrupted"
    if lost or (info.stop_reason is not None and left_out):
        return "stopped"
    if ended:
        return "finished"
    return "not_started" if "cases_started_s" not in info.timings else "failed"  # the engine failed (the error goes on up)


def _record_counts(info: RunInfo, summary: Summary, plan: RunPlan) -> None:
    """The whole run's counts, cost, wall time and role calls into ``info``."""
    info.wall_seconds = summary.wall_seconds = sum(each.wall_seconds for each in info.parts)
    info.counts = summary.count_dict()
    info.cost = summary.cost()
    info.agent_counts = summary.agent_counts()
    info.role_cache = summary.role_cache()
    if plan.replay is not None:  # a rescore says how many it could not judge
        info.not_rescorable = summary.not_rescorable
