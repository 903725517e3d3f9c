"""An agent behind a custom JSON endpoint (``kind = "http"``).

The request body is the agent's ``request`` template (any JSON; default
``{"messages": "{{messages}}"}``). A string that is exactly a placeholder is
replaced by the value itself (a list stays a list); a placeholder inside a
longer string is replaced by its text (JSON for non-strings). Placeholders:

==================  ==========================================================
``{{messages}}``    the conversation, OpenAI-style messages
``{{input}}``       the content of the newest user message
``{{options}}``     the case's options (as a dict)
``{{session_id}}``  the session id (below)
``{{model}}``       the connector's model, or null
==================  ==========================================================

The answer is read with JSONPath (jsonpath-ng): ``content_path`` (default
``$.content``; a body in the OpenAI ``choices`` shape is read as one when no
``content_path`` is set), ``tool_calls_path`` (default ``$.tool_calls``: a list
of ``{name, arguments}``), ``awaiting_input_path`` (default
``$.awaiting_input``) and ``input_hint_path`` (default ``$.input_hint``). A 2xx
body that is not JSON is the reply's text.

Server-side sessions: with ``session_header`` set, every request carries
``<session_header>: <session id>``. The id is ``options["session_id"]`` when
the caller gives one, else one id per client. When a response carries the same
header, its value is adopted for the rest of that session.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import OrderedDict
from typing import Any

from farm.agents.base import AgentResponseError, Message, Reply, replied, stable_options
from farm.agents.openai import (
    as_bool,
    content_text,
    excerpt,
    parse_completion,
    parse_tool_calls,
    parse_usage,
)
from farm.agents.permits import Limiter, NoLimit, estimate_tokens
from farm.agents.retry import request_json, with_retries
from farm.agents.transport import HTTPClient, HTTPReply
from farm.config import AgentConfig, Connector
from farm.errors import UsageError
from farm.jsonpaths import parse_path

__all__ = ["DEFAULT_TEMPLATE", "HTTPAgent", "PLACEHOLDERS", "fill_template"]

DEFAULT_TEMPLATE: dict[str, Any] = {"messages": "{{messages}}"}

PLACEHOLDERS = ("messages", "input", "options", "session_id", "model")

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

_DEFAULT_PATHS = {
    "content_path": "$.content",
    "tool_calls_path": "$.tool_calls",
    "awaiting_input_path": "$.awaiting_input",
    "input_hint_path": "$.input_hint",
}

#: Sessions whose server-assigned id a client remembers (one client may serve many conversations).
_ADOPTED_LIMIT = 4096

_MISSING = object()


def fill_template(template: Any, values: dict[str, Any]) -> Any:
    """``template`` with its ``{{name}}`` placeholders filled from ``values`` (see the module doc)."""
    if isinstance(template, dict):
        return {key: fill_template(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [fill_template(value, values) for value in template]
    if not isinstance(template, str):
        return template
    whole = _PLACEHOLDER.fullmatch(template.strip())
    if whole and whole.group(1) in values:
        return values[whole.group(1)]

    def text(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            return match.group(0)
        value = values[name]
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return _PLACEHOLDER.sub(text, template)


def _placeholders(template: Any) -> set[str]:
    if isinstance(template, dict):
        return set().union(*(_placeholders(v) for v in template.values())) if template else set()
    if isinstance(template, list):
        return set().union(*(_placeholders(v) for v in template)) if template else set()
    if isinstance(template, str):
        return set(_PLACEHOLDER.findall(template))
    return set()


def _last_user_content(messages: list[Message]) -> Any:
    for message in reversed(messages):
        if message.get("role") == "user":
            return message.get("content")
    return None


class HTTPAgent:
    """``send(messages, options) -> Reply`` over a custom JSON endpoint.

    ``connector`` gives the URL (unless the agent has ``url``), key, headers,
    timeout and retries; without one, the defaults of :class:`Connector` apply.
    """

    def __init__(
        self,
        connector: Connector | None,
        agent_config: AgentConfig,
        http: HTTPClient | None = None,
        limiter: Limiter | None = None,
    ):
        where = f'agents."{agent_config.id}"'
        lacking = agent_config.lacks(connector.name if connector else None)  # the one rule of what a kind needs
        if lacking is not None:
            raise UsageError(f"{where}: {lacking[1]}")
        url = agent_config.url or (connector.base_url if connector else "")
        self.config = agent_config
        self.url = url
        self.connector = connector if connector is not None else Connector(name=agent_config.id, base_url=url)
        self.template = DEFAULT_TEMPLATE if agent_config.request is None else agent_config.request
        unknown = sorted(_placeholders(self.template) - set(PLACEHOLDERS))
        if unknown:
            known = ", ".join("{{" + p + "}}" for p in PLACEHOLDERS)
            raise UsageError(f"{where}.request: unknown placeholder {{{{{unknown[0]}}}}} (known: {known})")
        self.paths = {}
        for field, default in _DEFAULT_PATHS.items():
            expression = getattr(agent_config, field) or default
            try:
                self.paths[field] = parse_path(expression)
            except ValueError as exc:  # the config refuses it as it loads; an AgentConfig made in code may not have been
                raise UsageError(f"{where}.{field}: {exc}") from None
        self.limiter: Limiter = limiter or NoLimit()
        self._owns_http = http is None
        self._http = http if http is not None else HTTPClient()
        self._own_session = uuid.uuid4().hex
        self._adopted: OrderedDict[str, str] = OrderedDict()

    # -- sessions -------------------------------------------------------------

    def session_id(self, options: dict[str, Any]) -> str:
        """The session id a call with these options carries."""
        given = options.get("session_id")
        key = str(given) if given else self._own_session
        return self._adopted.get(key, key)

    def _adopt(self, options: dict[str, Any], response: HTTPReply) -> None:
        header = self.config.session_header
        value = response.headers.get(header) if header else None
        if not value:
            return
        given = options.get("session_id")
        key = str(given) if given else self._own_session
        if value == key:
            self._adopted.pop(key, None)
            return
        self._adopted[key] = value
        self._adopted.move_to_end(key)
        while len(self._adopted) > _ADOPTED_LIMIT:
            self._adopted.popitem(last=False)

    # -- one call -------------------------------------------------------------

    def request_body(self, messages: list[Message], options: dict[str, Any]) -> Any:
        return fill_template(
            self.template,
            {
                "messages": messages,
                "input": _last_user_content(messages),
                "options": options,
                "session_id": self.session_id(options),
                "model": self.connector.model,
            },
        )

    def cache_key_parts(self, messages: list[Message], options: dict[str, Any]) -> dict[str, Any]:
        """What decides the answer (:mod:`farm.roles.cache`): the endpoint and the template with the
        messages and stable options; the session id, new in every run, is left out."""
        return {
            "kind": "http",
            "agent": self.config.id,
            "connector": self.connector.name,
            "url": self.url,
            "model": self.connector.model,
            "method": self.config.method,
            "template": self.template,
            "messages": messages,
            "options": stable_options(options),
        }

    def request_headers(self, options: dict[str, Any]) -> dict[str, str]:
        headers = dict(self.connector.headers)
        key = self.connector.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        if self.config.session_header:
            headers[self.config.session_header] = self.session_id(options)
        return headers

    async def send(self, messages: list[Message], options: dict[str, Any]) -> Reply:
        options = options or {}
        response, data, retries = await request_json(
            self._http,
            self.config.method,
            self.url,
            body=self.request_body(messages, options),
            headers=self.request_headers(options),
            connector=self.connector,
            limiter=self.limiter,
            tokens=estimate_tokens(messages, self.config.max_tokens),
            agent=self.config.id,
            text_ok=True,
        )
        self._adopt(options, response)
        try:
            reply = self.parse(data)
        except AgentResponseError as exc:
            raise with_retries(AgentResponseError(f"Cannot read the reply of agent '{self.config.id}': {exc}"), retries) from None
        reply.retries = retries
        reply.cost_usd = self.connector.cost(reply.usage)
        return reply

    def parse(self, data: Any) -> Reply:
        """The decoded body as a :class:`Reply`, through the configured JSONPaths."""
        if isinstance(data, str):
            return replied(Reply(content=data, raw=data), data if data.strip() else None, "the body", "empty")
        config = self.config
        completion = None
        if config.content_path is None and isinstance(data, dict) and "choices" in data:
            reply = completion = parse_completion(data)
        else:
            content = self._find("content_path", data)
            calls = parse_tool_calls(self._calls(data), self._calls_where())
            if content is _MISSING and not calls:
                path = config.content_path or _DEFAULT_PATHS["content_path"]
                raise AgentResponseError(f"nothing at {path} in the body: {excerpt(data)}")
            text = "" if content is _MISSING else content_text(content, others="json")
            usage = data.get("usage") if isinstance(data, dict) else None
            reply = Reply(content=text, tool_calls=calls, usage=parse_usage(usage), raw=data)
        if config.tool_calls_path is not None:
            reply.tool_calls = parse_tool_calls(self._calls(data), self._calls_where())
        awaiting = self._find("awaiting_input_path", data)
        if awaiting is not _MISSING and as_bool(awaiting) is not None:
            reply.awaiting_input = as_bool(awaiting)
        hint = self._find("input_hint_path", data)
        if isinstance(hint, str):
            reply.input_hint = hint
        if reply is not completion:
            found = self._find("content_path", data)
            return replied(reply, None if found is _MISSING else found, config.content_path or _DEFAULT_PATHS["content_path"])
        return reply

    def _find(self, field: str, data: Any) -> Any:
        matches = self.paths[field].find(data)
        return matches[0].value if matches else _MISSING

    def _calls_where(self) -> str:
        return f"the tool calls at {self.config.tool_calls_path or _DEFAULT_PATHS['tool_calls_path']}"

    def _calls(self, data: Any) -> Any:
        """What the tool-calls path found: None (nothing), the one list it found, or the matches
        as a list; :func:`parse_tool_calls` then refuses anything that is not a list of calls."""
        matches = [m.value for m in self.paths["tool_calls_path"].find(data)]
        if not matches:
            return None
        if len(matches) == 1 and (matches[0] is None or not isinstance(matches[0], dict)):
            return matches[0]
        return matches

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    def __repr__(self) -> str:
        return f"HTTPAgent({self.config.id!r}, url={self.url!r})"
