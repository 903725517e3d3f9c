"""A corpus of malformed suites: ``farm validate`` and ``farm test --dry-run`` never give a
traceback, and print user text literally (one sentence per problem)."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from farm.cli.app import app
from rich.console import Console
from typer.testing import CliRunner

from farm.console import ConsoleReporter, neutralise
from farm.results import CaseResult, Status, TurnResult

BASE = {
    "id": "a",
    "turns": [{"input": "hi", "assertions": [{"type": "regex", "value": "ok"}]}],
    "options": {"metadata": {"k": 1}},
}

CORPUS = {
    "deep.jsonl": '{"id": "a", "input": "x", "metadata": ' + "[" * 1200 + "]" * 1200 + "}\n",
    "deeper.json": "[" * 100_000,
    "bigint.jsonl": '{"id": "a", "input": "x", "max_turns": ' + "9" * 5000 + "}\n",
    "surrogate.jsonl": '{"id": "a", "input": "\\ud800"}\n',
    "surrogate-id.jsonl": '{"id": "\\udfff", "input": "x"}\n',
    "escaped-cases.json": '{"\\u0063ases": [\n{"id": "a", "input": "x"},\n{"id": "b", "input": "y"}]}',
    "duplicated-cases.json": '{"cases": [{"id": "a", "input": "x"}],\n"cases": [{"id": "b", "input": "y"}]}',
    "nested-cases.json": '{"x": {"cases": 1},\n"cases": [\n{"id": "b", "input": "y"}]}',
    "cases-not-list.json": '{"cases": {"cases": []}}',
    "markup.jsonl": '{"id": "[/x]", "input": ":100: [bold]"}\n{"id": "[/x]", "input": "x"}\n{"id": "c", "inp[/x]ut": "x"}\n',
    "nan.jsonl": '{"id": "a", "input": "x", "timeout": NaN}\n{"id": "b", "input": "x", "timeout": 1e999}\n',
    "types.jsonl": '1\n"x"\nnull\n[]\n{"id": {"a": 1}, "input": "x"}\n{"id": "b", "turns": "x"}\n{"id": "c", "assert": 3}\n',
    "empty.json": "",
    "bom.jsonl": '\ufeff{"id": "a", "input": "x"}\n',
}


def _mutations(seed: int, count: int) -> dict[str, str]:
    """Random damage to a valid case: values replaced, keys renamed, structure cut."""
    rng = random.Random(seed)
    junk = [None, 0, -1, 10**30, 1.5, True, "", "([a-z", "$$[[", "\ud800", "[/x]", "\x1b]0;x\x07", [], {}, [[[]]], {"type": 1}]
    out = {}
    for i in range(count):
        case = json.loads(json.dumps(BASE))
        node = case
        for _ in range(rng.randint(1, 4)):
            key = rng.choice(list(node)) if isinstance(node, dict) and node else None
            if key is None:
                break
            roll = rng.random()
            if roll < 0.4:
                node[key] = rng.choice(junk)
                break
            if roll < 0.55:
                node[key + rng.choice(["s", "_", "x"])] = node.pop(key)
                break
            child = node[key]
            node = child[0] if isinstance(child, list) and child else child
            if not isinstance(node, dict):
                break
        text = json.dumps(case, ensure_ascii=False)
        if rng.random() < 0.1:
            text = text[: rng.randint(1, len(text))]
        out[f"fuzz-{i}.jsonl"] = text + "\n"
    return out


def _farm(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("name, text", sorted({**CORPUS, **_mutations(10, 60)}.items()))
def test_no_traceback_from_validate_or_dry_run(tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    for args in (["validate", str(path)], ["test", "-i", str(path), "--dry-run"]):
        result = _farm(*args)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
        assert result.exit_code in (0, 2), (args, result.output)
        assert "Traceback" not in result.output
        if result.exit_code == 2:
            assert "error:" in result.output


@pytest.mark.parametrize("name", ["deep.jsonl", "bigint.jsonl", "surrogate.jsonl", "duplicated-cases.json", "types.jsonl", "nan.jsonl"])
def test_known_bad_files_are_refused(tmp_path: Path, name: str):
    path = tmp_path / name
    path.write_text(CORPUS[name], encoding="utf-8")
    assert _farm("validate", str(path)).exit_code == 2


def test_escaped_cases_key_and_raw_line_separators_load_at_the_right_lines(tmp_path: Path):
    path = tmp_path / "e.json"
    path.write_text(CORPUS["escaped-cases.json"])
    result = _farm("test", "-i", str(path), "--dry-run")
    assert result.exit_code == 0 and '"id": "b"' in result.output
    jsonl = tmp_path / "ls.jsonl"
    jsonl.write_text('{"id": "a", "input": "x\u2028y\u2029z\u0085w"}\n{"id": "b", "input": "q", "bad": 1}\n', encoding="utf-8")
    result = _farm("validate", str(jsonl))
    assert f"{jsonl}:2: field 'bad': unknown field" in result.output
    assert f"{jsonl}:1" not in result.output


def test_user_text_prints_literally(tmp_path: Path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"id": "c", "inp[/x]ut": ":100:"}\n{"id": "d", "input": "x", "tags": ":100:", "x:100:": 1}\n')
    result = _farm("validate", str(path))
    assert "'inp[/x]ut'" in result.output and "'x:100:'" in result.output and "💯" not in result.output
    assert "agent '[/x]' is not configured" in _farm("test", "-i", str(path), "-n", "[/x]").output


def test_agent_output_cannot_drive_the_terminal():
    evil = "ok\x1b]0;pwned\x07\x1b[2J\x9b31m :100:"
    assert "\x1b" not in neutralise(evil) and "\x07" not in neutralise(evil) and "\x9b" not in neutralise(evil)
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, force_terminal=True, width=120), verbose=True)
    turn = TurnResult(turn=1, input="hi", output=evil)
    reporter.case(CaseResult(id="[/x]\x1b[31m", status=Status.FAILED, turns=[turn], error=evil))
    text = out.getvalue()
    assert "pwned" in text and "\x1b]0;" not in text and "\x07" not in text and "\x1b[2J" not in text
    assert "[/x]" in text and ":100:" in text and "💯" not in text
