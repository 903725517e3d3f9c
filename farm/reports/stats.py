"""The statistics behind ``farm report``: pass-rate intervals, pass@k and pass^k, paired tests.

Pure arithmetic on counts (no pyarrow, no Ray), so a notebook, the web viewer and
the report share one implementation:

- :func:`wilson_interval`: the Wilson score interval of a pass rate.
- :func:`clustered_interval`: the same, when a case was tried several times
  (``--runs``) and its tries are not independent evidence.
- :func:`pass_at_k` / :func:`pass_hat_k`: the unbiased estimators of "at least
  one of k tries passes" and "all k tries pass" from n tries with c passes.
- :func:`mcnemar_exact` and :func:`comparison_sentence`: a paired comparison of
  two agents (or two runs) on the cases both ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "SIGNIFICANCE",
    "clustered_interval",
    "comparison_sentence",
    "format_p",
    "mcnemar_exact",
    "pass_at_k",
    "pass_hat_k",
    "wilson_interval",
]

SIGNIFICANCE = 0.05
"""The p-value below which :func:`comparison_sentence` calls a difference real."""


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
    # each binomial from the one before (exact integers): one product per term, where a fresh
    # math.comb per term made 10,000 discordant cases take seconds
    term = tail = 1
    for i in range(min(b, c)):
        term = term * (n - i) // (i + 1)
        tail += term
    return min(1.0, 2 * tail / 2**n)


def format_p(p: float) -> str:
    """A p-value as a sentence shows it: two decimals, four when small, a bound below that."""
    if p >= 0.01:
        return f"p = {p:.2f}"
    if p >= 0.0001:
        return f"p = {p:.4f}"
    return "p < 0.0001"


def _cases(count: int) -> str:
    return f"{count} case" if count == 1 else f"{count} cases"


def comparison_sentence(
    name_a: str, name_b: str, a_only: int, b_only: int, p: float, *, repeated: bool = False
) -> str:
    """One sentence saying what a paired comparison of A and B found.

    ``a_only`` cases pass on A and fail on B, ``b_only`` the reverse, ``p`` is
    :func:`mcnemar_exact` of the two. Below :data:`SIGNIFICANCE` the difference
    is called real; otherwise the sentence says it could be noise and how to get
    more evidence. ``repeated``: the cases ran several times and the counts are
    of cases where one side's pass rate is higher (a sign test), which the
    sentence then says.
    """
    if a_only == 0 and b_only == 0:
        if repeated:
            return f"{name_b} and {name_a} pass every case equally often: there is no difference to test."
        return f"{name_b} and {name_a} pass and fail the same cases: there is no difference to test."
    if repeated:
        counts = f"{name_b} passes {_cases(b_only)} more often than {name_a} and {a_only} less often; {format_p(p)}"
    else:
        counts = (
            f"{name_b} passes {_cases(b_only)} that {name_a} fails "
            f"and fails {a_only} that {name_a} passes; {format_p(p)}"
        )
    if p < SIGNIFICANCE:
        return f"{counts}: the difference is real."
    return f"{counts}: this could be noise; run more cases or --runs."
