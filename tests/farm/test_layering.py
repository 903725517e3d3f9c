"""The core (``farm/``) is engine-agnostic: importing all of it never imports Ray."""

import subprocess
import sys
from pathlib import Path

import farm


def test_farm_never_imports_ray():
    modules = sorted(
        ".".join(p.with_suffix("").relative_to(Path(farm.__file__).parent.parent).parts)
        for p in Path(farm.__file__).parent.rglob("*.py")
    )
    code = "import sys\n" + "".join(f"import {m.removesuffix('.__init__')}\n" for m in modules) + "print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert len(modules) > 20
    assert out.stdout.strip() == "False", "a module under farm/ imports Ray"
