"""A private Ray for a benchmark script: its temp files, address file and auth token in a
folder of its own, so it never joins or disturbs another Ray on the machine."""

from __future__ import annotations

import os
import tempfile

__all__ = ["private_ray_env"]


def private_ray_env(prefix: str) -> str:
    """Point Ray at a new folder under /tmp (short: unix socket paths must fit in 107 bytes).

    Call it before anything imports Ray: a parent's ``RAY_AUTH_MODE`` or ``RAY_ADDRESS``
    (a pytest session's Ray sets them) would otherwise leak into this Ray and crash it.
    """
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ.pop("RAY_ADDRESS", None)
    from farm.actors.cluster import QUIET_ENV  # imports Ray: only now

    base = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.environ.update(QUIET_ENV)
    os.environ.update(RAY_TMPDIR=base, HOME=base)
    return base
