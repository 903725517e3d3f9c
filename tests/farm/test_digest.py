"""The inputs digest keeps its values: a rescore compares them with digests that earlier runs wrote."""

from __future__ import annotations

from typing import Any

import pytest

from farm.cases import TestCase
from farm.conversation.digest import inputs_digest
from farm.conversation.settings import RunSettings

CHECKPOINTS = [{"id": "a", "assertion": {"type": "contains", "value": "x"}}]
PLAIN = RunSettings(agent_id="bot")
CONFIGURED = RunSettings(agent_id="bot", default_simulator="sim", input_tools=("ask",), agent_tool_mocks={"lookup": {"r": 1}})


@pytest.mark.parametrize(
    ("case", "settings", "expected"),
    [
        (
            {"input": "hi"},
            PLAIN,
            {"mode": "single", "input": "2d9720007a070373", "turn_count": "0", "turns": "4f53cda18c2baa0c", "simulator": "74234e98afe7498f",
             "tool_mocks": "44136fa355b3678a", "input_tools": "03a5241798ce666d", "options": "2a353e966a96e7e3"},
        ),
        (
            {"turns": [{"input": "a"}, {"input": "b", "options": {"metadata": {"k": 1}}}], "tool_mocks": {"t": {"ok": 2}}, "user": "ann"},
            CONFIGURED,
            {"mode": "static", "input": "b7f343d070bfc0ca", "turn_count": "2", "turns": "05d9d64aa4ab85c9", "simulator": "74234e98afe7498f",
             "tool_mocks": "d04243b81e793eea", "input_tools": "3c30bd1985bb04a6", "options": "68f17a0e92db3646"},
        ),
        (
            {"checkpoints": CHECKPOINTS},
            CONFIGURED,
            {"mode": "dynamic", "input": "b7f343d070bfc0ca", "turn_count": "0", "turns": "4f53cda18c2baa0c", "simulator": "05fe9dc0da6783f2",
             "tool_mocks": "5a96c3972fa07a60", "input_tools": "3c30bd1985bb04a6", "options": "2a353e966a96e7e3"},
        ),
        (
            {"checkpoints": CHECKPOINTS, "simulator": {"use": "sim", "goal": "buy"}},
            CONFIGURED,
            {"mode": "dynamic", "input": "b7f343d070bfc0ca", "turn_count": "0", "turns": "4f53cda18c2baa0c", "simulator": "603488c7aa41403a",
             "tool_mocks": "5a96c3972fa07a60", "input_tools": "3c30bd1985bb04a6", "options": "2a353e966a96e7e3"},
        ),
    ],
)
def test_the_digest_of_a_case_keeps_its_values(case: dict[str, Any], settings: RunSettings, expected: dict[str, str]):
    digest = inputs_digest(TestCase.model_validate({"id": "c", **case}), settings)
    assert digest == {"agent": "bot", "max_turns": "20", "max_tool_steps": "", **expected}
    assert inputs_digest(TestCase.model_validate({"id": "c", **case}), settings) == digest  # the run-wide parts hashed once
