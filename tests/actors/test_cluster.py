"""Joining a cluster that is not there: one sentence naming the address and what to do, exit 2,
before a run folder exists, and within seconds (Ray's own connect retries for minutes)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from farm.actors import cluster
from farm.actors.cluster import check_address

from farm.errors import UsageError


def free_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_address_where_nothing_listens_is_one_sentence_naming_it_and_the_way_out():
    port = free_port()
    with pytest.raises(UsageError) as caught:
        check_address(f"127.0.0.1:{port}")
    message = str(caught.value)
    assert message.startswith(f"--address 127.0.0.1:{port}: no Ray cluster answers at 127.0.0.1:{port} (connection refused)")
    assert "ray start --head" in message and "drop --address" in message and "\n" not in message


def test_a_ray_client_address_is_checked_the_same_way():
    port = free_port()
    with pytest.raises(UsageError, match=rf"^--address ray://127\.0\.0\.1:{port}: no Ray cluster answers"):
        check_address(f"ray://127.0.0.1:{port}")


def test_an_address_that_is_not_one_says_what_an_address_looks_like():
    with pytest.raises(UsageError, match=r"not a Ray address \(auto, host:port or ray://host:port\)"):
        check_address("headnode")


def test_auto_with_no_cluster_on_the_machine_says_so(monkeypatch: pytest.MonkeyPatch):
    def nothing_found(address: str, temp_dir: str | None) -> str:
        raise ConnectionError("Could not find any running Ray instance.")

    # Ray's own lookup (RAY_ADDRESS, the last `ray start`, any running GCS): this machine may run other Rays
    monkeypatch.setattr(cluster.ray._private.services, "get_ray_address_from_environment", nothing_found)
    with pytest.raises(UsageError, match=r"^--address auto: no running Ray cluster was found on this machine; start a cluster"):
        check_address("auto")


def test_an_address_from_the_environment_is_named_as_such(monkeypatch: pytest.MonkeyPatch):
    port = free_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(UsageError, match=rf"^RAY_ADDRESS 127\.0\.0\.1:{port}: "):
        check_address(f"127.0.0.1:{port}")


def test_farm_test_with_no_cluster_at_the_address_exits_2_with_one_line_and_no_run_folder(tmp_path: Path):
    (tmp_path / "farm.toml").write_text(
        '[farm]\ndefault_agent = "echo"\nresults_dir = "results"\n[agents.echo]\nkind = "python"\nentry = "farm.demo.agent:simulator"\n'
    )
    (tmp_path / "suite.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "farm.cli", "test", "-i", "suite.jsonl", "--address", f"127.0.0.1:{port}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: --address 127.0.0.1:{port}: no Ray cluster answers at 127.0.0.1:{port} (connection refused); "
        "start a cluster (ray start --head) or drop --address to run without one"
    ]
    assert done.stdout == ""
    assert not (tmp_path / "results").exists()
