"""Agent-driven roles (docs/reference/roles.md): simulator, validator, generator, reporter.

A role is played by any agent (an LLM on a connector with the built-in prompt,
or the user's own openai/http/python agent). This module builds each role's
call and reads its answer leniently (JSON in fences or prose); an unusable
answer is retried once, then raised as :class:`RoleError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from farm.agents.base import AgentClient, AgentError, Message, Reply
from farm.aio import run_sync
from farm.errors import UnreadVerdict
from farm.excerpts import NOTHING, clip
from farm.jsontext import NO_JSON, as_text, extract_json
from farm.messages import content_text
from farm.results import BLAME, Blame
from farm.roles.cache import RoleCache, caches_role, hit_cost, record
from farm.roles.types import RoleError, SimulatorTurn, Verdict
from farm.secrets import process_scrubber

if TYPE_CHECKING:
    from farm.config import AgentConfig, FarmConfig

__all__ = ["ATTRIBUTOR_ANSWER", "PLACEHOLDERS", "PROMPTS", "SIMULATOR_ANSWER", "RolePlayer", "attribution", "fill", "placeholders", "player_of", "render_transcript", "writes_prompt"]

T = TypeVar("T")

PROMPTS: dict[str, str] = {
    "simulator": """You are simulating a user talking to an AI agent, so that the agent can be tested.
test_mode: simulator

Persona: {persona}
Goal: {goal}
Turn: {turn_number} of at most {max_turns}

Read the conversation so far and the agent's last response, then write the user's next message,
moving toward the goal. If the goal has been achieved, set goal_achieved to true.

Respond in JSON only:
{"input": "your next message as the user", "goal_achieved": true or false, "reasoning": "brief explanation"}""",
    "validator": """You are a strict test validator judging an AI agent's response.
test_mode: validator

Criteria: {criteria}
Additional context: {context}

Judge only the agent's latest response against the criteria.
Respond in JSON only:
{"passed": true or false, "score": 0.0 to 1.0, "reason": "one sentence", "suggestions": ["..."]}""",
    "generator": """You are a test case generator for AI agents.
test_mode: generator

Target Agent: {target_agent}
Description: {target_description}
Available Tools: {target_tools}

Generate {count} test cases with focus on: {focus} (complexity: {complexity}).
This is batch {batch_number} (seed {seed}) of a suite of {total} cases.{coverage}
Write cases that differ from those already written (id: first words of the input):
{avoid}
Each case has: id (unique, short, lowercase words joined by '-'), name, input (the user message) or
turns (an array of {"input", "assertions"}), and assertions (e.g. {"type": "contains", "value": "..."},
{"type": "tool_called", "name": "..."}).

Respond in JSON only: {"cases": [ ... ]}""",
    "attributor": """You decide whose fault a failed test of an AI agent is.
test_mode: attributor

A simulator played the user of the agent, with a goal; checkpoints say what the agent had to do.
Goal of the simulated user: {goal}
Persona: {persona}
Checkpoints: {checkpoints}
How the test ended: {outcome}
Flags the farm's rules raised on the simulator's turns: {sim_flags}

Read the conversation and answer with one blame:
- "agent": the agent failed a user who played the goal well;
- "simulator": the simulated user left its goal, answered for the agent, stopped too early,
  repeated itself, or otherwise did not play the user the goal describes;
- "checkpoint": a checkpoint cannot be met as written, whatever the agent and the user do;
- "unknown": the conversation does not tell.
Respond in JSON only:
{"blame": "agent" or "simulator" or "checkpoint" or "unknown", "reason": "one sentence"}""",
    "reporter": """You are a test reporter. Summarise this test run of an AI agent for its developers:
what passed, what failed and why, patterns across failures, and what to fix first.
test_mode: reporter

Run summary (JSON):
{summary}

