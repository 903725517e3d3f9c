"""Starting a run reads as short phases: no function on the run path (farm/api.py, farm/_run/,
farm/engines/, the Ray driver) is longer than 80 lines, none of farm/api.py and farm/_run/ longer
than 60, and farm/_run/running.py, the phases themselves, at most 300 lines: each phase reads in
one screen."""

import ast
import importlib.util
from pathlib import Path

import pytest

import farm

CORE = Path(farm.__file__).parent
DRIVER = Path(str(importlib.util.find_spec("farm.actors.driver").origin))  # found, not imported: no Ray
RUN_PATH = [CORE / "api.py", *sorted((CORE / "_run").glob("*.py")), *sorted((CORE / "engines").glob("*.py")), DRIVER]


@pytest.mark.parametrize("path", RUN_PATH, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_no_function_on_the_run_path_is_over_80_lines(path: Path):
    tree = ast.parse(path.read_text())
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    long = {node.name: (node.end_lineno or node.lineno) - node.lineno + 1 for node in functions}
    most = 60 if path.parent.name == "_run" or path.name == "api.py" else 80
    assert {name: lines for name, lines in long.items() if lines > most} == {}


def test_the_phases_module_reads_in_one_sitting():
    assert len((CORE / "_run" / "running.py").read_text().splitlines()) <= 300
