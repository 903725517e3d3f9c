"""Adaptive repeats against ``--runs MAX``: agent calls saved, and how often the gate's verdict differs.

    python benchmarks/adaptive.py                     # the table of every configuration below
    python benchmarks/adaptive.py --per-rate 200 --json

A mixture of single-turn cases with known true pass rates (0, 0.3, 0.6, 0.75, 0.85, 0.95, 1.0),
``--per-rate`` cases of each, runs end to end (``farm.run``, the local engine) on a seeded scripted
``python`` agent: the k-th request with a given text passes with the case's rate, drawn from a hash
of the seed, the text and k. Each configuration runs twice on the same draws: ``--runs MAX`` and
adaptive (``--runs MIN..MAX``); per case, the fixed run's verdict (at least R of MAX tries passed)
against the adaptive one (``verdict`` of its last try). "Wrong" is against the true rate: a case of
rate at least R judged below its gate, or one below R judged above; the promise of the test
(docs/adaptive.md) is about rates outside the indifference zone, R +- delta.

Then the baseline comparison under adaptive repeats: ``--comparisons`` times, the same random agent
(the mixture, ``--per-rate`` cases of each rate) run with ``--runs MAX`` and adaptively, compared by
the gate's paired test (:func:`farm.gate.compare`'s arithmetic); how often it calls them different at
the 5 % level, with the per-case pass fraction of the adaptive side (biased by the stopping) and with
the unbiased estimate the gate uses.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402

import farm  # noqa: E402
from farm.reports.stats import paired_difference, paired_estimates  # noqa: E402
from farm.sequential import Sequential, parse_runs  # noqa: E402

RATES = (0.0, 0.3, 0.6, 0.75, 0.85, 0.95, 1.0)
CONFIGS = (("auto", 0.8), ("3..20", 0.8), ("2..30", 0.8), ("auto", 0.5))
"""(--runs, --min-pass-rate) of each row; ``auto`` at 0.8 is the README's CI example."""

AGENT = '''
import hashlib
import threading

SEED = {seed}
calls = {{}}
_lock = threading.Lock()


def reset():
    calls.clear()


def reply(messages, options):
    text = messages[-1]["content"]
    with _lock:
        k = calls[text] = calls.get(text, 0) + 1
    rate = float(text.split()[1])
    draw = int(hashlib.sha256(f"{{SEED}}:{{text}}:{{k}}".encode()).hexdigest()[:12], 16) / 16**12
    return "right" if draw < rate else "wrong"
'''

TOML = """
[farm]
default_agent = "scripted"
results_dir = "results"
engine = "local"

[agents.scripted]
kind = "python"
entry = "{module}:reply"
"""


