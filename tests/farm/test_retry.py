"""farm.agents.retry: which answers are retried, how long each wait is, and what a 429 tells
the connector's limiter, on an in-memory transport and a recorded sleep (no real waiting)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from farm.agents.base import AgentConnectionError, AgentHTTPError
from farm.agents.retry import (
    BACKOFF_BASE,
    RATE_LIMIT_BASE,
    RETRY_AFTER_CAP,
    UNREACHABLE_FAILURES,
    UNREACHABLE_SECONDS,
    Reachability,
    add_retry_listener,
    remove_retry_listener,
    request_json,
)
from farm.agents.transport import HTTPClient
from farm.config import Connector
from farm.errors import EndpointUnreachable
from tests.farm.test_agents import RecordingLimiter


class Sleeps(list[float]):
    """A sleep that waits for nothing and records how long it was asked to wait."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def answering(*answers: httpx.Response | Exception) -> tuple[HTTPClient, list[httpx.Request]]:
    """An HTTP client whose requests get ``answers`` in turn (an exception is raised instead)."""
    sent: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return HTTPClient(transport=httpx.MockTransport(handler)), sent


def call(http: HTTPClient, limiter: Any, sleep: Sleeps, max_retries: int = 5) -> tuple[Any, int]:
    async def go() -> tuple[Any, int]:
        try:
            _, data, retries = await request_json(
                http,
                "POST",
                "http://agent.test/chat",
                body={"q": 1},
                headers={},
                connector=Connector(name="c", base_url="http://agent.test", max_retries=max_retries),
                limiter=limiter,
                tokens=10,
                agent="target",
                sleep=sleep,
            )
            return data, retries
        finally:
            await http.aclose()

    return asyncio.run(go())


OK = httpx.Response(200, json={"answer": "fine", "usage": {"total_tokens": 7}})


def test_a_429_waits_its_retry_after_and_pauses_the_connector_for_as_long():
    http, sent = answering(httpx.Response(429, headers={"Retry-After": "3"}), OK)
    limiter, sleeps = RecordingLimiter(), Sleeps()
    assert call(http, limiter, sleeps) == ({"answer": "fine", "usage": {"total_tokens": 7}}, 1)
    assert sleeps == [3.0]
    assert limiter.backoffs == [3.0]
    assert limiter.acquired == [10, 10]
    assert limiter.released == [0, 7]  # the refused attempt cost nothing; then the reported usage
    assert len(sent) == 2


def test_retry_after_ms_is_read_in_milliseconds_and_a_long_retry_after_is_capped():
    http, _ = answering(
        httpx.Response(503, headers={"retry-after-ms": "1500", "Retry-After": "9"}),
        httpx.Response(503, headers={"Retry-After": "86400"}),
        httpx.Response(503, headers={"retry-after-ms": "soon", "Retry-After": "2"}),  # unreadable: Retry-After decides
        OK,
    )
    sleeps = Sleeps()
    call(http, RecordingLimiter(), sleeps)
    assert sleeps == [1.5, RETRY_AFTER_CAP, 2.0]


def test_a_429_without_retry_after_backs_off_over_a_rate_limit_window():
    http, _ = answering(httpx.Response(429), httpx.Response(429), OK)
    limiter, sleeps = RecordingLimiter(), Sleeps()
    call(http, limiter, sleeps)
    first, second = sleeps
    assert RATE_LIMIT_BASE / 2 <= first <= RATE_LIMIT_BASE
    assert RATE_LIMIT_BASE <= second <= 2 * RATE_LIMIT_BASE
    assert limiter.backoffs == sleeps


def test_server_errors_back_off_exponentially_then_give_up_after_every_attempt():
    http, sent = answering(*(httpx.Response(502) for _ in range(4)))
    limiter, sleeps = RecordingLimiter(), Sleeps()
    with pytest.raises(AgentHTTPError, match=r"502 Bad Gateway, after 4 requests\.$") as caught:
        call(http, limiter, sleeps, max_retries=3)
    assert caught.value.status_code == 502
    assert len(sent) == 4
    assert len(sleeps) == 3  # none after the last attempt
    for attempt, delay in enumerate(sleeps, 1):
        ceiling = BACKOFF_BASE * 2 ** (attempt - 1)
        assert ceiling / 2 <= delay <= ceiling
    assert limiter.backoffs == []  # only a 429 pauses the connector


def test_a_status_that_is_not_worth_retrying_is_final_at_once():
    http, sent = answering(httpx.Response(404, json={"error": {"message": "no such model"}}))
    sleeps = Sleeps()
    with pytest.raises(AgentHTTPError, match=r"404 Not Found \(no such model\), after 1 request \(not retried\)"):
        call(http, RecordingLimiter(), sleeps)
    assert sleeps == [] and len(sent) == 1


