"""Short commands, timed as a user times them: ``farm --help``, ``farm validate``, a 10-case ``farm test``.

    python benchmarks/startup.py                          # this tree, median of 5
    python benchmarks/startup.py --base /tmp/farm-main    # and another build, alternated with this one

Each command is a fresh process, run ``--repeat`` times; reported are the medians
of its wall time and of its CPU (user + system, from the child's rusage), which
a busy machine disturbs less than the wall time. ``--base`` adds a second
build (a copy of another commit, put first on ``PYTHONPATH``), run alternately
with this tree so that both see the same machine. Two baselines in the same
run: ``python -c pass`` and a bare client (stdlib threads and ``http.client``,
one per case) sending the same 10 requests to the same fake agent.

The children run with bytecode caches on (``PYTHONDONTWRITEBYTECODE`` removed),
as an installed farm runs: compiling the farm's modules again on every start
would add ~0.1 s of CPU that no user pays.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fake_agent import FakeAgent, config_toml  # noqa: E402  (beside this script)

CHECK = "fake agent"

THREADS = r'''
import http.client, json, sys, threading
from urllib.parse import urlsplit

url = urlsplit({url!r})
failures = []

def one(i):
    connection = http.client.HTTPConnection(url.hostname, url.port)
    body = json.dumps({{"model": "fake", "messages": [{{"role": "user", "content": f"Hello {{i}}"}}]}})
    connection.request("POST", url.path, body, {{"Content-Type": "application/json"}})
    data = json.loads(connection.getresponse().read())
    failures.append({check!r} not in data["choices"][0]["message"]["content"])

threads = [threading.Thread(target=one, args=(i,)) for i in range({n})]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(sum(failures))
'''


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``command`` (it must exit 0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def child_env(pythonpath: Path | None, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(HOME=str(home), PYTHONPATH=str(pythonpath or ROOT))
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--base", type=Path, default=None, help="another build's source tree, alternated with this one")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args(argv)

    builds = {"this": ROOT, **({"base": args.base.resolve()} if args.base else {})}
    folder = Path(tempfile.mkdtemp(prefix="farm-startup-", dir="/tmp"))
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        with FakeAgent(args.latency) as agent:
            cases = (json.dumps({"id": f"c{i:05d}", "input": f"Hello {i}", "assertions": [{"type": "contains", "value": CHECK}]}) for i in range(args.cases))
            (folder / "suite.jsonl").write_text("\n".join(cases) + "\n")
            (folder / "farm.toml").write_text(config_toml(agent.url))
            farm = [sys.executable, "-m", "farm.cli"]
            commands = {
                "farm --help": [*farm, "--help"],
                f"farm validate ({args.cases} cases)": [*farm, "validate", "suite.jsonl"],
                f"farm test ({args.cases} cases)": [*farm, "test", "-i", "suite.jsonl", "--engine", "local"],
            }
            baselines = {
                "python -c pass": [sys.executable, "-c", "pass"],
                f"bare client, threads ({args.cases} cases)": [
                    sys.executable, "-c", THREADS.format(url=f"{agent.url}/v1/chat/completions", n=args.cases, check=CHECK)
                ],
            }
            env = {name: child_env(path, folder) for name, path in builds.items()}
            for command in commands.values():  # once each, unmeasured: bytecode caches written
                for build in builds:
                    timed(command, folder, env[build])
            for _ in range(args.repeat):
                for name, command in baselines.items():
                    samples.setdefault((name, ""), []).append(timed(command, folder, env["this"]))
                for name, command in commands.items():
                    for build in builds:
                        samples.setdefault((name, build), []).append(timed(command, folder, env[build]))
                shutil.rmtree(folder / "results", ignore_errors=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    rows = [
        {
            "command": name,
            "build": build,
            "wall_s": round(statistics.median(w for w, _ in runs), 3),
            "cpu_s": round(statistics.median(c for _, c in runs), 3),
            "wall_range_s": [round(min(w for w, _ in runs), 3), round(max(w for w, _ in runs), 3)],
        }
        for (name, build), runs in samples.items()
    ]
    if args.json:
        print(json.dumps({"benchmark": "startup", "repeat": args.repeat, "rows": rows}))
    else:
        for row in rows:
            print(f"{row['command']:<32} {row['build']:<5} wall {row['wall_s']:.3f} s  cpu {row['cpu_s']:.3f} s  (wall {row['wall_range_s'][0]:.3f}-{row['wall_range_s'][1]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
