"""The scheduler's bookkeeping, without Ray and without an event loop."""

import subprocess
import sys

import pytest

from farm.engines import Job, Scheduler, StopReason, Worker
from farm.loaded import LoadedCase
from farm.results import CaseResult, CaseRunKey, Status


def cases(n, prefix="case"):
    return [LoadedCase(id=f"{prefix}-{i}", source=f"suite.jsonl:{i + 1}", data=b"{}") for i in range(n)]


def error_of(job: Job, message: str) -> CaseResult:
    return CaseResult(id=job.key.case_id, status=Status.ERROR, error=message, agent=job.agent, source=job.payload.source)


def result(job: Job, status=Status.PASSED, **fields) -> CaseResult:
    return CaseResult(id=job.key.case_id, status=status, agent=job.agent, source=job.payload.source, **fields)


def scheduler(workers=("a",), slots=1, **rules) -> Scheduler:
    return Scheduler([Worker(w, slots) for w in workers], make_error=error_of, **rules)


def test_slots_bound_what_is_in_flight():
    s = scheduler(["a", "b"], slots=2)
    s.add(cases(10))
    s.close()
    assert len(s.assign()) == 4
    assert s.assign() == []  # every slot is taken
    _, job = next(iter(s.running.values()))
    assert s.finished(job, result(job))
    assert len(s.assign()) == 1


def test_least_loaded_worker_gets_the_next_job():
    s = scheduler(["a", "b", "c"], slots=100)
    s.add(cases(7))
    placed = [w for w, _ in s.assign()]
    assert sorted(placed.count(w) for w in "abc") == [2, 2, 3]
    # finish the jobs on "a": the next job goes there
    for job in [job for w, job in s.running.values() if w == "a"]:
        s.finished(job, result(job))
    s.add(cases(1, "new"))
    assert s.assign()[0][0] == "a"


def test_jobs_start_in_the_suite_order_case_by_case_across_agents_and_runs():
    s = scheduler(slots=100, agents=["A", "B"], runs=2)
    s.add(cases(2))
    order = [job.key for _, job in s.assign()]
    assert order == [
        CaseRunKey("suite.jsonl", "case-0", 0, "A"), CaseRunKey("suite.jsonl", "case-0", 0, "B"), CaseRunKey("suite.jsonl", "case-1", 0, "A"), CaseRunKey("suite.jsonl", "case-1", 0, "B"),
        CaseRunKey("suite.jsonl", "case-0", 1, "A"), CaseRunKey("suite.jsonl", "case-0", 1, "B"), CaseRunKey("suite.jsonl", "case-1", 1, "A"), CaseRunKey("suite.jsonl", "case-1", 1, "B"),
    ]


def test_a_job_goes_only_to_a_worker_that_serves_its_agent():
    s = Scheduler(
        [Worker("gpu", 1, frozenset({"heavy"})), Worker("any", 5, frozenset({"light"}))],
        make_error=error_of,
        agents=["heavy", "light"],
    )
    s.add(cases(3))
    placed = {(w, job.agent) for w, job in s.assign()}
    assert placed == {("gpu", "heavy"), ("any", "light")}
    assert len(s.running) == 4  # one heavy job (one slot) and three light ones
    with pytest.raises(ValueError, match="no worker serves"):
        Scheduler([Worker("gpu", 1, frozenset({"heavy"}))], make_error=error_of, agents=["heavy", "light"])


def test_cases_that_arrive_while_the_run_goes_are_queued_and_the_run_ends_only_when_closed():
    s = scheduler(slots=10)
    s.add(cases(1))
    ((_, job),) = s.assign()
    s.finished(job, result(job))
    assert not s.done  # a generator may still send cases
    s.add(cases(2, "generated"))
    assert [j.key.case_id for _, j in s.assign()] == ["generated-0", "generated-1"]
    for _, j in list(s.running.values()):
        s.finished(j, result(j))
    s.close()
    assert s.done and s.cases == 3


