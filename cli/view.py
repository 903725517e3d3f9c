"""``farm view [RESULTS_DIR]``: browse, search and compare runs in a local web app (docs/reference/cli.md)."""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import Annotated

import typer
from farm.cli.options import ConfigPath, configured_results_dir

from farm.errors import FarmError, UsageError
from farm.numbers import as_whole

__all__ = ["view"]


def view(
    results_dir: Annotated[
        Path | None,
        typer.Argument(help="The results folder whose runs to show (default: [farm].results_dir).", show_default=False),
    ] = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on; anything but loopback is reachable by others.")
    ] = "127.0.0.1",
    port: Annotated[str, typer.Option("--port", metavar="PORT", help="Port to listen on (0: a free one).")] = "0",
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in a browser.")] = False,
    config: ConfigPath = None,
) -> None:
    """Serve a read-only web app over the runs of a results folder: runs, cases, transcripts, comparisons and trends."""
    from farm.cli.app import err_console, fail

    try:
        number = as_whole(port)  # as text, so that a bad one is said in one sentence (farm/numbers.py)
        if number is None or not 0 <= number <= 65535:
            raise UsageError(f"--port {port} is not a port: give one from 1 to 65535, or 0 for a free one.")
        root = results_dir if results_dir is not None else configured_results_dir(config)
        _check_results_folder(root)
        from farm.view import ViewApp, ViewServer, is_loopback

        try:
            server = ViewServer(ViewApp(str(root)), host, number)
        except OSError as exc:
            raise UsageError(_cannot_listen(host, number, exc)) from None
    except FarmError as exc:
        fail(exc)
    if not is_loopback(host):
        err_console.print(
            f"[yellow]warning:[/yellow] listening on {host}: anyone who can reach this machine can read the results in {root}."
        )
    print(f"farm view: {server.url}  (results: {server.app.folder.root}; Ctrl-C stops it)", flush=True)
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _check_results_folder(root: Path) -> None:
    """``root`` holds runs, as ``farm report`` finds them (:func:`farm.results.runs_at`): a folder of
    suites, an empty one or one run's own folder is refused, naming what to give instead."""
    from farm.results import runs_at

    if not root.is_dir():
        raise UsageError(f"Cannot view {root}, as it is not a folder; run `farm test` first or name a results folder.")
    runs, single = runs_at(root)
    if single:
        raise UsageError(f"Cannot view {root}, as it is one run's folder; name the results folder that holds it ({root.parent}).")
    if not runs:
        raise UsageError(f"Cannot view {root}, as there is no run folder in it; run `farm test` first or name a results folder.")


def _cannot_listen(host: str, port: int, exc: OSError) -> str:
    """Why ``host``:``port`` cannot be listened on, and what to change: the port only when it is the cause."""
    where = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    if isinstance(exc, socket.gaierror):
        return f"Cannot listen on {where}: '{host}' is not a known host name or address; try --host 127.0.0.1."
    if exc.errno == errno.EADDRINUSE:
        return f"Cannot listen on {where}: the port is in use; try another --port (0: a free one)."
    if exc.errno == errno.EACCES:
        return (
            f"Cannot listen on {where}: permission denied (ports below 1024 need privileges); try another --port (0: a free one)."
        )
    if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        return f"Cannot listen on {where}: {host} is not an address of this machine; try --host 127.0.0.1."
    return f"Cannot listen on {where} ({exc.strerror or exc})."
