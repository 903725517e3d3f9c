"""A temporary home for the session's Ray (``ray_session``) until tests/conftest.py provides it.

Starts one small local Ray for the whole session, unless one is already
running (then it is left alone). Ray writes its auth token and temp files
under a throw-away folder, never the real home.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import ray


@pytest.fixture(scope="session")
def ray_session():
    if ray.is_initialized():
        yield ray
        return
    home = tempfile.mkdtemp(prefix="farm-ray-")
    saved = {k: os.environ.get(k) for k in ("HOME", "RAY_TMPDIR", "RAY_USAGE_STATS_ENABLED", "RAY_AUTH_MODE")}
    os.environ.update(HOME=home, RAY_TMPDIR=home, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    ray.init(num_cpus=2, include_dashboard=False, namespace="farm-test", log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(home, ignore_errors=True)
