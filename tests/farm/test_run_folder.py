"""The run folder's layout and the case run's key, spelled in one place."""

from __future__ import annotations

import ast
from pathlib import Path

from farm.results import CASE_RUN_KEY, CaseResult, CaseRunKey, Status
from farm.results import _folder as folder

ROOT = Path(__file__).resolve().parents[2]
NAMES = {folder.RUN_JSON, folder.RESULTS_JSONL, folder.GENERATED_JSONL, folder.RAY_LOG, folder.PARTS_DIR, *(f"{table}.parquet" for table in folder.TABLES)}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            for child in node.body:
                if isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant):
                    found.add(id(child.value))
    return found


def _in_fstrings(tree: ast.AST) -> set[int]:
    return {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}


def test_nothing_but_the_run_folder_module_spells_a_file_name_of_the_run_folder():
    spelled = []
    for package in ("farm", "actors", "cli"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "farm" / "results" / "_folder.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            prose, formatted = _docstrings(tree), _in_fstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
                    named = node.value.startswith(tuple(NAMES)) or node.value.endswith(tuple(NAMES))
                    if named or (id(node) in formatted and node.value.startswith(".parquet")):  # f"{table}.parquet"
                        spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert spelled == []


def test_a_case_runs_key_within_its_run_and_across_runs_are_one_key():
    assert set(CASE_RUN_KEY) == {"run_id", *CaseRunKey._fields, "attempt"}
    result = CaseResult(id="greet", name="greet", status=Status.PASSED, source="suites/a.jsonl:3", run_index=2, agent="bot")
    key = result.run_key()
    assert isinstance(key, CaseRunKey) and key == CaseRunKey("suites/a.jsonl", "greet", 2, "bot")
    assert CaseResult(id="greet", name="greet", status=Status.PASSED).run_key("other").agent == "other"


def test_the_layout_names_each_table_and_part(tmp_path: Path):
    assert folder.table_path(tmp_path, "cases") == tmp_path / "cases.parquet"
    part = folder.part_path(tmp_path, "turns", 3)
    assert part == tmp_path / ".parts" / "turns-000003.parquet"
    part.parent.mkdir()
    part.write_bytes(b"")
    (part.parent / "notes.txt").write_text("not a part")
    assert folder.parts(tmp_path) == {"turns": [(3, part)]}
    assert folder.parts(tmp_path / "nowhere") == {}
    assert folder.table_of(tmp_path / "spans.parquet") == "spans" and folder.table_of(tmp_path / "other.parquet") is None
