"""A scripted OpenAI-compatible agent for integration tests, served on 127.0.0.1.

The last user message picks the behaviour; anything else is the demo expense agent:

- ``slow <seconds>``: answers "done" after that many seconds
- ``always 500``: an internal server error, every time
- ``429 once <tag>``: the first request with this tag gets 429 + ``Retry-After: 1``
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from farm.demo.agent import handle as demo_handle
from farm.demo.server import Response, chat_completion


class ScriptedAgent:
    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        messages = (body or {}).get("messages") or []
        last_user = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "") or ""
        text = last_user if isinstance(last_user, str) else ""
        if text.startswith("slow "):
            return Response(chat_completion("done"), delay=float(text.split()[1]))
        if text == "always 500":
            return Response({"error": {"message": "boom"}}, status=500)
        if text.startswith("429 once"):
            with self._lock:
                self.seen[text] += 1
                first = self.seen[text] == 1
            if first:
                return Response({"error": {"message": "rate limited"}}, status=429, headers={"Retry-After": "1"})
            return Response(chat_completion("recovered after the rate limit"))
        return demo_handle(path, body, headers)


def farm_toml(url: str, **connector: Any) -> str:
    """A farm.toml with agent ``target`` on the server at ``url``."""
    extra = "".join(f"{k} = {v!r}\n" if not isinstance(v, str) else f'{k} = "{v}"\n' for k, v in connector.items())
    return f"""
[farm]
default_agent = "target"
results_dir = "results"

[connectors.local]
base_url = "{url}/v1"
model = "scripted"
max_retries = 2
{extra}
[agents.target]
kind = "openai"
connector = "local"
tool_mocks = {{ create_expense = {{ expense = {{ id = "EXP-1", status = "draft" }} }}, submit_expense = {{ expense = {{ id = "EXP-1", status = "submitted" }} }} }}
"""
