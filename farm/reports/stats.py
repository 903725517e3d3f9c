"""The statistics behind ``farm report``: pass-rate intervals, pass@k and pass^k, paired tests.

Pure arithmetic on counts (no pyarrow, no Ray), so a notebook, the web viewer and
the report share one implementation:

- :func:`wilson_interval`: the Wilson score interval of a pass rate.
- :func:`clustered_interval`: the same, when a case was tried several times
  (``--runs``) and its tries are not independent evidence.
- :func:`pass_at_k` / :func:`pass_hat_k`: the unbiased estimators of "at least
  one of k tries passes" and "all k tries pass" from n tries with c passes.
- :func:`paired_difference` and :func:`difference_sentence`: a paired comparison
  of two agents (or two runs) on the cases both ran: the mean difference of
  per-case pass fractions with its interval, a p-value whose false positive rate
  holds whatever the tries on each side (:func:`mcnemar_exact` with one try
  each), and the smallest difference the cases could detect.
- :func:`paired_cases`: the one paired comparison of two runs (or agents) per case that the gate's
  ``--baseline``, ``farm report`` and the viewer share: :func:`paired_difference` of pass
  fractions, or where a side ran adaptive repeats :func:`paired_estimates` of each case's unbiased
  estimate (:class:`CaseResult`).
- :func:`paired_sentence`: how many cases two runs were paired on and how many left out.
- :func:`holm`: the adjustment of a report's several comparisons.
- :func:`student_t_sf` / :func:`student_t_quantile`: Student's t, from the
  regularized incomplete beta (no scipy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from farm.sequential import Sequential

__all__ = [
    "ESTIMATES_TEST",
    "SIGNIFICANCE",
    "REPEATED_TEST",
    "CaseResult",
    "PairedDifference",
    "clustered_interval",
    "difference_sentence",
    "format_p",
    "holm",
    "mcnemar_exact",
    "paired_cases",
    "paired_difference",
    "paired_estimates",
    "paired_sentence",
    "pass_at_k",
    "pass_hat_k",
    "student_t_quantile",
    "student_t_sf",
    "wilson_interval",
]

SIGNIFICANCE = 0.05
"""The p-value below which a difference is called significant (at the 5 % level)."""


def _wilson(rate: float, n: float, z: float) -> tuple[float, float]:
    """Wilson score bounds of ``rate`` observed over ``n`` (possibly fractional) trials."""
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (rate + z2 / (2.0 * n)) / denominator
    half = z / denominator * math.sqrt(rate * (1.0 - rate) / n + z2 / (4.0 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson_interval(passed: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of ``passed`` out of ``total`` (95 % with the default ``z``).

    Wilson (1927), "Probable inference, the law of succession, and statistical
    inference", JASA 22:209-212. Unlike the normal approximation it stays inside
    [0, 1] and is not zero-width at 0 or ``total`` passes. With no tries at all
    nothing is known, and the interval is ``(0.0, 1.0)``.
    """
    if total < 0 or passed < 0 or passed > total:
        raise ValueError(f"need 0 <= passed <= total, got passed={passed}, total={total}")
    if total == 0:
        return 0.0, 1.0
    return _wilson(passed / total, float(total), z)


