"""What ``-i/--input`` names (SPEC section 2), resolved to a :class:`~farm.suite.loader.Suite`.

=======================  ===============================================
``tests.jsonl``          a JSONL or JSON file
``-``                    cases as JSONL on stdin
``agents:<id>?k=v``      a generator agent writes the cases
``scripts:<id>?k=v``     a generator script writes the cases
``scripts.<module>``     script tests: each ``test_*(t, ctx)`` is a case
anything else            a direct message: one single-turn case
=======================  ===============================================
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl

from farm.config import AgentConfig, FarmConfig
from farm.errors import UsageError
from farm.roles.cache import RoleCache
from farm.roles.player import PLACEHOLDERS, PROMPTS, RolePlayer, placeholders, player_of, writes_prompt
from farm.scripts import ScriptResolver
from farm.suite.loader import SMALL_SUITE, Suite, load_file, load_message, load_stdin, looks_like_file

__all__ = ["resolve_input", "typed_query", "generator_metadata", "input_path"]


def typed_query(query: str) -> dict[str, Any]:
    """``count=3&focus=edge-cases&strict=true`` with values typed: int, float, bool, string; a key
    given more than once (``focus=a&focus=b``) is a list."""
    out: dict[str, Any] = {}
    for key, raw in parse_qsl(query, keep_blank_values=True):
        value = _typed(raw)
        if key in out:
            before = out[key]
            out[key] = [*before, value] if isinstance(before, list) else [before, value]
        else:
            out[key] = value
    return out


def _typed(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def input_path(value: str) -> Path | None:
    """The input's file, when it names one (for finding ``farm.toml`` beside it)."""
    if value == "-" or value.startswith(("agents:", "scripts:", "scripts.")):
        return None
    return Path(value) if looks_like_file(value) else None


def generator_metadata(config: FarmConfig, agent_id: str | None, params: dict[str, Any]) -> dict[str, Any]:
    """What a generator is told: the target's id, description and tools, plus the query."""
    meta: dict[str, Any] = {"test_mode": "generator", "count": 5, "focus": "happy-path", "complexity": "medium"}
    if agent_id:
        meta["target_agent"] = agent_id
        agent = config.agents.get(agent_id)
        if agent is not None:
            meta["target_description"] = agent.description or ""
            meta["target_tools"] = [_tool_name(t) for t in agent.tools]
    meta.update(params)
    return meta


def _tool_name(tool: Any) -> Any:
    if isinstance(tool, dict):
        return tool.get("function", {}).get("name") or tool.get("name") or tool
    return tool


def resolve_input(
    value: str, config: FarmConfig, agent_id: str | None, stdin: TextIO | None = None, compact: bool = False, cache: RoleCache | None = None
) -> Suite:
    """The suite ``value`` names; ``compact`` keeps the cases of a file or stdin as JSON once there
    are more than :data:`~farm.suite.loader.SMALL_SUITE` (for big runs);
    ``cache``: the role cache a generator's whole generation is kept in (its batch calls go
    through the engine's role players). A generator (``agents:``, ``scripts:``) gives a suite with
    no cases yet and its :class:`~farm.roles.generation.CaseStream` as ``stream``."""
    if value == "-":
        return load_stdin(stdin or sys.stdin, compact, SMALL_SUITE)
    if value.startswith("agents:"):
        return _generated_by_agent(value, config, agent_id, cache)
    if value.startswith("scripts:"):
        return _generated_by_script(value, config, agent_id)
    if value.startswith("scripts."):
        from farm.roles.scripttests import load_script_tests

        return load_script_tests(value.removeprefix("scripts."), config)
    if looks_like_file(value):
        return load_file(Path(value), display=value, compact=compact, small=SMALL_SUITE)
    return load_message(value)


def _split(value: str, prefix: str) -> tuple[str, dict[str, Any]]:
    ref, _, query = value.removeprefix(prefix).partition("?")
    if not ref:
        raise UsageError(f"-i {value}: name the {prefix[:-1]} id after '{prefix}'")
    return ref, typed_query(query)


def _placeholders(config: FarmConfig, generator: AgentConfig) -> set[str]:
    """The ``{name}`` placeholders of the generator's prompt (its file's, else the built-in one)."""
    try:
        text = RolePlayer.prompt_from(generator.prompt, config.base_dir) or PROMPTS["generator"]
    except OSError:
        text = PROMPTS["generator"]
    return placeholders(text) | PLACEHOLDERS["generator"]


def _generated_by_agent(value: str, config: FarmConfig, agent_id: str | None, cache: RoleCache | None = None) -> Suite:
    from farm.roles.generation import CaseStream, check_query

    generator_id, query = _split(value, "agents:")
    generator = config.agent(generator_id)  # a UsageError naming the configured agents
    prompt, strict = _placeholders(config, generator), writes_prompt(player_of(config, generator))
    check_query(f"{config.path or 'farm.toml'}: agents.{generator_id}.generate", generator.generate, prompt, strict)
    check_query(f"-i agents:{generator_id}", query, {*generator.generate, *prompt}, strict)
    params = {**generator.generate, **query}
    stream = CaseStream(f"agents:{generator_id}", config, params, generator_metadata(config, agent_id, params), agent_id=generator_id, cache=cache)
    return Suite([], f"agents:{generator_id} ({stream.asked} cases to generate)", stream=stream)


def _generated_by_script(value: str, config: FarmConfig, agent_id: str | None) -> Suite:
    from farm.roles.generation import CaseStream, check_query

    ref, params = _split(value, "scripts:")
    fn = ScriptResolver(config.scripts_dir).resolve(ref)
    check_query(f"-i scripts:{ref}", params, set(), strict=False)
    stream = CaseStream(f"scripts:{ref}", config, params, generator_metadata(config, agent_id, params), script=fn)
    return Suite([], f"scripts:{ref} ({stream.asked} cases to generate)", stream=stream)