def test_a_case_that_did_not_load_is_reported_at_once_and_never_assigned():
    s = scheduler(agents=["A", "B"])
    bad = LoadedCase(id="bad", source="suite.jsonl:3", error="field 'turns': not a list")
    reported = s.add([bad, *cases(1)])
    assert [(r.id, r.agent, r.error) for r in reported] == [
        ("bad", "A", "field 'turns': not a list"),
        ("bad", "B", "field 'turns': not a list"),
    ]
    assert {j.key.case_id for _, j in s.assign()} == {"case-0"}


def test_a_case_id_in_two_suites_is_two_cases_and_each_resumes_on_its_own():
    greet = [LoadedCase(id="greet", source=f"{suite}:1", data=b"{}") for suite in ("a.jsonl", "b.jsonl")]
    s = scheduler(slots=10, runs=2)
    s.add(greet)
    s.close()
    jobs = [job for _, job in s.assign()]
    assert [job.key for job in jobs] == [CaseRunKey("a.jsonl", "greet", 0, ""), CaseRunKey("b.jsonl", "greet", 0, ""), CaseRunKey("a.jsonl", "greet", 1, ""), CaseRunKey("b.jsonl", "greet", 1, "")]
    assert [r.suite for job in jobs for r in s.finished(job, result(job))] == ["a.jsonl", "b.jsonl", "a.jsonl", "b.jsonl"]  # neither is taken for the other
    resumed = scheduler(slots=10, runs=2, finished_before=[("a.jsonl", "greet", 0, ""), ("b.jsonl", "greet", 1, "")])
    resumed.add(greet)
    assert [job.key for _, job in resumed.assign()] == [CaseRunKey("b.jsonl", "greet", 0, ""), CaseRunKey("a.jsonl", "greet", 1, "")]


def test_adaptive_repeats_count_the_tries_of_each_suite_s_case_apart():
    greet = [LoadedCase(id="greet", source=f"{suite}:1", data=b"{}") for suite in ("a.jsonl", "b.jsonl")]
    s = adaptive(least=2, most=10, rate=0.5)
    s.add(greet)
    reported = run_through(s, lambda job: Status.PASSED if job.key.suite == "a.jsonl" else Status.FAILED)
    last = {r.suite: r for r in reported if r.stopped is not None}
    assert last["a.jsonl"].verdict != last["b.jsonl"].verdict


def test_jobs_finished_before_a_resume_are_not_queued():
    s = scheduler(slots=10, agents=["A", "B"], finished_before=[("suite.jsonl", "case-0", 0, "A")])
    s.add(cases(1))
    assert [j.key for _, j in s.assign()] == [CaseRunKey("suite.jsonl", "case-0", 0, "B")]


def test_lost_job_is_requeued_first_with_the_next_attempt():
    s = scheduler(max_attempts=3)
    s.add(cases(2))
    ((_, first),) = s.assign()
    assert s.lost(first) == []
    ((_, again),) = s.assign()
    assert again.key == first.key and again.attempt == 2


def test_a_job_that_keeps_dying_is_given_up():
    s = scheduler(max_attempts=2)
    s.add(cases(1))
    s.close()
    ((_, job),) = s.assign()
    s.lost(job)
    ((_, job),) = s.assign()
    (given_up,) = s.lost(job)
    assert given_up.status == Status.ERROR and "died 2 time(s)" in given_up.error and given_up.attempt == 2
    assert s.done


def test_each_job_is_reported_once():
    s = scheduler(["a", "b"])
    s.add(cases(1))
    ((_, job),) = s.assign()
    assert len(s.finished(job, result(job))) == 1
    assert s.finished(job, result(job)) == []  # a duplicate (e.g. a re-run that also finished) is dropped
    assert s.lost(job) == []  # and a late loss of a reported job is not re-queued
    assert s.assign() == []


def test_stop_dispatches_nothing_more():
    s = scheduler()
    s.add(cases(3))
    s.assign()
    dropped = s.stop()
    assert len(dropped) == 2
    assert s.assign() == [] and s.stop_reason == StopReason.REQUESTED
    s.add(cases(2, "late"))  # nothing arriving after the stop is queued
    assert s.queued == 0