def clustered_interval(per_case: Sequence[tuple[int, int]], z: float = 1.96) -> tuple[float, float]:
    """The Wilson interval of a pass rate over repeated tries, clustered by case.

    ``per_case`` holds ``(passes, tries)`` for each case. Tries of one case share
    the case's difficulty, so ten tries of one case are less evidence than ten
    cases. The interval is Wilson's evaluated at the *effective sample size*
    ``n_eff = n / deff`` (Kish 1965, *Survey Sampling*; the effective-n approach
    of Korn & Graubard 1998, "Confidence intervals for proportions with small
    expected number of positive counts estimated from survey data", Survey
    Methodology; Wilson with it is among the methods Dean & Pagano 2015,
    "Evaluating confidence interval methods for binomial proportions in
    clustered surveys", J. Surv. Stat. Methodol., found to hold their coverage). The design effect ``deff`` is the ratio of the cluster-robust
    (linearisation) variance of the ratio estimator ``p = sum(c_i) / sum(m_i)``,
    ``sum((c_i - p * m_i)^2) / n^2``, to the binomial variance ``p(1-p)/n``.

    - ``n_eff`` is truncated at ``n`` (as Korn & Graubard do): tries that agree
      less than chance would never make the evidence larger than the tries.
    - At a pass rate of 0 or 1 the variance ratio is 0/0: nothing in the data
      says how alike a case's tries are, so the cautious assumption is that they
      are fully alike, ``n_eff`` = the number of cases.
    - With one try per case the robust variance is the binomial one, ``deff = 1``,
      and the result equals :func:`wilson_interval` exactly.
    """
    for passes, tries in per_case:
        if tries < 0 or passes < 0 or passes > tries:
            raise ValueError(f"need 0 <= passes <= tries per case, got ({passes}, {tries})")
    cases = [(passes, tries) for passes, tries in per_case if tries > 0]
    n = sum(tries for _, tries in cases)
    if n == 0:
        return 0.0, 1.0
    passed = sum(passes for passes, _ in cases)
    rate = passed / n
    if passed in (0, n):
        n_eff = float(len(cases))
    else:
        # deff = sum((c - p m)^2) / (n p (1-p)) with p = C/n; times n^2 throughout, in integers:
        # n_eff = C (n - C) n^2 / sum((n c - C m)^2), exact, so one try per case gives n_eff == n.
        residual = sum((n * passes - passed * tries) ** 2 for passes, tries in cases)
        numerator = passed * (n - passed) * n * n
        n_eff = float(n) if residual == 0 else min(float(n), numerator / residual)
    return _wilson(rate, n_eff, z)


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n (k tries out of the n made), got n={n}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k, the chance that at least one of k tries passes.

    ``1 - C(n-c, k) / C(n, k)`` from n tries with c passes (Chen et al. 2021,
    "Evaluating Large Language Models Trained on Code", eq. 1). Exact integer
    binomials, so large n loses no precision. Needs ``1 <= k <= n``.
    """
    _check_counts(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass^k, the chance that all k tries pass.

    ``C(c, k) / C(n, k)`` from n tries with c passes (Yao et al. 2024,
    "tau-bench": the reliability measure). Needs ``1 <= k <= n``.
    """
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _log_binomial_term(n: int, i: int) -> float:
    """``log(C(n, i) / 2^n)``."""
    return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2.0)


_EXACT_UP_TO = 1000
"""Discordant pairs up to which the tail is summed in exact integers; beyond, in floating point."""


def _lower_tail(n: int, k: int) -> float:
    """``P(X <= k)`` for ``X ~ Binomial(n, 1/2)``, ``k <= n / 2``.

    Exact integers for small ``n``. Beyond, the terms are summed from the largest
    (``i = k``) down, each from the one before (``C(n, i-1) = C(n, i) i / (n-i+1)``)
    relative to it, until they no longer change the sum: at most some ten times
    the root of ``n`` terms (1,301 at 10^5 split evenly), with a relative error near the float's.
    """
    if n <= _EXACT_UP_TO:
        term = tail = 1
        for i in range(k):
            term = term * (n - i) // (i + 1)
            tail += term
        return tail / 2**n
    relative = total = 1.0
    for i in range(k, 0, -1):
        relative *= i / (n - i + 1)
        total += relative
        if relative < total * 1e-17:
            break
    return math.exp(_log_binomial_term(n, k) + math.log(total))


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value on ``b`` and ``c`` discordant pairs.

    Under "no difference" each discordant case is equally likely to go either
    way, so ``b ~ Binomial(b + c, 1/2)``; the p-value is twice the smaller tail,
    capped at 1 (McNemar 1947; the exact form, right for the small counts a test
    suite has). With no discordant pairs there is no evidence of a difference: 1.0.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * _lower_tail(n, min(b, c)))


def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta (modified Lentz; Numerical Recipes 6.4)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _regularized_beta(a: float, b: float, x: float) -> float:
    """``I_x(a, b)``, the regularized incomplete beta function, for ``0 <= x <= 1``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):  # where the fraction converges fast; else by symmetry
        return math.exp(log_front) * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _incomplete_beta_fraction(b, a, 1.0 - x) / b


def student_t_sf(t: float, df: float) -> float:
    """``P(T > t)`` for Student's t with ``df`` degrees of freedom (via the incomplete beta)."""
    tail = 0.5 * _regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


@lru_cache(maxsize=1024)
def student_t_quantile(probability: float, df: float) -> float:
    """The ``t`` with ``P(T <= t) = probability`` (``0.5 <= probability < 1``), by bisection."""
    low, high = 0.0, 1.0
    while student_t_sf(high, df) > 1.0 - probability:
        low, high = high, high * 2.0
    for _ in range(100):
        middle = (low + high) / 2.0
        if student_t_sf(middle, df) > 1.0 - probability:
            low = middle
        else:
            high = middle
        if high - low < 1e-12 * high:
            break
    return (low + high) / 2.0


