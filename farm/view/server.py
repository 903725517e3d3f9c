"""The ``farm view`` web app: a read-only HTTP server over a results folder.

The standard library's threading HTTP server is enough for one person's browser on
127.0.0.1, and adds no dependency: the work is in pyarrow, which releases the GIL. It
serves the pages (``farm/view/static``, files known by name at start) and these JSON
endpoints, all read-only::

    GET /api/runs                                  every run, newest first
    GET /api/runs/<run>                            one run: summary and run.json (secrets masked)
    GET /api/runs/<run>/cases?status=&tag=&agent=&q=&sort=&desc=&offset=&limit=
    GET /api/runs/<run>/cases/<case id>?agent=&suite=  one case: repetitions, turns, checks
    GET /api/compare?a=<run>&b=<run>&agent_a=&agent_b=&changed=&offset=&limit=
    GET /api/suites                                suites with their runs
    GET /api/trends?suite=<suite>&agent=           one suite over its runs (one agent's figures)

A run is named by its folder's name only (:class:`~farm.view.folders.ResultsFolder` refuses
anything else), so no URL reaches outside the results folder. Bound to a loopback address,
the server also refuses requests whose ``Host`` is not a loopback name, so a web page
elsewhere cannot reach it through DNS rebinding.
"""

from __future__ import annotations

import json
import math
import mimetypes
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from ipaddress import ip_address
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pyarrow as pa

from farm.errors import FarmError
from farm.secrets import looks_secret
from farm.view.cases import CaseQuery, RunCases
from farm.view.compare import Comparisons, Side
from farm.view.folders import NotFound, ResultsFolder
from farm.view.runs import RunSummaries
from farm.view.transcript import case_detail
from farm.view.trends import suites, trend

__all__ = ["ViewApp", "ViewServer", "is_loopback"]

_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BadRequest(FarmError, ValueError):
    """A query parameter the endpoint cannot use; the message names it (HTTP 400)."""


class ViewApp:
    """What the endpoints answer, apart from HTTP: the results folder and what is kept of it."""

    def __init__(self, root: str):
        self.folder = ResultsFolder(root)
        self.summaries = RunSummaries(self.folder)
        self.cases = RunCases()
        self.comparisons = Comparisons(self.cases)
        self.pages = _static_files()
        _warm()

    def answer(self, parts: list[str], query: dict[str, list[str]]) -> Any:
        """The JSON for ``GET /api/<parts...>``; :class:`NotFound` or :class:`BadRequest` when it cannot be given."""
        if parts == ["runs"]:
            return {"root": str(self.folder.root), "runs": self.summaries.all()}
        if len(parts) == 2 and parts[0] == "runs":
            run = self.folder.run(parts[1])
            info = run.info.model_dump(mode="json") if run.has_info else {}
            if "config" in info:
                info["config"] = _masked(info["config"])
            return {"summary": self.summaries.one(run), "info": info}
        if len(parts) == 3 and parts[0] == "runs" and parts[2] == "cases":
            return self.cases.page(self.folder.run(parts[1]), _case_query(query))
        if len(parts) == 4 and parts[0] == "runs" and parts[2] == "cases":
            return case_detail(self.folder.run(parts[1]), parts[3], _one(query, "agent"), _one(query, "suite"))
        if parts == ["compare"]:
            a, b = _one(query, "a"), _one(query, "b") or _one(query, "a")
            if not a:
                raise BadRequest("Name the runs to compare: ?a=<run>&b=<run> (or one run and agent_a, agent_b).")
            side_a = Side(self.folder.run(a), _one(query, "agent_a"))
            side_b = Side(self.folder.run(b or a), _one(query, "agent_b"))
            return self.comparisons.page(
                side_a, side_b,
                changed_only=_one(query, "changed") in ("1", "true"),
                offset=_number(query, "offset", 0), limit=_number(query, "limit", 100),
            )  # fmt: skip
        if parts == ["suites"]:
            return {"suites": suites(self.summaries.all())}
        if parts == ["trends"]:
            suite = _one(query, "suite")
            if not suite:
                raise BadRequest("Name the suite: ?suite=<path>.")
            return trend(self.summaries.all(), suite, _one(query, "agent"))
        raise NotFound("There is no such endpoint.")


