"""docs/reference/ is written from the code it describes: every case field, ``farm.toml`` key,
assertion type and command-line option has its entry, and a stale page fails here."""

import re
from pathlib import Path

import pytest
from farm.cli import reference
from farm.cli.app import COMMANDS

from farm.assertions.registry import checkers, fields_of
from farm.cases import AssertionSpec, Checkpoint, GoldenRule, Interactive, Options, SimulatorSpec, TestCase, Turn
from farm.config import AgentConfig, Connector, FarmSettings, Price, Resources
from farm.suite import validation

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / reference.PAGES


def _page(name: str) -> str:
    return (PAGES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("page", sorted(p.name for p in PAGES.glob("*.md")))
def test_every_reference_page_is_current(page):
    text = _page(page)
    assert reference.update(text) == text, (
        f"docs/reference/{page} does not match the code; regenerate it from the repository root with: {reference.COMMAND}"
    )


def test_every_table_is_on_a_page_once():
    marked = [name for page in PAGES.glob("*.md") for name in reference.marked(page.read_text(encoding="utf-8"))]
    assert sorted(marked) == sorted(reference.tables_of())
    assert {f"command.{name}" for name in COMMANDS} <= set(marked)


@pytest.mark.parametrize(
    ("model", "skip"),
    [
        (TestCase, ()), (Turn, ()), (Checkpoint, ()), (SimulatorSpec, ()), (Options, ()), (Interactive, ()),
        (GoldenRule, ()), (AssertionSpec, ()), (FarmSettings, ()), (Connector, ("name",)), (Price, ()),
        (AgentConfig, ("id",)), (Resources, ()),
    ],
)
def test_every_field_has_a_docstring(model, skip):
    assert reference.missing_docs(model, skip) == [], f"{model.__name__}: write a docstring under each of these fields"


def _rows(text: str, table: str) -> set[str]:
    block = text.split(f"<!-- generated: {table} -->", 1)[1].split("<!-- end generated -->", 1)[0]
    return set(re.findall(r"^\| `([^`]+)`", block, re.MULTILINE))


def test_every_key_a_suite_may_write_has_a_row():
    cases = _page("cases.md")
    for table, known in [
        ("case", validation.CASE_FIELDS), ("turn", validation.TURN_FIELDS), ("checkpoint", validation.CHECKPOINT_FIELDS),
        ("simulator", validation.SIMULATOR_FIELDS), ("options", validation.OPTIONS_FIELDS), ("interactive", validation.INTERACTIVE_FIELDS),
    ]:
        assert known <= _rows(cases, table), table
    assert validation.ASSERTION_COMMON <= _rows(_page("assertions.md"), "assertion-common")


def test_every_farm_toml_key_has_a_row():
    config = _page("config.md")
    assert set(FarmSettings.model_fields) <= _rows(config, "farm")
    assert set(Connector.model_fields) - {"name"} <= _rows(config, "connector")
    assert set(AgentConfig.model_fields) - {"id"} <= _rows(config, "agent")


def test_every_assertion_type_has_a_section_and_its_keys():
    text = _page("assertions.md")
    types = re.findall(r"^### `(\w+)`$", text, re.MULTILINE)
    assert sorted(types) == sorted(checkers()), "give every registered assertion type a section, and no other"
    for kind in checkers():
        section = text.split(f"### `{kind}`\n", 1)[1].split("\n### ", 1)[0]
        assert "```json" in section, f"{kind}: an example"
        assert "`actual`" in section, f"{kind}: what `actual` holds"
        assert all(meaning for meaning in fields_of(kind).values()), kind


def test_every_option_of_every_command_has_a_row():
    from farm.cli.app import app
    from typer.main import get_command

    group = get_command(app)
    text = _page("cli.md")
    for name in COMMANDS:
        rows = _rows(text, f"command.{name}")
        for param in group.commands[name].params:  # type: ignore[attr-defined]
            assert (set(getattr(param, "opts", ())) & rows) or param.param_type_name == "argument", (name, param.name)
    assert "--version" in _rows(text, "command.farm")


def test_a_stale_page_is_reported_and_rewritten(tmp_path, capsys):
    page = tmp_path / "config.md"
    page.write_text("# farm.toml\n\n<!-- generated: price -->\n| stale |\n<!-- end generated -->\n", encoding="utf-8")
    assert reference.main([str(tmp_path), "--check"]) == 1
    assert f"run: {reference.COMMAND}" in capsys.readouterr().err
    assert reference.main([str(tmp_path)]) == 0
    assert "| `cached_input` | number |  |" in page.read_text(encoding="utf-8")
    assert reference.main([str(tmp_path), "--check"]) == 0


def test_an_unknown_table_is_named():
    with pytest.raises(ValueError, match="marks a table 'nope'"):
        reference.update("<!-- generated: nope -->\n<!-- end generated -->\n")


def test_a_field_table_says_type_default_and_other_spellings():
    table = reference.field_table(TestCase)
    assert "| `timeout` | duration |  |" in table
    assert "| `max_turns` | integer | `20` |" in table
    assert "| `id` | string | required |" in table
    assert "| `assert` | | | Yao's spelling of `assertions`. |" in table
    assert "| `autoscaler_wait` | duration | `300s` |" in reference.field_table(FarmSettings, column="key")


# -- code cites the docs ------------------------------------------------------------------------

CODE = ("farm", "actors", "cli", "tests", "benchmarks", "deploy")
WORD = "SP" + "EC"  # spelled apart, so that this file does not cite what it forbids
CITATION = re.compile(rf"\b{WORD}\b(?!\s*(?:=|\.\w|\[|\())")
"""The word as a citation: not a part of an identifier (``FOO_{WORD}``, ``{WORD}S``), nor an identifier being used."""
UNREWRITTEN: frozenset[str] = frozenset()
"""Files whose citation is still to be rewritten as a docs/ page; each leaves this set when it is."""


def _citations() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for folder in CODE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            lines = [f"{n}: {line.strip()}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if CITATION.search(line)]
            if lines:
                found[path.relative_to(ROOT).as_posix()] = lines
    return found


def test_code_cites_the_docs_never_a_spec():
    cited = {path: lines for path, lines in _citations().items() if path not in UNREWRITTEN}
    assert cited == {}, "cite the docs/ page that holds it (docs/reference/cases.md, ...), or nothing"


def test_the_files_left_to_rewrite_still_need_it():
    cited = _citations()
    assert [path for path in UNREWRITTEN if (ROOT / path).exists() and path not in cited] == []


def test_the_citation_pattern_spares_identifiers():
    assert CITATION.search(f"a suite ({WORD} 3.2)") and CITATION.search(f"see {WORD} section 5")
    assert not any(CITATION.search(text.format(WORD)) for text in ("_CASE_{} = 1", "{}S", "{} = {{}}", "{}.get(x)", "{}[0]"))
