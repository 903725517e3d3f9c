"""Connecting to Ray: the embedded local Ray by default, or an existing cluster.

The embedded Ray lives only as long as one ``farm test``, so it starts and
stops lean (figures in benchmarks/README.md, "The whole command"):

- no dashboard, metrics or usage stats; and no dashboard API server either,
  which Ray starts even with ``include_dashboard=False`` once ``ray[default]``
  is installed (a process, and ~1 s of start-up spent waiting for it);
- the raylet starts its first workers while the driver connects, so the
  session actors find a process ready instead of starting one (~0.5 s);
- on the way out the raylet is stopped gracefully (it takes its workers and
  agents with it) and Ray's other processes are killed at once, instead of
  each getting a second to exit (~1.3 s).

The first and the last reach into ``ray._private``; where a Ray version lacks
what they touch, Ray's own start and stop are used unchanged.

No process of the embedded Ray outlives the run, however the run ends: Ray's
node agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) survive a
``kill -9`` of the process that started them. So the processes the embedded
Ray starts carry a token in their environment, and a small reaper process
keeps a list of them and of every process below them (an agent that renames
itself may overwrite its environment, so its parent is what tells); once the
farm exits, or says it has stopped Ray, the reaper kills what is left.

Nor does a file of the embedded Ray outlive it: its session files go to a
temporary folder of its own, removed when it stops, and the token of Ray's token
authentication (Ray 2.59+ writes one to ``~/.ray/auth_token`` for a new local
cluster) is given to it in the environment instead, so nothing is written to the
user's home. A user who set Ray's auth variables keeps them; joining a cluster
(``--address``) changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import ray

from farm.errors import UsageError

__all__ = ["OWNER_ENV", "PROBE_TIMEOUT_S", "Cluster", "check_address", "connect", "QUIET_ENV"]

#: Settings that make the embedded Ray slim and quiet (see RAY_NOTES: ~7 processes, ~0.5 GiB).
QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_enable_metrics_collection": "0",
    "RAY_task_events_report_interval_ms": "0",
    "RAY_DEDUP_LOGS": "0",
}


#: The environment variable that marks the processes of an embedded Ray (its value: one run's token).
OWNER_ENV = "FARM_EMBEDDED_RAY"

REAPER = r"""
import os, signal, sys
parent, needle = int(sys.argv[1]), ("%s=" % sys.argv[2]).encode() + sys.argv[3].encode()


def stat(pid):
    with open(f"/proc/{pid}/stat", "rb") as file:
        fields = file.read().rsplit(b")", 1)[1].split()
    return int(fields[1]), fields[19]  # parent pid, start time


def marked(pid):
    with open(f"/proc/{pid}/environ", "rb") as file:
        return needle in file.read().split(b"\0")


def scan(known):
    # Ray's processes: those that carry the token (the raylet, the GCS, ...), and every
    # process below them: an agent that renamed itself may have overwritten its environment
    parents, marks = {}, set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (os.getpid(), parent):
            pid = int(entry)
            try:
                parents[pid] = stat(pid)
                if marked(pid):
                    marks.add(pid)
            except OSError:
                pass
    found, grew = set(marks), True
    while grew:
        grew = False
        for pid, (ppid, _) in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    known.update({pid: parents[pid][1] for pid in found})


signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])  # told to go (SIGTERM): reap now
signal.signal(signal.SIGINT, signal.SIG_IGN)
known = {}
while os.getppid() == parent and signal.sigtimedwait([signal.SIGTERM], 0.5) is None:
    scan(known)
signal.sigtimedwait([signal.SIGTERM], 0.2)  # let a graceful stop finish first
scan(known)
for pid, started in known.items():
    try:
        if stat(pid)[1] == started:  # the same process, not a new one with its pid
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""


def _start_reaper(token: str) -> subprocess.Popen[bytes] | None:
    """The process that kills what is left of the embedded Ray once this process is gone."""
    if not os.path.isdir("/proc"):  # pragma: no cover - Linux only; elsewhere Ray's own stop is all
        return None
    env = {k: v for k, v in os.environ.items() if k != OWNER_ENV}
    return subprocess.Popen(
        [sys.executable, "-c", REAPER, str(os.getpid()), OWNER_ENV, token],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C to the farm's terminal does not reach it
    )


