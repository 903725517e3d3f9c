"""Adaptive repeats (``--runs auto``, ``--runs MIN..MAX``): after each try of a case, whether its
pass rate is decided above or below the gate (``--min-pass-rate R``), so that it stops there.

The test is Wald's sequential probability ratio test with an indifference zone of ``delta`` on
each side of ``R``: the likelihood ratio of a pass rate ``p1 = R + delta`` against ``p0 = R - delta``
(each kept within 0..1) over the case's passes and failures. It decides *above* when the ratio
reaches ``1/alpha`` and *below* when it falls to ``alpha``. Both thresholds are Ville's: for any
pass rate at most ``p0`` the ratio is a nonnegative supermartingale of mean at most 1, so the
chance that it *ever* reaches ``1/alpha`` is at most ``alpha``, at whichever try it is looked at
(and the same for the inverse ratio and any pass rate at least ``p1``). So a case whose true pass
rate is at most ``R - delta`` is decided above with probability at most ``alpha``, and one at
least ``R + delta`` decided below with probability at most ``alpha``; within the zone there is
no promise, only that an undecided case runs to ``MAX`` tries and is judged by the fixed-N rule.

Before the test, two decisions that hold whatever the remaining tries give (they add no error
beyond the fixed-N rule's at ``MAX`` tries): a case with enough passes to meet ``R`` over ``MAX``
tries, or too few tries left to reach it, is decided; and a try that ended in an error or a
timeout fails the gate whatever follows (as with ``--runs N``), so it decides below at once.
docs/adaptive.md says it for users.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from farm.writers.runinfo import RunOptions

__all__ = ["AUTO", "DEFAULT_ALPHA", "DEFAULT_DELTA", "DEFAULT_MIN_PASS_RATE", "Runs", "Sequential", "Stop", "parse_runs", "pass_rate_problem", "stop_said"]

Stop = Literal["decided_above", "decided_below", "max_tries"]
"""Why a case under adaptive repeats stopped: decided above or below its gate, or no decision
within ``MAX`` tries (judged then by the fixed-N rule)."""

DEFAULT_MIN_PASS_RATE = 1.0
"""Every try must pass, unless ``--min-pass-rate`` or ``[farm].min_pass_rate`` says less: the gate
(:mod:`farm.gate`) judges a case by it, and the sequential rule decides around it."""


def pass_rate_problem(value: object) -> str | None:
    """Why ``value`` (a number, or text of one) cannot be a gate (a share of tries, 0 < R <= 1), or
    None: the words of ``--min-pass-rate`` and of ``[farm].min_pass_rate`` alike."""
    from farm.numbers import as_number

    rate = as_number(value)
    if rate is not None and 0.0 < rate <= 1.0:
        return None
    return f"{f'{rate:g}' if rate is not None else value} is not a share of tries between 0 (excluded) and 1, e.g. 0.8"


DEFAULT_ALPHA = 0.05
"""The error level of each decision (``--alpha``)."""

DEFAULT_DELTA = 0.1
"""The indifference zone's half-width around the gate (``--delta``)."""

AUTO = (2, 10)
"""The bounds of ``--runs auto``: at least 2 tries, at most 10."""

_SLACK = 1e-9
"""As :mod:`farm.gate`'s: ``0.7 * 10`` is ``7.000000000000001`` in floating point."""


def stop_said(stopped: str, tries: int, verdict: str | None) -> str:
    """How a case under adaptive repeats stopped, in the words of every report: "stopped after 2
    tries: above the gate"; a case that ran to the most tries says that no test decided it."""
    counted = f"{tries} {'try' if tries == 1 else 'tries'}"
    side = f"{verdict or '?'} the gate"
    if stopped == "max_tries":
        return f"stopped after {counted}, the most, undecided: {side} by the fixed-N rule"
    return f"stopped after {counted}: {side}"


@lru_cache(maxsize=16)
def _stopping_paths(rule: Sequential) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """Per point ``(passes, tries)`` where ``rule`` stops a case: how many sequences of tries reach it
    without stopping before, and how many of those begin with a pass."""
    live = {(0, False): 1}  # (passes, first try passed) -> sequences still going
    stops: dict[tuple[int, int], int] = {}
    first_passed: dict[tuple[int, int], int] = {}
    for tries in range(1, rule.most + 1):
        grown: dict[tuple[int, bool], int] = {}
        for (passes, first), count in live.items():
            for passed in (False, True):
                key = (passes + passed, first or (tries == 1 and passed))
                grown[key] = grown.get(key, 0) + count
        live = {}
        for (passes, first), count in grown.items():
            if tries >= rule.least and rule.decide(passes, tries) is not None:
                stops[passes, tries] = stops.get((passes, tries), 0) + count
                first_passed[passes, tries] = first_passed.get((passes, tries), 0) + count * first
            else:
                live[passes, first] = count
    return stops, first_passed


