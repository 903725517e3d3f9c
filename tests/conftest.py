"""Shared fixtures: one real local Ray for the whole session, and real agent servers on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from farm.demo.agent import handle as demo_handle
from farm.demo.server import JSONServer


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory):
    """The session's Ray: slim, quiet, with its temp files and auth token out of the home folder."""
    import ray
    from farm.actors.cluster import QUIET_ENV

    if ray.is_initialized():
        yield ray
        return
    home = tmp_path_factory.mktemp("home")
    os.environ["HOME"] = str(home)
    os.environ.update(QUIET_ENV)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        namespace="farm-test",
        log_to_driver=False,
        _temp_dir=str(Path("/tmp") / f"farm-ray-{os.getpid()}"),
    )
    yield ray
    ray.shutdown()


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the session's Ray carries the ``ray`` marker (``-m "not ray"`` skips them)."""
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
