"""An agent behind any OpenAI-compatible ``/chat/completions`` endpoint (``kind = "openai"``).

Also home of the reading of OpenAI-shaped replies (:func:`parse_completion`,
:func:`parse_tool_calls`, ...), which the HTTP and Python agents reuse when an
answer comes in that shape.

What is sent: ``model`` (the connector's), ``messages`` (after the agent's
``system_prompt`` unless the conversation already starts with a system
message), ``tools``, ``temperature``, ``max_tokens`` and every key of
``params`` (last, so they can override anything). Of the case's options only
``user`` is sent (OpenAI's end-user id, taken from ``options["user"]`` or
``options["metadata"]["user"]``). ``options["metadata"]`` is *not* sent: many
OpenAI-compatible servers reject fields they do not know. An agent that wants
it can ask for it with ``kind = "http"`` and a ``{{options}}`` template.
``options["connector"]`` is the caller's business (it picks the connector
before the client is built).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from farm.agents.base import AgentResponseError, Message, Reply, ToolCall, parse_arguments, replied
from farm.agents.permits import Limiter, NoLimit, estimate_tokens
from farm.agents.retry import request_json, with_retries
from farm.agents.transport import HTTPClient
from farm.config import AgentConfig, Connector
from farm.excerpts import DOTS, clip
from farm.jsontext import as_text
from farm.messages import content_text
from farm.results import Usage

__all__ = [
    "OpenAIAgent",
    "as_bool",
    "declared_awaiting",
    "excerpt",
    "parse_arguments",
    "parse_completion",
    "parse_tool_calls",
    "parse_usage",
]


class OpenAIAgent:
    """``send(messages, options) -> Reply`` over ``POST {base_url}/chat/completions``.

    ``http``: a client to share (the caller closes it); without one the agent
    makes a small one of its own and closes it in :meth:`aclose`.
    """

    def __init__(
        self,
        connector: Connector,
        agent_config: AgentConfig,
        http: HTTPClient | None = None,
        limiter: Limiter | None = None,
    ):
        self.connector = connector
        self.config = agent_config
        self.url = _chat_completions_url(connector.base_url)
        self.limiter: Limiter = limiter or NoLimit()
        self._owns_http = http is None
        self._http = http if http is not None else HTTPClient()

    def request_body(self, messages: list[Message], options: dict[str, Any]) -> dict[str, Any]:
        """The JSON body for one call (no secrets: the key travels in a header)."""
        config = self.config
        if config.system_prompt and not (messages and messages[0].get("role") == "system"):
            messages = [{"role": "system", "content": config.system_prompt}, *messages]
        body: dict[str, Any] = {"messages": messages}
        if self.connector.model:
            body["model"] = self.connector.model
        if config.tools:
            body["tools"] = config.tools
        if config.temperature is not None:
            body["temperature"] = config.temperature
        if config.max_tokens is not None:
            body["max_tokens"] = config.max_tokens
        user = _end_user(options)
        if user:
            body["user"] = user
        body.update(config.params)
        return body

    def cache_key_parts(self, messages: list[Message], options: dict[str, Any]) -> dict[str, Any]:
        """What decides the answer (:mod:`farm.roles.cache`): the body as sent, where options reach
        only as ``user`` and metadata and session ids never do."""
        return {"kind": "openai", "agent": self.config.id, "connector": self.connector.name, "body": self.request_body(messages, options)}

    def request_headers(self) -> dict[str, str]:
        headers = dict(self.connector.headers)
        key = self.connector.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def send(self, messages: list[Message], options: dict[str, Any]) -> Reply:
        body = self.request_body(messages, options or {})
        _, data, retries = await request_json(
            self._http,
            "POST",
            self.url,
            body=body,
            headers=self.request_headers(),
            connector=self.connector,
            limiter=self.limiter,
            tokens=estimate_tokens(body["messages"], self.config.max_tokens),
            agent=self.config.id or self.connector.name,
        )
        try:
            reply = parse_completion(data)
        except AgentResponseError as exc:
            raise with_retries(AgentResponseError(f"Cannot read the reply of agent '{self.config.id}': {exc}"), retries) from None
        reply.retries = retries
        reply.cost_usd = self.connector.cost(reply.usage)
        return reply

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    def __repr__(self) -> str:
        return f"OpenAIAgent({self.config.id!r}, connector={self.connector.name!r})"


def _chat_completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions``, keeping the base's query (some gateways put a version there)."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/chat/completions"))


def _end_user(options: dict[str, Any]) -> str | None:
    user = options.get("user")
    if user is None and isinstance(options.get("metadata"), dict):
        user = options["metadata"].get("user")
    return user if isinstance(user, str) and user else None


# -- reading OpenAI-shaped replies --------------------------------------------


def excerpt(value: Any, limit: int = 200) -> str:
    """A short JSON rendering of ``value`` for an error message."""
    return clip(as_text(value), limit, DOTS)


def parse_completion(data: Any) -> Reply:
    """A ``chat.completion`` body as a :class:`Reply`; :class:`AgentResponseError` if it is not one."""
    if not isinstance(data, dict):
        raise AgentResponseError(f"the body is not a JSON object: {excerpt(data)}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = data.get("error")
        if error:
            detail = error.get("message") if isinstance(error, dict) else error
            raise AgentResponseError(f"the endpoint reported an error: {excerpt(detail)}")
        raise AgentResponseError(f"the body has no choices: {excerpt(data)}")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise AgentResponseError(f"choices[0].message is {_kind(message)}, not an object: {excerpt(choice)}")
    content = _checked_content(message.get("content"), "choices[0].message.content")
    if not content and isinstance(message.get("refusal"), str):
        content = message["refusal"]
    calls = parse_tool_calls(message.get("tool_calls"), "choices[0].message.tool_calls")
    if not calls and message.get("function_call") is not None:  # the pre-tools API
        calls = parse_tool_calls([message["function_call"]], "choices[0].message.function_call")
    awaiting, hint = declared_awaiting(message, data)
    reply = Reply(
        content=content,
        tool_calls=calls,
        awaiting_input=awaiting,
        input_hint=hint,
        finish_reason=choice.get("finish_reason"),
        usage=parse_usage(data.get("usage")),
        raw=data,
    )
    sent = message.get("content")
    if sent is None and isinstance(message.get("refusal"), str):  # a refusal is a reply
        sent = message["refusal"]
    return replied(reply, sent, "choices[0].message.content")


def _checked_content(content: Any, where: str) -> str:
    """The content at ``where`` as text (:func:`farm.messages.content_text`), once it is checked.

    The protocol allows null, a string, or a list of strings and part objects;
    anything else is an :class:`AgentResponseError`.
    """
    if isinstance(content, list):
        for index, part in enumerate(content):
            if not isinstance(part, (str, dict)):
                raise AgentResponseError(f"{where}[{index}] is {_kind(part)}, not a content part: {excerpt(content)}")
    elif content is not None and not isinstance(content, str):
        raise AgentResponseError(f"{where} is {_kind(content)}, not a string or a list of parts: {excerpt(content)}")
    return content_text(content)


def _kind(value: Any) -> str:
    """``value``'s JSON type with an article, for a message: "null", "a number", "an object"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def parse_tool_calls(value: Any, where: str = "tool_calls") -> list[ToolCall]:
    """Tool calls in the OpenAI shape (``{id, function: {name, arguments}}``) or flat (``{name, arguments}``).

    Null is no calls. Anything but a list of call objects with names breaks
    the protocol: an :class:`AgentResponseError` saying what was wrong
    (``where`` names the field).
    """
    if value is None:
        return []
    if not isinstance(value, list):
        raise AgentResponseError(f"{where} is {_kind(value)}, not a list of tool calls: {excerpt(value)}")
    calls = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise AgentResponseError(f"{where}[{index}] is {_kind(item)}, not a tool call object: {excerpt(value)}")
        function: dict[str, Any] = item["function"] if isinstance(item.get("function"), dict) else item
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise AgentResponseError(f"{where}[{index}] has no name: {excerpt(item)}")
        arguments = function.get("arguments", function.get("args"))
        calls.append(ToolCall(id=item.get("id"), name=name, arguments=parse_arguments(arguments)))
    return calls


