"""``--interactive``: a person at a real terminal answers an agent that runs inside a Ray actor."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.scripted import farm_toml


def read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"never saw {needle!r}; the terminal showed:\n{seen.decode(errors='replace')}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    return seen


def test_a_person_answers_when_the_agent_awaits_input(tmp_path: Path, engine: str, demo_server):
    (tmp_path / "farm.toml").write_text(farm_toml(demo_server.url, engine=engine))
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"id": "po", "turns": [{"input": "Submit $100,000 equipment purchase"}], "interactive": {"timeout": "60s"}}) + "\n")
    out = tmp_path / "out.jsonl"
    joins = []
    if engine == "ray":  # the session's Ray, not an embedded one of its own
        import ray

        joins = ["--address", ray.get_runtime_context().gcs_address]
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "farm.cli", "test", "-i", str(suite), "-o", str(out), "--interactive", *joins, "--config", str(tmp_path / "farm.toml")],
        stdin=slave, stdout=slave, stderr=slave, cwd=tmp_path, close_fds=True,
    )
    os.close(slave)
    try:
        shown = read_until(master, b"your answer", 90)
        import re
        plain = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", shown)
        assert b"Please provide PO number." in plain, plain.decode(errors="replace")
        os.write(master, b"The PO number is PO-7781\n")
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["status"] == "passed"
    assert [t["input_source"] for t in record["turns"]] == ["static", "human"]
    assert record["turns"][1]["input"] == "The PO number is PO-7781"


def test_interactive_needs_a_terminal(tmp_path: Path, demo_server):
    (tmp_path / "farm.toml").write_text(farm_toml(demo_server.url))
    proc = subprocess.run(
        [sys.executable, "-m", "farm.cli", "test", "-i", "Hello", "--interactive", "--config", str(tmp_path / "farm.toml")],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "--interactive needs a terminal" in proc.stderr
