"""Loading suites: files, messages, bad input, mode selection, both key spellings."""

import copy
import io
import json
import pickle

import pytest
from pydantic import BaseModel

from farm.cases import Mode
from farm.errors import InputError, UsageError
from farm.suite.loader import load_file, load_message, load_stdin, parse_cases


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_jsonl_skips_blanks_and_comments_and_keeps_lines(tmp_path):
    path = write(tmp_path, "s.jsonl", '// a comment\n\n{"id": "a", "input": "hi"}\n   \n{"id": "b", "turns": ["x", {"input": "y"}]}\n')
    suite = load_file(path)
    assert [(c.id, c.source.rsplit(":", 1)[1]) for c in suite.cases] == [("a", "3"), ("b", "5")]
    assert suite.cases[1].case.resolved_mode == Mode.STATIC
    assert [t.input for t in suite.cases[1].case.turns] == ["x", "y"]


def test_every_non_json_line_is_listed(tmp_path):
    path = write(tmp_path, "s.jsonl", '{"id": "a", "input": "x"}\n{nope\n{"id": "b"\n')
    suite = load_file(path)
    assert [p.split(": ")[0] for p in suite.problems] == [f"{path}:2", f"{path}:3"]
    assert [c.id for c in suite.cases if c.ok] == ["a"]


def test_a_line_that_is_not_json_hides_no_other_line(tmp_path):
    """Every problem of the file at once: a line that does not parse is that line's one problem."""
    lines = [
        '{"id": "a", "input": "hi", "assertions": [{"type": "contains", "value": "x"}]},',
        '{"id": "b", "input": "hi", "assertions": [{"type": "regex", "pattern": "(("}]}',
        '{"id": "c", "input": "hi", "max_turn": 3}',
        '{"id": "d", "input": "hi"}',
        '  {"id": "e", "input": "hi",}',
    ]
    path = write(tmp_path, "bad.jsonl", "\n".join(lines) + "\n")
    suite = load_file(path, display="bad.jsonl")
    assert suite.problems == [
        "bad.jsonl:1: not valid JSON: a trailing comma at column 79 (a line holds one case, with nothing after it)",
        "bad.jsonl:2: field 'assertions[0]': invalid regex '((': missing ) at position 2",
        "bad.jsonl:3: field 'max_turn': unknown field (did you mean 'max_turns'?)",
        "bad.jsonl:5: not valid JSON: a trailing comma at column 28 (JSON allows none before '}')",
    ]
    assert [c.id for c in suite.cases if c.ok] == ["d"]


@pytest.mark.parametrize(
    "line, said",
    [
        ('{"id": "a"} {"id": "b"}', "something follows the object at column 13 (a line holds one case)"),
        ("{'id': 'a'}", "a single quote at column 2 (JSON strings and keys take double quotes)"),
        ('{"id": "a", "input": "x"', "the text ends at column 25 before the object is closed"),
        ('{"id" "a"}', "a colon after the key is expected at column 7"),
        ('{"id": "a" "input": "x"}', "a comma (or the closing bracket) is expected at column 12"),
        ('{"id": "a", "tags": [1, 2,]}', "a trailing comma at column 26 (JSON allows none before ']')"),
    ],
)
def test_json_mistakes_are_said_in_the_farms_words(tmp_path, line, said):
    (problem,) = load_file(write(tmp_path, "s.jsonl", line + "\n"), display="s.jsonl").problems
    assert problem == f"s.jsonl:1: not valid JSON: {said}"


@pytest.mark.parametrize(
    "case, message",
    [
        ({"input": "x"}, "field 'id': required field is missing"),
        ({"id": "a", "input": "x", "assertions": [{"type": "nope"}]}, "unknown assertion type 'nope'"),
        ({"id": "a", "turns": [{"input": "x"}], "simulator": {"use": "s"}, "checkpoints": [{"id": "c", "assertion": "contains"}]}, "both 'turns' and 'checkpoints'"),
        ({"id": "a", "input": "x", "colour": "red"}, "field 'colour': unknown field"),
        ({"id": "a", "mode": "dynamic", "input": "x"}, "'mode' is 'dynamic'"),
        ({"id": "a", "simulator": {"use": "s"}, "checkpoints": [{"id": "c", "after": ["zz"], "assertion": {"type": "contains", "value": "v"}}]}, "unknown checkpoint(s): zz"),
        ({"id": "a", "input": "x", "timeout": "soon"}, "not a duration"),
        ([1, 2], "a case must be a JSON object"),
    ],
)
def test_rule_breaking_cases_become_errors_and_the_rest_load(tmp_path, case, message):
    path = write(tmp_path, "s.jsonl", json.dumps(case) + '\n{"id": "fine", "input": "x"}\n')
    suite = load_file(path)
    bad, good = suite.cases
    assert not bad.ok and message in bad.error, bad.error
    assert good.ok
    assert suite.problems[0].startswith(f"{path}:1: ")


def test_duplicate_ids_name_the_first(tmp_path):
    path = write(tmp_path, "s.jsonl", '{"id": "a", "input": "x"}\n{"id": "a", "input": "y"}\n')
    first, second = load_file(path).cases
    assert first.ok and not second.ok
    assert second.error == f"field 'id': duplicate id 'a' (first at {path}:1)"


def test_both_spellings_are_accepted(tmp_path):
    seed = {"id": "s", "turns": [{"input": "x", "assertions": [{"type": "tool_called", "name": "t"}, {"type": "regex", "pattern": "a+"}]}]}
    yao = {"id": "y", "turns": [{"input": "x", "assert": [{"type": "tool_called", "value": "t"}, {"type": "regex", "value": "a+"}]}]}
    cp = {"id": "c", "simulator": {"use": "s"}, "checkpoints": [{"id": "k", "assert": {"type": "contains", "value": "v"}}]}
    path = write(tmp_path, "s.jsonl", "\n".join(json.dumps(c) for c in (seed, yao, cp)))
    s, y, c = (x.case for x in load_file(path).cases)
    for case in (s, y):
        called, regex = case.turns[0].assertions
        assert called.name == "t" and regex.pattern == "a+"
    assert c.checkpoints[0].assertion.type == "contains"


def test_bare_string_and_single_object_assertions(tmp_path):
    path = write(tmp_path, "s.jsonl", '{"id": "a", "input": "x", "assert": {"type": "contains", "value": "v"}}\n{"id": "b", "input": "x", "assertions": "agent"}\n')
    a, b = (c.case for c in load_file(path).cases)
    assert [x.type for x in a.assertions] == ["contains"]
    assert [x.type for x in b.assertions] == ["agent"]


@pytest.mark.parametrize("shape", ["one", "array", "cases"])
def test_json_files_hold_one_case_an_array_or_cases(tmp_path, shape):
    cases = [{"id": "a", "input": "x"}, {"id": "b", "input": "y"}]
    data = {"one": cases[0], "array": cases, "cases": {"cases": cases}}[shape]
    path = write(tmp_path, "s.json", json.dumps(data, indent=2))
    suite = load_file(path)
    assert [c.id for c in suite.cases] == (["a"] if shape == "one" else ["a", "b"])
    assert all(c.ok for c in suite.cases)
    if shape != "one":
        lines = [int(c.source.rsplit(":", 1)[1]) for c in suite.cases]
        assert lines[0] < lines[1]


def test_broken_json_file_names_its_line(tmp_path):
    path = write(tmp_path, "s.json", '[\n {"id": "a"},\n {oops}\n]')
    with pytest.raises(InputError) as info:
        load_file(path)
    assert info.value.problems == [f"{path}:3: not valid JSON: a key in double quotes is expected at column 3"]


def test_a_json_file_that_does_not_parse_is_one_problem_at_its_line(tmp_path):
    path = write(tmp_path, "s.json", '[\n {"id": "a", "input": "x"},\n]\n')
    with pytest.raises(InputError) as info:
        load_file(path, display="s.json")
    assert info.value.problems == ["s.json:2: not valid JSON: a trailing comma at column 27 (JSON allows none before ']')"]


def test_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="file not found"):
        load_file(tmp_path / "nope.jsonl")


def test_message_and_stdin():
    (case,) = load_message("Hello there").cases
    assert case.ok and case.case.input == "Hello there"
    suite = load_stdin(io.StringIO('{"id": "a", "input": "x"}\n'))
    assert [c.id for c in suite.cases] == ["a"] and suite.cases[0].source == "<stdin>:1"


def test_select_by_regex_and_tags(tmp_path):
    path = write(tmp_path, "s.jsonl", '{"id": "a1", "input": "x", "tags": ["smoke"]}\n{"id": "b1", "input": "x"}\n{"id": "a2", "input": "x"}\n')
    suite = load_file(path)
    assert [c.id for c in suite.select("^a").cases] == ["a1", "a2"]
    assert [c.id for c in suite.select(None, ["smoke"]).cases] == ["a1"]
    with pytest.raises(UsageError, match="--run"):
        suite.select("(")


