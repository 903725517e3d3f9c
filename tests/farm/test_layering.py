"""The core (``farm/``) is engine-agnostic: importing all of it never imports Ray; and it is
layered: its import graph has no circle and few floors (docs/architecture.md draws it).

``farm.actors`` and ``farm.cli`` share the import name but not the folder: they
live in ``actors/`` and ``cli/`` beside ``farm/`` and are not part of the core.
"""

import ast
import subprocess
import sys
import tomllib
import warnings
from functools import cache
from pathlib import Path
from typing import NamedTuple

import farm

CORE = Path(farm.__file__).parent
ROOT = CORE.parent


def test_farm_never_imports_ray():
    modules = sorted(".".join(p.with_suffix("").relative_to(ROOT).parts) for p in CORE.rglob("*.py"))
    code = "import sys\n" + "".join(f"import {m.removesuffix('.__init__')}\n" for m in modules) + "print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert len(modules) > 20
    assert not any(m.startswith(("farm.actors", "farm.cli")) for m in modules)
    assert out.stdout.strip() == "False", "a module under farm/ imports Ray"


def test_every_package_folder_is_in_the_distribution():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {name: Path(path) for name, path in setuptools["package-dir"].items()}
    found = set()
    for name, folder in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            sub = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *sub)))
    assert found == set(setuptools["packages"])


def test_the_only_top_level_import_name_is_farm():
    code = "import farm.actors, farm.cli, importlib.util as u; print(u.find_spec('actors'), u.find_spec('cli'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.split() == ["None", "None"]



# -- the import graph of the core ------------------------------------------------------------------
#
# Read with ``ast``, as a newcomer (or a tool like farm-studio) reads the code: one node per module,
# one edge per import. An import names one module: ``from farm.x import y`` the submodule
# ``farm.x.y`` when there is one, else ``farm.x``. Edges come in three kinds: a module-level import
# (in ``if`` and ``try`` blocks too) loads with the module; one under ``if TYPE_CHECKING:`` loads
# nothing but a type checker follows it; one inside a function (late) loads when the function
# first runs. All three count for circles (a late import hides a circle, it does not break one);
# only the first raises a floor.

MAX_FLOORS = 11
HARMLESS = frozenset({"farm.config", "farm.secrets"})  # secrets names FarmConfig in its types only

Graph = dict[str, set[str]]


class Imports(NamedTuple):
    """The import graph of a package, one graph per kind of edge."""

    runtime: Graph  # module-level imports: they load with the module
    typed: Graph  # under ``if TYPE_CHECKING:`` only
    late: Graph  # inside a function only

    def all(self) -> Graph:
        return joined(self.runtime, self.typed, self.late)


