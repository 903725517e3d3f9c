"""The dispatcher's bookkeeping, without Ray."""

import pytest
from farm.actors.dispatch import Dispatcher, Job


def jobs(n):
    return [Job(("case", i), None) for i in range(n)]  # the bookkeeping never looks at the payload


def test_window_bounds_what_is_in_flight():
    d = Dispatcher(["a", "b"], window=3)
    d.add(jobs(10))
    assert len(d.assign()) == 3
    assert d.assign() == []  # the window is full
    d.finished(next(iter(d.running.values()))[1])
    assert len(d.assign()) == 1


def test_least_loaded_worker_gets_the_next_job():
    d = Dispatcher(["a", "b", "c"], window=100)
    d.add(jobs(7))
    placed = [w for w, _ in d.assign()]
    assert sorted(placed.count(w) for w in "abc") == [2, 2, 3]
    # finish two jobs on "a": the next job goes there
    on_a = [job for w, job in d.running.values() if w == "a"]
    for job in on_a:
        d.finished(job)
    d.add([Job(("new", 0), None)])
    assert d.assign()[0][0] == "a"


def test_lost_job_is_requeued_first_with_the_next_attempt():
    d = Dispatcher(["a"], window=1, max_attempts=3)
    d.add(jobs(2))
    (_, first), = d.assign()
    retry = d.lost(first)
    assert retry is not None and retry.attempt == 2 and retry.key == first.key
    (_, again), = d.assign()
    assert again.key == first.key and again.attempt == 2


def test_a_job_that_keeps_dying_is_given_up():
    d = Dispatcher(["a"], window=1, max_attempts=2)
    d.add(jobs(1))
    (_, job), = d.assign()
    job = d.lost(job)
    (_, job), = d.assign()
    assert d.lost(job) is None
    assert d.idle


def test_each_job_is_reported_once():
    d = Dispatcher(["a", "b"], window=2)
    d.add(jobs(1))
    (_, job), = d.assign()
    assert d.finished(job) is True
    assert d.finished(job) is False  # a duplicate (e.g. a re-run that also finished) is dropped
    assert d.lost(job) is None  # and a late loss of a reported job is not re-queued


def test_stop_dispatches_nothing_more():
    d = Dispatcher(["a"], window=1)
    d.add(jobs(3))
    d.assign()
    dropped = d.stop()
    assert len(dropped) == 2
    assert d.assign() == []


def test_window_must_be_positive():
    with pytest.raises(ValueError):
        Dispatcher(["a"], window=0)


def test_a_benched_worker_gets_no_new_job_until_its_time_is_up():
    d = Dispatcher(["a", "b"], window=10)
    d.add(jobs(1))
    ((worker, job),) = d.assign(now=0.0)
    d.bench(worker, until=5.0)
    retry = d.lost(job)
    d.add(jobs(3)[1:])
    placed = d.assign(now=1.0)
    assert {w for w, _ in placed} == {"b" if worker == "a" else "a"}
    assert retry.key in {j.key for _, j in placed}
    d.add([Job(("late", 0), None)])
    assert d.assign(now=6.0)[0][0] == worker  # back in rotation, and the least loaded


def test_when_every_worker_is_benched_all_are_used():
    d = Dispatcher(["a", "b"], window=10)
    d.bench("a", 10.0)
    d.bench("b", 10.0)
    d.add(jobs(2))
    assert len(d.assign(now=1.0)) == 2


def test_a_released_job_frees_its_slot_before_it_is_reported_once():
    d = Dispatcher(["a"], window=1)
    d.add(jobs(2))
    (worker, first), = d.assign()
    assert d.release(first) == worker and d.release(first) is None
    (_, second), = d.assign()  # the slot is free before the result is reported
    assert second.key != first.key
    assert d.finished(first) is True and d.finished(first) is False
    assert d.load["a"] == 1  # the second job still holds its slot


def test_a_retried_job_goes_first_and_a_later_worker_death_keeps_its_history():
    from farm.results import CaseResult, Status

    d = Dispatcher(["a"], window=1, max_attempts=2)
    d.add(jobs(2))
    (_, first), = d.assign()
    failed = CaseResult(id="case", status=Status.TIMEOUT, error="no answer")
    assert d.again(first.again(failed))
    (_, second), = d.assign()
    assert second.key == first.key and second.attempt == 2
    assert [(r.attempt, r.status) for r in second.retried] == [(1, Status.TIMEOUT)]
    # a worker death after a retry: deaths are counted apart from --retries, and the history stays
    third = d.lost(second)
    assert third is not None and third.attempt == 3 and third.retried == second.retried
    d.stop()
    assert not d.again(third.again(failed))  # a stopping run retries nothing
