"""``scripts:<dotted.path>`` references: Python functions under ``scripts_dir``.

``scripts:tests.gen`` (Yao: ``scripts.tests.gen``) is ``scripts/tests/gen.py``, function ``main``;
``scripts:tests.gen.generate`` is function ``generate`` in that module. A
reference may not escape ``scripts_dir``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from farm.errors import UsageError

__all__ = ["ScriptResolver", "call_maybe_async"]

_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class ScriptResolver:
    def __init__(self, scripts_dir: Path):
        self.root = Path(scripts_dir).resolve()
        self._modules: dict[Path, ModuleType] = {}

    def module_path(self, dotted: str) -> Path:
        parts = dotted.split(".")
        if not parts or not all(_PART.match(p) for p in parts):
            raise UsageError(f"scripts:{dotted}: not a dotted module path (e.g. scripts:tests.generate)")
        path = (self.root.joinpath(*parts)).with_suffix(".py").resolve()
        if not path.is_relative_to(self.root):
            raise UsageError(f"scripts:{dotted}: escapes the scripts folder {self.root}")
        return path

    def load_module(self, path: Path) -> ModuleType:
        if path in self._modules:
            return self._modules[path]
        name = "farm_scripts." + ".".join(path.relative_to(self.root).with_suffix("").parts).replace("-", "_")
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"{path}: cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise UsageError(f"{path}: failed to import: {type(exc).__name__}: {exc}") from None
        self._modules[path] = module
        return module

    def resolve(self, reference: str) -> Callable[..., Any]:
        """The function a ``scripts:`` reference (prefix optional) names."""
        reference = reference.strip()
        # ``scripts:tests.check``, or Yao's ``scripts.tests.check`` (its scripts live under scripts/)
        dotted = reference.removeprefix("scripts:") if reference.startswith("scripts:") else reference.removeprefix("scripts.")
        dotted = dotted.split("?", 1)[0].strip()
        path = self.module_path(dotted)
        if path.is_file():
            module, func = self.load_module(path), "main"
        else:
            head, _, func = dotted.rpartition(".")
            if not head:
                raise UsageError(f"scripts:{dotted}: no file {path}")
            mpath = self.module_path(head)
            if not mpath.is_file():
                raise UsageError(f"scripts:{dotted}: neither {path} nor {mpath} exists")
            module = self.load_module(mpath)
        fn = getattr(module, func, None)
        if not callable(fn):
            raise UsageError(f"scripts:{dotted}: the module has no function '{func}'")
        return fn

    def resolve_module(self, dotted: str) -> ModuleType:
        path = self.module_path(dotted)
        if not path.is_file():
            raise UsageError(f"scripts.{dotted}: no file {path}")
        return self.load_module(path)


async def call_maybe_async(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await ``fn`` if it is async; run it in a thread if it is not (so it blocks nothing)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result
