"""Worker health on the ray engine, without Ray: a fake clock and numbered preparations."""

import itertools

from farm.engines import Scheduler, Worker
from farm.engines.health import BENCH_SECONDS, RESTART_WAIT, Answer, WorkerHealth
from farm.loaded import LoadedCase


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def setup(workers=("a", "b")):
    scheduler = Scheduler([Worker(w, 1) for w in workers], make_error=lambda job, message: None)
    scheduler.add([LoadedCase(id=f"c{i}", source=f"s.jsonl:{i}", data=b"{}") for i in range(10)])
    scheduler.close()
    sent: list[tuple[int, str]] = []
    numbers = itertools.count()

    def prepare(worker: str) -> int:
        sent.append((ref := next(numbers), worker))
        return ref

    clock = Clock()
    return scheduler, WorkerHealth(scheduler, prepare, clock), sent, clock


def assigned_to(scheduler: Scheduler, now: float) -> set[str]:
    return {worker for worker, _ in scheduler.assign(now)}


def test_first_preparations_are_watched_and_an_answer_records_the_node():
    scheduler, health, sent, _ = setup()
    health.watch({"a": "ref-a", "b": "ref-b"})
    assert not health.healthy("a")  # its preparation has not answered yet
    health.answered("ref-a", "node-1")
    assert health.node_of == {"a": "node-1"} and health.healthy("a") and not health.healthy("b")
    assert list(health.probes) == ["ref-b"] and sent == []


def test_a_lost_worker_is_benched_and_prepared_again_once():
    scheduler, health, sent, clock = setup()
    health.lost("a")
    health.lost("a")  # a second loss while its preparation is in flight sends no other
    assert sent == [(0, "a")] and health.restarting == {"a": 100.0}
    assert assigned_to(scheduler, clock.now + RESTART_WAIT - 1) == {"b"}
    health.answered(0, "node-2")  # it restarted: back at once
    assert health.healthy("a") and assigned_to(scheduler, clock.now) == {"a"}


def test_a_restarting_worker_is_asked_again_until_the_wait_runs_out():
    scheduler, health, sent, clock = setup()
    health.lost("a")
    clock.now += RESTART_WAIT - 1
    health.answered(0, Answer.RESTARTING)
    assert sent == [(0, "a"), (1, "a")] and not health.healthy("a")
    clock.now += 2
    health.answered(1, Answer.RESTARTING)  # restarting for longer than the wait: let jobs find out
    assert sent == [(0, "a"), (1, "a")] and health.restarting == {} and not health.probes
    assert "a" in assigned_to(scheduler, clock.now)


def test_a_gone_worker_is_benched_for_a_while_and_never_kept():
    scheduler, health, _, clock = setup()
    health.watch({"a": "first"})
    health.answered("first", "node-1")
    health.lost("a")
    health.answered(0, Answer.GONE)
    assert health.gone == {"a"} and not health.healthy("a") and health.restarting == {}
    assert assigned_to(scheduler, clock.now + BENCH_SECONDS - 1) == {"b"}
    assert "a" in assigned_to(scheduler, clock.now + BENCH_SECONDS)
