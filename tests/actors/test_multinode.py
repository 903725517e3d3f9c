"""Multi-node behaviour with ``ray.cluster_utils.Cluster``: a head and two worker raylets on
this machine, session actors spread over them, one worker node lost mid-run.

The GCS keeps Ray's default failure detection (~15 s before a silent node is
declared dead), as on a real cluster: that is the window in which calls to the
lost node's actors fail with ``ActorUnavailableError``.

A Cluster cannot share the pytest session's in-process Ray, so
``benchmarks/multinode.py`` builds it in a subprocess (with a private
``RAY_TMPDIR``, so no other Ray on the machine sees it) and prints what
happened as one JSON line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray  # starts Ray of its own

ROOT = Path(__file__).resolve().parents[2]
CASES = 200


@pytest.fixture(scope="module")
def placement() -> dict:
    """One cluster (a head with no CPUs, a one-CPU node with a logical GPU, a one-CPU node), four
    runs on it through ``farm.run(..., address=...)`` (agents declaring a CPU, a GPU, nothing, two
    GPUs), then a run of its own that loses the busiest worker node after 60 results."""
    command = [
        sys.executable, str(ROOT / "benchmarks" / "multinode.py"),
        "--placement",
        "--cases", "12",
        "--node-loss-cases", str(CASES),
        "--remove-node-after", "60",
        "--actors", "4",
        "--parallel", "30",
        "--latency", "0.3",  # the 140 cases left when the node goes take a few seconds, not half of one
        "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def node_loss(placement: dict) -> dict:
    return placement["node_loss"]


def test_every_case_is_reported_exactly_once_across_nodes_after_a_node_is_lost(node_loss: dict):
    assert node_loss["removed"] is not None and node_loss["removed"]["killed_pids"], node_loss
    assert node_loss["removed"]["after_results"] >= 60
    assert node_loss["results"] == CASES, node_loss
    assert node_loss["unique"] == CASES and node_loss["duplicates"] == 0 and node_loss["missing"] == 0, node_loss
    assert node_loss["nodes_used"] > 1, node_loss  # the session actors were spread
    assert node_loss["max_attempt"] >= 2, node_loss  # the lost node's conversations ran again


def test_no_case_is_given_up_because_a_node_left(node_loss: dict):
    assert node_loss["statuses"] == {"passed": CASES}, node_loss


def test_an_agent_declaring_a_cpu_gets_an_actor_on_each_one_cpu_node(placement: dict):
    run = placement["num_cpus"]
    assert run["exit_code"] == 0 and run["results"] == run["unique"] == 12, run
    assert run["actors_per_node"] == {"cpu": 1, "gpu": 1}, run
    assert run["processes"] == 2, run


def test_an_agent_declaring_a_gpu_runs_every_conversation_on_the_gpu_node(placement: dict):
    run = placement["num_gpus"]
    assert run["exit_code"] == 0 and run["results"] == run["unique"] == 12, run
    assert run["cases_per_node"] == {"gpu": 12}, run


def test_an_agent_declaring_nothing_is_spread_over_the_nodes_with_cpus_not_the_head(placement: dict):
    run = placement["none"]
    assert run["exit_code"] == 0 and run["results"] == run["unique"] == 12, run
    assert run["actors_per_node"] == {"cpu": 1, "gpu": 1}, run


def test_a_request_no_node_can_meet_is_one_sentence_before_anything_runs(placement: dict):
    run = placement["impossible"]
    message = run["usage_error"]
    assert message.startswith('agent "heavy" asks for num_gpus = 2 per conversation slot') and "no node" in message, run
    assert "\n" not in message
    assert run["seconds"] < 10, "refused at once: the cluster has no autoscaler"