Respond in Markdown.""",
}


SIMULATOR_ANSWER = '{"input": "the user\'s next message", "goal_achieved": true or false, "reasoning": "why"}'
"""What a simulator answers (docs/simulator.md): this object as JSON text, or, from a python
simulator, as a dict. ``message`` is accepted for ``input``."""

ATTRIBUTOR_ANSWER = '{"blame": "agent", "simulator", "checkpoint" or "unknown", "reason": "one sentence"}'
"""What the attributor answers: whose failure a failed dynamic case is, and why."""

_BLAMES = BLAME

_WANTS = {"simulator": f"it must answer {SIMULATOR_ANSWER} as JSON text", "attributor": f"it must answer {ATTRIBUTOR_ANSWER} as JSON text"}
"""What the error of an unusable answer tells a role's author to answer instead."""


PLACEHOLDERS: dict[str, frozenset[str]] = {
    "simulator": frozenset({"persona", "goal", "turn_number", "max_turns"}),
    "validator": frozenset({"criteria", "context"}),
    "generator": frozenset(
        {"target_agent", "target_description", "target_tools", "count", "focus", "complexity", "batch_number", "seed", "total", "slice", "coverage", "avoid"}
    ),
    "reporter": frozenset({"summary"}),
    "attributor": frozenset({"goal", "persona", "checkpoints", "outcome", "sim_flags"}),
}
"""Each role's own placeholders (docs/generation.md): one with no value reads ``(not given)``."""

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill(prompt: str, fields: dict[str, str], documented: frozenset[str] = frozenset()) -> str:
    """``prompt`` with each ``{name}`` of ``fields`` (or of ``documented``: ``(not given)``) filled in.

    A prompt is text, not a format string: every other brace is kept as written, so a
    prompt file may hold a JSON example as it is."""

    def one(match: re.Match[str]) -> str:
        name = match[1]
        if name in fields:
            return fields[name]
        return "(not given)" if name in documented else match[0]

    return _PLACEHOLDER.sub(one, prompt)


def placeholders(prompt: str) -> set[str]:
    """The ``{name}`` placeholders ``prompt`` holds."""
    return set(_PLACEHOLDER.findall(prompt))


def _generator_fields(metadata: dict[str, Any]) -> dict[str, str]:
    """What the generator prompt shows besides the metadata: the batch's coverage as a clause
    (nothing when there are no coverage lists) and the cases to avoid, one a line."""
    chosen = metadata.get("slice")
    covers = as_text(chosen, ensure_ascii=True) if chosen else ""
    avoid = metadata.get("avoid") or []
    return {
        "coverage": f"; this batch covers: {covers}." if covers else "",
        "avoid": "\n".join(f"- {as_text(a, ensure_ascii=True)}" for a in avoid) if isinstance(avoid, list) and avoid else "(none yet)",
    }


def player_of(config: FarmConfig, agent: AgentConfig) -> AgentConfig:
    """The agent that plays ``agent``'s role: the one it ``uses``, else itself."""
    return config.agent(agent.uses) if agent.is_role and agent.uses else agent


def writes_prompt(player: AgentConfig) -> bool:
    """Whether the farm writes the role's prompt for ``player`` (:func:`player_of`): a plain LLM (an
    ``openai`` agent, or a role kind on a connector) does; a user's http/python service does not."""
    return player.kind == "openai" or player.is_role


def render_transcript(messages: list[Message]) -> str:
    """The conversation as text a role agent reads: roles, tool calls and tool results."""
    lines = []
    for m in messages:
        role = m.get("role", "?")
        content = m.get("content")
        if isinstance(content, list):
            content = content_text(content, separator=" ", others="mark")
        if role == "tool":
            lines.append(f"TOOL RESULT ({m.get('tool_call_id', '')}): {content}")
            continue
        if content:
            lines.append(f"{role.upper()}: {content}")
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            lines.append(f"{role.upper()} CALLS TOOL {fn.get('name')}({fn.get('arguments')})")
    return "\n".join(lines)


