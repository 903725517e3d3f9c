"""farm.aio.run_sync: a coroutine run to its end from sync code, with work for its loop's first idle moment."""

from __future__ import annotations

import asyncio

import pytest

from farm.aio import run_sync


async def steps(log: list[str]) -> str:
    log.append("started")
    await asyncio.sleep(0)  # ready again at once: the loop is not idle yet
    log.append("ready again")
    await asyncio.sleep(0.02)  # nothing to do until the timer: the loop's first idle moment
    log.append("woke")
    await asyncio.sleep(0.02)
    return "done"


def test_the_idle_work_runs_once_when_the_loop_first_has_nothing_to_do():
    log: list[str] = []
    assert run_sync(steps(log), idle=lambda: log.append("idle")) == "done"
    assert log == ["started", "ready again", "idle", "woke"]


def test_idle_work_that_fails_is_not_the_runs_failure():
    def broken() -> None:
        raise ImportError("no such module")

    log: list[str] = []
    assert run_sync(steps(log), idle=broken) == "done"
    assert log == ["started", "ready again", "woke"]


def test_inside_a_running_loop_the_idle_work_runs_on_the_helper_threads_loop():
    log: list[str] = []

    async def caller() -> str:
        return run_sync(steps(log), idle=lambda: log.append("idle"))

    assert asyncio.run(caller()) == "done"
    assert log == ["started", "ready again", "idle", "woke"]


def test_an_error_of_the_coroutine_is_raised_with_idle_work_too():
    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("the run's own")

    with pytest.raises(ValueError, match="the run's own"):
        run_sync(fails(), idle=lambda: None)


def test_the_idle_work_waits_while_a_socket_has_bytes_to_send():
    """A connection being made, or a request not yet written whole, is registered for writing:
    the loop waits then, but the run's requests are not out yet."""
    import socket

    log: list[str] = []

    async def sending() -> None:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        try:
            while True:  # fill the send buffer: what is left would wait to be written
                ours.send(b"x" * 65536)
        except BlockingIOError:
            pass
        writable = asyncio.Event()
        loop.add_writer(ours, writable.set)
        await asyncio.sleep(0.02)  # nothing ready, but a socket waits to send: not idle
        log.append("still sending")
        loop.call_later(0.01, lambda: theirs.recv(1 << 22))  # the other side reads: room to send
        await writable.wait()
        loop.remove_writer(ours)
        log.append("sent")
        await asyncio.sleep(0.02)
        ours.close()
        theirs.close()

    run_sync(sending(), idle=lambda: log.append("idle"))
    assert log == ["still sending", "sent", "idle"]


def test_under_another_event_loop_policy_the_loop_is_the_policys_and_no_idle_work_runs():
    made: list[str] = []

    class Policy(asyncio.DefaultEventLoopPolicy):  # as uvloop's would be: a loop of the user's choice
        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            made.append("policy's loop")
            return super().new_event_loop()

    log: list[str] = []
    asyncio.set_event_loop_policy(Policy())
    try:
        assert run_sync(steps(log), idle=lambda: log.append("idle")) == "done"
    finally:
        asyncio.set_event_loop_policy(None)
    assert made == ["policy's loop"] and log == ["started", "ready again", "woke"]
