"""The role cache: an unchanged role call is answered from disk instead of the role's agent.

A simulator, validator, generator or reporter call at temperature 0 gives the
same answer to the same request, so a rerun (or ``farm rescore``) need not pay
for it again. Entries live under the results dir, one file per request::

    <results_dir>/.cache/roles/ab/ab12…ef.json     {"version": 1, "reply": {...}}

API::

    cache = RoleCache.for_config(config)          # <results_dir>/.cache/roles, the run's scrubber
    player = RolePlayer.from_config("validator", config, "judge", cache=cache)
    roles = LocalRoles(config, cache=cache)       # every role player it builds uses the cache
    with tally() as calls:                        # role calls made inside, and how many hit
        ...
    calls.role_calls, calls.cache_hits

    key = cache.key(client, messages, options, role="validator", agent_id="judge")
    reply = cache.load(key)                       # a Reply, or None (missing, torn, unreadable)
    cache.store(key, reply)                       # only a usable answer, never headers or keys

The key is the SHA-256 of a canonical JSON of what decides the answer: the
role and role agent, the connector and model, and the request as the agent's
kind sends it (an ``openai`` agent's body: messages, tools, temperature,
max_tokens, params; an ``http`` agent's template with the messages and
options; a ``python`` agent's entry with the messages and options), which each
agent kind gives through its ``cache_key_parts``. Values that change from run
to run without changing the answer (session ids, run ids, turn counters
already told by the messages) are left out, or a rerun would never hit.

Writes are atomic (a temporary file in the same folder, then ``os.replace``),
so any number of processes (session and pool actors, both engines,
concurrent runs) share the folder without locks; an entry that cannot be read
is a miss, never an error.

Roles cache by default, except a role whose agent samples on purpose
(``temperature`` > 0); ``cache = true|false`` on the agent or its connector
decides instead. The agent under test is cached only when its own agent
config says ``cache = true``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from farm.agents.base import AgentClient, CacheKeyed, Message, Reply, stable_options
from farm.config import AgentConfig, Connector, FarmConfig
from farm.files import atomic_file
from farm.results import RoleCall
from farm.roles.types import CallTally, RoleRequest
from farm.secrets import Scrubber

__all__ = ["CACHE_DIR", "CachedAgent", "CallTally", "RoleCache", "caches_role", "hit_cost", "record", "tally", "target_cache"]

CACHE_DIR = Path(".cache") / "roles"
"""Where the role cache lives, under the results dir."""

ENTRY_VERSION = 1
"""The shape of an entry file; another version is a miss."""


_TALLY: ContextVar[CallTally | None] = ContextVar("farm_role_tally", default=None)


@contextmanager
def tally() -> Iterator[CallTally]:
    """Count the role calls made inside (in this task and the tasks it starts)."""
    counts = CallTally()
    token = _TALLY.set(counts)
    try:
        yield counts
    finally:
        _TALLY.reset(token)


@contextmanager
def timed(role: str, request: RoleRequest) -> Iterator[None]:
    """Log one role call, its time and whether it failed, in the current :func:`tally` (none open: nothing)."""
    counts = _TALLY.get()
    if counts is None:
        yield
        return
    started, clock = time.time(), time.perf_counter()
    error: str | None = None
    raised: str | None = None
    try:
        yield
    except BaseException as exc:
        error, raised = str(exc) or type(exc).__name__, getattr(exc, "traceback", None)
        raise
    finally:
        elapsed = round((time.perf_counter() - clock) * 1000, 3)
        counts.log.append(RoleCall(role=role, agent=request.agent_id, turn=request.turn, started_at=started, duration_ms=elapsed, error=error, traceback=raised))


def record(role_calls: int, cache_hits: int, cost_usd: float | None = None, requests: int = 0) -> None:
    """Add calls (what they cost, the requests they sent) to the current :func:`tally` (none open:
    nothing happens). The Ray role pools count in their actor and the session actor records the
    counts it gets back."""
    counts = _TALLY.get()
    if counts is not None:
        counts.add(role_calls, cache_hits, cost_usd, requests)


def hit_cost(client: AgentClient) -> float | None:
    """What a call answered from the cache cost: nothing (0.0) on a priced connector, unknown
    (None) on one without a price, so a cached run reads like the run it repeats."""
    connector = getattr(client, "connector", None)
    return 0.0 if isinstance(connector, Connector) and connector.price is not None else None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def request_shape(client: AgentClient, messages: list[Message], options: dict[str, Any]) -> dict[str, Any]:
    """What ``client`` sends for this call, as far as it decides the answer: the parts it gives
    (:class:`~farm.agents.base.CacheKeyed`), else its type with the messages and stable options."""
    if isinstance(client, CacheKeyed):
        return client.cache_key_parts(messages, options)
    return {"kind": type(client).__name__, "messages": messages, "options": stable_options(options)}


class RoleCache:
    """The cache folder, with the scrubber that keeps secrets out of it."""

    def __init__(self, folder: Path, scrubber: Scrubber | None = None):
        self.folder = Path(folder)
        self.scrubber = scrubber or Scrubber()

    @classmethod
    def for_config(cls, config: FarmConfig) -> RoleCache:
        """The cache of ``config``'s results dir, scrubbing the config's secrets."""
        return cls(config.results_dir / CACHE_DIR, Scrubber.from_config(config))

    def key(self, client: AgentClient, messages: list[Message], options: dict[str, Any], *, role: str | None = None, agent_id: str | None = None) -> str:
        """The SHA-256 (hex) of what decides the answer to this call."""
        shape = {"role": role, "role_agent": agent_id, "request": request_shape(client, messages, options)}
        return hashlib.sha256(_canonical(shape).encode("utf-8")).hexdigest()

    def path(self, key: str) -> Path:
        """The entry file of ``key``: ``<folder>/<first two hex digits>/<key>.json``."""
        return self.folder / key[:2] / f"{key}.json"

    def load(self, key: str) -> Reply | None:
        """The stored reply, or None: a missing, torn or unreadable entry is a miss."""
        try:
            data = json.loads(self.path(key).read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("version") != ENTRY_VERSION:
                return None
            return Reply.model_validate(data["reply"])
        except (OSError, ValueError, KeyError, ValidationError):
            return None

    def store(self, key: str, reply: Reply) -> None:
        """Keep ``reply`` (its content, tool calls and flags; never the raw body) for ``key``.
        A failure to write only means the next run asks again."""
        entry = {"version": ENTRY_VERSION, "reply": reply.model_dump(mode="json", exclude={"raw", "retries", "usage", "cost_usd"})}
        text = self.scrubber.scrub(_canonical(entry))
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(path, fsync=False) as file:
                file.write(text)
        except OSError:
            pass


def _explicit(*choices: bool | None) -> bool | None:
    return next((c for c in choices if c is not None), None)


def caches_role(agent: AgentConfig, player: AgentConfig, connector: Connector | None) -> bool:
    """Whether the calls of role agent ``agent`` (played by ``player`` on ``connector``) are cached:
    ``cache`` on the agent, its player or the connector decides; else yes, unless the player
    samples on purpose (a temperature above 0)."""
    choice = _explicit(agent.cache, player.cache, connector.cache if connector else None)
    if choice is not None:
        return choice
    temperature = player.params.get("temperature", player.temperature)
    return not (isinstance(temperature, (int, float)) and temperature > 0)


def target_cache(config: FarmConfig, agent_id: str, enabled: bool) -> RoleCache | None:
    """The cache for the agent under test: only when the run caches and the agent says ``cache = true``."""
    agent = config.agents.get(agent_id)
    return RoleCache.for_config(config) if enabled and agent is not None and agent.cache is True else None


class CachedAgent:
    """The agent under test through the cache (``cache = true`` on the agent): a call asked
    before is answered from disk; a reply that came back without an error is stored.

    It lives here, with the role cache, because it is the same cache, keys and tally: the agent
    under test opts into what every role call gets by default."""

    def __init__(self, client: AgentClient, cache: RoleCache, agent_id: str):
        self.client = client
        self.cache = cache
        self.agent_id = agent_id

    @property
    def in_process(self) -> bool:
        """As the agent it caches (:mod:`farm.traces.capture`)."""
        return bool(getattr(self.client, "in_process", False))

    async def send(self, messages: list[Message], options: dict[str, Any]) -> Reply:
        """The cached reply to this request, else the agent's, which the cache keeps when it is
        usable (see :class:`~farm.agents.base.AgentClient`)."""
        key = self.cache.key(self.client, messages, options, agent_id=self.agent_id)
        reply = self.cache.load(key)
        record(1, int(reply is not None))
        if reply is not None:
            reply.cost_usd = hit_cost(self.client)
            return reply
        reply = await self.client.send(messages, options)
        self.cache.store(key, reply)
        return reply

    async def aclose(self) -> None:
        """Close the wrapped client (see :class:`~farm.agents.base.AgentClient`)."""
        await self.client.aclose()

