"""Shared fixtures: one real local Ray for the whole session, real agent servers on 127.0.0.1,
and projects whose agents are Python functions."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from farm.demo.agent import handle as demo_handle
from farm.demo.server import JSONServer


@pytest.fixture(scope="session")
def ray_session():
    """The session's Ray: slim, quiet, with its temp files out of the way and auth off.

    Auth is off as for any private test cluster (Ray 2.59+ would otherwise write a
    token to ``~/.ray/auth_token``, in the home of whoever runs the tests); clients
    started during the session inherit the same mode. The environment it sets is
    restored when the session ends, and ``HOME`` is left alone.
    """
    import ray
    from farm.actors.cluster import QUIET_ENV

    if ray.is_initialized():
        yield ray
        return
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**QUIET_ENV, "RAY_AUTH_MODE": "disabled"}.items():
            patch.setenv(name, value)
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            namespace="farm-test",
            log_to_driver=False,
            _temp_dir=str(Path("/tmp") / f"farm-ray-{os.getpid()}"),
        )
        try:
            yield ray
        finally:
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the session's Ray carries the ``ray`` marker (``-m "not ray"`` skips them)."""
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
