"""Shared fixtures: one real local Ray for the whole session, real agent servers on 127.0.0.1,
and projects whose agents are Python functions."""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

# No Ray starts by itself here: a Ray call with no Ray connected (a thread that outlived its test,
# after the session's Ray was left) raises instead of starting a cluster of its own, dashboard and all
os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")

from farm.demo.agent import handle as demo_handle  # noqa: E402
from farm.demo.server import JSONServer


@pytest.fixture(scope="session")
def ray_session():
    """The session's Ray: slim, quiet, with its temp files out of the way and auth off.

    Auth is off as for any private test cluster (Ray 2.59+ would otherwise write a
    token to ``~/.ray/auth_token``, in the home of whoever runs the tests); clients
    started during the session inherit the same mode. The environment it sets is
    restored when the session ends, and ``HOME`` is left alone.

    Under pytest-xdist the workers share one Ray (:class:`SharedRay`): an idle Ray
    costs ~6 % of a core and ~10 CPU-seconds to start, which three of them spent on
    two cores. Each worker has its own namespace.
    """
    import ray
    from farm.actors.cluster import QUIET_ENV

    if ray.is_initialized():
        yield ray
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**QUIET_ENV, "RAY_AUTH_MODE": "disabled"}.items():
            patch.setenv(name, value)
        if worker is None:
            temp = Path("/tmp") / f"farm-ray-{os.getpid()}"
            _start_ray(temp, "farm-test")
            try:
                yield ray
            finally:
                ray.shutdown()
                shutil.rmtree(temp, ignore_errors=True)
            return
        shared = SharedRay.of_this_run()
        assert shared is not None
        try:
            shared.join()
            yield ray
        finally:
            shared.leave()


def _start_ray(temp: Path, namespace: str) -> None:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, namespace=namespace, log_to_driver=False, _temp_dir=str(temp))


