"""``farm.toml``: the farm's settings, connectors and agents (docs/reference/config.md).

The docstring under each field is its entry in docs/reference/config.md
(``python -m farm.cli.reference`` writes the tables from them).

API keys are never read from the file: a connector names the environment
variable that holds its key (``api_key_env``), and :meth:`Connector.api_key`
reads it at call time. Nothing here ever prints or serialises a key.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator
from pydantic_core import PydanticCustomError

from farm.configcheck import config_problems, key_place, toml_problem
from farm.durations import parse_duration
from farm.errors import ConfigError, UsageError
from farm.jsonpaths import path_problem
from farm.results._records import Usage
from farm.secrets import MASK, redact_url, register
from farm.sequential import pass_rate_problem
from farm.wording import nearest, shown

__all__ = [
    "HTTP_METHODS",
    "AgentConfig",
    "Connector",
    "FarmConfig",
    "FarmSettings",
    "Price",
    "Resources",
    "find_config",
    "load_config",
    "otlp_problem",
    "url_problem",
]

CONFIG_NAME = "farm.toml"

NO_CONFIG = f"no {CONFIG_NAME} in this folder (nor beside the input file or in its parents)"
"""The cause of a mistake when no ``farm.toml`` was found (:func:`find_config`'s places)."""

DEFAULT_INPUT_TOOLS = ("request_confirmation", "ask_user", "get_user_input")


HTTP_METHODS = ("POST", "PUT", "PATCH", "GET", "DELETE")
"""The methods an http agent sends its request with (``method``; POST unless it says another)."""


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a URL the farm can send to (one with ``http://`` or ``https://`` and a
    host), or None; a URL written without its scheme is given back with one, as a suggestion."""
    try:
        parts = urlsplit(url.strip())
        fine = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:  # an unclosed [IPv6] host, a port that is no number
        fine = False
    if fine:
        return None
    bare = url.strip()
    hint = f" (did you mean 'http://{shown(bare)}'?)" if bare and "://" not in bare and not any(c.isspace() for c in bare) else ""
    return f"'{shown(url)}' is not a URL: a URL begins with http:// or https:// and a host{hint}"


def otlp_problem(endpoint: str) -> str | None:
    """Why ``endpoint`` is not an OTLP/HTTP endpoint's base URL (``--otlp``, ``[farm].otlp_endpoint``), or None."""
    if url_problem(endpoint.strip().rstrip("/").removesuffix("/v1/traces")) is None:
        return None
    return f"'{shown(endpoint)}' is not an http(s) URL of an OTLP/HTTP endpoint (e.g. http://127.0.0.1:4318)"


def _checked(problem: Any) -> Any:
    """A field validator from a ``*_problem`` function: its sentence is the key's problem."""

    def check(value: Any) -> Any:
        said = problem(value) if value is not None else None
        if said:
            raise ValueError(said)
        return value

    return check


def _finite(value: Any) -> Any:
    """An amount of USD must be a number: TOML's ``inf`` and ``nan`` would make every cost ``nan``."""
    if isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("finite_number", "{value} is not a finite amount of USD", {"value": value})
    return value


class Price(BaseModel):
    """What a connector's tokens cost, in USD per million tokens (``price = { input = 2.50, output = 10.00 }``)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    """USD per million prompt tokens."""
    output: float = Field(ge=0)
    """USD per million completion tokens."""
    cached_input: float | None = Field(default=None, ge=0)
    """USD per million prompt tokens the API served from its cache (``cached_tokens``); unset: ``input``."""

    _finite_amounts = field_validator("input", "output", "cached_input", mode="before")(_finite)

    def cost(self, usage: Usage) -> float:
        """The USD ``usage`` costs at this price; cached prompt tokens at ``cached_input`` when set."""
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        micro = (usage.prompt_tokens - cached) * self.input + cached * cached_rate + usage.completion_tokens * self.output
        return micro / 1_000_000


class Connector(BaseModel):
    """An LLM or HTTP endpoint and its limits."""

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    """The connector's name: its table's key (``[connectors.<name>]``), set by the farm."""
    base_url: str
    """The endpoint: an OpenAI-compatible API's base URL (``https://api.openai.com/v1``), or an http
    agent's URL when the agent gives none. Credentials in it are treated as secrets."""
    model: str | None = None
    """The model sent with every request (``{{model}}`` in an http agent's template)."""
    api_key_env: str | None = None
    """The environment variable that holds the API key, sent as ``Authorization: Bearer``; read at call
    time, never written. Named but not set: ``farm test`` stops before anything starts."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Headers sent with every request; values whose names look secret are masked in every output."""
    rpm: int | None = Field(default=None, ge=1)
    """Requests per minute, cluster-wide (unset: no limit)."""
    tpm: int | None = Field(default=None, ge=1)
    """Tokens per minute, cluster-wide (unset: no limit)."""
    max_concurrency: int | None = Field(default=None, ge=1)
    """Requests in flight at once, cluster-wide (unset: no limit); also sizes ``--parallel``'s default."""
    burst: int | None = Field(default=None, ge=1)
    """Requests that may go at once before the rpm paces them (default: a second's worth, rpm/60, at least 1)."""
    timeout: float = 60.0
    """One request's timeout (a duration); one that exhausts its retries ends the case as ``timeout``."""
    max_retries: int = Field(default=5, ge=0)
    """Retries of a request after a 429, a 5xx or a connection error, honouring ``Retry-After``."""
    max_reply_bytes: int = Field(default=10_000_000, ge=1)
    """Largest reply body read, counted after decompression; a larger one is an error of that turn."""
    cache: bool | None = None
    """Whether role calls on this connector go through the role cache (default: yes, unless the
    role agent sets a temperature above 0); an agent's own ``cache`` wins."""
    price: Price | None = None
    """What its tokens cost; every call it serves then records ``cost_usd``. Unset: no cost, never a guessed one."""

    _url = field_validator("base_url")(_checked(url_problem))

    def cost(self, usage: Usage) -> float | None:
        """The USD ``usage`` costs on this connector; None when it has no ``price``."""
        return None if self.price is None else self.price.cost(usage)

    @field_validator("timeout", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float:
        return parse_duration(v)

    def api_key(self) -> str | None:
        """The key from the environment, or None. Never logged or stored.

        A key with a newline or spaces around it (``echo key > file`` then
        ``export KEY=$(cat file)`` on some shells, a copied line) would make
        an invalid header deep in a request: it is a :class:`UsageError` here.
        """
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env) or None
        if key is not None and key != key.strip():
            where = "ends" if key[-1:].isspace() else "starts"
            raise UsageError(
                f"${self.api_key_env}, the API key of connector '{self.name}', {where} with a newline or space;"
                f" set it without (export {self.api_key_env}=\"$(printf %s \"${self.api_key_env}\" | tr -d '[:space:]')\")"
            )
        return key

    def _key_state(self) -> str:
        try:
            return "set" if self.api_key() else "not set"
        except UsageError:
            return "set, with a stray newline or space"

    def redacted(self) -> dict[str, Any]:
        """A description safe to print or write: the key's variable, never its value."""
        data = self.model_dump()
        data["api_key"] = f"${self.api_key_env} ({self._key_state()})" if self.api_key_env else None
        data["base_url"] = redact_url(self.base_url)
        data["headers"] = {k: MASK for k in self.headers}  # a header is where keys go
        return data


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_RAY_OWN = ("CPU", "GPU", "memory", "object_store_memory")


def _amount(value: float, what: str) -> float:
    # Ray takes fractions of one unit, and whole units above one (1.5 GPUs is refused)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a number of at least 0")
    if value > 1 and value != int(value):
        raise ValueError(f"{what} above 1 must be a whole number, as Ray requires (got {value})")
    return value


class Resources(BaseModel):
    """What one conversation slot of an agent needs on a Ray cluster, in Ray's names; the ray
    engine starts the agent's actors with them (:mod:`farm.actors.placement`)."""

    model_config = ConfigDict(extra="forbid")

    num_cpus: float | None = None
    """CPUs per slot (a fraction of one, or whole CPUs)."""
    num_gpus: float | None = None
    """GPUs per slot (a fraction of one, or whole GPUs)."""
    memory: int | None = None
    """Bytes; ``"4GiB"``, ``"512MB"`` are read as such."""
    custom: dict[str, float] = Field(default_factory=dict)
    """Custom node resources (``{ "A100" = 1 }``)."""

    @field_validator("num_cpus", "num_gpus")
    @classmethod
    def _units(cls, v: float | None, info: Any) -> float | None:
        return None if v is None else _amount(v, info.field_name)

    @field_validator("memory", mode="before")
    @classmethod
    def _bytes(cls, v: Any) -> int:
        match = _SIZE.match(v) if isinstance(v, str) else None
        if isinstance(v, bool) or not (match or isinstance(v, int)) or (isinstance(v, int) and v <= 0):
            raise ValueError(f"{v!r} is not an amount of memory (use e.g. \"4GiB\", \"512MiB\" or a number of bytes)")
        if isinstance(v, int):
            return v
        assert match is not None
        size = int(float(match[1]) * _SIZE_UNITS[(match[2] or "b").lower()])
        if size <= 0:
            raise ValueError(f"{v!r} is no memory at all")
        return size

    @field_validator("custom")
    @classmethod
    def _custom(cls, v: dict[str, float]) -> dict[str, float]:
        for name, amount in v.items():
            if name in _RAY_OWN:
                raise ValueError(f"'{name}' is one of Ray's own resources: use num_cpus, num_gpus or memory")
            _amount(amount, f"custom.{name}")
        return v

    def ray_options(self) -> dict[str, Any]:
        """The options of ``ActorClass.options(...)`` for one slot."""
        options: dict[str, Any] = {k: v for k, v in (("num_cpus", self.num_cpus), ("num_gpus", self.num_gpus), ("memory", self.memory)) if v}
        if self.custom:
            options["resources"] = dict(self.custom)
        return options

    def demand(self) -> dict[str, float]:
        """What one slot asks of a node, in the names of ``ray.nodes()`` (``CPU``, ``GPU``, ``memory``, custom)."""
        wanted = {"CPU": self.num_cpus or 0, "GPU": self.num_gpus or 0, "memory": float(self.memory or 0), **self.custom}
        return {k: v for k, v in wanted.items() if v}


AgentKind = Literal["openai", "http", "python", "simulator", "validator", "generator", "reporter"]


class AgentConfig(BaseModel):
    """An agent: the one under test, or one playing a role (simulator, validator, ...)."""

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    """The agent's id: its table's key (``[agents."<id>"]``), set by the farm."""
    kind: AgentKind = "openai"
    """``openai`` (an OpenAI-compatible chat endpoint), ``http`` (a custom JSON endpoint), ``python``
    (a function); or a role played with a built-in prompt: ``simulator``, ``validator``,
    ``generator``, ``reporter``."""
    connector: str | None = None
    """The connector it is reached through (its endpoint, model, key and limits)."""
    description: str | None = None
    """What the agent does, for people and for a generator's prompt (``{target_description}``)."""
    # kind = "python"
    entry: str | None = None
    """``kind = "python"``: ``"module:function"``, a sync or async function of ``(messages, options)``
    returning the reply (docs/reference/roles.md); it must import and take those two arguments, or
    ``farm test`` and ``farm validate`` stop (exit 2)."""
    # kind = "http"
    url: str | None = None
    """``kind = "http"``: the endpoint (default: the connector's ``base_url``)."""
    method: str = "POST"
    """``kind = "http"``: the HTTP method: ``POST``, ``PUT``, ``PATCH``, ``GET`` or ``DELETE``."""
    request: Any = None
    """JSON body template; ``{{messages}}``, ``{{input}}``, ``{{options}}``,
    ``{{session_id}}`` and ``{{model}}`` are filled in."""
    content_path: str | None = None
    """``kind = "http"``: JSONPath of the reply text in the answer (default ``$.content``; a body in
    OpenAI's ``choices`` shape is read as one when unset)."""
    tool_calls_path: str | None = None
    """``kind = "http"``: JSONPath of the tool calls, a list of ``{name, arguments}`` (default ``$.tool_calls``)."""
    awaiting_input_path: str | None = None
    """``kind = "http"``: JSONPath of the agent's own "awaiting input" flag (default ``$.awaiting_input``)."""
    input_hint_path: str | None = None
    """``kind = "http"``: JSONPath of what the agent expects next (default ``$.input_hint``)."""
    session_header: str | None = None
    """``kind = "http"``: a header that carries the session id, for server-side sessions; a response's
    same header is adopted for the rest of the session."""
    # role agents: the agent that plays the role and its prompt
    uses: str | None = None
    """For a role kind: another agent (openai, http or python) that answers the role's calls."""
    prompt: str | None = None
    """For a role kind: a file (relative to farm.toml) whose text replaces the built-in prompt; the
    role's ``{placeholders}`` are filled in and every other brace is kept."""
    # the agent under test
    tools: list[Any] = Field(default_factory=list)
    """OpenAI tool definitions passed with every call."""
    tool_mocks: dict[str, Any] = Field(default_factory=dict)
    """Tool name → its result when the agent calls it: a JSON value, or ``"scripts:<id>"`` (a function of
    the arguments); a case's ``tool_mocks`` win."""
    max_tool_steps: int | None = Field(default=None, ge=1)
    """Agent calls within one turn while tool mocks are answered (a case's own wins; default 8)."""
    input_tools: list[str] = Field(default_factory=lambda: list(DEFAULT_INPUT_TOOLS))
    """Tool names that mean the agent awaits user input."""
    system_prompt: str | None = None
    """Prepended to every conversation as a system message."""
    temperature: float | None = None
    """Sent with every request; a role agent above 0 samples on purpose and is not cached."""
    max_tokens: int | None = None
    """Sent with every request: the most completion tokens."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Extra fields merged into every request body."""
    generate: dict[str, Any] = Field(default_factory=dict)
    """Generator agents: defaults of the ``agents:<id>?k=v`` query (``batch``, ``patience``,
    ``seed``, ``count``, and coverage lists such as ``focus = ["refunds", "travel"]``)."""
    cache: bool | None = None
    """Role agents: whether their calls go through the role cache (default: yes, unless
    ``temperature`` > 0). The agent under test: ``true`` sends its calls through the same cache."""
    resources: Resources | None = None
    """What one conversation slot needs on a Ray cluster (the ray engine places its actors by it)."""
    concurrency: int | None = Field(default=None, ge=1)
    """Conversations one slot's actor runs at once (default: 1 when CPUs or GPUs are declared)."""

    _url = field_validator("url")(_checked(url_problem))
    _paths = field_validator("content_path", "tool_calls_path", "awaiting_input_path", "input_hint_path")(_checked(path_problem))

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        method = v.strip().upper()
        if method not in HTTP_METHODS:
            raise ValueError(f"'{shown(v)}' is not a method an http agent sends with: {', '.join(HTTP_METHODS[:-1])} or {HTTP_METHODS[-1]}{nearest(method, HTTP_METHODS)}")
        return method

    @property
    def is_role(self) -> bool:
        return self.kind in ("simulator", "validator", "generator", "reporter")

    def lacks(self, connector: str | None) -> tuple[str, str] | None:
        """The key this agent needs and lacks, and why, when it is reached through ``connector``
        (its own, or the one ``-c`` or a case puts in its place): None when it has what it needs.
        The one rule of what a kind needs, for the checks before a run and for the client's build."""
        if self.is_role and not self.uses and not connector:
            return "uses", f'a {self.kind} agent needs "uses" (the agent that plays it) or a "connector"'
        if self.kind == "openai" and not connector:
            return "connector", 'kind "openai" needs a connector (set connector = "<name>", or pass -c)'
        if self.kind == "http" and not self.url and not connector:
            return "url", 'kind "http" needs a url (or a connector, whose base_url it is sent to)'
        return None

    @property
    def declares_resources(self) -> bool:
        """Whether this agent asks Ray for anything per slot (so it wants the ray engine)."""
        return bool(self.resources and self.resources.demand())


class FarmSettings(BaseModel):
    """``[farm]``: the run's defaults; a command-line option wins over its key."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("autoscaler_wait", mode="before")
    @classmethod
    def _wait(cls, v: Any) -> float:
        return parse_duration(v)

    default_agent: str | None = None
    """The agent under test when ``-n`` is not given."""
    simulator: str | None = None
    """The simulator of dynamic cases whose ``simulator`` names none (``--simulator`` wins)."""
    validator: str | None = None
    """The validator of ``agent`` assertions (and ``judge`` golden rules) that name none."""
    results_dir: str = "farm-results"
    """Where run folders are written, and where ``farm report`` and ``farm view`` look (relative to farm.toml)."""
    scripts_dir: str = "scripts"
    """The root of ``scripts:<id>`` references (relative to farm.toml); none may leave it."""
    actors: int | None = Field(default=None, ge=1)
    """Session actors to start (default: sized from the cluster)."""
    engine: Literal["auto", "local", "ray"] | None = None
    """Where conversations run when ``--engine`` is not given (default: ``auto``)."""
    autoscaler_wait: float = 300.0
    """How long a run waits for an autoscaling cluster (``--address``) to add nodes that an agent's
    ``resources`` need before it gives up (a duration)."""
    golden_dir: str | None = None
    """Where golden conversations are, for the cases that set ``golden`` (``--golden DIR`` overrides)."""
    max_cost: float | None = Field(default=None, gt=0)
    """A run's budget in USD when ``--max-cost`` is not given: nothing more is dispatched once it is spent."""
    min_pass_rate: float | None = None
    """The share of its tries a repeated case must pass when ``--min-pass-rate`` is not given (0 < R <= 1;
    default 1.0)."""
    traces: bool = False
    """Capture the spans the agent makes in every case run, not only in those that assert on
    traces: they are kept in the results and ``spans.parquet`` (docs/traces.md)."""
    max_spans: int = Field(default=1000, ge=0)
    """The most of the agent's spans a case run keeps; the rest are counted (``spans_dropped``)."""
    trace_receiver: str | None = None
    """``host:port`` of the OTLP/HTTP receiver a remote agent exports its spans to (default: 127.0.0.1
    and a free port, printed when the run starts)."""
    trace_wait: float = Field(default=2.0, ge=0)
    """Seconds the farm waits after a remote agent's turn for its spans to arrive."""
    max_trace_body: int = Field(default=8 << 20, gt=0)
    """The largest OTLP request body the receiver reads, in bytes; a larger one gets 413."""
    otlp_endpoint: str | None = None
    """Where each case run goes as a trace when ``--otlp`` is not given: an OTLP/HTTP endpoint's base
    URL (``http://127.0.0.1:4318``; docs/traces.md)."""

    attribute: bool | None = None
    """Whether a failed dynamic case that no simulator flag settles asks the ``attributor`` whose failure
    it is, when ``--attribute`` is not given (default: false, no extra calls)."""
    attributor: str | None = None
    """The agent that says whose failure a failed dynamic case is (``--attribute``): a validator-kind
    agent (given the built-in attributor prompt), or the user's own http/python service."""
    simulator_failures: Literal["failure", "error"] | None = None
    """What a failed dynamic case blamed on the simulator is (default ``failure``): ``error`` makes it an
    error of the simulator, the farm's part having failed, which ``--retry-errors`` runs again."""

    _finite_budget = field_validator("max_cost", mode="before")(_finite)
    _gate = field_validator("min_pass_rate")(_checked(pass_rate_problem))
    _otlp = field_validator("otlp_endpoint")(_checked(otlp_problem))


class FarmConfig(BaseModel):
    """The parsed ``farm.toml``; ``path`` is where it came from (None: built-in defaults)."""

    model_config = ConfigDict(extra="forbid")

    farm: FarmSettings = Field(default_factory=FarmSettings)
    """``[farm]``: the run's defaults."""
    connectors: dict[str, Connector] = Field(default_factory=dict)
    """``[connectors.<name>]``: endpoints and their limits."""
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    """``[agents."<id>"]``: the agents under test and the role agents."""
    path: Path | None = None
    """Where the file was read from; set by the farm, not a key."""
    _shown: str | None = PrivateAttr(default=None)
    """The file as the user named it (``farm.toml``), as its problems begin."""

    def model_post_init(self, __context: Any) -> None:
        for name, conn in self.connectors.items():
            conn.name = name
        for agent_id, agent in self.agents.items():
            agent.id = agent_id
        register(self)  # so results are scrubbed of this config's secrets (farm.secrets)

    @property
    def base_dir(self) -> Path:
        """Relative paths in the config resolve against its folder."""
        return self.path.parent if self.path else Path.cwd()

    def resolve_path(self, value: str) -> Path:
        p = Path(value)
        return p if p.is_absolute() else (self.base_dir / p)

    @property
    def results_dir(self) -> Path:
        return self.resolve_path(self.farm.results_dir)

    @property
    def scripts_dir(self) -> Path:
        return self.resolve_path(self.farm.scripts_dir)

    @property
    def golden_dir(self) -> Path | None:
        return self.resolve_path(self.farm.golden_dir) if self.farm.golden_dir else None

    def place(self, *key: str) -> str:
        """How a problem of ``key`` (its tables and its name) begins, as the file's other problems
        do: ``farm.toml:12: key 'entry'`` (found when a problem needs it, not at every load)."""
        if self.path is None:
            return f"key '{'.'.join(key)}'"
        try:
            text = _read(self.path)
        except (OSError, UnicodeDecodeError):
            text = ""
        return key_place(self._shown or str(self.path), text, key)

    def agent(self, agent_id: str) -> AgentConfig:
        try:
            return self.agents[agent_id]
        except KeyError:
            if self.path is None and not self.agents:
                raise UsageError(f"{NO_CONFIG}; agent '{shown(agent_id)}' is not configured: write one, give --config PATH, or run `farm init` for a starter project") from None
            known = ", ".join(sorted(self.agents)) or "none"
            where = f" in {self.path}" if self.path else ""
            raise UsageError(f"agent '{shown(agent_id)}' is not configured{where}{nearest(agent_id, self.agents)} (configured: {known})") from None

    def connector(self, name: str) -> Connector:
        try:
            return self.connectors[name]
        except KeyError:
            known = ", ".join(sorted(self.connectors)) or "none"
            where = f" in {self.path}" if self.path else ""
            raise UsageError(f"connector '{shown(name)}' is not configured{where}{nearest(name, self.connectors)} (configured: {known})") from None

    def check_keys(self) -> None:
        """Raise :class:`UsageError` for a connector whose key in the environment cannot be sent (before a
        run), naming the line of its ``api_key_env``."""
        for name in self.connectors:
            self.api_key(name)

    def api_key(self, connector: str) -> str | None:
        """The key of ``connector`` from the environment (:meth:`Connector.api_key`); one that cannot
        be sent is a :class:`UsageError` naming the line of its ``api_key_env``."""
        try:
            return self.connector(connector).api_key()
        except UsageError as exc:
            raise UsageError(f"{self.place('connectors', connector, 'api_key_env')}: {exc}") from None

    def safe_dump(self) -> dict[str, Any]:
        """The resolved configuration without secrets, for ``run.json``."""
        return {
            "path": str(self.path) if self.path else None,
            "farm": self.farm.model_dump(),
            "connectors": {n: c.redacted() for n, c in self.connectors.items()},
            "agents": {n: _safe_agent(a) for n, a in self.agents.items()},
        }


def _safe_agent(agent: AgentConfig) -> dict[str, Any]:
    data = agent.model_dump(exclude={"tool_mocks"})
    if data.get("url"):
        data["url"] = redact_url(data["url"])
    return data


def find_config(explicit: str | None, input_path: Path | None = None) -> Path | None:
    """``--config``, else ``./farm.toml``, else the input file's folder and its parents."""
    if explicit:
        path = Path(explicit)
        if path.is_dir():
            inside = path / CONFIG_NAME
            hint = f"; did you mean --config {inside}?" if inside.is_file() else f" (it holds no {CONFIG_NAME}); give the file's path"
            raise UsageError(f"--config: {explicit} is a folder, not a {CONFIG_NAME} file{hint}")
        if not path.is_file():
            raise UsageError(f"--config: {explicit} does not exist")
        return path
    if (Path.cwd() / CONFIG_NAME).is_file():
        return Path(CONFIG_NAME)  # as a user would write it, in messages (farm.toml:3: ...)
    if input_path is not None:
        for folder in [input_path.resolve().parent, *input_path.resolve().parents]:
            candidate = folder / CONFIG_NAME
            if candidate.is_file():
                return candidate
    return None


def load_config(path: Path | None) -> FarmConfig:
    """Parse ``farm.toml``; its mistakes are one :class:`ConfigError` listing every one, each
    naming the file, line and key (:mod:`farm.configcheck`)."""
    if path is None:
        return FarmConfig()
    try:
        text = _read(path)
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(toml_problem(str(path), text, exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    problems, config = config_problems(str(path), text, data, FarmConfig, _tables())
    if problems:
        raise ConfigError(problems)
    assert config is not None
    config.path = path.resolve()
    config._shown = str(path)
    return config


def _fields(model: type[BaseModel], *hidden: str) -> frozenset[str]:
    return frozenset(name for name in model.model_fields if name not in hidden)


def _tables() -> dict[str, frozenset[str]]:
    """The keys each table of ``farm.toml`` may hold: a model's fields, but those the farm fills in."""
    return {
        "top": _fields(FarmConfig, "path"),
        "farm": _fields(FarmSettings),
        "connector": _fields(Connector, "name"),
        "price": _fields(Price),
        "agent": _fields(AgentConfig, "id"),
        "resources": _fields(Resources),
    }


def _read(path: Path) -> str:
    """The text of ``farm.toml``, without the byte-order mark some editors write first (as the suites are read)."""
    return path.read_text(encoding="utf-8-sig")
