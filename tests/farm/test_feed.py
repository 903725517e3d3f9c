"""Every suite hands its cases over through one feed: a static suite's is closed from the start (the
engines close their scheduler at once, with no thread and nothing awaited), a generator's hands each
batch over as it arrives, and a failure of the feed itself is handed over before its end."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from farm.engines.feed import ThreadFeed, pump
from farm.feed import CLOSED
from farm.loaded import LoadedCase


def case(case_id: str) -> LoadedCase:
    return LoadedCase(id=case_id, source=f"s.jsonl:{case_id}", raw={"id": case_id, "input": "hi"})


class Batches:
    """A feed that hands over ``batches``, then (``fail``) raises."""

    closed = False

    def __init__(self, batches: list[list[LoadedCase]], fail: Exception | None = None):
        self._batches, self._fail = batches, fail

    async def batches(self, generate: Any, on_progress: Callable[[Any], None]) -> AsyncIterator[list[LoadedCase]]:
        for batch in self._batches:
            await asyncio.sleep(0)
            yield batch
        if self._fail is not None:
            raise self._fail


def test_a_static_suite_s_feed_ends_at_once_with_no_thread():
    before = threading.active_count()
    feed = ThreadFeed(CLOSED, generate=lambda: None)  # type: ignore[arg-type]
    assert feed.take() == [] and feed.open is False  # its end is there at once
    assert threading.active_count() == before
    arrived: list[Any] = []
    asyncio.run(pump(CLOSED, None, arrived.append))  # type: ignore[arg-type]
    assert arrived == [None]


def test_a_generator_s_feed_hands_over_each_batch_then_its_end():
    one, two = [case("a"), case("b")], [case("c")]
    feed = ThreadFeed(Batches([one, two]), generate=lambda: None)  # type: ignore[arg-type]
    taken: list[list[LoadedCase]] = []
    for _ in range(200):
        taken += feed.take(wait=0.05)
        if not feed.open:
            break
    feed.close()
    assert [[c.id for c in batch] for batch in taken] == [["a", "b"], ["c"]]
    assert feed.open is False


def test_a_failure_of_the_feed_itself_is_raised_where_the_run_is_pumped():
    feed = ThreadFeed(Batches([[case("a")]], fail=RuntimeError("the generator's bug")), generate=lambda: None)  # type: ignore[arg-type]
    taken: list[list[LoadedCase]] = []
    with pytest.raises(RuntimeError, match="the generator's bug"):
        for _ in range(200):
            taken += feed.take(wait=0.05)
    feed.close()
