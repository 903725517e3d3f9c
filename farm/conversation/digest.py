"""What shaped a conversation, as digests a rescore can compare (``CaseResult.inputs_digest``).

A live run records, on each result, a digest per part of everything that decides
what the agent was sent: the agent under test, the mode, the case's input and
attachments, the static turns (their number, inputs, attachments and options),
the simulator (its agent and options: goal, persona, connector), ``max_turns``,
``max_tool_steps``, the tool mocks in force (the agent's and the case's), the
agent's input-requesting tools and the options sent to the agent (with
``user``/``team``). What only judges the conversation is left out: assertions,
checkpoints, ``final_assertions``, ``expected``, ``name``, ``tags``, timeouts.

``farm rescore`` computes the same digests for the edited suite; where a part
differs, the recorded conversation no longer answers the case, and
:func:`changed_inputs` says which part, in words.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from farm.cases import Options, TestCase

if TYPE_CHECKING:
    from farm.conversation.settings import RunSettings
    from farm.results import TurnResult

__all__ = ["changed_inputs", "inputs_digest"]


# One encoder for every digest: json.dumps with options builds a new one per call, a cost on every case.
_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)


def _hash(value: Any) -> str:
    text = _ENCODER.encode(to_jsonable_python(value, fallback=str))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _options(options: Any) -> Any:
    return None if options is None else options.model_dump(mode="json", exclude_none=True)


# The parts most cases share with the whole run are hashed once, not once per case.
_NOTHING = _hash(None)
_NO_TURNS = _hash([])
_NO_MOCKS = _hash({})
_NO_OPTIONS = Options()
_NO_OPTIONS_DIGEST = _hash([_options(_NO_OPTIONS), None, None])


@lru_cache(maxsize=32)
def _run_simulator(default_simulator: str | None) -> str:
    """The digest of a simulator the case leaves to the run's default."""
    return _hash([default_simulator, None])


@lru_cache(maxsize=32)
def _input_tools(names: tuple[str, ...]) -> str:
    return _hash(list(names))


def inputs_digest(case: TestCase, settings: RunSettings) -> dict[str, str]:
    """The digest of each part of ``case`` (run with ``settings``) that shapes its conversation."""
    turns = case.turns or []
    simulator = case.simulator
    if simulator is not None:
        simulator_digest = _hash([simulator.use or settings.default_simulator, _options(simulator.options)])
    else:
        simulator_digest = _NOTHING if case.checkpoints is None else _run_simulator(settings.default_simulator)
    mocks = {**settings.agent_tool_mocks, **case.tool_mocks}
    if case.options == _NO_OPTIONS and case.user is None and case.team is None:
        options_digest = _NO_OPTIONS_DIGEST
    else:
        options_digest = _hash([_options(case.options), case.user, case.team])
    return {
        "agent": settings.agent_id,
        "mode": case.resolved_mode.value,
        "input": _hash([case.input, case.attachments]),
        "turn_count": str(len(turns)),
        "turns": _hash([[t.input, t.attachments, _options(t.options)] for t in turns]) if turns else _NO_TURNS,
        "simulator": simulator_digest,
        "max_turns": str(case.max_turns),
        "max_tool_steps": str(case.max_tool_steps or settings.max_tool_steps or ""),
        "tool_mocks": _hash(mocks) if mocks else _NO_MOCKS,
        "input_tools": _input_tools(tuple(settings.input_tools)),
        "options": options_digest,
    }


_PARTS = {
    "input": "the case's input or attachments changed since the run",
    "simulator": "the simulator (its agent, goal, persona or options) changed since the run",
    "tool_mocks": "the tool mocks changed since the run",
    "input_tools": "the agent's input-requesting tools changed since the run",
    "options": "the options sent to the agent changed since the run",
}


def changed_inputs(recorded: dict[str, str] | None, now: dict[str, str], recorded_turns: list[TurnResult], case: TestCase) -> str | None:
    """What changed between the run's digests (``recorded``) and the edited case's (``now``),
    in words; None when nothing did. Static turns are compared with the recorded turns
    themselves, so the reason names the turn."""
    if recorded is None:
        return "the run recorded no digest of the case's inputs (an older farm wrote it)"
    if recorded.get("agent") != now["agent"]:
        return f"the agent under test is '{now['agent']}' now, '{recorded.get('agent')}' in the run"
    if recorded.get("mode") != now["mode"]:
        return f"the case is {now['mode']} now, {recorded.get('mode')} in the run"
    if recorded.get("input") != now["input"]:
        return _PARTS["input"]
    if recorded.get("turn_count") != now["turn_count"]:
        return f"the case has {now['turn_count']} turns now, {recorded.get('turn_count')} in the run"
    if recorded.get("turns") != now["turns"]:
        for index, spec in enumerate(case.turns or []):
            if index < len(recorded_turns):
                turn = recorded_turns[index]
                if turn.input_source == "static" and _hash(turn.input) != _hash(spec.input):
                    return f"turn {index + 1}'s input changed since the run"
        return "a turn's attachments or options changed since the run"
    for part, limit in (("max_turns", "max_turns"), ("max_tool_steps", "max_tool_steps")):
        if recorded.get(part) != now[part]:
            return f"{limit} is {now[part] or 'the default'} now, {recorded.get(part) or 'the default'} in the run"
    for part, reason in _PARTS.items():
        if recorded.get(part) != now[part]:
            return reason
    return None