def project(folder: Path, per_rate: int, seed: int) -> tuple[Path, object]:
    """A project of the mixture's suite and the seeded agent; the agent's module (to reset its counts)."""
    module = f"adaptive_agent_{seed}"
    (folder / f"{module}.py").write_text(AGENT.format(seed=seed))
    (folder / "farm.toml").write_text(TOML.format(module=module))
    cases = [
        {"id": f"r{rate:g}-{i}", "input": f"rate {rate} case {i}", "assertions": [{"type": "contains", "value": "right"}]}
        for rate in RATES
        for i in range(per_rate)
    ]
    (folder / "suite.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    sys.path.insert(0, str(folder))
    return folder, importlib.import_module(module)


def verdicts(run_dir: Path, min_pass_rate: float, most: int) -> dict[str, bool]:
    """Per case: whether it is above its gate (the adaptive verdict, else at least R of its tries)."""
    tries: dict[str, list[bool]] = {}
    decided: dict[str, bool] = {}
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["status"] in ("error", "timeout"):  # a broken agent would make every figure meaningless
            raise SystemExit(f"case {row['id']} ended in {row['status']}: {row['error']}")
        tries.setdefault(row["id"], []).append(row["status"] == "passed")
        if row.get("verdict"):
            decided[row["id"]] = row["verdict"] == "above"
    return {case: decided.get(case, sum(runs) >= min_pass_rate * most - 1e-9) for case, runs in tries.items()}


def one_config(folder: Path, agent: object, runs: str, rate: float, delta: float) -> dict[str, object]:
    most = int(parse_runs(runs))
    outcome = {}
    for label, value in (("fixed", most), ("adaptive", runs)):
        agent.reset()  # type: ignore[attr-defined]  # the same draws for both runs
        result = farm.run(str(folder / "suite.jsonl"), config=folder / "farm.toml", runs=value, min_pass_rate=rate, console=Console(quiet=True))
        outcome[label] = (verdicts(result.run_dir, rate, most), sum(agent.calls.values()))  # type: ignore[attr-defined]
    (fixed, fixed_calls), (adaptive, adaptive_calls) = outcome["fixed"], outcome["adaptive"]
    true_rate = {case: float(case[1:].rsplit("-", 1)[0]) for case in fixed}
    outside = [case for case, p in true_rate.items() if abs(p - rate) >= delta - 1e-9]

    def wrong(judged: dict[str, bool], cases: list[str]) -> float:
        return sum(judged[case] != (true_rate[case] >= rate) for case in cases) / max(1, len(cases))

    by_rate = {
        f"{p:g}": {"fixed": wrong(fixed, [c for c in fixed if true_rate[c] == p]), "adaptive": wrong(adaptive, [c for c in fixed if true_rate[c] == p])}
        for p in RATES
    }
    return {
        "runs": runs, "min_pass_rate": rate, "cases": len(fixed), "calls_fixed": fixed_calls, "calls_adaptive": adaptive_calls,
        "saved": 1 - adaptive_calls / fixed_calls, "same_verdict": sum(fixed[c] == adaptive[c] for c in fixed) / len(fixed),
        "wrong_outside_zone_fixed": wrong(fixed, outside), "wrong_outside_zone_adaptive": wrong(adaptive, outside), "wrong_by_rate": by_rate,
    }  # fmt: skip


def comparisons(runs: str, rate: float, per_rate: int, count: int, seed: int) -> dict[str, object]:
    """How often the paired test calls the same random agent, adaptive against fixed, different."""
    repeats = parse_runs(runs)
    rule = Sequential(rate, repeats.least, int(repeats))
    rng = random.Random(seed)
    naive = unbiased = 0
    for _ in range(count):
        pairs, estimates = [], []
        for p in RATES:
            for _ in range(per_rate):
                fixed = sum(rng.random() < p for _ in range(int(repeats)))
                passes = tries = 0
                while tries < repeats.least or rule.decide(passes, tries) is None:
                    tries += 1
                    passes += rng.random() < p
                pairs.append(((fixed, int(repeats)), (passes, tries)))
                estimates.append((fixed / int(repeats), rule.estimate(passes, tries)))
        naive += paired_difference(pairs).significant
        unbiased += paired_estimates(estimates).significant
    return {"runs": runs, "min_pass_rate": rate, "cases": per_rate * len(RATES), "comparisons": count, "called_different_naive": naive / count, "called_different": unbiased / count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-rate", type=int, default=100, help="cases of each true pass rate (default 100)")
    parser.add_argument("--comparisons", type=int, default=400, help="paired comparisons of the random agent (default 400)")
    parser.add_argument("--compared-per-rate", type=int, default=20, help="cases of each rate in each comparison (default 20)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder, agent = project(Path(tmp), args.per_rate, args.seed)
        rows = [one_config(folder, agent, runs, rate, args.delta) for runs, rate in CONFIGS]
    compared = [comparisons(runs, rate, args.compared_per_rate, args.comparisons, args.seed) for runs, rate in CONFIGS[:2]]
    if args.json:
        print(json.dumps({"configs": rows, "comparisons": compared}))
        return
    print(f"{'--runs':>7} {'R':>4} {'cases':>6} {'calls MAX':>10} {'adaptive':>9} {'saved':>7} {'same verdict':>13} {'wrong out of zone: MAX':>23} {'adaptive':>9}")
    for row in rows:
        print(
            f"{row['runs']:>7} {row['min_pass_rate']:>4} {row['cases']:>6} {row['calls_fixed']:>10} {row['calls_adaptive']:>9} {row['saved']:>7.1%} "
            f"{row['same_verdict']:>13.1%} {row['wrong_outside_zone_fixed']:>23.2%} {row['wrong_outside_zone_adaptive']:>9.2%}"
        )
        print("        wrong by true rate (MAX / adaptive): " + ", ".join(f"{p}: {w['fixed']:.1%} / {w['adaptive']:.1%}" for p, w in row["wrong_by_rate"].items()))  # type: ignore[union-attr]
    for row in compared:
        print(
            f"same agent, --runs {row['runs']} against --runs MAX at R={row['min_pass_rate']}, {row['cases']} cases, {row['comparisons']} comparisons: "
            f"called different {row['called_different']:.1%} (pass fractions as they are: {row['called_different_naive']:.1%})"
        )


if __name__ == "__main__":
    main()