class ViewServer(ThreadingHTTPServer):
    """The HTTP server of one :class:`ViewApp`; ``serve_forever`` runs it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, app: ViewApp, host: str = "127.0.0.1", port: int = 0):
        self.app = app
        self.loopback_only = is_loopback(host)
        host = host.strip("[]")
        self.address_family = _family(host)  # an IPv6 address (::1) needs an IPv6 socket
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), self.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def start(self) -> threading.Thread:
        """Serve on a background thread (for tests and benchmarks); ``shutdown`` stops it."""
        thread = threading.Thread(target=self.serve_forever, name="farm-view", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer
    protocol_version = "HTTP/1.1"
    server_version = "farm-view"

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        if self.server.loopback_only and not is_loopback(_host_name(self.headers.get("Host", ""))):
            self._json(HTTPStatus.FORBIDDEN, {"error": "This server answers requests for 127.0.0.1 or localhost only."})
            return
        split = urlsplit(self.path)
        raw = split.path.split("/")[1:]
        parts = [unquote(part) for part in raw]
        try:
            if "\0" in unquote(self.path):  # no file name holds one: the OS would refuse it mid-answer
                raise BadRequest("A URL may not hold a NUL character (%00).")
            if parts[:1] == ["api"]:
                self._json(HTTPStatus.OK, self.server.app.answer(parts[1:], parse_qs(split.query)))
                # Arrow's allocator keeps freed memory for reuse: hand back what a big answer left behind
                pa.default_memory_pool().release_unused()
            elif split.path == "/" or (len(parts) == 2 and parts[0] == "static"):
                self._page("index.html" if split.path == "/" else parts[1])
            else:
                raise NotFound("There is no such page.")
        except NotFound as exc:
            self._json(HTTPStatus.NOT_FOUND, {"error": str(exc)})
        except BadRequest as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
        except (OSError, pa.ArrowException) as exc:  # a file replaced or damaged as it was read
            self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"Cannot read the run's files now ({exc}); reload the page."})
        except Exception as exc:  # noqa: BLE001 - the page says so in one line, never an empty reply
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"The viewer failed on this request ({type(exc).__name__}: {exc})."})

    def _page(self, name: str) -> None:
        body = self.server.app.pages.get(name)
        if body is None:
            raise NotFound("There is no such page.")
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        self._send(HTTPStatus.OK, body, f"{kind}; charset=utf-8" if kind.startswith("text/") or kind.endswith("javascript") else kind)

    def _json(self, status: HTTPStatus, payload: Any) -> None:
        try:
            text = json.dumps(payload, separators=(",", ":"), default=str, allow_nan=False)
        except ValueError:  # a NaN or an infinity in a run's files (a judge's score): JSON has none, so null
            text = json.dumps(_finite(payload), separators=(",", ":"), default=str, allow_nan=False)
        self._send(status, text.encode(), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the standard library's name)
        pass  # a browsing session is not worth a line per request


def _warm() -> None:
    """Run each kind of Arrow work once on a tiny table: the first call of a kernel, the Parquet
    reader and the join engine load and register lazily (tens of ms), which a page should not pay."""
    import io

    import pyarrow.compute as pc
    import pyarrow.dataset  # noqa: F401  (pyarrow.parquet.read_table imports it on its first call)
    import pyarrow.parquet as pq

    table = pa.table({"case_id": ["b", "a"], "status": ["passed", "failed"], "n": [1.0, 2.0]})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    table = pq.read_table(io.BytesIO(sink.getvalue()), columns=["case_id", "status", "n"])
    pc.sort_indices(table, sort_keys=[("case_id", "ascending")])
    pc.value_counts(table["status"])
    pc.quantile(table["n"], q=0.5)
    pc.match_substring(table["case_id"], "a", ignore_case=True)
    grouped = table.group_by("case_id").aggregate([("n", "sum")])
    grouped.join(grouped, keys="case_id", join_type="full outer", left_suffix="_a", right_suffix="_b")


def _finite(value: Any) -> Any:
    """``value`` with each NaN or infinite number made None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _family(host: str) -> socket.AddressFamily:
    """The address family to listen with on ``host``: IPv6 for an IPv6 address or a name that has
    only those, else IPv4 (a name that cannot be resolved fails at bind, which says so)."""
    try:
        found = socket.getaddrinfo(host or None, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return socket.AF_INET
    families = [family for family, *_ in found]
    return socket.AF_INET if socket.AF_INET in families else families[0]


def _host_name(header: str) -> str:
    if header.startswith("["):
        return header.split("]")[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _static_files() -> dict[str, bytes]:
    """The pages, by file name: read once, so a URL can only pick one of these."""
    folder = resources.files("farm.view") / "static"
    return {entry.name: entry.read_bytes() for entry in folder.iterdir() if entry.is_file()}


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values and values[-1] != "" else None


def _number(query: dict[str, list[str]], name: str, default: int) -> int:
    value = _one(query, name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, not {value!r}.") from None


def _case_query(query: dict[str, list[str]]) -> CaseQuery:
    statuses = tuple(status for value in query.get("status", []) for status in value.split(",") if status)
    return CaseQuery(
        status=statuses,
        tag=_one(query, "tag"),
        agent=_one(query, "agent"),
        text=_one(query, "q"),
        sort=_one(query, "sort") or "case_id",
        descending=_one(query, "desc") in ("1", "true"),
        offset=_number(query, "offset", 0),
        limit=_number(query, "limit", 50),
    )


def _masked(value: Any, key: str = "") -> Any:
    """``run.json``'s config as shown: values of secret-looking keys and every header value masked
    (the farm writes none, but a file another tool wrote might)."""
    if isinstance(value, dict):
        if key.lower() == "headers":
            return {name: "…" for name in value}
        return {name: ("…" if looks_secret(name) and item else _masked(item, name)) for name, item in value.items()}
    if isinstance(value, list):
        return [_masked(item, key) for item in value]
    return value
