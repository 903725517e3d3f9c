"""What ``farm test`` does before its first request: load and check the suite (``prepare_run``).

    python benchmarks/suite_load.py                          # this tree, 1000 cases, median of 9
    python benchmarks/suite_load.py --base /tmp/farm-main    # and another build, alternated with this one
    python benchmarks/suite_load.py --cases 20000 --repeat 3

Each repeat is a fresh ``farm test -i suite.jsonl`` process whose
``farm._run.running.prepare_run`` is timed and then ends the process, so that
nothing is sent (the config names an agent no one serves). The cases are single-turn,
one ``contains`` assertion each. Reported are medians of the wall time of
``prepare_run`` and of its parts: ``parse_cases`` (validating every case), the
first ``known_types()`` inside it (importing the assertion checkers), and
``check_for_run`` (the cases against the config). ``--base`` adds another build
(a copy of another commit, first on ``PYTHONPATH``), run alternately with this
tree so that both see the same machine. The children run with bytecode caches
on, as an installed farm does (see ``startup.py``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fake_agent import config_toml  # noqa: E402  (beside this script)
from startup import child_env  # noqa: E402

CHILD = r'''
import json, os, sys, time
from farm._run import running
from farm.suite import checks, loader

spent = {}

def timed(owner, name, key):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[key] = spent.get(key, 0.0) + (time.perf_counter() - started) * 1000
    setattr(owner, name, wrapper)

timed(loader, "parse_cases", "parse_cases_ms")
timed(loader, "known_types", "known_types_ms")
timed(checks, "check_for_run", "check_for_run_ms")
prepare = running.prepare_run

def measured(*args, **kwargs):
    started = time.perf_counter()
    prepared = prepare(*args, **kwargs)
    spent["prepare_run_ms"] = (time.perf_counter() - started) * 1000
    print(json.dumps({**spent, "cases": len(prepared.suite.cases)}), flush=True)
    os._exit(0)

running.prepare_run = measured
sys.argv = ["farm", "test", "-i", "suite.jsonl", "--engine", "local", "-q"]
from farm.cli.app import main
main()
'''

PARTS = ("prepare_run_ms", "parse_cases_ms", "known_types_ms", "check_for_run_ms")


def measure(folder: Path, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"the child exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--base", type=Path, default=None, help="another build's source tree, alternated with this one")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args(argv)

    builds = {"this": ROOT, **({"base": args.base.resolve()} if args.base else {})}
    folder = Path(tempfile.mkdtemp(prefix="farm-suiteload-", dir="/tmp"))
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    try:
        cases = (json.dumps({"id": f"c{i}", "input": f"Hello {i}", "assertions": [{"type": "contains", "value": "fake agent"}]}) for i in range(1, args.cases + 1))
        (folder / "suite.jsonl").write_text("\n".join(cases) + "\n")
        (folder / "farm.toml").write_text(config_toml("http://127.0.0.1:9"))
        env = {name: child_env(path, folder) for name, path in builds.items()}
        for name in builds:  # once each, unmeasured: bytecode caches written
            measure(folder, env[name])
        for _ in range(args.repeat):
            for name in builds:
                samples[name].append(measure(folder, env[name]))
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    rows = [
        {"build": name, "cases": args.cases, **{part: round(statistics.median(s[part] for s in runs), 2) for part in PARTS},
         "prepare_run_range_ms": [round(min(s["prepare_run_ms"] for s in runs), 2), round(max(s["prepare_run_ms"] for s in runs), 2)]}
        for name, runs in samples.items()
    ]
    if args.json:
        print(json.dumps({"benchmark": "suite_load", "repeat": args.repeat, "rows": rows}))
    else:
        for row in rows:
            low, high = row["prepare_run_range_ms"]
            print(
                f"{row['build']:<5} {row['cases']} cases: prepare_run {row['prepare_run_ms']:.1f} ms ({low:.1f}-{high:.1f}),"
                f" parse_cases {row['parse_cases_ms']:.1f} (of it known_types {row['known_types_ms']:.1f}), check_for_run {row['check_for_run_ms']:.1f}"
            )
        if len(rows) == 2:
            print(f"this / base: {rows[0]['prepare_run_ms'] / rows[1]['prepare_run_ms']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
