"""Generators as sources of cases (:class:`~farm.suite.sources.CaseSource`): ``-i agents:<id>?k=v``
(:class:`GeneratorAgent`) and ``-i scripts:<module.fn>?k=v`` (:class:`GeneratorScript`). Each
gives a suite with no cases yet and its feed (:class:`~farm.generation.feed.GeneratedFeed`),
whose :class:`~farm.generation.stream.CaseStream` writes them as the run goes, its query checked
(:func:`~farm.generation.query.check_query`) before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from farm.errors import UsageError
from farm.generation.feed import GeneratedFeed
from farm.generation.query import check_query
from farm.generation.stream import CaseStream
from farm.inputkind import typed_query
from farm.roles.player import PLACEHOLDERS, PROMPTS, RolePlayer, placeholders, player_of, writes_prompt
from farm.scripts import ScriptResolver
from farm.suite.loader import Suite

if TYPE_CHECKING:
    from farm.config import AgentConfig, FarmConfig
    from farm.suite.sources import Loading

__all__ = ["GeneratorAgent", "GeneratorScript", "generator_metadata"]


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


@dataclass(frozen=True)
class GeneratorAgent:
    """``agents:<id>?k=v``: the generator agent ``id`` writes the cases, its ``generate`` settings
    under the query; its whole generation is kept in the role cache (``loading.cache``)."""

    value: str
    kind: Literal["generator"] = "generator"

    def load(self, loading: Loading) -> Suite:
        config = loading.config
        generator_id, query = _split(self.value, "agents:")
        generator = config.agent(generator_id)  # a UsageError naming the configured agents
        prompt, strict = _placeholders(config, generator), writes_prompt(player_of(config, generator))
        check_query(f"{config.path or 'farm.toml'}: agents.{generator_id}.generate", generator.generate, prompt, strict)
        check_query(f"-i agents:{generator_id}", query, {*generator.generate, *prompt}, strict)
        params = {**generator.generate, **query}
        metadata = generator_metadata(config, loading.agent_id, params)
        stream = CaseStream(f"agents:{generator_id}", config, params, metadata, agent_id=generator_id, cache=loading.cache)
        stream.default_simulator = loading.simulator
        return Suite([], f"agents:{generator_id} ({stream.asked} cases to generate)", GeneratedFeed(stream))


@dataclass(frozen=True)
class GeneratorScript:
    """``scripts:<module.fn>?k=v``: the function writes the cases, told the query."""

    value: str
    kind: Literal["generator"] = "generator"

    def load(self, loading: Loading) -> Suite:
        config = loading.config
        ref, params = _split(self.value, "scripts:")
        fn = ScriptResolver(config.scripts_dir).resolve(ref)
        check_query(f"-i scripts:{ref}", params, set(), strict=False)
        stream = CaseStream(f"scripts:{ref}", config, params, generator_metadata(config, loading.agent_id, params), script=fn)
        stream.default_simulator = loading.simulator
        return Suite([], f"scripts:{ref} ({stream.asked} cases to generate)", GeneratedFeed(stream))