def test_an_unreachable_endpoint_is_retried_then_judged_unreachable():
    refused = httpx.ConnectError("connection refused")
    http, sent = answering(refused, refused, refused)
    limiter, sleeps = RecordingLimiter(), Sleeps()
    with pytest.raises(EndpointUnreachable, match="3 connections failed and none was ever answered"):
        call(http, limiter, sleeps, max_retries=2)  # every attempt failed to connect: fewer than a burst, the same verdict
    assert len(sent) == 3 and len(sleeps) == 2
    assert limiter.released == [0, 0, 0]  # nothing reached the endpoint


def test_no_retries_means_one_attempt_and_no_wait():
    http, sent = answering(httpx.Response(503))
    sleeps = Sleeps()
    with pytest.raises(AgentHTTPError, match="after 1 request"):
        call(http, RecordingLimiter(), sleeps, max_retries=0)
    assert sleeps == [] and len(sent) == 1


def test_every_retry_is_told_to_the_listeners_with_its_number_and_why():
    heard: list[tuple[str, int, int, str]] = []

    def listener(agent: str, retry: int, retries: int, why: str) -> None:
        heard.append((agent, retry, retries, why))

    add_retry_listener(listener)
    try:
        refused = httpx.ConnectError("[Errno 111] Connect call failed: connection refused")
        http, _ = answering(refused, refused, httpx.Response(503), OK)
        call(http, RecordingLimiter(), Sleeps(), max_retries=5)
    finally:
        remove_retry_listener(listener)
    assert heard == [
        ("target", 1, 5, "connection refused"),
        ("target", 2, 5, "connection refused"),
        ("target", 3, 5, "503 Service Unavailable"),
    ]
    http, _ = answering(httpx.Response(503), OK)
    call(http, RecordingLimiter(), Sleeps())
    assert len(heard) == 3  # removed: told nothing more


# -- an endpoint where nothing listens ------------------------------------------------------


@pytest.fixture(autouse=True)
def reachability(monkeypatch: pytest.MonkeyPatch) -> Reachability:
    """A fresh verdict for each test, on a clock that the recorded sleeps move."""
    from farm.agents import retry

    fresh = Reachability(clock=lambda: fresh.now)  # type: ignore[attr-defined]
    fresh.now = 0.0  # type: ignore[attr-defined]
    monkeypatch.setattr(retry, "_reachability", fresh)
    return fresh


def test_a_connector_that_never_answered_is_unreachable_after_a_burst_or_some_seconds_of_failures(reachability: Reachability):
    assert not any(reachability.failed("burst") for _ in range(UNREACHABLE_FAILURES - 1))
    assert reachability.failed("burst") and reachability.judged("burst")
    assert not reachability.failed("slow")
    reachability.now = UNREACHABLE_SECONDS  # type: ignore[attr-defined]
    assert reachability.failed("slow")  # two failures, the seconds apart
    reachability.answered("slow")
    assert not reachability.judged("slow")  # it answered since (a server started): cleared
    reachability.answered("up")
    assert not any(reachability.failed("up") for _ in range(2 * UNREACHABLE_FAILURES))  # it answered once: it is there
    assert reachability.failed("once", spent=True)  # a request's every attempt failed: no burst needed
    assert not reachability.failed("up", spent=True)


def test_an_unreachable_endpoint_ends_the_request_early_and_the_next_after_one_attempt(reachability: Reachability):
    refused = httpx.ConnectError("connection refused")
    http, sent = answering(*[refused] * 6)

    class Clocked(Sleeps):
        async def __call__(self, seconds: float) -> None:
            self.append(seconds)
            reachability.now += seconds  # type: ignore[attr-defined]

    sleeps = Clocked()
    with pytest.raises(EndpointUnreachable) as caught:
        call(http, RecordingLimiter(), sleeps, max_retries=5)
    assert str(caught.value).startswith("connector 'c' at http://agent.test cannot be reached: ")
    assert len(sent) < 6 and sum(sleeps[:-1]) < UNREACHABLE_SECONDS <= sum(sleeps)  # not all the retries
    http, sent = answering(refused, OK)
    again = Sleeps()
    with pytest.raises(EndpointUnreachable):
        call(http, RecordingLimiter(), again, max_retries=5)
    assert len(sent) == 1 and again == []  # judged: one attempt, no retries
    http, _ = answering(OK)
    assert call(http, RecordingLimiter(), Sleeps())[0] == {"answer": "fine", "usage": {"total_tokens": 7}}  # a server started since
    assert not reachability.judged("c agent.test")


def test_a_refused_connection_to_an_endpoint_that_answered_before_is_retried_as_ever(reachability: Reachability):
    refused = httpx.ConnectError("connection refused")
    call(answering(OK)[0], RecordingLimiter(), Sleeps())
    for _ in range(2):  # more failures than a burst: it answered once, it is there
        with pytest.raises(AgentConnectionError, match="after 6 requests") as caught:
            call(answering(*[refused] * 6)[0], RecordingLimiter(), Sleeps(), max_retries=5)
        assert not isinstance(caught.value, EndpointUnreachable)
