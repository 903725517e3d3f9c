"""The paired comparison's arithmetic at the size of a large suite: how long it takes.

    python benchmarks/stats.py            # a table
    python benchmarks/stats.py --json

- the exact McNemar p-value of 10^5 discordant cases, split evenly and unevenly, against the
  sum of every binomial term in exact integers that the report used before (quadratic: each
  term a longer integer);
- ``paired_difference`` over 10^5 cases of one try each, and of three tries against five.

Pure Python, one process, no Ray: the median of ``--repeat`` timings, in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from farm.reports.stats import mcnemar_exact, paired_difference  # noqa: E402


def integer_tail(b: int, c: int) -> float:
    """The p-value as the report computed it before: every binomial term of the smaller tail in exact integers."""
    n = b + c
    term = tail = 1
    for i in range(min(b, c)):
        term = term * (n - i) // (i + 1)
        tail += term
    return min(1.0, 2 * tail / 2**n)


def median_ms(call: Callable[[], object], repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        timings.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(timings)


def cases(count: int, tries_a: int, tries_b: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    rng = random.Random(1)
    out = []
    for _ in range(count):
        p = rng.random()
        out.append(((sum(rng.random() < p for _ in range(tries_a)), tries_a), (sum(rng.random() < p for _ in range(tries_b)), tries_b)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    half = args.cases // 2
    one_try, repeated = cases(args.cases, 1, 1), cases(args.cases, 3, 5)
    rows = {
        f"mcnemar_exact({half}, {half})": median_ms(lambda: mcnemar_exact(half, half), args.repeat),
        f"mcnemar_exact({half - args.cases // 100}, {half + args.cases // 100})": median_ms(
            lambda: mcnemar_exact(half - args.cases // 100, half + args.cases // 100), args.repeat
        ),
        f"before: exact integers ({half}, {half})": median_ms(lambda: integer_tail(half, half), 1),
        f"paired_difference, {args.cases} cases, 1 try each": median_ms(lambda: paired_difference(one_try), args.repeat),
        f"paired_difference, {args.cases} cases, 3 tries vs 5": median_ms(lambda: paired_difference(repeated), args.repeat),
    }
    if args.json:
        print(json.dumps({name: round(ms, 2) for name, ms in rows.items()}))
        return
    width = max(len(name) for name in rows)
    for name, ms in rows.items():
        print(f"{name:<{width}}  {ms:10.2f} ms")


if __name__ == "__main__":
    main()