def test_workers_need_a_slot():
    with pytest.raises(ValueError):
        scheduler(slots=0)


def test_a_benched_worker_gets_no_new_job_until_its_time_is_up():
    s = scheduler(["a", "b"], slots=10)
    s.add(cases(1))
    ((worker, job),) = s.assign(now=0.0)
    s.lost(job, now=0.0, bench_for=5.0)
    s.add(cases(2, "more"))
    placed = s.assign(now=1.0)
    assert {w for w, _ in placed} == {"b" if worker == "a" else "a"}
    assert job.key in {j.key for _, j in placed}
    s.add(cases(1, "late"))
    assert s.assign(now=6.0)[0][0] == worker  # back in rotation, and the least loaded


def test_when_every_worker_is_benched_the_jobs_wait_until_one_is_back():
    s = scheduler(["a", "b"], slots=10)
    s.add(cases(2))
    for _, job in s.assign(now=0.0):
        s.lost(job, now=0.0, bench_for=10.0)
    assert s.assign(now=1.0) == []  # both still restarting: no attempt spent on them
    s.rest("b")  # b answers again
    assert [(w, j.attempt) for w, j in s.assign(now=2.0)] == [("b", 2), ("b", 2)]
    assert [w for w, _ in s.assign(now=10.0)] == []  # b took both; a is back at 10 s with nothing left
    s.add(cases(1, "late"))
    s.bench("a", until=20.0)  # still restarting, says Ray
    assert [w for w, _ in s.assign(now=15.0)] == ["b"]
    s.add(cases(1, "later"))
    assert [w for w, _ in s.assign(now=20.0)] == ["a"]


def test_a_retried_job_goes_first_and_a_later_worker_death_keeps_its_history():
    s = scheduler(max_attempts=2, retries=1)
    s.add(cases(2))
    ((_, first),) = s.assign()
    assert s.finished(first, result(first, Status.TIMEOUT, error="no answer", ended_by="agent")) == []  # --retries: again
    ((_, second),) = s.assign()
    assert second.key == first.key and second.attempt == 2
    assert [(r.attempt, r.status) for r in second.retried] == [(1, Status.TIMEOUT)]
    # a worker death after a retry: deaths are counted apart from --retries, and the history stays
    s.lost(second)
    ((_, third),) = s.assign()
    assert third.key == first.key and third.attempt == 3 and third.retried == second.retried
    (final,) = s.finished(third, result(third, Status.TIMEOUT, error="no answer", ended_by="agent"))  # no retries left
    assert final.attempt == 3 and [r.attempt for r in final.retried] == [1]


def test_a_stopping_run_retries_nothing():
    s = scheduler(retries=3)
    s.add(cases(1))
    ((_, job),) = s.assign()
    s.stop()
    (final,) = s.finished(job, result(job, Status.ERROR, error="refused", ended_by="agent"))
    assert final.status == Status.ERROR and final.attempt == 1


def test_fail_fast_stops_at_the_first_failure_and_in_flight_jobs_still_report():
    s = scheduler(slots=2, fail_fast=True)
    s.add(cases(5))
    (_, a), (_, b) = s.assign()
    assert len(s.finished(a, result(a, Status.FAILED))) == 1
    assert s.stop_reason == StopReason.FAIL_FAST and s.assign() == []
    assert len(s.finished(b, result(b))) == 1 and s.done


def test_the_budget_stops_dispatching_once_spent_counting_earlier_parts():
    s = scheduler(slots=2, max_cost=1.0, cost_of=lambda r: r.duration_ms / 1000, spent=0.25)
    s.add(cases(10))
    (_, a), (_, b) = s.assign()
    s.finished(a, result(a, duration_ms=500))  # 0.75 spent
    assert not s.stopped
    ((_, c),) = s.assign()
    s.finished(b, result(b, duration_ms=250))  # 1.0: the budget is spent
    assert s.stop_reason == StopReason.MAX_COST and s.assign() == []
    assert len(s.finished(c, result(c, duration_ms=100))) == 1  # what was in flight still reports
    assert s.done and s.spent == pytest.approx(1.1)
    resumed = scheduler(max_cost=1.0, spent=1.0)  # a resume with the same budget starts nothing
    resumed.add(cases(1))
    assert resumed.assign() == [] and resumed.stop_reason == StopReason.MAX_COST