@dataclass
class Cluster:
    address: str
    started: bool
    """True when this process started an embedded Ray (and so stops it)."""
    reaper: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    temp_dir: str | None = None
    """The embedded Ray's own folder for its files, removed when it stops."""
    restore_env: dict[str, str | None] = field(default_factory=dict, repr=False)
    """Environment variables set for the embedded Ray, and what they were before."""

    @property
    def cpus(self) -> float:
        return float(ray.cluster_resources().get("CPU", 1))

    @property
    def nodes(self) -> int:
        return sum(1 for n in ray.nodes() if n.get("Alive"))

    def shutdown(self) -> None:
        if self.started and ray.is_initialized():
            _stop_quickly()
            ray.shutdown()
        if self.reaper is not None:
            self.reaper.terminate()  # it reaps what the stop left, then exits
            self.reaper = None
        for name, value in self.restore_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.restore_env = {}
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None


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
        check_address(address)
        try:
            ray.init(address=address, **common)
        except ConnectionError as exc:  # found, answered, and still refused us: Ray's own sentence
            raise UsageError(f"{_named(address)}: cannot join the Ray cluster there: {str(exc).splitlines()[0]}{_INSTEAD}") from None
        return Cluster(address=address, started=False)
    token = uuid.uuid4().hex
    os.environ[OWNER_ENV] = token  # inherited by every process of the embedded Ray
    reaper = _start_reaper(token)
    parent = os.environ.get("RAY_TMPDIR") or None  # Ray's own variable for where its files go
    if parent:
        os.makedirs(parent, exist_ok=True)
    temp_dir = tempfile.mkdtemp(prefix="farm-ray-", dir=parent)  # short: Ray's socket paths must fit in 107 bytes
    restore = _auth_in_environment()
    try:
        with _no_api_server():
            ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, _temp_dir=temp_dir, **common)
    except BaseException:
        Cluster("local", True, reaper, temp_dir, restore).shutdown()
        raise
    finally:
        os.environ.pop(OWNER_ENV, None)  # Ray's processes have it; what this process starts later does not
    return Cluster(address="local", started=True, reaper=reaper, temp_dir=temp_dir, restore_env=restore)


AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
"""Ray's token-auth settings: a user who set any of them chose where the token lives."""

_PROCESS_TOKEN = uuid.uuid4().hex
"""The embedded Ray's auth token: one per process, as Ray's token loader keeps the first it read."""


def _auth_in_environment() -> dict[str, str | None]:
    """Give the embedded Ray its auth token in the environment (so it writes none to
    ``~/.ray``), unless the user set Ray's auth variables; returns what to restore."""
    if any(os.environ.get(name) for name in AUTH_ENV):
        return {}
    os.environ["RAY_AUTH_TOKEN"] = _PROCESS_TOKEN
    return {"RAY_AUTH_TOKEN": None}


#: How long the address of a cluster may take to accept a connection before the run gives up on
#: it: Ray's own connect retries for minutes against an address where nothing listens.
PROBE_TIMEOUT_S = 5.0

_INSTEAD = "; start a cluster (ray start --head) or drop --address to run without one"


def _named(address: str) -> str:
    """How the user gave ``address``: ``--address X``, or the ``RAY_ADDRESS`` of the environment."""
    if os.environ.get("RAY_ADDRESS") == address:
        return f"RAY_ADDRESS {address}"
    return f"--address {address}"


def check_address(address: str, timeout: float = PROBE_TIMEOUT_S) -> str:
    """The ``host:port`` that ``address`` (``auto``, ``host:port``, ``ray://host:port``) names, once it
    accepts a connection within ``timeout`` seconds; else one :class:`UsageError` sentence saying
    what to do (a user mistake, before anything starts)."""
    target = address.removeprefix("ray://")
    if target == "auto":
        services: Any = getattr(getattr(ray, "_private", None), "services", None)
        try:
            found = services.get_ray_address_from_environment("auto", None)
        except ConnectionError:
            raise UsageError(f"{_named(address)}: no running Ray cluster was found on this machine{_INSTEAD}") from None
        except AttributeError:  # a Ray without this helper: its own connect says what is wrong
            return address
        target = str(found)
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"{_named(address)}: not a Ray address (auto, host:port or ray://host:port)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except TimeoutError:
        raise UsageError(f"{_named(address)}: {target} did not answer within {timeout:g} s{_INSTEAD}") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"{_named(address)}: no Ray cluster answers at {target} ({reason.lower()}){_INSTEAD}") from None
    return target


@contextlib.contextmanager
def _no_api_server() -> Iterator[None]:
    """Start no dashboard API server while this block starts a Ray (it serves only the dashboard,
    Ray Jobs and usage stats: an embedded Ray private to one run needs none of them)."""
    services: Any = getattr(getattr(ray, "_private", None), "services", None)
    original = getattr(services, "start_api_server", None)
    if original is None:
        yield
        return
    services.start_api_server = lambda *args, **kwargs: (None, None)
    try:
        yield
    finally:
        services.start_api_server = original


def _stop_quickly() -> None:
    """Make the coming ``ray.shutdown`` stop the raylet gracefully and kill every other process
    at once (the node it changes is dropped by that shutdown)."""
    node: Any = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    kill = getattr(node, "_kill_process_impl", None)
    if kill is None:
        return

    def stop(process_type: str, allow_graceful: bool = False, check_alive: bool = True, wait: bool = False) -> None:
        graceful = allow_graceful and process_type == "raylet"
        kill(process_type, allow_graceful=graceful, check_alive=check_alive, wait=wait)

    node._kill_process_impl = stop
