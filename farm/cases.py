"""Test-case models: what a user writes in a suite (docs/reference/cases.md).

The docstring under each field is its entry in docs/reference/cases.md
(``python -m farm.cli.reference`` writes the tables from them); ``other_spellings``
lists the keys a model also accepts for one of its fields.

Both spellings of the seed design and of its Go implementation are accepted
(``assertions``/``assert``, ``assertion``/``assert``, ``name``/``value`` for
``tool_called``, ``pattern``/``value`` for ``regex``), and normalised here so
that nothing downstream needs to know there were two.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from farm.durations import parse_duration
from farm.errors import FarmError
from farm.wording import nearest

__all__ = [
    "AssertionSpec",
    "Checkpoint",
    "GoldenRule",
    "Interactive",
    "Mode",
    "Options",
    "SimulatorSpec",
    "TestCase",
    "Turn",
    "CaseRuleError",
    "role_agent_id",
]


class CaseRuleError(FarmError, ValueError):
    """A case that parses as JSON but breaks a rule of the format."""


class Mode(StrEnum):
    """How a case runs: chosen by its fields (:attr:`TestCase.resolved_mode`)."""

    SINGLE = "single"
    STATIC = "static"
    DYNAMIC = "dynamic"


class Options(BaseModel):
    """The seed's ``context.Options``: passed to the agent with every call."""

    model_config = ConfigDict(extra="forbid")

    skip: dict[str, Any] | bool | None = None
    """Passed to the agent as it is: ``{"history": true}`` asks it to skip its stored history,
    ``{"trace": true}`` its tracing (role calls send ``{"history": true}``)."""
    connector: str | None = None
    """On a case or a turn: passed to the agent. On a ``simulator`` or an ``agent`` assertion: the
    connector that role call goes through, instead of the role agent's own."""
    search: Any = None
    """Passed to the agent as it is (the seed's search switch)."""
    mode: str | None = None
    """Passed to the agent as it is (the agent's own mode, not the case's)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Passed to the agent; a turn's keys are merged over the case's. On a ``simulator``: the
    persona, goal and anything else its prompt reads."""

    def merged(self, other: Options | None) -> Options:
        """These options overridden field by field by ``other`` (metadata merged)."""
        if other is None:
            return self
        data = self.model_dump(exclude_none=True)
        over = other.model_dump(exclude_none=True)
        metadata = {**data.pop("metadata", {}), **over.pop("metadata", {})}
        return Options(**{**data, **over, "metadata": metadata})


def _normalise_assertions(value: Any) -> list[Any]:
    """An object, an array, or a bare type string, as a list. Each item is then read as an
    :class:`AssertionSpec`, which refuses one that is neither an object nor a type name where it
    is (``assertions[0]``)."""
    if value is None:
        return []
    if isinstance(value, (str, dict)):
        return [value]
    if not isinstance(value, list):
        raise ValueError("must be an object, an array of objects or a type name")
    return value


def _pop_alias(data: dict[str, Any], primary: str, alias: str) -> None:
    if alias in data:
        _one_of(data, primary, alias)
        value = data.pop(alias)
        if data.get(primary) is None:
            data[primary] = value


def _one_of(data: dict[str, Any], first: str, second: str) -> None:
    """Refuses ``data`` giving two spellings of one field different values: the farm would keep
    one and drop the other without a word (the same value twice, as a model written back out
    holds an alias it copied, drops nothing)."""
    if data.get(first) is not None and data.get(second) is not None and data[first] != data[second]:
        raise ValueError(f"give one of '{first}' and '{second}', not both")


_SPELLINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "regex": (("pattern", "value"),),
    "tool_called": (("name", "value"),),
    "tool_result": (("result", "value"), ("tool", "value")),
    "agent": (("criteria", "value"),),
}
"""Each assertion type's pairs of keys that say one thing (the farm's, then Yao's): a case gives one."""