@dataclass(frozen=True)
class PairedDifference:
    """A paired comparison of sides A and B over the cases both judged: how much more often B passes."""

    cases: int
    """Cases in the comparison: each judged at least once on both sides."""
    difference: float
    """The mean over cases of B's pass fraction minus A's: a fraction in [-1, 1]."""
    interval: tuple[float, float]
    """The 95 % interval of :attr:`difference` (fractions)."""
    p_value: float
    """Two-sided; :attr:`test` says which test gave it."""
    test: str
    """``"exact McNemar"`` (one try per case on each side) or :data:`REPEATED_TEST` (repeated tries: the
    paired t test and the Cochran-Mantel-Haenszel test, the larger p; see :func:`paired_difference`)."""
    detectable_difference: float | None
    """The smallest ``|difference|`` this many cases detect with 80 % power at the 5 % level;
    None with fewer than two cases."""

    @property
    def significant(self) -> bool:
        """``p_value`` below :data:`SIGNIFICANCE`, decided on the unrounded value."""
        return self.p_value < SIGNIFICANCE


_POWER = 0.80
"""The power at which :attr:`PairedDifference.detectable_difference` is computed."""


def _standard_error(differences: Sequence[float], mean: float) -> float:
    """The standard error of the mean of ``differences``; when they are all equal, that of Agresti & Min's
    pseudo-counts (2005: half a case more each way, +1 and -1, one more at 0), so that a handful of identical
    cases does not claim a zero-width interval."""
    n = len(differences)
    if max(differences) > min(differences):  # not "squares > 0": equal thirds can leave a rounding residue
        return math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1) / n)
    augmented = n + 2
    centre = sum(differences) / augmented
    variance = (sum(d * d for d in differences) + 1.0) / augmented - centre * centre
    return math.sqrt(variance / augmented)


