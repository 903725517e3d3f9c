"""A fake OpenAI-compatible agent with a fixed latency, served from its own process.

The benchmarks run it in a separate process so that it never competes with the
driver for the GIL, and on a lean asyncio HTTP/1.1 server (keep-alive,
``Content-Length`` bodies, one fixed answer) so that the server costs as
little CPU per request as it can: on two cores every millisecond the agent
spends is one the farm cannot, and the figures are about the farm.
Every reply is ``chat_completion(REPLY)`` after ``latency`` seconds;
``requests`` and ``cpu_s`` say what it served and what that cost it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

__all__ = ["FakeAgent", "REPLY", "config_toml"]

REPLY = "Hello from the fake agent. Your expense is noted."


class _AgentProtocol(asyncio.Protocol):
    """One connection: read each request whole (headers, then Content-Length bytes), answer it after the latency."""

    served = 0

    def __init__(self, latency: float, answer: bytes):
        self.latency = latency
        self.answer = answer
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in self.buffer[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            _AgentProtocol.served += 1
            asyncio.get_running_loop().call_later(self.latency, self._answer)

    def _answer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(self.answer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


def _serve(latency: float) -> None:
    """The child process: serve until stdin closes, then print how many requests were served."""
    from farm.demo.server import chat_completion

    body = json.dumps(chat_completion(REPLY)).encode()
    answer = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _AgentProtocol(latency, answer), "127.0.0.1", 0, backlog=4096)
        print(server.sockets[0].getsockname()[1], flush=True)
        await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes it (or dies)
        server.close()

    asyncio.run(main())
    print(_AgentProtocol.served, round(time.process_time(), 3), flush=True)


class FakeAgent:
    """``with FakeAgent(0.05) as agent: agent.url`` — the server lives in a child process."""

    def __init__(self, latency: float):
        self.latency = latency
        self.port = 0
        self.requests = -1
        """Requests served; known once the agent has stopped."""
        self.cpu_s = -1.0
        """CPU seconds the agent's process used; known once it has stopped."""
        self._process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeAgent:
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--latency", str(self.latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"the fake agent did not start: {line!r}")
        self.port = int(line)
        return self

    def stop(self) -> None:
        process = self._process
        if process is None:
            return
        try:
            out, _ = process.communicate(timeout=10)  # closes stdin: the child stops
            served, cpu = out.split()
            self.requests, self.cpu_s = int(served), float(cpu)
        except (subprocess.TimeoutExpired, ValueError):  # it did not stop cleanly: no figures
            process.kill()
            process.wait()

    def __enter__(self) -> FakeAgent:
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Serve the fake agent until stdin closes.")
    parser.add_argument("--latency", type=float, default=0.05)
    _serve(parser.parse_args().latency)