def _said(value: Any) -> str:
    """A value a case wrote, short, as a problem quotes it."""
    text = json.dumps(value, default=repr)
    return text if len(text) <= 40 else text[:37] + "..."


class AssertionSpec(BaseModel):
    """One assertion as written. Type-specific keys stay available as extras."""

    model_config = ConfigDict(extra="allow")

    type: str
    """The assertion type (docs/reference/assertions.md); without ``type``, an object with a ``value``
    is ``equals``, and a bare string is a type with no other key."""
    value: Any = None
    """What is expected; its meaning is the type's."""
    name: Any = None
    """``tool_called``, ``span_count``, ``span_latency``: the tool or span name."""
    pattern: str | None = None
    """``regex``: the pattern."""
    path: str | None = None
    """``json_path``, ``type``: the JSONPath."""
    negate: bool = False
    """``true``: the assertion passes when its condition does not hold (an error stays an error)."""
    message: str | None = None
    """The failure message to record instead of the type's own."""
    ignore_case: bool = False
    """``contains``, ``not_contains``, ``regex``: ignore case."""
    use: str | None = None
    """``agent``: the validator; ``script``: the function."""
    options: Options | None = None
    """``agent``: ``options.connector`` picks the validator call's connector and ``options.metadata``
    reaches the validator; ``script``: passed to the function."""

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"type": data}
        if isinstance(data, AssertionSpec):
            return data
        if not isinstance(data, dict):
            raise ValueError(f"every assertion must be an object or a type name, not {_said(data)}")
        data = dict(data)
        if "type" not in data:
            if "value" not in data:
                raise ValueError("an assertion needs a 'type'")
            data["type"] = "equals"  # as in Yao: a bare value is an equality
        kind = data.get("type")
        # script: `use` or Yao's `script`
        if kind == "script":
            _pop_alias(data, "use", "script")
        # two spellings of one field: both given would silently keep one
        for first, second in _SPELLINGS.get(kind, ()):
            _one_of(data, first, second)
        # tool_result: `tool`/`result`, or Yao's `value: {tool, result}`
        if kind == "tool_result" and isinstance(data.get("value"), dict) and "tool" not in data:
            value = data.pop("value")
            data["tool"] = value.get("tool")
            if "result" in value:
                data["result"] = value["result"]
        # tool_called: `name` or `value`; regex: `pattern` or `value`
        if kind == "tool_called" and data.get("name") is None and "value" in data:
            data["name"] = data["value"]
        if kind == "regex" and data.get("pattern") is None and isinstance(data.get("value"), str):
            data["pattern"] = data["value"]
        return data

    def extra(self, key: str, default: Any = None) -> Any:
        return (self.model_extra or {}).get(key, default)

    @property
    def expected(self) -> Any:
        """What the assertion expects, for reports."""
        if self.type == "tool_called":
            return self.name
        if self.type == "regex":
            return self.pattern
        if self.type == "tool_result":
            return {"tool": self.extra("tool"), "result": self.extra("result")}
        if self.type in ("json_path", "type") and self.path:
            return {"path": self.path, "value": self.value}
        return self.value


class Checkpoint(BaseModel):
    """A goal of a dynamic case: reached once its assertion passes after the ids in ``after``."""

    model_config = ConfigDict(extra="forbid")
    other_spellings: ClassVar[dict[str, str]] = {"assert": "Yao's spelling of ``assertion``."}

    id: str
    """Unique within the case; ``after`` and the results name the checkpoint by it."""
    description: str | None = None
    """What the checkpoint means, for people (recorded with its result)."""
    assertion: AssertionSpec
    """The assertion checked after each agent reply until it passes: one assertion, an object or a
    bare type name (not an array: give each condition its own checkpoint). Text assertions look at the reply
    and the turn's tool results."""
    after: list[str] = Field(default_factory=list)
    """Ids of checkpoints that must be reached first (one reached earlier in the same turn counts);
    until then this one is not checked (no judge call is spent on it). A string is one id."""
    required: bool = True
    """``false``: reaching it is recorded, but the case does not wait for it and does not fail without it."""

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            _pop_alias(data, "assertion", "assert")
            if isinstance(data.get("after"), str):
                data["after"] = [data["after"]]
        return data

    @field_validator("assertion", mode="before")
    @classmethod
    def _one_assertion(cls, v: Any) -> Any:
        if isinstance(v, list):  # said here: the result of a checkpoint is one assertion's
            raise ValueError("a checkpoint takes one assertion (an object or a type name), not an array; give each condition its own checkpoint")
        return v


