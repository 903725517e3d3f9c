"""Statistics of ``farm report``: each estimator against values worked out by hand."""

from __future__ import annotations

import pytest

from farm.reports.stats import (
    clustered_interval,
    format_p,
    mcnemar_exact,
    pass_at_k,
    pass_hat_k,
    wilson_interval,
)


@pytest.mark.parametrize(
    ("passed", "total", "low", "high"),
    [
        # Wilson (1927) at z = 1.96; the textbook values for n = 10.
        (0, 10, 0.0, 0.2775),
        (5, 10, 0.2366, 0.7634),
        (8, 10, 0.4902, 0.9433),
        (10, 10, 0.7225, 1.0),
        # 1 of 2: centre (0.5 + 0.9604) / 2.9208 = 0.5, half 0.67105 * sqrt(0.125 + 0.2401) = 0.40547.
        (1, 2, 0.0945, 0.9055),
    ],
)
def test_wilson_interval_matches_hand_computed_bounds(passed: int, total: int, low: float, high: float):
    assert wilson_interval(passed, total) == pytest.approx((low, high), abs=5e-5)


def test_wilson_interval_of_nothing_is_everything_and_bad_counts_are_refused():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="passed <= total"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(-1, 2)


def test_a_wider_z_gives_a_wider_interval():
    low95, high95 = wilson_interval(7, 20)
    low99, high99 = wilson_interval(7, 20, z=2.576)
    assert low99 < low95 < 0.35 < high95 < high99


def test_clustered_interval_with_one_try_per_case_is_wilson_exactly():
    cases = [(1, 1)] * 7 + [(0, 1)] * 3
    assert clustered_interval(cases) == wilson_interval(7, 10)
    cases = [(1, 1)] * 13 + [(0, 1)] * 29
    assert clustered_interval(cases) == wilson_interval(13, 42)


def test_clustered_interval_counts_fully_alike_tries_once():
    # p = 3/6; residuals (3 - 1.5)^2 + (0 - 1.5)^2 = 4.5; n_eff = 36 * 0.25 / 4.5 = 2.
    assert clustered_interval([(3, 3), (0, 3)]) == pytest.approx(wilson_interval(1, 2))
    # Every case passed every time: nothing says how alike the tries are, so n_eff = cases.
    assert clustered_interval([(3, 3), (3, 3)]) == pytest.approx(wilson_interval(2, 2))
    assert clustered_interval([(0, 5)] * 4) == pytest.approx(wilson_interval(0, 4))


def test_clustered_interval_with_a_design_effect_between():
    # p = 6/12; residuals 0.25 + 0.25 + 2.25 + 2.25 = 5; n_eff = 144 * 0.25 / 5 = 7.2 (deff 5/3).
    # Wilson at p = 0.5, n = 7.2: half = 1.96 / 1.533556 * sqrt(0.25 / 7.2 + 3.8416 / 207.36) = 0.29492.
    low, high = clustered_interval([(2, 3), (1, 3), (3, 3), (0, 3)])
    assert (low, high) == pytest.approx((0.20508, 0.79492), abs=5e-5)
    # Wider than if the 12 tries were independent, narrower than 4 cases.
    naive_low, _ = wilson_interval(6, 12)
    cases_low, _ = wilson_interval(2, 4)
    assert cases_low < low < naive_low


def test_clustered_interval_never_claims_more_than_the_tries():
    # Every case passed exactly half its tries: less spread than chance; n_eff is truncated at n = 6.
    assert clustered_interval([(1, 2), (1, 2), (1, 2)]) == pytest.approx(wilson_interval(3, 6))


def test_clustered_interval_ignores_untried_cases_and_refuses_bad_counts():
    assert clustered_interval([]) == (0.0, 1.0)
    assert clustered_interval([(0, 0), (1, 1), (0, 1)]) == wilson_interval(1, 2)
    with pytest.raises(ValueError, match="passes <= tries"):
        clustered_interval([(4, 3)])


@pytest.mark.parametrize(
    ("n", "c", "k", "at_k", "hat_k"),
    [
        # k = 1: both are the pass rate.
        (4, 1, 1, 0.25, 0.25),
        # n = 3, c = 2, k = 2: 1 - C(1,2)/C(3,2) = 1; C(2,2)/C(3,2) = 1/3.
        (3, 2, 2, 1.0, 1 / 3),
        # n = 5, c = 2, k = 2: 1 - C(3,2)/C(5,2) = 1 - 3/10; C(2,2)/C(5,2) = 1/10.
        (5, 2, 2, 0.7, 0.1),
        # n = 4, c = 1, k = 2: 1 - C(3,2)/C(4,2) = 1 - 3/6; C(1,2) = 0.
        (4, 1, 2, 0.5, 0.0),
        # n = 6, c = 4, k = 3: 1 - C(2,3)/C(6,3) = 1; C(4,3)/C(6,3) = 4/20.
        (6, 4, 3, 1.0, 0.2),
        # n = k: pass@k is "any passed", pass^k is "all passed".
        (3, 0, 3, 0.0, 0.0),
        (3, 1, 3, 1.0, 0.0),
        (3, 3, 3, 1.0, 1.0),
    ],
)
def test_pass_at_k_and_pass_hat_k_match_hand_computed_values(n: int, c: int, k: int, at_k: float, hat_k: float):
    assert pass_at_k(n, c, k) == pytest.approx(at_k)
    assert pass_hat_k(n, c, k) == pytest.approx(hat_k)


def test_pass_at_k_is_exact_for_large_n():
    # 1 - C(900, 10) / C(1000, 10): the float product of the ten ratios agrees to 1e-12.
    ratio = 1.0
    for i in range(10):
        ratio *= (900 - i) / (1000 - i)
    assert pass_at_k(1000, 100, 10) == pytest.approx(1 - ratio, abs=1e-12)


def test_pass_at_k_refuses_k_beyond_the_tries_made():
    with pytest.raises(ValueError, match="k tries out of the n made"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="c <= n"):
        pass_hat_k(2, 3, 1)
    with pytest.raises(ValueError):
        pass_hat_k(2, 1, 0)


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 0, 1.0),
        # 2 * P(X <= 0 | n = 14) = 2 / 2^14.
        (14, 0, 2 / 16384),
        (0, 14, 2 / 16384),
        (5, 0, 2 / 32),
        (6, 0, 2 / 64),
        # 2 * (C(4,0) + C(4,1)) / 16 = 10 / 16.
        (3, 1, 0.625),
        # 2 * (1 + 10 + 45) / 1024.
        (2, 8, 112 / 1024),
        # Twice the tail passes 1 when the split is even: capped.
        (1, 1, 1.0),
        (4, 4, 1.0),
    ],
)
def test_mcnemar_exact_matches_the_binomial_tail(b: int, c: int, p: float):
    assert mcnemar_exact(b, c) == pytest.approx(p)


def test_mcnemar_refuses_negative_counts():
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_format_p_keeps_small_values_readable():
    assert format_p(0.5) == "p = 0.50"
    assert format_p(0.0312) == "p = 0.03"
    assert format_p(0.00122) == "p = 0.0012"
    assert format_p(0.00001) == "p < 0.0001"