class SharedRay:
    """One Ray for all the xdist workers of a test run, started by the first that needs it.

    The folder holds a lock, the Ray's address, and a file per worker whose session is still
    going (written when it starts, removed when it ends: :func:`pytest_sessionstart`). The
    worker that started the Ray stops it last: at the end of its session it waits until every
    other worker's session has ended (or its process is gone), so that none can still need it.
    """

    LEAVE_WAIT = 600.0

    def __init__(self, folder: Path, worker: str):
        self.folder, self.worker = folder, worker
        self.owner = False

    @classmethod
    def of_this_run(cls) -> SharedRay | None:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        if worker is None:
            return None
        return cls(Path("/tmp") / f"farm-ray-{os.environ['PYTEST_XDIST_TESTRUNUID'][:12]}", worker)

    def session_started(self) -> None:
        (self.folder / "sessions").mkdir(parents=True, exist_ok=True)
        (self.folder / "sessions" / self.worker).write_text(str(os.getpid()))

    def session_ended(self) -> None:
        (self.folder / "sessions" / self.worker).unlink(missing_ok=True)

    def join(self) -> None:
        import fcntl

        import ray

        with open(self.folder / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            address = self.folder / "address"
            if address.exists():
                ray.init(address=address.read_text(), namespace=f"farm-test-{self.worker}", log_to_driver=False)
            else:
                _start_ray(self.folder / "ray", f"farm-test-{self.worker}")
                address.write_text(ray.get_runtime_context().gcs_address)
                self.owner = True

    def _others(self) -> list[str]:
        """The other workers whose session is still going (a worker that crashed does not count)."""
        going = []
        for session in (self.folder / "sessions").iterdir():
            if session.name == self.worker:
                continue
            try:
                os.kill(int(session.read_text()), 0)
            except (ValueError, OSError):
                continue
            going.append(session.name)
        return going

    def leave(self) -> None:
        import ray

        if self.owner:
            deadline = time.monotonic() + self.LEAVE_WAIT
            while self._others() and time.monotonic() < deadline:
                time.sleep(0.2)
        ray.shutdown()
        if self.owner:
            shutil.rmtree(self.folder / "ray", ignore_errors=True)


def pytest_sessionstart(session: pytest.Session) -> None:
    shared = SharedRay.of_this_run()
    if shared is not None:
        shared.session_started()


def pytest_sessionfinish(session: pytest.Session) -> None:
    shared = SharedRay.of_this_run()
    if shared is not None:
        shared.session_ended()
        if not any((shared.folder / "sessions").iterdir()):  # the last worker out tidies up
            shutil.rmtree(shared.folder, ignore_errors=True)


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of each write.

    Ray's console handler (``PlainRayHandler`` on the ``ray`` logger) means to, but keeps the
    ``sys.stderr`` of when it was made, at ``import ray``: under pytest, a capture's file. Ray
    logs after pytest has closed it (at exit), and each line was a "--- Logging error ---
    ValueError: I/O operation on closed file" traceback; following ``sys.stderr`` they go to
    the capture while it is open and to the terminal after."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _ray_logs_follow_stderr() -> None:
    if "ray" not in sys.modules:  # not imported: no handler yet
        return
    for handler in logging.getLogger("ray").handlers:
        # Ray's own console handlers (pytest adds its capture's handlers to this logger during a test)
        console = isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
        if console and type(handler).__module__.startswith("ray.") and not isinstance(handler.stream, _CurrentStderr):
            handler.setStream(_CurrentStderr())  # type: ignore[arg-type]  # it writes and flushes, all a handler needs


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """A test may import Ray while its own capture (``capsys``) is ``sys.stderr``: not past its end."""
    _ray_logs_follow_stderr()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Before pytest closes its capture of the whole run (see :class:`_CurrentStderr`)."""
    _ray_logs_follow_stderr()


@pytest.fixture(params=["local", pytest.param("ray", marks=pytest.mark.ray)])
def engine(request) -> str:
    """Each integration test runs on both engines; the ray one on the session's Ray."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param


@pytest.fixture(scope="session")
def demo_server():
    """The demo expense agent behind a real HTTP server on 127.0.0.1."""
    with JSONServer(demo_handle) as server:
        yield server


@pytest.fixture
def python_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """Lays out a project in ``tmp_path`` whose agents are functions of a Python module beside
    its farm.toml. Call it with the module's source, the farm.toml text (``{module}`` stands for
    the module's name) and ``scripts`` (file name to source, under ``scripts/``); it returns the
    module's name, new for each test, so that tests never share the module's state. ``tmp_path``
    is on ``sys.path`` until the test ends."""

    def build(source: str, toml: str, scripts: dict[str, str]) -> str:
        module = f"agents_{uuid.uuid4().hex}"
        (tmp_path / f"{module}.py").write_text(source)
        (tmp_path / "scripts").mkdir()
        for name, text in scripts.items():
            (tmp_path / "scripts" / name).write_text(text)
        (tmp_path / "farm.toml").write_text(toml.replace("{module}", module))
        monkeypatch.syspath_prepend(str(tmp_path.resolve()))
        return module

    return build


#: The files that take longest (seconds on two cores, each on one pytest-xdist worker: Rays of
#: their own, faults, limiter windows), longest first. They start first, so that the other workers
#: get through the many short files meanwhile instead of one worker running a long one at the end
#: (pytest-xdist hands out files in collection order: ``--no-loadscope-reorder`` in pyproject.toml).
LONGEST = (
    "tests/cli/test_embedded_ray.py",  # ~80
    "tests/actors/test_faults.py",  # ~70
    "tests/actors/test_multinode.py",  # ~50
    "tests/actors/test_limiter.py",  # ~40
    "tests/cli/test_farm_test.py",  # ~40
    "tests/actors/test_jobs.py",  # ~35
    "tests/cli/test_generation.py",  # ~30
    "tests/actors/test_warm.py",  # ~25
    "tests/cli/test_agent_driven.py",  # ~25
    "tests/cli/test_secrets.py",  # ~20
    "tests/cli/test_guide.py",  # ~20
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the session's Ray carries the ``ray`` marker (``-m "not ray"`` skips them);
    the longest files go first (:data:`LONGEST`), the others keep their order."""
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
    rank = {path: i for i, path in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONGEST)))
