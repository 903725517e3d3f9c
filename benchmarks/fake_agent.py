"""A fake OpenAI-compatible agent with a fixed latency, served from its own process.

The benchmarks run it in a separate process so that its threads (the stdlib
server spawns one per connection) never compete with the driver for the GIL.
Every reply is ``chat_completion("Hello from the fake agent")`` after
``latency`` seconds; ``requests`` counts what it served.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

__all__ = ["FakeAgent", "REPLY", "config_toml"]

REPLY = "Hello from the fake agent. How can I help with your expense?"


def _serve(latency: float, ready: Any, stop: Any, served: Any) -> None:
    from farm.demo.server import JSONServer, Response, chat_completion

    body = chat_completion(REPLY)

    def handler(path: str, payload: Any, headers: dict[str, str]) -> Response:
        return Response(body, delay=latency)

    with JSONServer(handler) as server:
        ready.put(server.port)
        stop.wait()
        served.value = server.requests


class FakeAgent:
    """``with FakeAgent(0.05) as agent: agent.url`` — the server lives in a child process."""

    def __init__(self, latency: float):
        self.latency = latency
        ctx = mp.get_context("spawn")  # no Ray, no threads inherited from the driver
        self._ready = ctx.Queue()
        self._stop = ctx.Event()
        self._served = ctx.Value("l", -1)
        self._process = ctx.Process(target=_serve, args=(latency, self._ready, self._stop, self._served), daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> int:
        """Requests served; known once the agent has stopped."""
        return int(self._served.value)

    def start(self) -> "FakeAgent":
        self._process.start()
        self.port = self._ready.get(timeout=30)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()

    def __enter__(self) -> "FakeAgent":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def config_toml(url: str, max_concurrency: int | None = None, timeout: str = "60s", results_dir: str = "results") -> str:
    """A farm.toml whose agent ``target`` talks to the fake agent at ``url``."""
    limit = f"max_concurrency = {max_concurrency}\n" if max_concurrency else ""
    return f"""
[farm]
default_agent = "target"
results_dir = "{results_dir}"

[connectors.fake]
base_url = "{url}/v1"
model = "fake"
timeout = "{timeout}"
max_retries = 2
{limit}
[agents.target]
kind = "openai"
connector = "fake"
"""
