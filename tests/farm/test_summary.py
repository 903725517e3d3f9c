"""The run's tally (farm/summary.py): what it adds up beyond the console's Summary block."""

from __future__ import annotations

from farm.results import CaseResult, StabilityClass, Status, TurnResult, Usage
from farm.roles.cache import CallTally
from farm.summary import Summary


def test_pass_rate_leaves_skipped_runs_out_and_is_none_when_nothing_ran() -> None:
    summary = Summary()
    assert summary.pass_rate is None
    summary.add(CaseResult(id="s", status=Status.SKIPPED))
    assert summary.pass_rate is None
    for status in (Status.PASSED, Status.PASSED, Status.FAILED, Status.TIMEOUT):
        summary.add(CaseResult(id="c", status=status))
    assert summary.pass_rate == 0.5


def test_a_roles_error_is_left_out_of_the_agents_figures_but_fails_the_run() -> None:
    summary = Summary()
    summary.add(CaseResult(id="c", status=Status.PASSED))
    summary.add(CaseResult(id="c", status=Status.ERROR, error="simulator error: no JSON", error_role="simulator"))
    summary.add(CaseResult(id="d", status=Status.ERROR, error="the agent failed"))
    summary.add(CaseResult(id="e", status=Status.ERROR, error="judge error", error_role="validator"))
    assert (summary.errors, summary.role_errors) == (3, 2)
    assert summary.pass_rate == 0.5  # c passed, d (the agent's own error) did not; the role errors are not counted
    assert summary.agents[""].pass_rate == 0.5 and summary.exit_code == 1
    stability = summary.stability()
    assert (stability["", "c"].runs, stability["", "c"].passes) == (1, 1) and ("", "e") not in stability  # e was never judged


def test_span_runs_from_the_first_start_to_the_last_end() -> None:
    summary = Summary()
    summary.add(CaseResult(id="never-started", status=Status.ERROR, duration_ms=5.0))
    assert (summary.first_start, summary.last_end, summary.span_seconds) == (None, None, None)
    summary.add(CaseResult(id="b", status=Status.PASSED, started_at=1_000.0, duration_ms=4_000.0))
    summary.add(CaseResult(id="a", status=Status.PASSED, started_at=998.0, duration_ms=1_000.0))
    assert (summary.first_start, summary.last_end, summary.span_seconds) == (998.0, 1_004.0, 6.0)
    assert summary.duration_ms == 5_005.0


def test_turns_are_counted_from_the_turns_when_total_turns_is_not_set() -> None:
    summary = Summary()
    summary.add(CaseResult(id="a", status=Status.PASSED, total_turns=3))
    summary.add(CaseResult(id="b", status=Status.PASSED, turns=[TurnResult(turn=1), TurnResult(turn=2)]))
    summary.add(CaseResult(id="c", status=Status.PASSED, usage=Usage(prompt_tokens=7, completion_tokens=3, total_tokens=10)))
    assert (summary.total_turns, summary.avg_turns) == (5, 5 / 3)
    assert (summary.prompt_tokens, summary.completion_tokens, summary.total_tokens) == (7, 3, 10)


def test_not_rescorable_counts_the_rescores_results_it_could_not_judge() -> None:
    summary = Summary()
    summary.add(CaseResult(id="live", status=Status.ERROR))  # a live run says nothing about rescoring
    summary.add(CaseResult(id="judged", status=Status.FAILED, rescorable=True))
    summary.add(CaseResult(id="changed", status=Status.ERROR, rescorable=False))
    assert (summary.not_rescorable, summary.errors) == (1, 2)


def test_role_calls_outside_the_cases_are_added_to_the_cases_own() -> None:
    summary = Summary()
    summary.add(CaseResult(id="a", status=Status.PASSED, role_calls=3, cache_hits=1))
    summary.add_calls(CallTally(role_calls=2, cache_hits=2))
    assert summary.role_cache() == {"role_calls": 5, "cache_hits": 3}


def test_stability_counts_list_every_class_best_first_and_leave_skip_only_cases_out() -> None:
    summary = Summary()
    for case_id, statuses in {
        "always": "PP",
        "never": "FE",
        "half": "PF",
        "skips": "SS",
    }.items():
        for letter in statuses:
            status = {"P": Status.PASSED, "F": Status.FAILED, "E": Status.ERROR, "S": Status.SKIPPED}[letter]
            summary.add(CaseResult(id=case_id, status=status))
    counts = summary.stability_counts()
    assert list(counts) == list(StabilityClass)
    assert [str(name) for name in counts] == ["stable", "mostly_stable", "unstable", "highly_unstable", "consistently_failing"]
    assert counts == {
        StabilityClass.STABLE: 1,
        StabilityClass.MOSTLY_STABLE: 0,
        StabilityClass.UNSTABLE: 1,
        StabilityClass.HIGHLY_UNSTABLE: 0,
        StabilityClass.CONSISTENTLY_FAILING: 1,
    }


def test_two_suites_case_of_one_id_are_tallied_apart_and_a_resumes_other_path_is_one_suite() -> None:
    summary = Summary()
    for source, status in (("a.jsonl:1", Status.PASSED), ("b.jsonl:1", Status.FAILED), ("a.jsonl:1", Status.PASSED), ("b.jsonl:1", Status.FAILED)):
        summary.add(CaseResult(id="greet", status=status, source=source))
    stability = summary.stability()
    assert {key: (stat.passes, stat.runs) for key, stat in stability.items()} == {("a.jsonl", "greet"): (2, 2), ("b.jsonl", "greet"): (0, 2)}
    assert summary.several_suites
    # a resume from another folder reads a.jsonl by its absolute path: the same suite, the same case
    summary.add(CaseResult(id="greet", status=Status.PASSED, source="/project/a.jsonl:1"))
    assert summary.stability()["a.jsonl", "greet"].runs == 3 and len(summary.tallies) == 2
    one = Summary()
    one.add(CaseResult(id="greet", status=Status.PASSED, source="a.jsonl:1"))
    assert not one.several_suites
