"""A small threaded JSON-over-HTTP server on 127.0.0.1, for the demo agent and for tests.

``handler(path, body, headers) -> Response`` decides every answer, so the same
server plays an OpenAI-compatible agent, a custom HTTP agent, or one that
answers 429 before it succeeds.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["JSONServer", "Response", "chat_completion"]


@dataclass
class Response:
    body: Any
    """Sent as JSON; bytes are sent as they are (an empty body, a body that is no JSON)."""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering (a slow agent)."""


Handler = Callable[[str, Any, dict[str, str]], Response]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default 5 drops bursts of connections
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a cancelled request) is no error of the server's: no traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class JSONServer:
    """Serve ``handler`` on ``127.0.0.1:port`` (0: any free port) in a background thread."""

    def __init__(self, handler: Handler, port: int = 0, host: str = "127.0.0.1"):
        self.handler = handler
        self.requests = 0
        self._lock = threading.Lock()
        outer = self

        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    self._send(Response({"error": {"message": "body is not JSON"}}, status=400))
                    return
                with outer._lock:
                    outer.requests += 1
                try:
                    response = outer.handler(self.path, body, dict(self.headers))
                except Exception as exc:  # a broken handler answers 500, like a real server
                    response = Response({"error": {"message": f"{type(exc).__name__}: {exc}"}}, status=500)
                if response.delay:
                    time.sleep(response.delay)
                self._send(response)

            do_GET = do_POST

            def _send(self, response: Response) -> None:
                data = response.body if isinstance(response.body, bytes) else json.dumps(response.body).encode()
                try:
                    self.send_response(response.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in response.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self._server = _Server((host, port), _RequestHandler)
        self._thread = threading.Thread(target=lambda: self._server.serve_forever(poll_interval=0.05), name="farm-json-server", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> JSONServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> JSONServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def chat_completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    model: str = "farm-demo",
    usage: tuple[int, int] = (10, 5),
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An OpenAI ``chat.completion`` body. ``tool_calls``: ``[{"name", "arguments"}]``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": call.get("id") or f"call_{i}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))},
            }
            for i, call in enumerate(tool_calls)
        ]
    if extra:
        message.update(extra)
    return {
        "id": "chatcmpl-farm",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }
