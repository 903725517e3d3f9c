"""farm.jsontext: JSON found in what an LLM wrote."""

from __future__ import annotations

from pathlib import Path

from farm.jsontext import NO_JSON, extract_json, json_value, pretty_json, whole_json


def test_the_whole_text_is_json():
    assert extract_json('  {"a": [1, 2]}\n') == {"a": [1, 2]}
    assert extract_json("3") == 3
    assert extract_json("null") is None  # JSON null is a value, not "no JSON"


def test_a_fenced_block_is_read_when_the_text_is_not_json():
    text = 'Here it is:\n```json\n{"ok": true}\n```\nanything else?'
    assert extract_json(text) == {"ok": True}
    assert extract_json("```\n[1, 2]\n```") == [1, 2]


def test_a_broken_fence_falls_through_to_the_next_one():
    text = "```json\n{broken\n```\nthen\n```json\n{\"second\": 2}\n```"
    assert extract_json(text) == {"second": 2}


def test_the_first_object_in_prose_wins_over_an_earlier_array():
    assert extract_json('I saw [1] and then {"b": 2} and {"c": 3}') == {"b": 2}


def test_an_array_in_prose_is_taken_when_there_is_no_object():
    assert extract_json("the values are [1, 2, 3].") == [1, 2, 3]


def test_text_without_json_is_no_json():
    assert extract_json("") is NO_JSON
    assert extract_json("   ") is NO_JSON
    assert extract_json("no json here {at all") is NO_JSON
    assert repr(NO_JSON) == "NO_JSON"


def test_a_value_that_is_not_text_is_returned_as_it_is():
    document = {"already": "parsed"}
    assert extract_json(document) is document
    assert extract_json(None) is None


def test_only_a_reply_that_is_an_object_or_array_as_a_whole_is_whole_json():
    assert whole_json(' {"a": 1}\n') == {"a": 1}
    assert whole_json("[1, 2]") == [1, 2]
    assert whole_json('Sure: {"a": 1}') is NO_JSON  # extract_json would find it
    assert whole_json("3") is NO_JSON and whole_json("{broken") is NO_JSON and whole_json("  ") is NO_JSON


def test_pretty_json_indents_values_and_leaves_text_as_it_is():
    assert pretty_json({"b": "é", "a": 1}) == '{\n  "b": "é",\n  "a": 1\n}'
    assert pretty_json({"b": 2, "a": 1}, sort_keys=True) == '{\n  "a": 1,\n  "b": 2\n}'
    assert pretty_json("as written") == "as written"
    circular: list = []
    circular.append(circular)
    assert pretty_json(circular) == "[[...]]"


def test_json_value_is_what_a_json_file_gives_back():
    assert json_value({"at": (1, 2), "when": Path("x")}) == {"at": [1, 2], "when": "x"}


def test_a_jsonpath_that_does_not_parse_is_said_in_the_farms_words_with_where():
    import pytest

    from farm.jsonpaths import parse_path

    assert [m.value for m in parse_path("$.a[0]").find({"a": [7]})] == [7]
    for path, said in [
        ("$.[[[", "'$.[[[' is not a JSONPath (at character 4)"),  # the second '[': jsonpath-ng counts from 0
        ("$.a#", "'$.a#' is not a JSONPath (at character 4)"),  # the lexer's error, counted the same way
        ("$.a\n.[[", "'$.a\\n.[[' is not a JSONPath (at character 7)"),  # on a later line: within the whole path
        ("$.a[", "'$.a[' is not a JSONPath (it ends too soon)"),
        ("$['a", "\"$['a\" is not a JSONPath (a quote is not closed)"),
        ("", "'' is not a JSONPath: it is empty (e.g. $.content)"),
    ]:
        with pytest.raises(ValueError) as caught:
            parse_path(path)
        assert str(caught.value) == said
        assert "Parse error" not in said and "token" not in said