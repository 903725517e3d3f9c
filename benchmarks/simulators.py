"""Whose failure it is, measured: precision and recall of ``simulator`` blame.

    python benchmarks/simulators.py                 # 50 cases, each simulator, the local engine
    python benchmarks/simulators.py --cases 50 --json

The agent under test is the demo expense assistant (``farm.demo.agent``), correct by construction
for the 50 dynamic cases (each: file an expense of one type and amount; checkpoints: it asks the
type, drafts the expense, submits it). Each case runs with scripted simulators of known faults:

- ``good``: plays the goal (the demo simulator);
- ``leaves-goal-20``, ``leaves-goal-50``: talks about something else in 20 % (50 %) of its turns;
- ``answers-for-agent``: restates the agent's question and answers it ("Shall I submit it? Yes");
- ``stops-early``: says the goal is achieved when the agent asks it to confirm;
- ``repeats``: says its opening line again, whatever the agent asks.

With the correct agent every failure is the simulator's. A broken agent (it says the expense is
submitted and never submits it) runs with the good simulator: every failure there is the agent's.
Reported: per simulator, the cases that failed and how they were blamed; the recall of
``simulator`` blame (simulator-blamed of the failed cases the simulator caused), and its
precision over every run (simulator-blamed cases that were the simulator's). Blame here is the
deterministic flags' alone: no attributor is asked (``--attribute`` is off).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from farm import run  # noqa: E402

TYPES = ("travel", "meal", "hotel", "taxi", "training", "equipment", "dinner")

AGENTS = '''
import zlib

from farm.demo.agent import reply_to, simulator as demo_simulator


def target(messages, options):
    return reply_to(messages)


def broken(messages, options):
    """The demo agent, but it claims the submission it never makes."""
    last = messages[-1]
    if last.get("role") == "user" and str(last.get("content", "")).lower().startswith(("yes", "confirm")):
        return {"content": "Your expense is submitted."}
    return reply_to(messages)


def _said(messages):
    return next((str(m["content"]) for m in reversed(messages) if m["role"] == "assistant" and m.get("content")), "")


def good(messages, options):
    return demo_simulator(messages, options)


def _leaves(share):
    def simulator(messages, options):
        metadata = options["metadata"]
        if messages and zlib.crc32(f"{metadata['test_id']}:{metadata['turn_number']}".encode()) % 100 < share:
            return {"input": "By the way, do you know a good place for lunch near the office?", "goal_achieved": False}
        return demo_simulator(messages, options)
    return simulator


leaves_goal_20 = _leaves(20)
leaves_goal_50 = _leaves(50)


def answers_for_agent(messages, options):
    said = _said(messages)
    if "Shall I submit it?" in said:
        return {"input": "Shall I submit it? Yes, go ahead.", "goal_achieved": False}
    return demo_simulator(messages, options)


def stops_early(messages, options):
    if "confirm" in _said(messages).lower():
        return {"goal_achieved": True, "reasoning": "the expense is as good as filed"}
    return demo_simulator(messages, options)


def repeats(messages, options):
    return {"input": "Hi, I need to file an expense.", "goal_achieved": False}
'''

SIMULATORS = ("good", "leaves-goal-20", "leaves-goal-50", "answers-for-agent", "stops-early", "repeats")


def project(folder: Path, module: str) -> Path:
    agents = "\n".join(f'[agents."{name}"]\nkind = "python"\nentry = "{module}:{name.replace("-", "_")}"\n' for name in SIMULATORS)
    mocks = '{ create_expense = { expense = { id = "EXP-1", status = "draft" } }, submit_expense = { expense = { id = "EXP-1", status = "submitted" } } }'
    (folder / "farm.toml").write_text(textwrap.dedent(f"""
        [farm]
        default_agent = "target"
        results_dir = "results"
        engine = "local"

        [agents.target]
        kind = "python"
        entry = "{module}:target"
        tool_mocks = {mocks}

        [agents.broken]
        kind = "python"
        entry = "{module}:broken"
        tool_mocks = {mocks}
        """) + agents)
    return folder / "farm.toml"


def suite(folder: Path, simulator: str, count: int) -> Path:
    path = folder / f"{simulator}.jsonl"
    lines = []
    for i in range(count):
        kind, amount = TYPES[i % len(TYPES)], 40 + 97 * i
        lines.append(json.dumps({
            "id": f"expense-{i:02d}",
            "simulator": {"use": simulator, "goal": f"file a ${amount} {kind} expense", "options": {"metadata": {"details": f"A {kind} expense, ${amount}"}}},
            "checkpoints": [
                {"id": "asks-type", "assertion": {"type": "contains", "value": "type"}},
                {"id": "drafts", "after": ["asks-type"], "assertion": {"type": "tool_called", "name": "create_expense"}},
                {"id": "submits", "after": ["drafts"], "assertion": {"type": "tool_called", "name": "submit_expense"}},
            ],
            "max_turns": 6,
        }))  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def blames(results: Path) -> dict[str, int]:
    counts: dict[str, int] = {"passed": 0}
    for line in results.read_text().splitlines():
        record = json.loads(line)
        key = "passed" if record["status"] == "passed" else record.get("blame") or record["status"]
        counts[key] = counts.get(key, 0) + 1
    return counts


def measure(count: int) -> dict[str, object]:
    rows = []
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        module = "bench_simulators"
        (folder / f"{module}.py").write_text(AGENTS)
        sys.path.insert(0, str(folder))
        config = project(folder, module)
        for agent, simulator in [*(("target", s) for s in SIMULATORS), ("broken", "good")]:
            out = folder / f"{agent}-{simulator}.jsonl"
            run(str(suite(folder, simulator, count)), config=str(config), agent=agent, output=str(out), console=Console(quiet=True), cache=False)
            counts = blames(out)
            at_fault = "agent" if agent == "broken" else "simulator"
            failed = count - counts["passed"]
            rows.append({"agent": agent, "simulator": simulator, "cases": count, "failed": failed, "at_fault": at_fault if failed else None,
                         "blame": {k: v for k, v in counts.items() if k != "passed"}})  # fmt: skip
    simulator_blamed = sum(r["blame"].get("simulator", 0) for r in rows)
    correct = sum(r["blame"].get("simulator", 0) for r in rows if r["at_fault"] == "simulator")
    for r in rows:
        r["recall"] = r["blame"].get("simulator", 0) / r["failed"] if r["at_fault"] == "simulator" and r["failed"] else None
    return {"rows": rows, "precision": correct / simulator_blamed if simulator_blamed else None,
            "good_simulator_blamed": sum(r["blame"].get("simulator", 0) for r in rows if r["simulator"] == "good")}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args.cases)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{'agent':<8} {'simulator':<18} {'failed':>6}  {'blame':<40} {'recall':>6}")
    for r in figures["rows"]:
        blamed = ", ".join(f"{v} {k}" for k, v in sorted(r["blame"].items())) or "-"
        recall = "-" if r["recall"] is None else f"{r['recall']:.2f}"
        print(f"{r['agent']:<8} {r['simulator']:<18} {r['failed']:>3}/{r['cases']:<3} {blamed:<40} {recall:>6}")
    precision = figures["precision"]
    print(f"precision of simulator blame: {'-' if precision is None else f'{precision:.2f}'}; "
          f"simulator blamed with the good simulator: {figures['good_simulator_blamed']}")  # fmt: skip


if __name__ == "__main__":
    main()
