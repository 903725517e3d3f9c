"""Connecting to Ray: the embedded local Ray by default, or an existing cluster."""

from __future__ import annotations

import os
from dataclasses import dataclass

import ray

__all__ = ["Cluster", "connect", "QUIET_ENV"]

#: Settings that make the embedded Ray slim and quiet (see RAY_NOTES: ~7 processes, ~0.5 GiB).
QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_enable_metrics_collection": "0",
    "RAY_task_events_report_interval_ms": "0",
    "RAY_prestart_worker_first_driver": "0",
    "RAY_DEDUP_LOGS": "0",
}


@dataclass
class Cluster:
    address: str
    started: bool
    """True when this process started an embedded Ray (and so stops it)."""

    @property
    def cpus(self) -> float:
        return float(ray.cluster_resources().get("CPU", 1))

    @property
    def nodes(self) -> int:
        return sum(1 for n in ray.nodes() if n.get("Alive"))

    def shutdown(self) -> None:
        if self.started and ray.is_initialized():
            ray.shutdown()


def connect(address: str | None = None, num_cpus: int | None = None, namespace: str = "farm") -> Cluster:
    """Join ``address`` (``auto``, ``ray://host:10001``), reuse a Ray this process already
    started, or start the embedded local Ray sized to the machine, with no dashboard."""
    if ray.is_initialized():
        return Cluster(address=ray.get_runtime_context().gcs_address, started=False)
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    common = dict(namespace=namespace, log_to_driver=False, logging_level="ERROR", configure_logging=True)
    address = address or os.environ.get("RAY_ADDRESS")  # inside a Ray job, join its cluster
    if address:
        ray.init(address=address, **common)
        return Cluster(address=address, started=False)
    ray.init(
        num_cpus=num_cpus or os.cpu_count() or 1,
        include_dashboard=False,
        **common,
    )
    return Cluster(address="local", started=True)