def _shuffled_tries_p(pairs: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> float:
    """The two-sided p-value of the summed differences when each case's tries are shuffled between sides.

    Under "no difference" each try of a case is as likely to pass on one side as on the other, so given
    how many of a case's tries passed (``s`` of ``N``), which side holds them is a draw without
    replacement: B's passes are hypergeometric, and ``d`` has mean 0 and a variance known exactly from
    the counts, ``(1/tries_A + 1/tries_B)^2 Var(passes_B)``. The sum of the ``d`` over that variance is
    compared with the normal. With the same tries on every case this is the Cochran-Mantel-Haenszel test
    (no continuity correction), each case a stratum.
    """
    total = variance = 0.0
    for (passes_a, tries_a), (passes_b, tries_b) in pairs:
        tries, passed = tries_a + tries_b, passes_a + passes_b
        total += passes_b / tries_b - passes_a / tries_a
        spread = tries_a * tries_b * passed * (tries - passed) / (tries * tries * (tries - 1))
        variance += (1.0 / tries_a + 1.0 / tries_b) ** 2 * spread
    if variance == 0.0:  # every try of every case agreed: nothing differs
        return 1.0
    return math.erfc(abs(total) / math.sqrt(2.0 * variance))


REPEATED_TEST = "paired t and Cochran-Mantel-Haenszel"
""":attr:`PairedDifference.test` when a case ran more than once on a side: both tests, the larger p."""


def paired_difference(pairs: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> PairedDifference:
    """The paired difference of per-case pass fractions (E. Miller 2024, "Adding Error Bars to Evals").

    ``pairs``: per case ``((passes_A, tries_A), (passes_B, tries_B))``, tries >= 1 on both sides.
    Each case gives ``d = passes_B / tries_B - passes_A / tries_A``; their mean is the difference and
    its standard error the spread of the ``d`` over the root of the number of cases. The interval is
    the mean +- Student's t (n - 1 degrees of freedom) times that error.

    The p-value, with one try per case on each side: the exact McNemar test. Otherwise the larger of
    two: the paired t test that matches the interval, and the test of :func:`_shuffled_tries_p`. Each
    holds its false positive rate where the other may not: the t test fails when the ``d`` are skewed
    (1 try against 4 at pass rates near 0.9: over 10 to 60 cases it calls identical agents different
    6 to 14 % of the time), the shuffle when a case's tries on one side are alike beyond chance. A
    difference is called significant only when both agree, so never with an interval that holds 0.
    """
    for (passes_a, tries_a), (passes_b, tries_b) in pairs:
        if not (0 <= passes_a <= tries_a and 0 <= passes_b <= tries_b and tries_a >= 1 and tries_b >= 1):
            raise ValueError(f"need 0 <= passes <= tries and tries >= 1, got {((passes_a, tries_a), (passes_b, tries_b))}")
    one_try = all(tries_a == 1 and tries_b == 1 for (_, tries_a), (_, tries_b) in pairs)
    differences = [passes_b / tries_b - passes_a / tries_a for (passes_a, tries_a), (passes_b, tries_b) in pairs]
    if one_try:
        test, p = "exact McNemar", mcnemar_exact(differences.count(-1.0), differences.count(1.0))
    else:
        test, p = REPEATED_TEST, _shuffled_tries_p(pairs)
    n = len(pairs)
    mean = sum(differences) / n if n else 0.0
    if n < 2:
        return PairedDifference(n, mean, (-1.0, 1.0), p, test, None)
    error = _standard_error(differences, mean)
    df = n - 1
    critical = student_t_quantile(1.0 - SIGNIFICANCE / 2.0, df)
    interval = (max(-1.0, mean - critical * error), min(1.0, mean + critical * error))
    detectable = min(1.0, (critical + student_t_quantile(_POWER, df)) * error)
    if not one_try:
        p = max(p, min(1.0, 2.0 * student_t_sf(abs(mean) / error, df)))
    return PairedDifference(n, mean, interval, p, test, detectable)


ESTIMATES_TEST = "paired t of unbiased estimates (adaptive repeats)"
"""The test of :func:`paired_estimates`."""


def paired_estimates(pairs: Sequence[tuple[float, float]]) -> PairedDifference:
    """The paired difference of per-case pass-rate estimates ``(A, B)``, where a side ran adaptive
    repeats: its pass fractions are biased by the early stop, so each such case comes as the unbiased
    estimate of :meth:`farm.sequential.Sequential.estimate`. The mean difference, its Student t
    interval and the paired t test's p-value (the tries-shuffling test of :func:`paired_difference`
    does not hold when one side stopped on what it saw)."""
    differences = [b - a for a, b in pairs]
    n = len(differences)
    mean = sum(differences) / n if n else 0.0
    if n < 2:
        return PairedDifference(n, mean, (-1.0, 1.0), 1.0, ESTIMATES_TEST, None)
    error = _standard_error(differences, mean)
    df = n - 1
    critical = student_t_quantile(1.0 - SIGNIFICANCE / 2.0, df)
    interval = (max(-1.0, mean - critical * error), min(1.0, mean + critical * error))
    detectable = min(1.0, (critical + student_t_quantile(_POWER, df)) * error)
    p = min(1.0, 2.0 * student_t_sf(abs(mean) / error, df)) if error > 0 else (1.0 if mean == 0 else 0.0)
    return PairedDifference(n, mean, interval, p, ESTIMATES_TEST, detectable)


@dataclass(frozen=True)
class CaseResult:
    """One case on one side of a paired comparison: its passes of its judged tries and, where adaptive
    repeats stopped it, the unbiased estimate of its pass rate (its pass fraction is biased there)."""

    passes: int
    tries: int
    estimate: float | None = None
    """:meth:`farm.sequential.Sequential.estimate` of a case adaptive repeats stopped; None under
    ``--runs N``, where the pass fraction is the estimate."""

    @classmethod
    def of(cls, passes: int, tries: int, stopped: str | None, rule: Sequential | None) -> CaseResult:
        """A case of a run whose stopping rule is ``rule`` (None: ``--runs N``), ``stopped`` as its
        last try records (None: not stopped by the rule)."""
        estimate = rule.estimate(passes, tries) if stopped and rule is not None and tries else None
        return cls(passes, tries, estimate)

    @property
    def rate(self) -> float:
        """The estimate of the case's pass rate: unbiased on either kind of run."""
        return self.estimate if self.estimate is not None else self.passes / self.tries

    def better_than(self, other: CaseResult) -> bool:
        """This case did better than ``other``: by the estimates where adaptive repeats stopped either,
        else by the pass fractions, cross-multiplied in integers so that 2/3 and 4/6 are equal exactly."""
        if self.estimate is None and other.estimate is None:
            return self.passes * other.tries > other.passes * self.tries
        return self.rate > other.rate


def paired_cases(pairs: Sequence[tuple[CaseResult, CaseResult]]) -> PairedDifference:
    """Side A against side B over the cases both judged, ``(A, B)`` per case, each with tries on both
    sides: :func:`paired_difference` of the pass fractions, or, when adaptive repeats stopped a case
    on either side, :func:`paired_estimates` of each case's unbiased estimate (:attr:`CaseResult.rate`).
    Every paired comparison of runs goes through here, so that the gate's ``--baseline``,
    ``farm report`` and the viewer never disagree on the same two runs."""
    if any(a.estimate is not None or b.estimate is not None for a, b in pairs):
        return paired_estimates([(a.rate, b.rate) for a, b in pairs])
    return paired_difference([((a.passes, a.tries), (b.passes, b.tries)) for a, b in pairs])


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (Holm 1979) of p-values from one report's several comparisons.

    The smallest p is multiplied by the number of comparisons, the next by one fewer, and so on, each
    at least the one before and at most 1; a comparison is significant when its adjusted p is below
    :data:`SIGNIFICANCE`, which keeps the chance of any false positive in the report at 5 %.
    Same order as given.
    """
    m = len(p_values)
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def format_p(p: float) -> str:
    """A p-value as a sentence shows it: two decimals, four when small, a bound below that.

    Never rounded onto or across :data:`SIGNIFICANCE`: 0.049 shows as ``p = 0.049`` and 0.0525
    as ``p = 0.053``, not both as ``p = 0.05``; the sentence decides on the unrounded value.
    """
    if p < 0.0001:
        return "p < 0.0001"
    for decimals in range(2 if p >= 0.01 else 4, 7):
        shown = round(p, decimals)
        if p == SIGNIFICANCE or (shown != SIGNIFICANCE and (shown < SIGNIFICANCE) == (p < SIGNIFICANCE)):
            return f"p = {p:.{decimals}f}"
    return f"p < {SIGNIFICANCE}" if p < SIGNIFICANCE else f"p > {SIGNIFICANCE}"


def _points(fraction: float) -> str:
    """A signed fraction in percentage points, one decimal."""
    return f"{100.0 * fraction:+.1f}"


def _how_often(name_a: str, name_b: str, difference: float) -> str:
    points = f"{abs(100.0 * difference):.1f}"
    if points == "0.0":
        return f"{name_b} passes as often as {name_a}"
    more = "more" if difference > 0 else "less"
    return f"{name_b} passes {points} percentage points {more} often than {name_a}"


def difference_sentence(name_a: str, name_b: str, d: PairedDifference, p: float | None = None, adjusted: bool = False) -> str:
    """One sentence: the difference in percentage points (of each case's unbiased estimate where a side
    ran adaptive repeats, which it says) with its 95 % interval, the p-value (``p``
    overrides ``d.p_value``, e.g. Holm-adjusted, which ``adjusted`` says) and whether that is
    "significant at the 5 % level" or "not significant: this could be noise", then the smallest
    difference these cases could detect."""
    if d.cases == 0:
        return f"{name_a} and {name_b} judged no case in common: there is nothing to compare."
    p_value = d.p_value if p is None else p
    low, high = d.interval
    shown = format_p(p_value) + (", Holm-adjusted" if adjusted else "")
    how = _how_often(name_a, name_b, d.difference)
    if d.test == ESTIMATES_TEST:  # the pass fractions of adaptive repeats are biased: say what stands for them
        how += ", by each case's unbiased estimate of its pass rate under adaptive repeats"
    text = f"{how} (95 % interval {_points(low)} to {_points(high)} points; {_cases(d.cases)}, {d.test}, {shown})"
    if p_value < SIGNIFICANCE:
        return f"{text}: significant at the 5 % level."
    detectable = d.detectable_difference
    if detectable is None or detectable >= 1.0:
        return f"{text}: not significant: this could be noise; {_cases(d.cases)} are too few to detect any difference."
    return (
        f"{text}: not significant: this could be noise; {_cases(d.cases)} detect a difference of "
        f"{100.0 * detectable:.1f} points or more (80 % power)."
    )


def paired_sentence(name_a: str, name_b: str, paired: int, left_out: int) -> str:
    """One sentence on what two runs are compared on: the cases both ran (the same suite and id,
    :data:`~farm.results.CASE_KEY`), ``paired``, and those only one of them ran, ``left_out``;
    with none paired, that nothing is compared. The names start it, as given: ``Baseline run r1``."""
    said = f"{name_a} and {name_b}"
    if paired == 0:
        return f"{said} have no case in common (the same suite and case id), so they are not compared."
    if left_out == 0:
        return f"{said} are compared on the {_cases(paired)} both ran."
    return f"{said} are compared on the {_cases(paired)} both ran (the same suite and case id), leaving out {_cases(left_out)} that only one of them ran."


def _cases(count: int) -> str:
    return f"{count} case" if count == 1 else f"{count} cases"
