"""farm.scripts: ``scripts:`` references resolved to functions under ``scripts_dir``."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from farm.errors import UsageError
from farm.scripts import ScriptResolver, call_maybe_async


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    root = tmp_path / "scripts"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "gen.py").write_text(
        "def main(meta):\n    return ['main', meta]\n\ndef generate(meta):\n    return ['generate', meta]\n"
        "VALUE = 3\n"
    )
    (root / "broken.py").write_text("raise RuntimeError('at import')\n")
    (tmp_path / "outside.py").write_text("def main():\n    return 'outside'\n")
    return root


def test_a_module_reference_names_its_main(scripts: Path):
    fn = ScriptResolver(scripts).resolve("scripts:tests.gen")
    assert fn("m") == ["main", "m"]


def test_a_function_reference_names_that_function(scripts: Path):
    resolver = ScriptResolver(scripts)
    assert resolver.resolve("scripts:tests.gen.generate")("m") == ["generate", "m"]
    # Yao's spelling, and a query after the reference, name the same function
    assert resolver.resolve("scripts.tests.gen.generate")("m") == ["generate", "m"]
    assert resolver.resolve(" scripts:tests.gen.generate?count=3 ")("m") == ["generate", "m"]


def test_a_module_is_loaded_once(scripts: Path):
    resolver = ScriptResolver(scripts)
    first = resolver.resolve("scripts:tests.gen")
    assert resolver.resolve("scripts:tests.gen.main") is first


@pytest.mark.parametrize("reference", ["scripts:..outside", "scripts:tests/../../outside", "scripts:.outside"])
def test_a_reference_that_is_not_a_dotted_path_is_refused(scripts: Path, reference: str):
    with pytest.raises(UsageError, match="not a dotted module path"):
        ScriptResolver(scripts).resolve(reference)


def test_a_reference_may_not_leave_the_scripts_folder_through_a_link(scripts: Path, tmp_path: Path):
    (scripts / "escape").symlink_to(tmp_path)
    with pytest.raises(UsageError, match="escapes the scripts folder"):
        ScriptResolver(scripts).resolve("scripts:escape.outside")


def test_a_missing_module_or_function_is_one_sentence(scripts: Path):
    resolver = ScriptResolver(scripts)
    with pytest.raises(UsageError, match=r"scripts:tests\.nope\.main: neither .*nope/main\.py nor .*nope\.py exists"):
        resolver.resolve("scripts:tests.nope.main")
    with pytest.raises(UsageError, match="scripts:nope: no file"):
        resolver.resolve("scripts:nope")
    with pytest.raises(UsageError, match="the module has no function 'missing'"):
        resolver.resolve("scripts:tests.gen.missing")
    with pytest.raises(UsageError, match="the module has no function 'VALUE'"):
        resolver.resolve("scripts:tests.gen.VALUE")


def test_a_module_that_fails_to_import_says_why(scripts: Path):
    with pytest.raises(UsageError, match=r"broken\.py: failed to import: RuntimeError: at import"):
        ScriptResolver(scripts).resolve("scripts:broken")


def test_resolve_module_loads_a_module_by_dotted_path(scripts: Path):
    resolver = ScriptResolver(scripts)
    assert resolver.resolve_module("tests.gen").VALUE == 3
    with pytest.raises(UsageError, match="scripts.tests.none: no file"):
        resolver.resolve_module("tests.none")


def test_call_maybe_async_awaits_async_and_threads_sync_functions():
    async def twice(x: int) -> int:
        return 2 * x

    def where(x: int) -> tuple[int, bool]:
        return x, threading.current_thread() is threading.main_thread()

    def returns_awaitable() -> object:
        return twice(5)

    assert asyncio.run(call_maybe_async(twice, 4)) == 8
    assert asyncio.run(call_maybe_async(where, 1)) == (1, False)  # not on the event loop's thread
    assert asyncio.run(call_maybe_async(returns_awaitable)) == 10
