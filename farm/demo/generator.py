"""A test-case generator that behaves like an LLM, for the demo, the tests and the benchmarks.

:class:`LikeAnLLM` answers OpenAI chat requests (serve it with
:class:`~farm.demo.server.JSONServer`) as a real model does when asked to write
cases: at most ``per_reply`` cases a reply, the same cases for the same prompt
(temperature 0), now and then a malformed one (``malformed_every``), ids that
start again in every reply (so ids collide across batches), after ``latency``
seconds. ``distinct`` bounds how many different cases it can ever write. With
``answer_first``, it answers that many requests and holds the rest until :meth:`release`
(a generation that is still under way when a test interrupts it).

:func:`generator` is the demo's generator agent (``kind = "python"``): the same
writer, called in-process.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from typing import Any

from farm.demo.server import Response, chat_completion

__all__ = ["LikeAnLLM", "generator", "write_cases"]

_TYPES = ("travel", "meal", "hotel", "taxi", "training", "equipment", "dinner")
_ASKS = (
    "I want to submit a {t} expense of ${a}",
    "Can you file my {t} costs, ${a} in total?",
    "Please reimburse a ${a} {t} receipt",
    "How do I claim ${a} for {t}?",
)
_COUNT = re.compile(r"Generate (\d+) test cases")


def _case(index: int, number: int, malformed: bool, slice_text: str, kinds: tuple[str, ...] = _TYPES) -> dict[str, Any]:
    """Case ``index`` of the writer's repertoire, as reply position ``number`` gives its id."""
    kind = kinds[index % len(kinds)]
    amount = 10 + (index * 37) % 4990
    text = _ASKS[(index // len(_TYPES)) % len(_ASKS)].format(t=kind, a=amount)
    assertion = {"type": "tool_caled" if malformed else "tool_called", "name": "create_expense"}
    return {"id": f"{kind}-{number}", "name": f"{kind} expense of ${amount} ({slice_text})", "input": f"{text} (ref {index})", "assertions": [assertion]}


def write_cases(
    prompt: str, count: int, per_reply: int = 25, distinct: int = 1_000_000, malformed_every: int = 20, kinds: tuple[str, ...] = _TYPES
) -> list[dict[str, Any]]:
    """The cases a deterministic model writes for ``prompt``: ``min(count, per_reply)`` of its
    ``distinct`` possible cases, picked by the prompt's hash, about expenses of ``kinds``; every
    ``malformed_every``-th one (by its index) has a misspelt assertion type (``tool_caled``)."""
    seed = int.from_bytes(hashlib.sha256(prompt.encode("utf-8")).digest()[:8], "big")
    rng = random.Random(seed)
    picks = rng.sample(range(distinct), min(count, per_reply, distinct))
    slice_match = re.search(r"this batch covers: (.*)\.", prompt)
    slice_text = slice_match.group(1) if slice_match else "any"
    malformed = [bool(malformed_every) and index % malformed_every == malformed_every - 1 for index in picks]
    return [_case(index, n, bad, slice_text, kinds) for n, (index, bad) in enumerate(zip(picks, malformed, strict=True), start=1)]


class LikeAnLLM:
    """An OpenAI-compatible generator model (a :class:`~farm.demo.server.JSONServer` handler);
    ``requests`` counts the chat requests it answered, ``last_request`` is when the latest came."""

    def __init__(
        self, per_reply: int = 25, distinct: int = 1_000_000, malformed_every: int = 20, latency: float = 0.3, answer_first: int | None = None
    ):
        self.per_reply = per_reply
        self.distinct = distinct
        self.malformed_every = malformed_every
        self.latency = latency
        self.requests = 0
        self.last_request = 0.0
        """When the latest request arrived (``time.time()``)."""
        self._lock = threading.Lock()
        self._answer_first = answer_first
        self._released = threading.Event()

    def release(self) -> None:
        """Answers the requests held back by ``answer_first``, and every one after."""
        self._released.set()

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        with self._lock:
            self.requests += 1
            self.last_request = time.time()
            held = self._answer_first is not None and self.requests > self._answer_first
        if held:
            self._released.wait(timeout=120)
        prompt = "\n".join(str(m.get("content")) for m in body.get("messages", []))
        found = _COUNT.search(prompt)
        count = int(found.group(1)) if found else self.per_reply
        cases = write_cases(prompt, count, self.per_reply, self.distinct, self.malformed_every)
        return Response(chat_completion(json.dumps({"cases": cases}), model="like-an-llm", usage=(len(prompt) // 4, 60 * len(cases))), delay=self.latency)


def generator(messages: list[dict[str, Any]], options: dict[str, Any]) -> str:
    """The demo's generator agent: expense cases as a deterministic model writes them, for
    ``metadata`` (``count``, ``batch_number``, ``seed``, the batch's ``slice``; a ``focus`` that
    names an expense type, such as ``travel`` or ``meal``, is what its cases are about)."""
    metadata = options.get("metadata", {})
    prompt = json.dumps({k: metadata.get(k) for k in ("batch_number", "seed", "slice", "avoid")}, sort_keys=True, default=str)
    chosen = metadata.get("slice") or {}
    slice_text = ", ".join(f"{k}={v}" for k, v in chosen.items()) or "any"
    kinds = tuple(v for v in chosen.values() if v in _TYPES) or _TYPES
    cases = write_cases(f"{prompt}\nthis batch covers: {slice_text}.", int(metadata.get("count", 5)), malformed_every=0, kinds=kinds)
    return json.dumps({"cases": cases})