def test_compact_cases_hold_json_and_come_back_the_same(tmp_path):
    case = {"id": "a", "tags": ["t"], "simulator": {"use": "s"}, "checkpoints": [{"id": "c", "assertion": {"type": "agent", "use": "agents:v"}}]}
    path = write(tmp_path, "s.jsonl", json.dumps(case) + "\n" + '{"id": "b", "input": "x", "assertions": [{"type": "nope"}]}\n')
    full = load_file(path)
    small = load_file(path, compact=True)
    a, b = small.cases
    assert a.case is None and a.data and a.ok and a.needs == (True, True)
    assert a.materialized().case == full.cases[0].case
    assert not b.ok and b.error == full.cases[1].error
    assert [c.id for c in small.select(None, ["t"]).cases] == ["a"]


def test_compact_cases_keep_what_the_case_set(tmp_path):
    """A field set to its default (``"value": null``) is not a field left out, once compact too."""
    cases = [
        {"id": "a", "input": "x", "assertions": [{"type": "equals", "value": None}, {"type": "json_path", "path": "$.a", "value": None}]},
        {"id": "b", "input": 1, "tags": "t", "timeout": "5s", "golden": True, "max_turns": 0, "expected": "e", "assert": {"type": "tool_called", "value": "f", "negate": False}},
        {"id": 3, "simulator": {"use": "s", "goal": "g", "max_turns": 4}, "checkpoints": [
            {"id": "c", "assert": "agent", "after": "c0"},
            {"id": "c0", "assertion": {"type": "tool_result", "value": {"tool": "t", "result": None}}},
        ]},
        {"id": "d", "turns": ["x", {"input": {"role": "user", "content": "y"}, "assert": {"value": None}, "timeout": 2}], "interactive": {"timeout": "1m"}, "options": {"metadata": {"k": None}}},
    ]
    path = write(tmp_path, "s.jsonl", "".join(json.dumps(case) + "\n" for case in cases))
    full, small = load_file(path).cases, load_file(path, compact=True).cases

    def given(value):
        """The fields a model was given, at every depth (``==`` on models does not look at that)."""
        if isinstance(value, BaseModel):
            return {name: given(getattr(value, name)) for name in value.model_fields_set}
        return [given(item) for item in value] if isinstance(value, list) else value

    for before, after in zip(full, small, strict=True):
        assert after.case is None and after.data is not None
        again = after.materialized().case
        assert again == before.case and given(again) == given(before.case)


def test_a_small_suite_keeps_its_models_and_a_big_one_holds_json():
    """Kept as models up to ``small`` cases (validated once); past it, every case as JSON, the first ones too."""
    items = [(f"s.jsonl:{i}", {"id": f"c{i}", "input": "x"}) for i in range(1, 4)]
    assert all(c.case is not None and c.data is None for c in parse_cases(items, compact=True, small=3))
    assert all(c.case is None and c.data is not None for c in parse_cases(items, compact=True, small=2))
    assert all(c.case is None and c.data is not None for c in parse_cases(iter(items), compact=True, small=2))


def test_farm_test_keeps_the_models_of_a_small_suite(tmp_path):
    from farm.config import FarmConfig
    from farm.inputs import resolve_input

    path = write(tmp_path, "s.jsonl", '{"id": "a", "input": "x"}\n')
    (case,) = resolve_input(str(path), FarmConfig(), None, compact=True).cases
    assert case.case is not None and case.materialized() is case


def test_a_case_pickles_as_its_json():
    """What a Ray actor is sent: the JSON, as a compact case holds it, whichever the driver kept."""
    (kept,) = parse_cases([("s.jsonl:1", {"id": "a", "input": "x", "tags": ["t"], "assertions": [{"type": "equals", "value": None}]})])
    sent = pickle.loads(pickle.dumps(kept))
    assert sent.case is None and sent.data == kept.compact().data and sent.ok
    assert sent.materialized().case == kept.case and kept.case is not None and kept.data is None


def test_a_copy_of_a_case_keeps_its_model():
    (kept,) = parse_cases([("s.jsonl:1", {"id": "a", "input": "x", "assertions": [{"type": "contains", "value": "y"}]})])
    shallow, deep = copy.copy(kept), copy.deepcopy(kept)
    assert shallow.case is kept.case and shallow.data is None
    assert deep.case == kept.case and deep.case is not kept.case and deep.data is None