def _answer(reply: Reply) -> tuple[Any, Reply]:
    """The JSON value of a role's reply, and the reply as the cache keeps it.

    A python role may return its answer as a dict (no ``content``): that dict is the answer,
    kept in the cache as its JSON text."""
    value = extract_json(reply.content)
    raw = reply.raw
    if value is NO_JSON and not reply.content.strip() and not reply.tool_calls and isinstance(raw, dict) and not {"choices", "content"} & raw.keys():
        return raw, reply.model_copy(update={"content": as_text(raw)})
    return value, reply


_TRUE_FALSE: dict[Any, bool] = {True: True, False: False, "true": True, "false": False}
"""How `goal_achieved` may be written (1 and 0 are True and False as keys)."""


def _as_is(data: Any) -> Any:
    return data


def verdict_of(data: Any) -> Verdict:
    """A validator's verdict in its JSON answer; a :class:`RoleError` when it gives none (no
    ``passed``, or one that says neither true nor false: never read as the agent's failure)."""
    try:
        verdict = Verdict.from_json(data)
    except UnreadVerdict as exc:
        raise RoleError(f"the validator gave no verdict: {exc}") from None
    if verdict is None:
        raise RoleError("the validator's answer has no 'passed'")
    return verdict


def simulator_turn(data: Any) -> SimulatorTurn:
    """A simulator's answer as a :class:`SimulatorTurn`; a :class:`RoleError` naming the keys it
    wants when the answer is not of that shape."""
    if not isinstance(data, dict):
        raise RoleError(f"the simulator's answer is not a JSON object but {type(data).__name__} {clip(as_text(data), 60)}: it must be {SIMULATOR_ANSWER}")
    goal = data.get("goal_achieved", False)
    achieved = _TRUE_FALSE.get(goal.strip().lower() if isinstance(goal, str) else goal) if isinstance(goal, (bool, int, str)) else None
    if achieved is None:
        raise RoleError(f"the simulator's 'goal_achieved' is {clip(as_text(goal), 40)!r}, not true or false: it must answer {SIMULATOR_ANSWER}")
    text = data.get("input", data.get("message"))
    if text is None and not achieved:
        given = ", ".join(repr(k) for k in data) or "none"
        raise RoleError(f"the simulator's answer has no 'input' (its keys: {given}) and does not say 'goal_achieved': it must be {SIMULATOR_ANSWER}")
    if text is not None:
        text = as_text(text, ensure_ascii=True)
    reasoning = data.get("reasoning")
    return SimulatorTurn(input=text, goal_achieved=achieved, reasoning=None if reasoning is None else as_text(reasoning))


def attribution(data: Any) -> tuple[Blame, str]:
    """The attributor's answer as ``(blame, reason)``; a :class:`RoleError` naming the keys it wants
    when the answer is not of that shape."""
    if not isinstance(data, dict):
        raise RoleError(f"the attributor's answer is not a JSON object but {type(data).__name__} {clip(as_text(data), 60)}: it must be {ATTRIBUTOR_ANSWER}")
    blame = data.get("blame")
    said = blame.strip().lower() if isinstance(blame, str) else blame
    if said not in _BLAMES:
        given = ", ".join(repr(k) for k in data) or "none"
        raise RoleError(f"the attributor's 'blame' is {clip(as_text(blame), 40)!r} (its keys: {given}), not one of {', '.join(_BLAMES)}: it must answer {ATTRIBUTOR_ANSWER}")
    reason = data.get("reason")
    return cast(Blame, said), " ".join(as_text(reason).split()) if reason else "the attributor gave no reason"