def test_a_crash_of_the_farm_is_an_error_result_of_that_job():
    s = scheduler()
    s.add(cases(1))
    ((_, job),) = s.assign()
    (crashed,) = s.crashed(job, "ValueError('boom')")
    assert crashed.status == Status.ERROR and crashed.error == "internal error while running the case: ValueError('boom')"


def test_a_dropped_job_frees_its_slot_and_is_never_reported():
    s = scheduler()
    s.add(cases(1))
    s.close()
    ((_, job),) = s.assign()
    s.stop()
    s.dropped(job)
    assert s.done and s.load["a"] == 0 and CaseRunKey("suite.jsonl", "case-0", 0, "") not in s.reported


def test_a_job_its_worker_was_not_ready_for_runs_again_first_without_spending_an_attempt():
    s = scheduler(["a"], slots=1)
    s.add(cases(3))
    s.close()
    ((worker, job),) = s.assign()
    s.returned(job)
    ((_, again),) = s.assign()
    assert again.key == job.key and again.attempt == job.attempt == 1
    assert s.finished(again, result(again)) and not s.done


def test_a_returned_job_of_a_stopped_run_is_not_queued_again():
    s = scheduler(["a"], slots=1)
    s.add(cases(2))
    ((_, job),) = s.assign()
    s.stop()
    s.returned(job)
    s.close()
    assert s.queued == 0 and s.done


def test_importing_the_scheduler_loads_no_runner_and_no_case_model():
    code = "import sys, farm.engines.scheduler; print(sorted(m for m in sys.modules if m.startswith(('farm.conversation', 'farm.suite'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- adaptive repeats ---------------------------------------------------------


def adaptive(least=2, most=10, rate=0.8, **rules) -> Scheduler:
    from farm.sequential import Sequential

    return scheduler(slots=100, runs=most, sequential=Sequential(min_pass_rate=rate, least=least, most=most), **rules)


def run_through(s: Scheduler, outcome) -> list[CaseResult]:
    """Pump ``s`` to its end, each job ending as ``outcome(job)`` says; every result reported."""
    reported = []
    s.close()
    while not s.done:
        started = s.assign()
        assert started, "the scheduler holds jobs it never assigns"
        for _, job in started:
            reported += s.finished(job, result(job, outcome(job)))
    return reported


def test_adaptive_repeats_queue_the_least_tries_first_and_one_more_at_a_time():
    s = adaptive(least=3, most=10)
    s.add(cases(1))
    first = s.assign()
    assert [job.run_index for _, job in first] == [0, 1, 2]
    for _, job in first[:2]:
        s.finished(job, result(job))
    assert s.assign() == []  # no decision while a try of the case is in flight
    s.finished(first[2][1], result(first[2][1], Status.FAILED))
    assert [job.run_index for _, job in s.assign()] == [3]


def test_a_case_decided_below_stops_and_its_last_result_says_why():
    s = adaptive(least=2, most=10, rate=0.8)
    s.add(cases(2))
    reported = run_through(s, lambda job: Status.PASSED if job.key.case_id == "case-0" else Status.FAILED)
    failing = [r for r in reported if r.id == "case-1"]
    assert len(failing) == 3  # three failures: at most 7 of 10 can pass, below 0.8
    assert (failing[-1].stopped, failing[-1].tries, failing[-1].verdict) == ("decided_below", 3, "below")
    assert all(r.stopped is None for r in failing[:-1])
    passing = [r for r in reported if r.id == "case-0"]
    assert len(passing) == 8 and (passing[-1].stopped, passing[-1].verdict) == ("decided_above", "above")  # 8 of 10 are met