def module_name(path: Path, root: Path) -> str:
    parts = path.with_suffix("").relative_to(root).parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, package: str, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that one import statement names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = package if node.level else ""
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        source = ".".join(p for p in (base, node.module or "") if p)
        names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names]
    found = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _collect(node: ast.AST, kind: str, package: str, modules: set[str], out: dict[str, set[str]]) -> None:
    """Each import under ``node``, by kind: "runtime", "typed" or "late" (a typed import inside a
    function is typed; a late one under ``if TYPE_CHECKING:`` is typed too)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            out[kind] |= _targets(child, package, modules)
        elif isinstance(child, ast.If) and _is_type_checking(child):
            for stmt in child.body:
                _collect(ast.Module(body=[stmt], type_ignores=[]), "typed", package, modules, out)
            for stmt in child.orelse:
                _collect(ast.Module(body=[stmt], type_ignores=[]), kind, package, modules, out)
        elif isinstance(child, _FUNCTIONS):
            _collect(child, "typed" if kind == "typed" else "late", package, modules, out)
        else:
            _collect(child, kind, package, modules, out)


def import_graph(root: Path, top: str) -> Imports:
    """Each module under ``root/top`` with the modules it imports when it loads, for type checking
    only, and inside functions only."""
    files = {module_name(p, root): p for p in (root / top).rglob("*.py")}
    graphs: Imports = Imports({}, {}, {})
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: dict[str, set[str]] = {"runtime": set(), "typed": set(), "late": set()}
        with warnings.catch_warnings():  # a stray escape in a docstring is the compiler's business, not the graph's
            warnings.simplefilter("ignore")
            tree = ast.parse(path.read_text(), str(path))
        _collect(tree, "runtime", package, set(files), found)
        graphs.runtime[name] = found["runtime"] - {name}
        graphs.typed[name] = found["typed"] - found["runtime"] - {name}
        graphs.late[name] = found["late"] - found["runtime"] - {name}
    return graphs


def components(graph: Graph) -> list[frozenset[str]]:
    """The strongly connected components (Tarjan's algorithm): a circle is one of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = {stack.pop()}
            while node not in members:
                members.add(stack.pop())
            out.append(frozenset(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def circles(graph: Graph) -> list[frozenset[str]]:
    return [c for c in components(graph) if len(c) > 1]


def floors(graph: Graph) -> int:
    """The longest path in the graph of components, counted in components: a leaf is floor 1."""
    of = {node: comp for comp in components(graph) for node in comp}

    @cache
    def floor(comp: frozenset[str]) -> int:
        return 1 + max((floor(of[nxt]) for node in comp for nxt in graph[node] if of[nxt] != comp), default=0)

    return max(map(floor, set(of.values())))


def joined(*graphs: Graph) -> Graph:
    return {node: set().union(*(g[node] for g in graphs)) for node in graphs[0]}


def test_the_graph_reader_finds_circles_and_floors_and_counts_type_only_and_late_imports_apart(tmp_path: Path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from pkg.sub import b\nfrom pkg import c\n",
        "sub/__init__.py": "",
        "sub/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\ntry:\n    from .. import c\nexcept ImportError:\n    pass\n",
        "c.py": "import os\n\ndef late():\n    from pkg import d\n",
        "d.py": "class D:\n    def method(self):\n        if True:\n            from pkg import c\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    runtime, typed, late = graphs = import_graph(tmp_path, "pkg")
    assert runtime["pkg.a"] == {"pkg.sub.b", "pkg.c"} and runtime["pkg.sub.b"] == {"pkg.c"}
    assert typed["pkg.sub.b"] == {"pkg.a"} and runtime["pkg.c"] == set()  # a function's import is not the module's
    assert late["pkg.c"] == {"pkg.d"} and late["pkg.d"] == {"pkg.c"} and typed["pkg.c"] == set()
    assert circles(runtime) == [] and circles(joined(runtime, typed)) == [frozenset({"pkg.a", "pkg.sub.b"})]
    assert sorted(map(sorted, circles(graphs.all()))) == [["pkg.a", "pkg.sub.b"], ["pkg.c", "pkg.d"]]
    assert floors(runtime) == 3 and floors(joined(runtime, typed)) == 2


def test_the_core_has_no_import_circle_but_the_type_only_one_of_config_and_secrets():
    """Counting imports for type checking and inside functions: a late import hides a circle, it
    does not break it."""
    graphs = import_graph(ROOT, "farm")
    assert len(graphs.runtime) > 100
    assert circles(graphs.runtime) == [], "modules under farm/ import each other when they load"
    everything = graphs.all()
    found = [c for c in circles(everything) if c != HARMLESS]
    assert found == [], "import circles, counting imports inside functions: " + "; ".join(
        " ".join(f"{a} -> {b}" for a in sorted(c) for b in sorted(everything[a] & c)) for c in found
    )


def test_the_core_stands_on_at_most_eleven_floors():
    assert floors(import_graph(ROOT, "farm").runtime) <= MAX_FLOORS


def test_the_case_model_stands_on_leaves_only():
    """Everything can import the case model, and nothing it needs imports it back."""
    graph = import_graph(ROOT, "farm").all()
    for model in ("farm.cases", "farm.loaded", "farm.conversation.goldenfile"):
        below = {model}
        while below != (below := below | {n for b in below for n in graph[b]}):
            pass
        assert not any(m.startswith(("farm.suite", "farm.roles", "farm.engines", "farm._run", "farm.api")) for m in below), (model, sorted(below))
