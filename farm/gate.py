"""The CI gate of a run (docs/reference/outputs.md): whether ``farm test`` exits 0, and why.

Agents are not deterministic, so a case that ran ``--runs N`` times passes its gate when at
least ``min_pass_rate`` of its tries passed (skipped tries not counted); an error or a timeout
always fails it. With a baseline run, each agent of this run is compared with it on the cases
both ran (the paired difference of :mod:`farm.reports.stats`), and the run fails when an agent
is significantly worse, the p-values Holm-adjusted across agents. A case is paired only with the
same case, by its suite and id as the reader of each run works them out (:data:`farm.results.CASE_KEY`):
a baseline with no case in common is not compared, and one with some says how many were left out. :func:`judge` decides from
per-case tallies alone; :func:`judge_run` reads them from the run folders.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from farm.errors import UsageError
from farm.results import Status
from farm.results._suites import suite_of
from farm.sequential import DEFAULT_MIN_PASS_RATE, pass_rate_problem
from farm.summary import TriedCase
from farm.wording import plural
from farm.writers.runinfo import GateComparison, RunGate, RunInfo

if TYPE_CHECKING:
    import pyarrow as pa

    from farm.reports.stats import CaseResult
    from farm.results import RunRecord
    from farm.sequential import Sequential
    from farm.summary import Summary

__all__ = [
    "DEFAULT_MIN_PASS_RATE",
    "adaptive_said",
    "STOPPED",
    "Baseline",
    "CaseKey",
    "CaseTally",
    "Tallies",
    "check_min_pass_rate",
    "ended_early",
    "gate_exit_code",
    "find_baseline",
    "judge",
    "judge_run",
    "read_tallies",
    "several_suites",
    "case_label",
    "cases_of",
    "tallies_of",
    "tried_cases",
    "tries_due",
    "summary_tallies",
    "verdict_sentence",
]

_SLACK = 1e-9
"""``0.7 * 10`` is ``7.000000000000001`` in floating point: 7 passes of 10 meet a 0.7 gate."""


@dataclass(slots=True)
class CaseTally:
    """One case of one agent in a run: its tries that were not skipped, and how they ended."""

    passes: int = 0
    tries: int = 0
    broken: int = 0
    """Tries that ended in an error or a timeout."""
    source: str | None = None
    """Where the case came from (its record's ``source``): its run's reader makes it the case's suite,
    which with its id pairs it with the same case of another run."""
    stopped: str | None = None
    """Under adaptive repeats: why the case stopped (:data:`farm.sequential.Stop`), from its last try."""
    verdict: str | None = None
    """Under adaptive repeats: ``above`` or ``below`` the gate, as the sequential rule decided it."""

    def passes_gate(self, min_pass_rate: float) -> bool:
        """At least ``min_pass_rate`` of the tries passed, and none errored or timed out; under
        adaptive repeats, the verdict the sequential rule gave (:mod:`farm.sequential`)."""
        if self.verdict is not None:
            return self.broken == 0 and self.verdict == "above"
        return self.broken == 0 and self.passes >= min_pass_rate * self.tries - _SLACK

    def result(self, rule: Sequential | None) -> CaseResult:
        """The case as a paired comparison counts it (:func:`farm.reports.stats.paired_cases`), its run's
        stopping rule ``rule`` (None: ``--runs N``) giving its unbiased estimate."""
        from farm.reports.stats import CaseResult

        return CaseResult.of(self.passes, self.tries, self.stopped, rule)

    @property
    def flaky(self) -> bool:
        """Some tries passed and some did not."""
        return 0 < self.passes < self.tries


CaseKey = tuple[str, str]
"""A case within its run: its suite (:func:`~farm.results._suites.suite_of` of its ``source``) and its
id. An id may repeat across a run's suites: two suites' ``greet`` are two cases, each with its gate."""

Tallies = dict[str, dict[CaseKey, CaseTally]]
"""Per agent (``""`` for results that name none), per case (:data:`CaseKey`): its :class:`CaseTally`."""

Row = tuple[str | None, ...]
"""One case run: ``(agent, case_id, status, error_role[, source[, stopped, verdict[, suite]]])``; without
its suite, its source names it (:func:`~farm.results._suites.suite_of`; none: ``""``)."""


def tally(rows: Iterable[Row]) -> Tallies:
    """The tallies of :data:`Row` rows, one per case run, per agent and case (:data:`CaseKey`); cases
    that only ever skipped are left out. A role's error fails the case's gate but is not one of the
    agent's tries: it says nothing of the agent."""
    out: Tallies = {}
    for agent, case_id, status, role, *more in rows:
        if status == Status.SKIPPED.value or case_id is None:
            continue
        source, stopped, verdict, suite = (*more, None, None, None, None)[:4]
        key = (suite_of(source) if suite is None else suite, case_id)
        case = out.setdefault(agent or "", {}).setdefault(key, CaseTally(source=source))
        if verdict is not None:
            case.stopped, case.verdict = stopped, verdict
        case.tries += not (status == Status.ERROR.value and role)
        case.passes += status == Status.PASSED.value
        case.broken += status in (Status.ERROR.value, Status.TIMEOUT.value)
    return out


def summary_tallies(summary: Summary) -> Tallies:
    """The tallies a run's :class:`~farm.summary.Summary` kept while its results came (earlier parts included)."""
    out: Tallies = {}
    for (agent, suite, case_id), counted in summary.tallies.items():
        out.setdefault(agent, {})[suite, case_id] = CaseTally(
            passes=counted.passes,
            tries=counted.runs,
            broken=counted.broken,
            source=counted.source,
            stopped=counted.stopped,
            verdict=counted.verdict,
        )
    return out


def read_cases(run_dir: Path) -> pa.Table:
    """The ``agent``, ``case_id``, ``status``, ``error_role``, ``source``, ``stopped``, ``verdict`` and ``suite``
    of every case run in ``run_dir`` (:func:`farm.results.read_run`; the suite as its reader gives it);
    a run whose cases cannot all be read is a :class:`~farm.errors.UsageError`: no gate on part of a run."""
    from farm.results import read_run

    return cases_of(read_run(run_dir))


def cases_of(run: RunRecord) -> pa.Table:
    """:func:`read_cases` of a run already read."""
    table = run.cases(columns=["agent", "case_id", "status", "error_role", "source", "stopped", "verdict", "suite"])
    if run.problems:
        raise UsageError(f"Cannot judge the run {run.path}, as {run.problems[0]}")
    return table


def read_tallies(run_dir: Path) -> Tallies:
    """The tallies of the run in ``run_dir`` (its cases table)."""
    return tallies_of(read_cases(run_dir))


def tallies_of(cases: pa.Table) -> Tallies:
    """The tallies of a cases table of :func:`read_cases`'s columns."""
    columns = cases.to_pydict()
    nothing = [None] * cases.num_rows  # a run written before adaptive repeats
    adaptive = (columns.get("stopped", nothing), columns.get("verdict", nothing), columns.get("suite", nothing))
    return tally(
        zip(
            columns["agent"],
            columns["case_id"],
            columns["status"],
            columns["error_role"],
            columns["source"],
            *adaptive,
            strict=True,
        )
    )


def ended_early(status: str, info: RunInfo, cases: pa.Table) -> tuple[str | None, int]:
    """Why a run (its ``status`` and ``run.json``) ended before every case ran, and the case runs it
    did not run of those that were due, its ``cases`` (:func:`read_cases`'s columns) having run; why
    is None for a run that ran them all. Under ``--runs N`` every case's N tries were due; under
    adaptive repeats only those :func:`tries_due` counts (a decided case owes none)."""
    agents = max(1, len(info.agents))
    if info.options.adaptive_runs:
        from farm.sequential import parse_runs

        least = parse_runs(info.options.adaptive_runs).least
        not_run = tries_due(tried_cases(cases).values(), info.cases * agents, least)
    else:
        not_run = max(0, info.cases * max(1, info.runs) * agents - cases.num_rows)
    why = info.stop_reason if info.stop_reason and not_run else None
    return (status if status != "finished" else why), not_run


def tried_cases(cases: pa.Table) -> dict[tuple[str, str, str], TriedCase]:
    """Per agent, suite and case id of a cases table (``agent``, ``case_id``, ``status``, ``stopped``, and
    ``suite`` or else ``source``): how far it got."""
    columns = cases.to_pydict()
    suites = columns["suite"] if "suite" in columns else [suite_of(source) for source in columns["source"]]
    out: dict[tuple[str, str, str], TriedCase] = {}
    for agent, suite, case_id, status, stopped in zip(
        columns["agent"], suites, columns["case_id"], columns["status"], columns["stopped"], strict=True
    ):
        out.setdefault((agent or "", suite, case_id), TriedCase()).count(status, stopped)
    return out


def several_suites(tallies: Tallies) -> bool:
    """Whether the cases of ``tallies`` come from more than one suite: their names then say the suite."""
    return len({suite for cases in tallies.values() for suite, _ in cases}) > 1


def case_label(key: CaseKey, several: bool) -> str:
    """A case as the gate's lines and tables name it: its id, with its suite when the run has
    ``several`` (an id may repeat across them)."""
    suite, case_id = key
    return f"{case_id} ({suite or '(no suite)'})" if several else case_id


def tries_due(tried: Iterable[TriedCase], planned: int, least: int) -> int:
    """Under adaptive repeats (at least ``least`` tries a case), the tries that were due and never ran,
    of ``planned`` cases (cases x agents), ``tried`` those that ran at all: a case never started owes
    its first ``least``, one started owes those of them it did not run, and one past them that no
    rule stopped (nor a skip) owes its next try. A decided case owes nothing: the tries it did not
    make were never due."""
    due = started = 0
    for case in tried:
        started += 1
        if case.stopped:
            continue
        due += least - case.results if case.results < least else int(not case.skipped)
    return due + max(0, planned - started) * least


def adaptive_said(tallies: Tallies) -> str | None:
    """Under adaptive repeats, one sentence: the tries made, and how the cases stopped; else None."""
    stops = Counter(case.stopped for cases in tallies.values() for case in cases.values() if case.stopped)
    if not stops:
        return None
    tries = sum(case.tries for cases in tallies.values() for case in cases.values())
    said = f"{stops['decided_above']} decided above the gate, {stops['decided_below']} below, {stops['max_tries']} undecided at the most tries"
    return f"Adaptive repeats: {tries} {'try' if tries == 1 else 'tries'} in all; {said}."


def check_min_pass_rate(value: float | str, where: str = "--min-pass-rate") -> float:
    """``value`` (a number, or text of one) when it is a share of tries (0 < R <= 1); else a usage
    error naming ``where``."""
    from farm.numbers import as_number

    rate, problem = as_number(value), pass_rate_problem(value)
    if problem or rate is None:
        raise UsageError(f"{where}: {problem}")
    return rate


@dataclass(frozen=True)
class Baseline:
    """An earlier run to compare with: its folder, id and tallies, and the folder of the run compared
    with it. Each folder's ``run.json`` says where its run's suite files are, so that each case is
    paired by its suite as that run's reader works it out."""

    path: Path
    run_id: str
    tallies: Tallies
    compared_with: Path
    """The folder of the run compared with the baseline (a run still going has written its ``run.json``)."""


def find_baseline(value: str, results_dir: Path, input: str | Sequence[str], exclude: Path | None = None) -> Path | None:
    """The run folder ``--baseline`` names: ``value`` itself, which must be a finished run's folder,
    or with ``last`` the latest finished run of the same ``input`` under ``results_dir`` (other than
    ``exclude``, a resumed run's own folder), None when there is none yet."""
    from farm.results import list_runs, read_run

    if value != "last":
        path = Path(value)
        try:
            run = read_run(path)
        except UsageError:
            run = None
        if run is None or not run.has_info or not (run.finished_tables or run.jsonl is not None):
            raise UsageError(
                f"--baseline: {value} is not a run folder (no run.json and results in it); give a run folder or 'last'"
            )
        return path
    wanted = _input_key(input, str(Path.cwd()))
    latest: tuple[float, Path] | None = None
    for run in list_runs(results_dir):
        if exclude is not None and run.path.resolve() == exclude.resolve():
            continue
        info = run.info
        if run.has_info and run.status == "finished" and info.input and _input_key(info.inputs or info.input, info.cwd) == wanted:
            if latest is None or (info.started_at or 0.0) >= latest[0]:
                latest = (info.started_at or 0.0, run.path)
    return latest[1] if latest else None


def _input_key(input: str | Sequence[str], cwd: str | None) -> tuple[str, ...]:
    """Inputs as runs started from different folders name them: a suite path by its absolute path."""
    from farm.inputkind import input_kind

    values = [input] if isinstance(input, str) else list(input)
    return tuple(str((Path(cwd or ".") / value).resolve()) if input_kind(value) == "file" else value for value in values)


def read_baseline(path: Path, compared_with: Path) -> Baseline:
    """The baseline run in ``path``, for the run in ``compared_with``; a run the farm cannot read
    whole is a usage error."""
    from farm.results import read_run

    try:
        tallies = read_tallies(path)
    except UsageError as exc:
        raise UsageError(f"--baseline {path}: {exc}") from None
    return Baseline(path, read_run(path).run_id, tallies, compared_with)


def judge_run(run_dir: Path, min_pass_rate: float, baseline: Path | None, asked: str | None = None) -> RunGate:
    """The gate of the run in ``run_dir`` (:func:`judge`), with the run in ``baseline`` if any;
    ``asked``: what ``--baseline`` said (``last`` that found no run is said in the sentence)."""
    return judge(read_tallies(run_dir), min_pass_rate, read_baseline(baseline, run_dir) if baseline else None, asked)


def judge(
    tallies: Tallies,
    min_pass_rate: float,
    baseline: Baseline | None = None,
    asked: str | None = None,
    stopped: str | None = None,
    not_run: int = 0,
) -> RunGate:
    """The gate of a run whose cases are ``tallies``: its verdict, and the sentence that says why;
    ``stopped``: why the run ended before ``not_run`` of its case runs ran (:data:`STOPPED`), which fails it."""
    cases = [case for per_case in tallies.values() for case in per_case.values()]
    below = sum(not case.passes_gate(min_pass_rate) for case in cases)
    flaky = sum(case.flaky and case.passes_gate(min_pass_rate) for case in cases)
    comparisons = compare(tallies, baseline) if baseline is not None else []
    worse = [c for c in comparisons if c.worse]
    verdict: Literal["passed", "failed"] = "failed" if below or worse or stopped else "passed"
    gate = RunGate(
        min_pass_rate=min_pass_rate,
        baseline=str(baseline.path) if baseline else None,
        baseline_run_id=baseline.run_id if baseline else None,
        verdict=verdict,
        sentence="",
        cases=len(cases),
        below=below,
        flaky=flaky,
        comparisons=comparisons,
        stopped=stopped,
        not_run=not_run,
    )
    parts = [verdict_sentence(gate)]
    for comparison in comparisons:  # what it is compared on, when a case only one run ran is left out; then its figures
        if baseline is not None and comparison.left_out:
            parts.append(_left_out(comparison, baseline, several=len(tallies) > 1))
        parts.append(comparison.sentence)
    if asked == "last" and baseline is None:
        parts.append("No baseline: no earlier finished run of this input in the results folder.")
    elif baseline is not None:
        parts += _not_compared(tallies, baseline, comparisons)
    gate.sentence = " ".join(parts)
    return gate


STOPPED = {
    "interrupted": "the run was interrupted",
    "max_cost": "the run stopped early, its --max-cost budget spent",
    "fail_fast": "the run stopped early at its first failure (--fail-fast)",
    "unreachable": "the run stopped early, an agent's endpoint unreachable",
    "generator_failed": "the run stopped early, its generator failed",
    "stopped": "the run stopped early",
    "failed": "the run failed",
    "running": "the run did not finish",
}
"""Why a run ended before every case ran (its ``stop_reason``, else its ``status``), as the gate says it."""


def gate_exit_code(gate: RunGate) -> int:
    """What ``farm test`` exits with under ``gate``: 0 passed, 1 failed, 130 when an interrupt (Ctrl-C,
    SIGTERM) stopped the run. The ``--json`` summary's ``exit_code`` is this, as the process's is."""
    if gate.stopped == "interrupted":
        return 130
    return 0 if gate.verdict == "passed" else 1


def verdict_sentence(gate: RunGate) -> str:
    """The verdict and its cases in one sentence: :attr:`RunGate.sentence` without the comparisons.
    It leads with why the gate failed: the run stopped early, an agent is worse than the baseline."""
    why = []
    if gate.stopped:
        why.append(f"{STOPPED.get(gate.stopped, 'the run stopped early')}: {plural(gate.not_run, 'case run')} not run")
    worse = [c.agent or "this run" for c in gate.comparisons if c.worse]
    if worse:
        why.append(f"{', '.join(worse)} significantly worse than baseline run {gate.baseline_run_id}")
    return (
        f"{gate.verdict}: "
        + "".join(f"{each}; " for each in why)
        + _cases_said(gate.cases, gate.below, gate.flaky, gate.min_pass_rate)
    )


def _not_compared(tallies: Tallies, baseline: Baseline, comparisons: list[GateComparison]) -> list[str]:
    """The sentences naming each agent of the run that is not compared: the baseline run did not test
    it (none compared: one sentence), or they have no case in common."""
    from farm.reports.stats import paired_sentence

    tested = ", ".join(sorted(baseline.tallies)) or "no case"
    paired = dict(_agents_paired(tallies, baseline))
    if not paired:
        return [f"No comparison: baseline run {baseline.run_id} tested {tested}, none of this run's agents."]
    compared = {c.agent for c in comparisons}
    said = []
    for agent in tallies:
        if agent in compared:
            continue
        if agent not in paired:
            said.append(f"No baseline for {agent}: baseline run {baseline.run_id} tested {tested}.")
        else:
            said.append(paired_sentence(*_names(agent, paired[agent], baseline, len(tallies) > 1), 0, 0))
    return said


def _left_out(comparison: GateComparison, baseline: Baseline, several: bool) -> str:
    """How many cases the comparison paired, and left out as only one of the runs ran them."""
    from farm.reports.stats import paired_sentence

    names = _names(comparison.agent, comparison.baseline_agent, baseline, several)
    return paired_sentence(*names, comparison.cases, comparison.left_out)


def _names(agent: str, other: str, baseline: Baseline, several: bool) -> tuple[str, str]:
    """The two sides of a comparison as its sentences name them."""
    if several:
        return f"{other} in baseline run {baseline.run_id}", agent
    return f"Baseline run {baseline.run_id}", "this run"


def _cases_said(cases: int, below: int, flaky: int, min_pass_rate: float) -> str:
    gate = "every try must pass" if min_pass_rate >= 1.0 else f"the {min_pass_rate:g} gate"
    if not below:
        passed = "the one case passed its gate" if cases == 1 else f"all {cases} cases passed their gate"
        return f"{passed} ({gate})" + (f", {flaky} of them flaky: failing some tries." if flaky else ".")
    below_said = "the one case is below its gate" if cases == 1 else f"{below} of {cases} cases below their gate"
    said = f"{below_said} ({gate}; an error or a timeout fails it)"
    return said + (f"; {flaky} flaky {'case' if flaky == 1 else 'cases'} passed it, failing some tries." if flaky else ".")


def compare(tallies: Tallies, baseline: Baseline) -> list[GateComparison]:
    """Each agent of the run against the same agent in ``baseline`` (or, when both runs tested one
    agent, the baseline's under another name), on the cases both judged, each paired only with the
    same case (its suite and id); Holm-adjusted across the agents compared. An agent with no case in
    common with its baseline is not compared (:func:`_not_compared` says so)."""
    from farm.reports.stats import SIGNIFICANCE, difference_sentence, holm, paired_cases

    suites_now, suites_before = _suites(baseline.compared_with), _suites(baseline.path)
    rule_before, rule_now = _rule(baseline.path), _rule(baseline.compared_with)
    found = []
    for agent, other in _agents_paired(tallies, baseline):
        now, before = _by_case(tallies[agent], suites_now), _by_case(baseline.tallies[other], suites_before)
        both = now.keys() & before.keys()
        if not both:
            continue
        judged = sorted(key for key in both if now[key].tries and before[key].tries)  # by the agent, not only a role
        pairs = [(before[key].result(rule_before), now[key].result(rule_now)) for key in judged]
        found.append((agent, other, paired_cases(pairs), len(now) + len(before) - 2 * len(both)))
    adjusted = holm([d.p_value for _, _, d, _ in found])
    several = len(found) > 1
    return [
        GateComparison(
            agent=agent,
            baseline_agent=other,
            cases=d.cases,
            left_out=left_out,
            difference=d.difference,
            difference_interval=list(d.interval),
            p_value=d.p_value,
            p_adjusted=p,
            test=d.test,
            detectable_difference=d.detectable_difference,
            worse=p < SIGNIFICANCE and d.difference < 0,
            sentence=difference_sentence(
                f"{other or 'the agent'} in baseline run {baseline.run_id}",
                agent or "this run",
                d,
                p if several else None,
                several,
            ),
        )
        for (agent, other, d, left_out), p in zip(found, adjusted, strict=True)
    ]


def _rule(run_dir: Path) -> Sequential | None:
    """The stopping rule of the run in ``run_dir`` when it ran adaptive repeats (its ``run.json``)."""
    from farm.sequential import Sequential
    from farm.writers import read_run_json

    try:
        return Sequential.of_run(read_run_json(run_dir).options)
    except (OSError, UsageError):
        return None


def _agents_paired(tallies: Tallies, baseline: Baseline) -> list[tuple[str, str]]:
    """Each agent of the run with the baseline's agent it is compared with: the same one, or, when
    each run tested one agent, the baseline's under whatever name."""
    renamed = len(tallies) == 1 and len(baseline.tallies) == 1
    pairs = []
    for agent in tallies:
        other = agent if agent in baseline.tallies else next(iter(baseline.tallies)) if renamed else None
        if other is not None:
            pairs.append((agent, other))
    return pairs


def _suites(run_dir: Path) -> Callable[[str | None], str]:
    """The suite of a case of the run in ``run_dir`` from its ``source``, as the run's reader works it out."""
    from farm.results import RunRecord

    return RunRecord(run_dir).suite_of


def _by_case(cases: dict[CaseKey, CaseTally], suite_of: Callable[[str | None], str]) -> dict[tuple[str, str], CaseTally]:
    """One run's cases by suite and id as its reader works the suite out (:data:`farm.results.CASE_KEY`):
    what pairs a case across runs (``s.jsonl`` and its absolute path are one suite)."""
    return {(suite_of(case.source), case_id): case for (_, case_id), case in cases.items()}
