"""farm.jsontext: JSON found in what an LLM wrote."""

from __future__ import annotations

from farm.jsontext import NO_JSON, extract_json


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
