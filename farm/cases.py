"""Test-case models: what a user writes in a suite (SPEC section 3).

Both spellings of the seed design and of its Go implementation are accepted
(``assertions``/``assert``, ``assertion``/``assert``, ``name``/``value`` for
``tool_called``, ``pattern``/``value`` for ``regex``), and normalised here so
that nothing downstream needs to know there were two.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from farm.durations import parse_duration
from farm.errors import FarmError

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
    SINGLE = "single"
    STATIC = "static"
    DYNAMIC = "dynamic"


class Options(BaseModel):
    """The seed's ``context.Options``: passed to the agent with every call."""

    model_config = ConfigDict(extra="forbid")

    skip: dict[str, Any] | bool | None = None
    connector: str | None = None
    search: Any = None
    mode: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def merged(self, other: Options | None) -> Options:
        """These options overridden field by field by ``other`` (metadata merged)."""
        if other is None:
            return self
        data = self.model_dump(exclude_none=True)
        over = other.model_dump(exclude_none=True)
        metadata = {**data.pop("metadata", {}), **over.pop("metadata", {})}
        return Options(**{**data, **over, "metadata": metadata})


def _normalise_assertions(value: Any) -> list[dict[str, Any]]:
    """An object, an array, or a bare type string, as a list of objects."""
    if value is None:
        return []
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list):
        raise ValueError("must be an object, an array of objects or a type name")
    out = []
    for item in value:
        if isinstance(item, str):
            item = {"type": item}
        if not isinstance(item, dict):
            raise ValueError("every assertion must be an object or a type name")
        out.append(item)
    return out


def _pop_alias(data: dict[str, Any], primary: str, alias: str) -> None:
    if alias in data:
        if primary in data and data[primary] is not None:
            raise ValueError(f"give either '{primary}' or '{alias}', not both")
        data[primary] = data.pop(alias)


class AssertionSpec(BaseModel):
    """One assertion as written. Type-specific keys stay available as extras."""

    model_config = ConfigDict(extra="allow")

    type: str
    value: Any = None
    name: Any = None
    pattern: str | None = None
    path: str | None = None
    negate: bool = False
    message: str | None = None
    ignore_case: bool = False
    use: str | None = None
    options: Options | None = None

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "type" not in data:
            if "value" not in data:
                raise ValueError("an assertion needs a 'type'")
            data["type"] = "equals"  # as in Yao: a bare value is an equality
        kind = data.get("type")
        # script: `use` or Yao's `script`
        if kind == "script":
            _pop_alias(data, "use", "script")
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
    model_config = ConfigDict(extra="forbid")

    id: str
    description: str | None = None
    assertion: AssertionSpec
    after: list[str] = Field(default_factory=list)
    required: bool = True

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            _pop_alias(data, "assertion", "assert")
            if isinstance(data.get("assertion"), str):
                data["assertion"] = {"type": data["assertion"]}
            if isinstance(data.get("after"), str):
                data["after"] = [data["after"]]
        return data


class SimulatorSpec(BaseModel):
    """``simulator``: the agent that plays the user. Yao's shorthands ``goal`` and
    ``persona`` are ``options.metadata.goal``/``.persona`` (``max_turns`` is the case's)."""

    model_config = ConfigDict(extra="forbid")

    use: str | None = None
    options: Options = Field(default_factory=Options)

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
    enabled: bool = False
    timeout: float = 300.0

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
    _pop_alias(data, key, "assert")
    if key in data:
        data[key] = _normalise_assertions(data[key])


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: Any = None
    assertions: list[AssertionSpec] = Field(default_factory=list)
    options: Options | None = None
    attachments: list[Any] = Field(default_factory=list)
    timeout: float | None = None

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


class TestCase(BaseModel):
    """One test case, as loaded from a suite (SPEC 3.2)."""

    __test__ = False  # not a pytest class
    model_config = ConfigDict(extra="forbid")

    id: str
    name: str | None = None
    mode: Mode | None = None
    description: str | None = None
    input: Any = None
    turns: list[Turn] | None = None
    simulator: SimulatorSpec | None = None
    checkpoints: list[Checkpoint] | None = None
    assertions: list[AssertionSpec] = Field(default_factory=list)
    final_assertions: list[AssertionSpec] = Field(default_factory=list)
    expected: Any = None
    options: Options = Field(default_factory=Options)
    tags: list[str] = Field(default_factory=list)
    skip: bool | str = False
    timeout: float | None = None
    max_turns: int = Field(default=20, ge=1, le=10_000)
    max_tool_steps: int | None = Field(default=None, ge=1, le=1_000)
    """Agent calls within one turn while tool mocks are answered (default: the agent's, else 8)."""
    attachments: list[Any] = Field(default_factory=list)
    interactive: Interactive | None = None
    before: str | None = None
    after: str | None = None
    tool_mocks: dict[str, Any] = Field(default_factory=dict)
    variables: dict[str, Any] = Field(default_factory=dict)
    user: str | None = None
    team: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    golden: GoldenRule | None = None
    """Compare the conversation with its golden file: ``true``, ``false``, a rule name, or a :class:`GoldenRule`."""

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if "id" in data and not isinstance(data["id"], str) and data["id"] is not None:
                data["id"] = str(data["id"])
            _normalise_assertion_keys(data)
            if "final_assertions" in data:
                data["final_assertions"] = _normalise_assertions(data["final_assertions"])
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

    @field_validator("golden", mode="before")
    @classmethod
    def _golden(cls, v: Any) -> Any:
        if isinstance(v, bool):
            return {"enabled": v}
        if isinstance(v, str):
            if v not in _TEXT_RULES:  # said here: pydantic would name 'golden.text', which the user never wrote
                raise ValueError(f"{v!r} is not a rule ({', '.join(_TEXT_RULES)})")
            return {"text": v}
        if v is not None and not isinstance(v, dict):
            raise ValueError("must be true, false, a rule name (exact, similar, judge) or an object {text, threshold, use, enabled}")
        return v

    @field_validator("id")
    @classmethod
    def _non_empty_id(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v

    @property
    def resolved_mode(self) -> Mode:
        """The mode the fields select (SPEC 3.1); raises :class:`CaseRuleError`."""
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