class SimulatorSpec(BaseModel):
    """``simulator``: the agent that plays the user. Yao's shorthands ``goal`` and
    ``persona`` are ``options.metadata.goal``/``.persona`` (``max_turns`` is the case's)."""

    model_config = ConfigDict(extra="forbid")
    other_spellings: ClassVar[dict[str, str]] = {
        "goal": "Yao's shorthand for ``options.metadata.goal``: what the simulated user wants done.",
        "persona": "Yao's shorthand for ``options.metadata.persona``: who the simulated user is.",
        "max_turns": "Yao's place for the case's ``max_turns`` (the case's own wins when it sets one).",
    }

    use: str | None = None
    """The simulator agent, ``agents:<id>`` or ``<id>`` (default: ``--simulator``, else
    ``[farm].simulator``). A bare string as ``simulator`` is this."""
    options: Options = Field(default_factory=Options)
    """Sent with every simulator call; ``options.metadata`` fills the prompt's ``{goal}``,
    ``{persona}`` and reaches a simulator service (docs/simulator.md)."""

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("goal" in data or "persona" in data):
            data = dict(data)
            options = data.get("options")
            options = dict(options) if isinstance(options, dict) else ({} if options is None else options)
            if isinstance(options, dict):
                metadata = options.get("metadata")
                metadata = dict(metadata) if isinstance(metadata, dict) else ({} if metadata is None else metadata)
                if isinstance(metadata, dict):
                    for key in ("goal", "persona"):
                        if key in data:
                            metadata.setdefault(key, data.pop(key))
                options["metadata"] = metadata
            data["options"] = options
        return data