def parse_usage(value: Any) -> Usage:
    """Token usage from ``{prompt_tokens, completion_tokens, total_tokens}`` (or input/output tokens),
    with the cached prompt tokens of ``prompt_tokens_details.cached_tokens``."""
    if isinstance(value, Usage):
        return value
    if not isinstance(value, dict):
        return Usage()

    def number(*keys: str) -> int:
        for key in keys:
            if isinstance(value.get(key), (int, float)):
                return int(value[key])
        return 0

    prompt = number("prompt_tokens", "input_tokens")
    completion = number("completion_tokens", "output_tokens")
    total = number("total_tokens") or prompt + completion
    # Chat Completions says prompt_tokens_details.cached_tokens; the Responses API input_tokens_details
    details = value.get("prompt_tokens_details") or value.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = int(cached) if isinstance(cached, (int, float)) and not isinstance(cached, bool) else 0
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total, cached_tokens=min(cached, prompt))


def as_bool(value: Any) -> bool | None:
    """A declared flag: a bool, or ``"true"``/``"false"``/1/0; None for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        return value.strip().lower() in ("true", "yes")
    return None


def declared_awaiting(*sources: Any) -> tuple[bool | None, str | None]:
    """``awaiting_input`` and ``input_hint`` from the first object that declares them.

    Non-standard fields an agent may add to the message or to the top level
    of its answer (docs/reference/cases.md, awaiting input: detection by explicit declaration).
    """
    awaiting: bool | None = None
    hint: str | None = None
    for source in sources:
        if not isinstance(source, dict):
            continue
        if awaiting is None:
            awaiting = as_bool(source.get("awaiting_input"))
        if hint is None and isinstance(source.get("input_hint"), str):
            hint = source["input_hint"]
    return awaiting, hint