def test_an_undecided_case_runs_to_the_most_tries_and_is_judged_there():
    s = adaptive(least=2, most=6, rate=0.5)
    s.add(cases(1))
    reported = run_through(s, lambda job: Status.PASSED if job.run_index % 2 else Status.FAILED)
    assert len(reported) == 6 and [r.run_index for r in reported] == list(range(6))
    assert (reported[-1].stopped, reported[-1].tries, reported[-1].verdict) == ("max_tries", 6, "above")


def test_an_error_stops_the_case_below_its_gate():
    s = adaptive(least=2, most=10, rate=0.5)
    s.add(cases(1))
    reported = run_through(s, lambda job: Status.ERROR if job.run_index == 1 else Status.PASSED)
    assert len(reported) == 2 and reported[-1].stopped == "decided_below"


def test_a_skipped_case_is_tried_no_more_and_not_judged():
    s = adaptive(least=2, most=10)
    s.add(cases(1))
    reported = run_through(s, lambda job: Status.SKIPPED)
    assert len(reported) == 2 and all(r.stopped is None for r in reported)


def test_a_resume_goes_on_with_each_undecided_case_and_leaves_decided_ones():
    before = {
        ("suite.jsonl", "case-0", 0, ""): ("passed", False), ("suite.jsonl", "case-0", 1, ""): ("failed", False),  # undecided: goes on at index 2
        ("suite.jsonl", "case-1", 0, ""): ("failed", False), ("suite.jsonl", "case-1", 1, ""): ("failed", False), ("suite.jsonl", "case-1", 2, ""): ("failed", False),  # decided below
        ("suite.jsonl", "case-2", 0, ""): ("passed", False),  # the least tries not all run: index 1 first
    }  # fmt: skip
    s = adaptive(least=2, most=10, finished_before=before, tried_before=before)
    s.add(cases(3))
    assert sorted(job.key[1:3] for _, job in s.assign()) == [("case-0", 2), ("case-2", 1)]


def test_a_resume_under_adaptive_repeats_continues_until_the_same_decision():
    def outcome(job):
        return Status.FAILED if job.run_index in (1, 4) else Status.PASSED

    once = adaptive(least=2, most=10, rate=0.5)
    once.add(cases(1))
    whole = run_through(once, outcome)
    s = adaptive(least=2, most=10, rate=0.5)
    s.add(cases(1))
    s.close()
    first = []
    for _, job in s.assign():
        first += s.finished(job, result(job, outcome(job)))
    before = {("suite.jsonl", r.id, r.run_index, ""): (r.status.value, False) for r in first}
    resumed = adaptive(least=2, most=10, rate=0.5, finished_before=before, tried_before=before)
    resumed.add(cases(1))
    rest = run_through(resumed, outcome)
    assert [r.run_index for r in first + rest] == [r.run_index for r in whole]
    assert (rest[-1].stopped, rest[-1].tries) == (whole[-1].stopped, whole[-1].tries)


def test_the_budget_still_stops_adaptive_repeats():
    s = adaptive(least=2, most=10, max_cost=1.0, cost_of=lambda r: 0.4)
    s.add(cases(1))
    reported = run_through(s, lambda job: Status.PASSED)
    assert len(reported) == 3 and s.stop_reason is StopReason.MAX_COST


def test_a_resume_knows_the_cases_its_earlier_parts_ended_under_adaptive_repeats():
    from farm.engines.scheduler import ended_before
    from farm.sequential import Sequential

    rule = Sequential(min_pass_rate=0.8, least=2, most=10)
    tried = {
        ("s.jsonl", "never", 0, "bot"): ("failed", False), ("s.jsonl", "never", 1, "bot"): ("failed", False), ("s.jsonl", "never", 2, "bot"): ("failed", False),
        ("s.jsonl", "open", 0, "bot"): ("passed", False), ("s.jsonl", "open", 1, "bot"): ("passed", False),  # 2 of 2: undecided
        ("s.jsonl", "half", 0, "bot"): ("failed", False),  # its first tries not all run
        ("s.jsonl", "skip", 0, "bot"): ("skipped", False),
    }  # fmt: skip
    assert ended_before(rule, tried) == 2  # never: decided below; skip: not tried again