class Interactive(BaseModel):
    """``interactive``: how a person answers this case under ``--interactive``."""

    enabled: bool = False
    """Accepted as the seed design writes it; a person answers only when the run says ``--interactive``."""
    timeout: float = 300.0
    """How long to wait for the person's answer (a duration)."""

    @field_validator("timeout", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float:
        return parse_duration(v)


class GoldenRule(BaseModel):
    """``golden``: how a run's conversation is compared with its golden one (see farm.conversation.golden).

    ``true`` is ``{"text": "exact"}``; a bare rule name (``"similar"``) is that rule with its defaults.
    Tool calls, ``awaiting_input``, the number of turns and JSON replies are always compared exactly.
    """

    model_config = ConfigDict(extra="forbid")

    text: Literal["exact", "similar", "judge"] = "exact"
    """How reply text is compared: ``exact``; ``similar`` (difflib ratio at least ``threshold``);
    ``judge`` (the validator judges whether the reply says the same as the golden one)."""
    threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    """For ``similar``: the least similarity ratio that passes."""
    use: str | None = None
    """For ``judge``: the validator agent (default ``[farm].validator``)."""
    enabled: bool = True
    """``golden: false`` is ``{"enabled": false}``: never compared, not even with ``--golden DIR``."""


_TEXT_RULES: tuple[str, ...] = get_args(GoldenRule.model_fields["text"].annotation)


def role_agent_id(use: str | None, default: str | None) -> str | None:
    """The role agent a ``use`` names (``agents:<id>`` or ``<id>``: a case's simulator, an ``agent``
    assertion's or a ``judge`` golden rule's validator), else ``default`` (``[farm].simulator``,
    ``[farm].validator``)."""
    return use.removeprefix("agents:").strip() if use else default


def _has_assertions(data: dict[str, Any]) -> bool:
    """Whether a raw case carries assertions of its own (case or turn level)."""
    if data.get("assertions") or data.get("assert"):
        return True
    turns = data.get("turns")
    return isinstance(turns, list) and any(
        isinstance(t, dict) and (t.get("assertions") or t.get("assert")) for t in turns
    )


def _normalise_assertion_keys(data: dict[str, Any], key: str = "assertions") -> None:
    """``assert`` as ``assertions``; the value is read as a list by the field's own validator, so a
    wrong one is named by its field (``turns[0].assertions``)."""
    _pop_alias(data, key, "assert")


class Turn(BaseModel):
    """One scripted turn of a static case; a bare string is a turn with that ``input``."""

    model_config = ConfigDict(extra="forbid")
    other_spellings: ClassVar[dict[str, str]] = {"assert": "Yao's spelling of ``assertions``."}

    input: Any = None
    """What the user says: as a case's ``input``. Under ``--interactive``, a person may answer instead
    when the agent awaits input."""
    assertions: list[AssertionSpec] = Field(default_factory=list)
    """Checked against this turn's reply; the first that fails fails the case and stops it. An object,
    an array (all must pass) or a bare type name."""
    options: Options | None = None
    """Sent with this turn, merged over the case's ``options`` (field by field, ``metadata`` key by key)."""
    attachments: list[Any] = Field(default_factory=list)
    """Parts added to this turn's message, as the case's ``attachments`` are."""
    timeout: float | None = None
    """This turn's timeout (a duration; default ``--turn-timeout``)."""

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"input": data}
        if isinstance(data, dict):
            data = dict(data)
            _normalise_assertion_keys(data)
        return data

    @field_validator("timeout", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float | None:
        return None if v is None else parse_duration(v)

    @field_validator("assertions", mode="before")
    @classmethod
    def _assertions(cls, v: Any) -> list[Any]:
        return _normalise_assertions(v)


_FALSE_WORDS = frozenset({"false", "no", "off", "0", "none", "null"})
"""Texts of ``skip`` that read as "do not skip": a string is a reason to skip, so these are refused."""


def _json_type(value: Any) -> str:
    """What a JSON value is, as a message names it (``an array``, ``true``)."""
    if isinstance(value, bool) or value is None:
        return "null" if value is None else str(value).lower()
    return "an array" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


class TestCase(BaseModel):
    """One test case, as loaded from a suite (docs/reference/cases.md)."""

    __test__ = False  # not a pytest class
    model_config = ConfigDict(extra="forbid")
    other_spellings: ClassVar[dict[str, str]] = {"assert": "Yao's spelling of ``assertions``."}

    id: str
    """Unique within its suite (a number is read as its text); results, ``--run`` and golden files name
    the case by it, with its suite's name when several suites run."""
    name: str | None = None
    """A title for people (the console, reports); default: the id."""
    mode: Mode | None = None
    """``single``, ``static`` or ``dynamic``; optional: the fields choose the mode, and a ``mode`` that
    disagrees with them is an error of the case (``static`` is accepted for a single-turn case)."""
    description: str | None = None
    """Free text for the suite's readers; not sent to the agent."""
    input: Any = None
    """Single-turn: what the user says. Dynamic: the first user message (default: the simulator writes
    it). A string, a message ``{"role", "content"}`` whose content is text or parts (``text``,
    ``image``, ``file``, ``audio``), or an array of messages (history sent before the agent answers)."""
    turns: list[Turn] | None = None
    """Static: the scripted turns, played in order (at most 10000)."""
    simulator: SimulatorSpec | None = None
    """Dynamic (or static, to continue while the agent awaits input after the last turn): the agent
    that plays the user. A string is its ``use``."""
    checkpoints: list[Checkpoint] | None = None
    """Dynamic: what the agent must do; the case passes when every required checkpoint is reached."""
    assertions: list[AssertionSpec] = Field(default_factory=list)
    """Single-turn: checked against the reply. An object, an array (all must pass) or a bare type name.
    Static turns and dynamic checkpoints carry their own."""
    final_assertions: list[AssertionSpec] = Field(default_factory=list)
    """Checked once after the last turn, against the session: text assertions see the last reply,
    tool assertions every call of the case, and ``json_path`` reads every tool result (in call
    order) merged with ``variables``."""
    expected: Any = None
    """Shorthand for an ``equals`` assertion on the (last) reply; ignored, with a warning, when the case
    has assertions."""
    options: Options = Field(default_factory=Options)
    """Sent to the agent with every turn (a turn's own are merged over them)."""
    tags: list[str] = Field(default_factory=list)
    """Labels to select cases by (``--tag``) and to group them in reports; a string is one tag."""
    skip: bool | str = False
    """``true``, or the reason as a string: the case is not run and counts as skipped."""
    timeout: float | None = None
    """The whole case's timeout (a duration: ``30s``, ``2m``, ``1h``, ``500ms``, ``2m30s``; default
    ``--timeout``, 5m); when it passes, the case's status is ``timeout``."""
    max_turns: int = Field(default=20, ge=1, le=10_000)
    """The most turns the conversation may take (dynamic, or a simulator continuing a static case);
    ``0`` means the default. Reaching it fails a dynamic case."""
    max_tool_steps: int | None = Field(default=None, ge=1, le=1_000)
    """Agent calls within one turn while tool mocks are answered (default: the agent's, else 8)."""
    attachments: list[Any] = Field(default_factory=list)
    """Parts added to the first user message: ``{"type": "image" | "file" | "audio", "source": ...}`` or
    a plain source (its type guessed from the file name). A source is ``file://./receipt.jpg`` (or a bare
    relative path: against the suite's folder, never outside it), ``https://...`` (images only) or a
    ``data:`` URL."""
    interactive: Interactive | None = None
    """How a person answers this case under ``--interactive``."""
    before: str | None = None
    """A hook run before the case, ``scripts:<id>``: its failure makes the case an error; a dict it
    returns joins the session's ``variables``."""
    after: str | None = None
    """A hook run after the case, ``scripts:<id>``; it gets ``{"phase": "after", "case", "result"}``."""
    tool_mocks: dict[str, Any] = Field(default_factory=dict)
    """Tool name → its result when the agent calls it: a JSON value, or ``"scripts:<id>"`` (a function
    of the arguments). The farm sends the result back and asks the agent again, within
    ``max_tool_steps``; a case's mocks win over the agent's."""
    variables: dict[str, Any] = Field(default_factory=dict)
    """The session's starting variables, read by ``final_assertions``' ``json_path``."""
    user: str | None = None
    """The user's identity, sent in ``options.metadata.user``."""
    team: str | None = None
    """The team's identity, sent in ``options.metadata.team``."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form data kept with the case (a generator records what it was asked to cover here); not
    sent to the agent: ``options.metadata`` is."""
    golden: GoldenRule | None = None
    """Compare the conversation with its golden file: ``true``, ``false``, a rule name, or an object ``{text, threshold, use, enabled}``."""

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if isinstance(data.get("id"), int | float) and not isinstance(data["id"], bool):
                data["id"] = str(data["id"])  # a number is read as its text
            _normalise_assertion_keys(data)
            if isinstance(data.get("simulator"), str):
                data["simulator"] = {"use": data["simulator"]}
            if isinstance(data.get("simulator"), dict) and "max_turns" in data["simulator"]:
                data["simulator"] = dict(data["simulator"])
                sim_max = data["simulator"].pop("max_turns")
                if data.get("max_turns") in (None, 0):
                    data["max_turns"] = sim_max
            if data.get("max_turns") == 0 and not isinstance(data.get("max_turns"), bool):
                del data["max_turns"]  # as in Yao: 0 means the default
            if data.get("expected") is not None and _has_assertions(data):
                del data["expected"]  # the assertions win (as in Yao); the loader warns
            if isinstance(data.get("tags"), str):
                data["tags"] = [data["tags"]]
        return data

    @field_validator("timeout", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float | None:
        return None if v is None else parse_duration(v)

    @field_validator("assertions", "final_assertions", mode="before")
    @classmethod
    def _assertions(cls, v: Any) -> list[Any]:
        return _normalise_assertions(v)

    @field_validator("golden", mode="before")
    @classmethod
    def _golden(cls, v: Any) -> Any:
        if isinstance(v, bool):
            return {"enabled": v}
        if isinstance(v, str):
            if v not in _TEXT_RULES:  # said here: pydantic would name 'golden.text', which the user never wrote
                raise ValueError(f"{json.dumps(v, ensure_ascii=False)} is not a rule{nearest(v, _TEXT_RULES)}: the rules are {', '.join(_TEXT_RULES)}")
            return {"text": v}
        if v is not None and not isinstance(v, dict):
            raise ValueError("must be true, false, a rule name (exact, similar, judge) or an object {text, threshold, use, enabled}")
        return v

    @field_validator("id", mode="before")
    @classmethod
    def _text_id(cls, v: Any) -> Any:
        if not isinstance(v, str):  # a number is text by now; pydantic would make `true` a type error of its own words
            raise ValueError(f"must be text or a number, not {_json_type(v)}")
        if not v.strip():
            raise ValueError("must not be empty")
        return v

    @field_validator("skip", mode="before")
    @classmethod
    def _skip(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().lower() in _FALSE_WORDS:
            raise ValueError(f"{json.dumps(v, ensure_ascii=False)} is text, so it would skip the case with it as the reason; write false (no quotes) to run it")
        return v

    @field_validator("max_turns", "max_tool_steps", mode="before")
    @classmethod
    def _whole(cls, v: Any) -> Any:
        if isinstance(v, bool):  # pydantic reads true as 1
            raise ValueError(f"must be a whole number, not {str(v).lower()}")
        return v

    @property
    def resolved_mode(self) -> Mode:
        """The mode the fields select (docs/reference/cases.md); raises :class:`CaseRuleError`."""
        has_turns = self.turns is not None
        has_dynamic = not has_turns and self.checkpoints is not None  # no simulator: the default one
        if has_turns and self.checkpoints is not None:
            raise CaseRuleError(
                "a case cannot have both 'turns' and 'checkpoints': "
                "choose static (turns) or dynamic (checkpoints, with a simulator)"
            )
        if has_turns:
            mode = Mode.STATIC
        elif has_dynamic:
            mode = Mode.DYNAMIC
        else:
            mode = Mode.SINGLE
        if self.mode is not None:
            declared = self.mode
            agrees = declared == mode or (declared == Mode.STATIC and mode == Mode.SINGLE)
            if not agrees:
                raise CaseRuleError(
                    f"'mode' is '{declared.value}' but the fields make it {mode.value} "
                    f"({'turns' if has_turns else 'simulator + checkpoints' if has_dynamic else 'neither turns nor simulator + checkpoints'})"
                )
        return mode

    @property
    def title(self) -> str:
        return self.name or self.id

    def skip_reason(self) -> str | None:
        if self.skip is True:
            return "skipped by the case ('skip': true)"
        if isinstance(self.skip, str) and self.skip:
            return self.skip
        return None

    def all_assertions(self) -> list[AssertionSpec]:
        """Every assertion in the case, for up-front validation of types."""
        out = list(self.assertions) + list(self.final_assertions)
        for turn in self.turns or []:
            out.extend(turn.assertions)
        for cp in self.checkpoints or []:
            out.append(cp.assertion)
        return out


InputSource = Literal["static", "simulated", "human"]
