"""Both engines stay pumps: the bookkeeping lives in the scheduler and the worker health, so each
engine's module is short enough to read in one sitting."""

import ast
from pathlib import Path

import pytest

import farm

ROOT = Path(farm.__file__).parent.parent
PUMPS = [ROOT / "farm" / "engines" / "local.py", ROOT / "actors" / "driver.py"]


def code_lines(tree: ast.Module, source: str) -> int:
    """Lines of ``source`` that are code: not blank, not a comment, not a docstring."""
    strings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            strings.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines = enumerate(source.splitlines(), 1)
    return sum(1 for number, line in lines if line.strip() and not line.strip().startswith("#") and number not in strings)


@pytest.mark.parametrize("path", PUMPS, ids=lambda path: path.name)
def test_an_engine_is_at_most_120_lines_of_code_with_no_function_over_80(path: Path):
    source = path.read_text()
    tree = ast.parse(source)
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    longest = max(functions, key=lambda node: (node.end_lineno or node.lineno) - node.lineno + 1)
    assert code_lines(tree, source) <= 120
    assert (longest.end_lineno or longest.lineno) - longest.lineno + 1 <= 80, longest.name
