"""The core (``farm/``) is engine-agnostic: importing all of it never imports Ray.

``farm.actors`` and ``farm.cli`` share the import name but not the folder: they
live in ``actors/`` and ``cli/`` beside ``farm/`` and are not part of the core.
"""

import subprocess
import sys
import tomllib
from pathlib import Path

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
