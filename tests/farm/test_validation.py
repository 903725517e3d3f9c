"""``farm validate`` and the load step are deep: every mistake is found before any agent call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from farm.config import load_config
from farm.errors import InputError, UsageError
from farm.suite.checks import check_for_run, check_suite
from farm.suite.loader import load_file

TOML = """
[farm]
simulator = "sim"
[connectors.llm]
base_url = "http://127.0.0.1:9/v1"
model = "m"
[agents.bot]
kind = "openai"
connector = "llm"
[agents.sim]
kind = "simulator"
connector = "llm"
[agents.judge]
kind = "validator"
connector = "llm"
"""


def load(tmp_path: Path, case: dict[str, Any], toml: str | None = TOML, **kw):
    path = tmp_path / "s.jsonl"
    path.write_text("\n" + json.dumps(case) + "\n")
    suite = load_file(path)
    if toml is not None:
        (tmp_path / "farm.toml").write_text(toml)
        check_suite(suite, load_config(tmp_path / "farm.toml"), **kw)
    return suite


def problem(tmp_path: Path, case: dict[str, Any], count: int = 1, **kw) -> str:
    suite = load(tmp_path, case, **kw)
    assert len(suite.problems) == count, suite.problems
    text = suite.problems[0]
    assert text.startswith(f"{tmp_path / 's.jsonl'}:2: "), text
    return text


def one(assertion: dict[str, Any]) -> dict[str, Any]:
    return {"id": "a", "input": "x", "assertions": [assertion]}


@pytest.mark.parametrize("assertion, words", [
    ({"type": "regex", "value": "([a-z"}, ["assertions[0]", "invalid regex"]),
    ({"type": "json_path", "path": "$$[[", "value": 1}, ["field 'assertions[0].path': '$$[[' is not a JSONPath (at character 2)"]),
    ({"type": "type", "path": "$.n", "value": "integer"}, ["unknown type name 'integer'", "number"]),
    ({"type": "contains"}, ["'contains' assertion needs a 'value'"]),
    ({"type": "equals"}, ["needs a 'value'"]),
    ({"type": "tool_called"}, ["needs a 'name'"]),
    ({"type": "tool_result", "value": {"result": {}}}, ["needs a 'tool'"]),
    ({"type": "tool_result", "tool": "t", "result": {"s": "regex:(("}}, ["invalid regex"]),
    ({"type": "latency", "value": "fast"}, ["numeric 'value'"]),
    ({"type": "contains", "valeu": "x"}, ["'assertions[0].valeu': unknown field", "did you mean 'value'"]),
    ({"type": "agent", "use": "agents:judge", "options": {"conector": "llm"}}, ["assertions[0].options.conector", "did you mean 'connector'"]),
])
def test_assertion_mistakes_name_file_line_and_field(tmp_path, assertion, words):
    text = problem(tmp_path, one(assertion), count=2 if "valeu" in assertion else 1)  # and: contains needs a value
    for word in words:
        assert word in text


@pytest.mark.parametrize("case, words", [
    ({"id": "a", "input": "x", "tagz": ["t"]}, ["'tagz'", "did you mean 'tags'"]),
    ({"id": "a", "turns": [{"input": "x", "asserts": []}]}, ["'turns[0].asserts'", "did you mean 'assertions'"]),
    ({"id": "a", "simulator": {"use": "sim", "metadata": {"x": 1}}, "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "x"}}]}, ["'simulator.metadata'", "unknown field"]),
    ({"id": "a", "checkpoints": [{"id": "c", "assertion": {"type": "contains", "value": "ok"}, "afterr": ["c"]}]}, ["'checkpoints[0].afterr'", "did you mean 'after'"]),
    ({"id": "a", "input": "x", "options": {"metadata": {}, "conector": "llm"}}, ["'options.conector'"]),
    ({"id": "a", "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "x"}, "after": ["c"]}]}, ["depends on itself"]),
    ({"id": "a", "checkpoints": [
        {"id": "c", "assert": {"type": "contains", "value": "x"}, "after": ["d"]},
        {"id": "d", "assert": {"type": "contains", "value": "y"}, "after": ["c"]},
    ]}, ["cycle", "c -> d -> c"]),
    (
        {"id": "a", "simulator": {"use": "simm"}, "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "x"}}]},
        ["'simulator.use'", "agent 'simm' is not configured", "did you mean 'sim'"],
    ),
    ({"id": "a", "input": "x", "assertions": [{"type": "agent", "use": "agents:judgee", "value": "polite"}]}, ["assertions[0].use", "'judgee'"]),
    ({"id": "a", "input": "x", "options": {"connector": "lm"}}, ["options.connector", "connector 'lm' is not configured"]),
    ({"id": "a", "input": "x", "attachments": ["file://../../etc/passwd"]}, ["'input'", "outside the test file's folder"]),
    ({"id": "a", "input": "x", "attachments": ["file://missing.png"]}, ["does not exist"]),
    ({"id": "a", "input": "x", "assertions": [{"type": "script", "script": "scripts.nope.Check"}]}, ["assertions[0].script", "exists"]),
    ({"id": "a", "input": "x", "before": "scripts:../escape"}, ["'before'", "not a dotted module path"]),
    ({"id": "a", "checkpoints": [{"id": "c", "required": False, "assertion": {"type": "contains", "value": "x"}}]}, ["'checkpoints'", "every checkpoint is required: false"]),
    ({"id": "a", "input": "x", "skip": "false"}, ["'skip'", '"false" is text', "write false (no quotes)"]),
    ({"id": ["a"], "input": "x"}, ["'id'", "must be text or a number, not an array"]),
    ({"id": True, "input": "x"}, ["'id'", "not true"]),
    ({"input": "x"}, ["'id'", "required field is missing"]),  # once
    ({"id": " ", "input": "x"}, ["'id'", "must not be empty"]),  # once, and not "missing"
    ({"id": "a", "input": "x", "max_turns": True}, ["'max_turns'", "must be a whole number, not true"]),
    ({"id": "a", "input": "x", "golden": "simlar"}, ["'golden'", "did you mean 'similar'"]),
    ({"id": "a", "input": [{"role": "usr", "content": "x"}]}, ["'input'", "input[0] has the role \"usr\" (did you mean 'user'?)"]),
    ({"id": "a", "input": {"rol": "user", "content": "x"}}, ["'input'", "unknown key 'rol' (did you mean 'role'?)"]),
])
def test_case_mistakes_name_file_line_and_field(tmp_path, case, words):
    text = problem(tmp_path, case)
    for word in words:
        assert word in text, text


def test_checkpoints_without_any_simulator_name_both_remedies(tmp_path):
    toml = TOML.replace('simulator = "sim"', "")
    case = {"id": "a", "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "x"}}]}
    text = problem(tmp_path, case, toml=toml)
    assert "'simulator.use'" in text and "--simulator" in text and "[farm].simulator" in text
    assert not load(tmp_path, case, toml=toml, default_simulator="sim").problems


def test_a_script_reference_that_resolves_is_fine(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "checks.py").write_text("def Validate(content, input, options):\n    return {'pass': True}\n")
    assert not load(tmp_path, one({"type": "script", "script": "scripts.checks.Validate"})).problems


def test_without_a_config_ids_are_not_checked(tmp_path):
    case = {"id": "a", "simulator": {"use": "whoever"}, "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "x"}}]}
    suite = load(tmp_path, case, toml=None)
    from farm.config import FarmConfig

    check_suite(suite, FarmConfig())
    assert not suite.problems


def test_run_checks_refuse_an_unimportable_python_entry_and_a_missing_key(tmp_path, monkeypatch):
    toml = TOML + '[agents.py]\nkind = "python"\nentry = "no_such_module_here:answer"\n'
    suite = load(tmp_path, {"id": "a", "input": "x"}, toml=toml)
    config = load_config(tmp_path / "farm.toml")
    with pytest.raises(UsageError, match=r"farm\.toml:\d+: key 'entry': module 'no_such_module_here' cannot be imported"):
        check_for_run(suite, config, "py")
    keyed = load_config(tmp_path / "farm.toml").model_copy()
    keyed.connectors["llm"].api_key_env = "FARM_UNSET_KEY_FOR_TEST"
    monkeypatch.delenv("FARM_UNSET_KEY_FOR_TEST", raising=False)
    with pytest.raises(UsageError, match=r"FARM_UNSET_KEY_FOR_TEST, which is not set"):
        check_for_run(suite, keyed, "bot")
    check_for_run(suite, keyed, "bot", dry_run=True)  # a dry run calls nothing
    monkeypatch.setenv("FARM_UNSET_KEY_FOR_TEST", "k")
    check_for_run(suite, keyed, "bot")


def test_every_problem_of_a_case_is_reported_one_each(tmp_path):
    """No problem hides another: unknown fields, a bad assertion type, an invalid regex, a checkpoint
    cycle and an unknown simulator are all reported, each naming its field."""
    suite = load(tmp_path, {
        "id": "a", "inputt": "x", "simulator": {"use": "simm", "goall": "g"},
        "checkpoints": [
            {"id": "c", "assert": {"type": "containz", "value": "x"}, "after": ["d"]},
            {"id": "d", "assert": {"type": "regex", "pattern": "([a-z", "flags": 1}, "after": ["c"]},
        ],
    })
    where = f"{tmp_path / 's.jsonl'}:2: "
    problems = [p.removeprefix(where) for p in suite.problems]
    assert all(p.startswith(where) for p in suite.problems)
    assert problems[:3] == [
        "field 'inputt': unknown field (did you mean 'input'?)",
        "field 'simulator.goall': unknown field (did you mean 'goal'?)",
        "field 'checkpoints[1].assert.flags': unknown field",
    ]
    assert problems[3] == "field 'checkpoints[0].assertion.type': unknown assertion type 'containz' (did you mean 'contains'?)"
    assert problems[4].startswith("field 'checkpoints[1].assertion': invalid regex '([a-z'")
    assert problems[5] == "field 'checkpoints': the checkpoints depend on each other in a cycle (c -> d -> c), so none of them can be reached"
    assert problems[6].startswith("field 'simulator.use': agent 'simm' is not configured")
    assert len(problems) == 7


def test_a_refused_value_does_not_hide_the_rest_of_the_case(tmp_path):
    problems = load(tmp_path, {"id": "a", "input": "x", "timeout": "soon", "max_turns": 10**4000 if False else 10**40,
                               "assertions": [{"type": "regex", "value": "(("}]}).problems
    assert len(problems) == 3, problems
    assert "field 'timeout': 'soon' is not a duration" in problems[0]
    assert "field 'max_turns': must be at most 10000, not 1000000000000000000000000000000000000..." in problems[1]
    assert "field 'assertions[0]': invalid regex '(('" in problems[2]


@pytest.mark.parametrize("value", [10**4000 // 10**3990, 10**20, -1])
def test_numbers_have_bounds(tmp_path, value):
    assert problem(tmp_path, {"id": "a", "input": "x", "max_turns": value}, toml=None)
    assert problem(tmp_path, one({"type": "latency", "value": value * 10**8}), toml=None)


@pytest.mark.parametrize("key", ["a\nb", "a\x1b[31mb", "a\u2028b", "a\u0085b", "a\rb"])
def test_names_from_the_input_are_escaped_so_each_problem_is_one_line(tmp_path, key):
    suite = load(tmp_path, {"id": "a", "input": "x", key: 1, "options": {key: 2}, "tool_mocks": {key: "scripts:../x"},
                            "assertions": [{"type": key, "value": 1}]})
    assert len(suite.problems) >= 3
    for text in suite.problems:
        assert text.isprintable(), text
    assert repr(key)[1:-1] in suite.problems[0]


def test_patterns_are_checked_by_the_engine_the_run_uses_with_no_warning(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # re would warn "Possible nested set" for [[:alpha:]
        assert not load(tmp_path, one({"type": "regex", "value": "[[:alpha:]]+"}), toml=None).problems
        assert "invalid regex" in problem(tmp_path, one({"type": "regex", "value": "[[:alpha:]"}), toml=None)
        assert "invalid regex" in problem(tmp_path, one({"type": "tool_result", "tool": "t", "result": {"s": "regex:[[:alpha:]"}}), toml=None)


def test_a_case_scripts_at_most_as_many_turns_as_max_turns_allows(tmp_path):
    turn = {"input": "hi"}
    text = problem(tmp_path, {"id": "a", "turns": [turn] * 10_001}, toml=None)
    assert text.endswith("field 'turns': 10001 turns, more than the 10000 a case may have (the bound of max_turns)")
    assert not load(tmp_path, {"id": "a", "turns": [turn] * 10_000}, toml=None).problems


def test_bounds_are_found_at_their_edges():
    """Out of bounds is found however deep or however it is hidden: a key, text beyond ASCII, an array."""
    from farm.suite.validation import MAX_DEPTH, TooLargeInteger, raw_problems

    def nested(levels: int, inner: Any) -> Any:
        for _ in range(levels):
            inner = [inner]
        return inner

    deepest = MAX_DEPTH - 1  # arrays around the innermost value, which then sits MAX_DEPTH deep (metadata is 1)
    assert raw_problems({"id": "a", "metadata": nested(deepest, "x")}) == []
    assert raw_problems({"id": "a", "metadata": nested(deepest, [])}) == []
    assert raw_problems({"id": "a", "metadata": nested(deepest, {})}) == []
    for inner in ("x", [], {}, 1):
        (problem,) = raw_problems({"id": "a", "metadata": nested(deepest + 1, inner)})
        assert problem.endswith(f"nested more than {MAX_DEPTH} levels deep")
    assert raw_problems({"id": "a", "input": "é ü", "metadata": {"ключ": ["ü"]}}) == []
    assert "a key holds a lone surrogate" in raw_problems({"id": "a", "metadata": {"é\ud800": 1}})[0]
    assert raw_problems({"id": "a", "metadata": {"k": [{"x": "é\udfff"}]}}) == [
        "field 'metadata.k[0].x': holds a lone surrogate (such as \\ud800), which is not valid Unicode text"
    ]
    assert raw_problems({"id": "a", "metadata": [[TooLargeInteger(5000)]]}) == ["field 'metadata[0][0]': an integer of 5000 digits is too large (at most 4300)"]


@pytest.mark.parametrize(
    "case, said",
    [
        ({"assertions": [{"type": "contains", "value": "x", "negate": "ture"}]}, "field 'assertions[0].negate': 'ture' is not true or false"),
        ({"max_turns": "many"}, "field 'max_turns': 'many' is not a whole number"),
        ({"max_turns": 2.5}, "field 'max_turns': 2.5 is not a whole number"),
        ({"tags": [1]}, "field 'tags[0]': 1 is not text (a string in double quotes)"),
        ({"options": 5}, "field 'options': 5 is not an object ({...})"),
        ({"mode": "dynamc"}, "field 'mode': 'dynamc' is not one of single, static, dynamic (did you mean 'dynamic'?)"),
    ],
)
def test_a_refused_value_is_said_in_the_farms_words_at_the_farms_field_path(tmp_path, case, said):
    problems = load(tmp_path, {"id": "a", "input": "x", **case}).problems
    assert problems and problems[0].split(": ", 1)[1] == said, problems
    assert not any("Input should" in p for p in problems)


@pytest.mark.parametrize(
    "case, said",
    [
        (
            {"simulator": {"use": "agents:sim"}, "checkpoint": [{"id": "c", "assertion": {"type": "contains", "value": "v"}}]},
            "field 'checkpoint': unknown field (did you mean 'checkpoints'?)",
        ),
        ({"inptu": "hi"}, "field 'inptu': unknown field (did you mean 'input'?)"),
        ({"turn": [{"input": "hi"}]}, "field 'turn': unknown field (did you mean 'turns'?)"),
    ],
)
def test_a_misspelt_mode_field_is_the_one_problem_not_the_mode_it_leaves(tmp_path, case, said):
    problems = load(tmp_path, {"id": "a", **case}).problems
    assert [p.split(": ", 1)[1] for p in problems] == [said]


def test_a_key_given_twice_is_a_problem_of_its_case_not_the_last_one_read(tmp_path):
    (tmp_path / "s.jsonl").write_text(
        '{"id": "ok", "input": "x"}\n'
        '{"id": "a", "input": "x", "assertions": [{"type": "contains", "value": "NOPE"}], "assertions": []}\n'
    )
    suite = load_file(tmp_path / "s.jsonl")
    assert suite.problems == [f"{tmp_path / 's.jsonl'}:2: the key 'assertions' is given twice in one object (only the last would be read)"]
    (tmp_path / "s.json").write_text('{"cases": [\n  {"id": "ok", "input": "x"},\n  {"id": "a", "input": {"role": "user", "role": "user", "content": "x"}}\n]}\n')
    assert load_file(tmp_path / "s.json").problems == [f"{tmp_path / 's.json'}:3: the key 'role' is given twice in one object (only the last would be read)"]


@pytest.mark.parametrize("text, said", [
    ('{"case": [{"id": "a", "input": "x"}]}', "s.json:1: field 'case': unknown field (did you mean 'cases'?)"),
    ('{"cases": [{"id": "a", "input": "x"}],\n "defaults": {"tags": ["t"]}}', "s.json:2: field 'defaults': unknown field of a suite"),
])
def test_a_json_suite_with_a_key_beside_its_cases_is_refused(tmp_path, text, said):
    (tmp_path / "s.json").write_text(text)
    with pytest.raises(InputError) as refused:
        load_file(tmp_path / "s.json", display="s.json")
    assert refused.value.problems[0].startswith(said), refused.value.problems


def assertion(spec: Any) -> dict[str, Any]:
    return {"assertions": [spec]}


@pytest.mark.parametrize(
    "case, said",
    [
        (assertion({"type": "contains", "value": ""}), "field 'assertions[0].value': an empty value matches every reply; give the text to look for"),
        (assertion({"type": "not_contains", "value": []}), "field 'assertions[0].value': an empty value matches every reply; give the text that must be absent"),
        (assertion({"type": "tool_called", "value": ["book", ""]}), "field 'assertions[0].value[1]': an empty name matches no tool; give the tool's name"),
        (
            assertion({"type": "tool_result", "tool": "book", "result": {}}),
            "field 'assertions[0].result': an empty object matches every result; give the keys to look for, or leave 'result' out",
        ),
        (
            assertion({"type": "tool_result", "tool": "book", "result": {"id": "regex:"}}),
            "field 'assertions[0].result': 'regex:' with no pattern after it matches every result; give the pattern",
        ),
        (
            assertion({"type": "agent", "use": "agents:judge", "criteria": " "}),
            "field 'assertions[0].criteria': empty criteria give the validator nothing to judge by; say what the reply must do",
        ),
        (assertion({"type": "tool_executed", "name": "book", "count": -1}), "field 'assertions[0].count': must be at least 0, not -1"),
        (assertion({"type": "tool_executed", "name": "book", "count": 2, "min": 1}), "field 'assertions[0]': give 'count', or 'min' and 'max', not both"),
        (assertion({"type": "tool_executed", "name": ""}), "field 'assertions[0].name': must not be empty"),
        (assertion({"type": "span_count", "name": "search*", "min": 3, "max": 1}), "field 'assertions[0]': 'min' (3) is more than 'max' (1), so no number is within them"),
        (assertion({"type": "trajectory", "tools": "book"}), "field 'assertions[0].tools': 'book' is not a list (an array: [...])"),
        (assertion({"type": "trajectory", "tools": ["search", ""]}), "field 'assertions[0].tools[1]': must not be empty"),
        (assertion({"type": "trajectory", "tools": ["a"], "order": "sorted"}), "field 'assertions[0].order': 'sorted' is not one of exact, in_order, any"),
        (assertion({"type": "tool_executed"}), "field 'assertions[0].name': required field is missing"),
        (assertion({"type": "tool_called", "name": "book", "value": "search"}), "field 'assertions[0]': give one of 'name' and 'value', not both"),
        (assertion({"type": "tool_result", "tool": "t", "result": 1, "value": {"tool": "t", "result": 2}}), "field 'assertions[0]': give one of 'result' and 'value', not both"),
        (assertion({"type": "agent", "use": "agents:judge", "criteria": "polite", "value": "rude"}), "field 'assertions[0]': give one of 'criteria' and 'value', not both"),
        (assertion({"type": "script", "use": "scripts.a", "script": "scripts.b"}), "field 'assertions[0]': give one of 'use' and 'script', not both"),
        (assertion({"type": "json_path", "path": "$.a b"}), "field 'assertions[0].path': '$.a b' is not a JSONPath (at character 5)"),
        ({"assertions": 5}, "field 'assertions': must be an object, an array of objects or a type name"),
        ({"final_assertions": [None]}, "field 'final_assertions[0]': every assertion must be an object or a type name, not null"),
        ({"input": None, "turns": [{"input": "x", "assertions": ["contains", 3]}]}, "field 'turns[0].assertions[1]': every assertion must be an object or a type name, not 3"),
    ],
)
def test_an_assertion_that_could_not_say_anything_or_says_two_things_is_refused_at_its_field(tmp_path, case, said):
    problems = load(tmp_path, {"id": "a", "input": "x", **case}).problems
    assert problems and problems[-1].split(": ", 1)[1] == said, problems
    assert not any("should" in p or "Input" in p for p in problems)


def test_the_same_value_in_both_spellings_drops_nothing_and_is_accepted(tmp_path):
    """A model written back out holds the alias it copied (``pattern`` from ``value``): read again, it stays valid."""
    case = {"id": "a", "input": "x", "assertions": [{"type": "regex", "pattern": "ok", "value": "ok"}, {"type": "tool_called", "value": ["book"]}]}
    suite = load(tmp_path, case)
    assert not suite.problems
    from farm.cases import TestCase

    model = suite.cases[0].case
    assert model is not None and TestCase.model_validate_json(model.model_dump_json(exclude_unset=True)) == model


def test_every_pydantic_error_a_case_can_meet_is_said_in_the_farms_words():
    from typing import Literal

    from pydantic import AnyUrl, BaseModel, Field, HttpUrl, ValidationError

    from farm.suite.validation import schema_problems

    class Model(BaseModel):
        few: list[int] = Field(default_factory=list, min_length=2)
        many: list[int] = Field(default_factory=list, max_length=1)
        keys: dict[str, int] = Field(default_factory=dict, min_length=1)
        text: str = Field(default="x", min_length=1)
        short: str = Field(default="x", max_length=2)
        ratio: float = Field(default=0.5, lt=1)
        flag: bool = False
        table: dict[str, int] = Field(default_factory=dict)
        rule: Literal["exact", "similar"] = "exact"
        link: HttpUrl | None = None
        url: AnyUrl | None = None
        step: int = Field(default=2, multiple_of=2)

    said = {
        "few": ([1], "field 'few': give at least 2 items"),
        "many": ([1, 2], "field 'many': give at most one item"),
        "keys": ({}, "field 'keys': give at least one key"),
        "text": ("", "field 'text': must not be empty"),
        "short": ("long", "field 'short': 'long' is longer than 2 characters"),
        "ratio": ("half", "field 'ratio': 'half' is not a number"),
        "flag": ("maybe", "field 'flag': 'maybe' is not true or false"),
        "table": ([], "field 'table': [] is not an object ({...})"),
        "rule": ("similr", "field 'rule': 'similr' is not one of exact, similar (did you mean 'similar'?)"),
        "link": ("ftp://host", "field 'link': 'ftp://host' is not a URL starting with http:// or https://"),
        "url": ("not a url", "field 'url': 'not a url' is not a URL"),
        "step": (3, "field 'step': 3 is not a multiple of 2"),
    }
    for field, (value, sentence) in said.items():
        with pytest.raises(ValidationError) as caught:
            Model.model_validate({field: value})
        assert schema_problems(caught.value) == [sentence]
    with pytest.raises(ValidationError) as caught:
        Model.model_validate({"ratio": 2})
    assert schema_problems(caught.value) == ["field 'ratio': must be less than 1, not 2"]


def test_an_error_type_without_words_of_its_own_is_said_plainly_not_in_pydantics_words():
    from pydantic import BaseModel, ValidationError

    from farm.suite.validation import schema_problems

    class Model(BaseModel):
        when: __import__("datetime").date | None = None

    with pytest.raises(ValidationError) as caught:
        Model.model_validate({"when": "someday"})
    assert schema_problems(caught.value) == ["field 'when': 'someday' is not a value this field takes"]