class RolePlayer:
    """Plays one role with one agent client.

    ``builtin_prompt``: the agent is a plain LLM, so the farm writes the role's
    prompt (the built-in one or the file ``prompt`` names). Otherwise the agent
    is the user's own role service and gets the conversation and the metadata
    in ``options`` as they are.

    ``cache``: where usable answers are kept and looked up (:mod:`farm.roles.cache`);
    ``agent_id``: the role agent, part of the cache key.
    """

    def __init__(
        self,
        role: str,
        client: AgentClient,
        prompt: str | None = None,
        builtin_prompt: bool = True,
        cache: RoleCache | None = None,
        agent_id: str | None = None,
    ):
        self.role = role
        self.client = client
        from farm.agents.python import PythonAgent

        if isinstance(client, PythonAgent):  # a python agent playing the role may answer with a dict, read whole
            client.role_answers = True
        self.prompt = prompt or PROMPTS[role]
        self.builtin_prompt = builtin_prompt
        self.cache = cache
        self.agent_id = agent_id

    @classmethod
    def from_config(
        cls, role: str, config: FarmConfig, agent_id: str, limiter_for: Any = None, connector: str | None = None, cache: RoleCache | None = None
    ) -> RolePlayer:
        """The player of ``role`` for agent ``agent_id`` of ``config``.

        A plain LLM (an ``openai`` agent, or a role kind on a connector) gets the
        role's prompt; the user's own http/python service gets the conversation,
        with the role's metadata in ``options``. ``connector``: the connector of
        this role call (a case's ``options.connector``) instead of the agent's own.
        ``cache``: the role cache, used unless this agent opts out
        (:func:`~farm.roles.cache.caches_role`).
        """
        from farm.agents.factory import build_agent

        agent = config.agent(agent_id)
        player_agent = player_of(config, agent)
        builtin = writes_prompt(player_agent)
        if connector is not None:
            config.connector(connector)  # a UsageError naming the configured connectors
        client = build_agent(config, agent_id, connector_override=connector, limiter_for=limiter_for)
        connector_name = connector or player_agent.connector or agent.connector
        if cache is not None and not caches_role(agent, player_agent, config.connectors.get(connector_name) if connector_name else None):
            cache = None
        prompt = None if role == "attributor" else cls.prompt_from(agent.prompt, config.base_dir)  # an agent's prompt is its own role's
        return cls(role, client, prompt, builtin_prompt=builtin, cache=cache, agent_id=agent_id)

    def run_once(self, call: Callable[[RolePlayer], Awaitable[T]]) -> T:
        """Run one role call from synchronous code (a generator before the
        run, the reporter after it), closing the agent client afterwards."""

        async def once() -> T:
            try:
                return await call(self)
            finally:
                await self.client.aclose()

        return run_sync(once())

    @classmethod
    def prompt_from(cls, path: str | None, base_dir: Path) -> str | None:
        if not path:
            return None
        p = Path(path)
        p = p if p.is_absolute() else base_dir / p
        return p.read_text(encoding="utf-8")

    def _messages(self, conversation: list[Message], metadata: dict[str, Any]) -> list[Message]:
        if not self.builtin_prompt:
            return list(conversation)
        fields = {k: as_text(v, ensure_ascii=True) for k, v in metadata.items()}
        fields.setdefault("context", as_text({k: v for k, v in metadata.items() if k not in ("criteria",)}, ensure_ascii=True))
        if self.role == "generator":
            fields.update(_generator_fields(metadata))
        system = fill(self.prompt, fields, PLACEHOLDERS.get(self.role, frozenset()))
        return [{"role": "system", "content": system}, {"role": "user", "content": self._ask(conversation, metadata)}]

    def _ask(self, conversation: list[Message], metadata: dict[str, Any]) -> str:
        """The user message of a role call: a generator's request for its cases, else the conversation."""
        if self.role == "generator":
            count = metadata.get("count")
            return f"Write the {count} test cases of this batch now, as JSON." if count else "Write the test cases now, as JSON."
        return render_transcript(conversation) or "(no conversation yet: write the user's first message)"

    def _cached(self, messages: list[Message], options: dict[str, Any]) -> tuple[str | None, Reply | None]:
        """This call's cache key (None without a cache) and the stored answer, counted in the
        current :func:`~farm.roles.cache.tally`."""
        key = self.cache.key(self.client, messages, options, role=self.role, agent_id=self.agent_id) if self.cache else None
        cached = self.cache.load(key) if self.cache and key else None
        record(1, int(cached is not None))
        return key, cached

    async def _call_json(self, conversation: list[Message], metadata: dict[str, Any], read: Callable[[Any], T] = _as_is) -> T:
        """The role's answer as ``read`` makes it of its JSON. An answer with no JSON is asked again
        once; one that ``read`` refuses (a :class:`RoleError`: JSON of the wrong shape, a verdict that
        is neither true nor false) is that error at once. Neither is kept in the cache, so that the
        next run asks again rather than repeat a bad answer."""
        options = {"skip": {"history": True}, "metadata": {**metadata, "test_mode": self.role}}
        messages = self._messages(conversation, {**metadata, "test_mode": self.role})
        key, cached = self._cached(messages, options)
        problem, raised = "", None
        for _attempt in range(2):  # one retry for an unusable answer
            try:
                reply = cached if cached is not None else await self.client.send(messages, options)
                if reply is cached:
                    record(0, 0, hit_cost(self.client))
                else:
                    record(0, 0, reply.cost_usd, 1 + reply.retries)
            except AgentError as exc:
                record(0, 0, None, 1 + exc.retries)  # sent, and failed: no reply, no known cost
                problem, raised = f"the {self.role} agent failed: {exc}", exc.traceback
                continue
            value, reply = _answer(reply)
            if value is not NO_JSON:
                result = read(value)  # JSON of the wrong shape: its RoleError at once (no retry), and not kept
                if self.cache and key and cached is None:
                    self.cache.store(key, reply)  # only an answer that reads is kept
                return result
            cached = None  # an entry that no longer reads (a changed parser): ask the agent
            said = f"no JSON: {clip(reply.content, 120, NOTHING)!r}" if reply.content.strip() else "nothing"
            problem, raised = f"the {self.role} answered {said}" + (f"; {_WANTS[self.role]}" if self.role in _WANTS else ""), None
        error = RoleError(problem)
        error.traceback = raised
        raise error

    async def simulate(self, conversation: list[Message], metadata: dict[str, Any]) -> SimulatorTurn:
        return await self._call_json(conversation, metadata, simulator_turn)

    async def attribute(self, conversation: list[Message], metadata: dict[str, Any]) -> tuple[Blame, str]:
        """Whose failure the failed conversation is, and why (:func:`attribution`)."""
        return await self._call_json(conversation, metadata, attribution)

    async def validate(self, conversation: list[Message], metadata: dict[str, Any]) -> Verdict:
        return await self._call_json(conversation, metadata, verdict_of)

    async def generate(self, metadata: dict[str, Any]) -> list[Any]:
        data: Any = await self._call_json([], metadata)
        if isinstance(data, dict) and isinstance(data.get("cases"), list):
            return data["cases"]
        if isinstance(data, list):
            return data
        if isinstance(data, dict):
            return [data]
        raise RoleError("the generator's answer is neither {\"cases\": [...]}, an array, nor a case")

    async def report(self, summary: dict[str, Any]) -> str:
        messages = [{"role": "system", "content": fill(self.prompt, {"summary": json.dumps(summary, indent=2, default=str)})}]
        if not self.builtin_prompt:
            messages = [{"role": "user", "content": json.dumps(summary, default=str)}]
        options = {"skip": {"history": True}, "metadata": {"test_mode": "reporter"}}
        key, cached = self._cached(messages, options)
        if cached is not None:
            record(0, 0, hit_cost(self.client))
            return process_scrubber().scrub(cached.content)
        try:
            reply = await self.client.send(messages, options)
        except AgentError as exc:
            record(0, 0, None, 1 + exc.retries)
            raise RoleError(process_scrubber().scrub(f"the reporter agent failed: {exc}")) from None
        record(0, 0, reply.cost_usd, 1 + reply.retries)
        if self.cache and key and reply.content.strip():
            self.cache.store(key, reply)
        return process_scrubber().scrub(reply.content)  # report.md is written as the reporter said it
