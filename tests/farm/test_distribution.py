"""What the wheel ships beside the modules, read from pyproject.toml as setuptools reads it."""

import tomllib
from fnmatch import fnmatch
from pathlib import Path

import farm

CORE = Path(farm.__file__).parent
ROOT = CORE.parent


def shipped(package: str) -> list[str]:
    """The files under ``package``'s folder that its ``package-data`` patterns put in the wheel."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folder = ROOT / setuptools["package-dir"][package]
    patterns = setuptools["package-data"].get(package, [])
    files = (path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    return sorted(name for name in files if any(fnmatch(name, pattern) for pattern in patterns))


def test_the_wheel_says_the_package_is_typed():
    assert (CORE / "py.typed").is_file()
    assert "py.typed" in shipped("farm")


def test_the_demo_and_the_viewer_pages_ship_too():
    files = shipped("farm")
    assert any(name.startswith("demo/") and name.endswith(".toml") for name in files)
    assert any(name.startswith("view/static/") for name in files)