class Runs(int):
    """``--runs``: an int, the most tries of each case; ``least`` below it when the repeats are
    adaptive. An int so that everything that counts ``--runs N`` counts the most tries unchanged."""

    least: int

    def __new__(cls, most: int, least: int | None = None) -> Runs:
        self = super().__new__(cls, most)
        self.least = most if least is None else least
        return self

    def __reduce__(self) -> tuple[type[Runs], tuple[int, int]]:
        return (Runs, (int(self), self.least))

    @property
    def adaptive(self) -> bool:
        return self.least < self

    @property
    def spec(self) -> str | None:
        """``MIN..MAX`` when adaptive (what ``run.json`` records for a resume); None otherwise."""
        return f"{self.least}..{int(self)}" if self.adaptive else None


def parse_runs(value: int | str, where: str = "--runs") -> Runs:
    """``--runs``' value: ``N``, ``auto`` or ``MIN..MAX``; anything else is a usage error naming ``where``."""
    from farm.errors import UsageError

    text = str(value).strip()
    if text == "auto":
        return Runs(AUTO[1], AUTO[0])
    least, dots, most = text.partition("..")
    if not (least.strip().lstrip("-").isdigit() and (not dots or most.strip().lstrip("-").isdigit())):
        raise UsageError(f"{where}: '{text}' is not a number of tries, 'auto' or MIN..MAX (e.g. 3..20)")
    if not dots:
        if int(least) < 1:
            raise UsageError(f"{where}: {int(least)} is not a positive number")
        return Runs(int(least))
    low, high = int(least), int(most)
    if low < 1:
        raise UsageError(f"{where} {text}: the least tries must be 1 or more")
    if high <= low:
        raise UsageError(
            f"{where} {text}: the least tries ({low}) must be below the most ({high}); for a fixed number give --runs {high}"
        )
    return Runs(high, low)


@dataclass(frozen=True)
class Sequential:
    """The decision rule of adaptive repeats against a gate of ``min_pass_rate`` (module docstring)."""

    min_pass_rate: float
    least: int
    most: int
    alpha: float = DEFAULT_ALPHA
    delta: float = DEFAULT_DELTA

    @classmethod
    def of_run(cls, options: RunOptions) -> Sequential | None:
        """The rule a run stopped its cases by, from the options its ``run.json`` records; None for a
        run without adaptive repeats (``--runs N``)."""
        if not options.adaptive_runs:
            return None
        runs = parse_runs(options.adaptive_runs)
        rate = options.min_pass_rate or DEFAULT_MIN_PASS_RATE
        return cls(rate, runs.least, int(runs), options.alpha or DEFAULT_ALPHA, options.delta or DEFAULT_DELTA)

    def decide(self, passes: int, tries: int, broken: bool = False) -> Stop | None:
        """Why a case with ``passes`` of ``tries`` stops now, or None: it goes on. ``broken``: a try
        ended in an error or a timeout, which fails the gate."""
        if broken:
            return "decided_below"
        if tries < self.least:
            return None
        if tries >= self.most:
            return "max_tries"
        need = math.ceil(self.min_pass_rate * self.most - _SLACK)
        if passes >= need:
            return "decided_above"
        if passes + (self.most - tries) < need:
            return "decided_below"
        ratio = self.log_ratio(passes, tries - passes)
        bound = math.log(1 / self.alpha)
        if ratio >= bound:
            return "decided_above"
        if ratio <= -bound:
            return "decided_below"
        return None

    def verdict(self, stopped: Stop, passes: int, tries: int) -> Literal["above", "below"]:
        """The gate's verdict on a case that stopped: the decision, else (``max_tries``) the
        fixed-N rule: at least ``R`` of its tries passed."""
        if stopped != "max_tries":
            return "above" if stopped == "decided_above" else "below"
        return "above" if tries and passes >= self.min_pass_rate * tries - _SLACK else "below"

    def estimate(self, passes: int, tries: int) -> float:
        """An unbiased estimate of the pass rate of a case this rule stopped at ``passes`` of ``tries``
        (Girshick, Mosteller and Savage 1946): of the sequences of tries the rule lets reach that
        point, the share whose first try passed. ``passes / tries`` is biased under early stopping
        (a case stops below after a run of failures); this is not, for a rule of the counts alone.
        A point the rule does not stop at (a run cut short) gets ``passes / tries``."""
        stops, first_passed = _stopping_paths(self)
        total = stops.get((passes, tries), 0)
        return first_passed.get((passes, tries), 0) / total if total else passes / max(1, tries)

    @property
    def zone(self) -> tuple[float, float]:
        """The indifference zone ``(p0, p1)``: ``R - delta`` and ``R + delta``, kept within 0..1."""
        return max(self.min_pass_rate - self.delta, 0.0), min(self.min_pass_rate + self.delta, 1.0)

    def log_ratio(self, passes: int, failures: int) -> float:
        """The log-likelihood ratio of ``p1`` against ``p0`` after ``passes`` and ``failures``:
        a pass when ``p0`` is 0, or a failure when ``p1`` is 1, is conclusive (infinite)."""
        p0, p1 = self.zone
        total = 0.0
        if passes:
            total += math.inf if p0 == 0.0 else passes * math.log(p1 / p0)
        if failures:
            total += -math.inf if p1 == 1.0 else failures * math.log((1 - p1) / (1 - p0))
        return total
