"""``farm view``: a local, read-only web app to browse, search and compare the runs of a results
folder.

:func:`serve` starts it; :class:`~farm.view.server.ViewServer` is the server, whose JSON
endpoints read the run folders' Parquet tables with pyarrow as they are on disk, so a run that
appears or grows shows without a restart.
"""

from __future__ import annotations

from farm.view.server import ViewApp, ViewServer, is_loopback

__all__ = ["ViewApp", "ViewServer", "is_loopback"]
