"""Starting a run reads as short phases: no function on the run path (farm/api.py, farm/_run/,
farm/engines/__init__.py) is longer than 80 lines, so each phase reads in one screen."""

import ast
from pathlib import Path

import pytest

import farm

CORE = Path(farm.__file__).parent
RUN_PATH = [CORE / "api.py", *sorted((CORE / "_run").glob("*.py")), CORE / "engines" / "__init__.py"]


@pytest.mark.parametrize("path", RUN_PATH, ids=lambda path: str(path.relative_to(CORE)))
def test_no_function_on_the_run_path_is_over_80_lines(path: Path):
    tree = ast.parse(path.read_text())
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    long = {node.name: (node.end_lineno or node.lineno) - node.lineno + 1 for node in functions}
    assert {name: lines for name, lines in long.items() if lines > 80} == {}
