"""The decision rule of adaptive repeats (farm.sequential) and its ``--runs`` values."""

import math
import random

import pytest

from farm.errors import UsageError
from farm.sequential import Runs, Sequential, parse_runs


def test_runs_values_parse_to_their_bounds():
    assert (int(parse_runs("auto")), parse_runs("auto").least) == (10, 2)
    assert (int(parse_runs("3..20")), parse_runs("3..20").least, parse_runs("3..20").spec) == (20, 3, "3..20")
    assert parse_runs(5) == 5 and not parse_runs("5").adaptive and parse_runs(5).spec is None


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("3..2", r"--runs 3\.\.2: the least tries \(3\) must be below the most \(2\)"),
        ("0..4", r"--runs 0\.\.4: the least tries must be 1 or more"),
        ("0", r"--runs: 0 is not a positive number"),
        ("lots", r"--runs: 'lots' is not a number of tries, 'auto' or MIN\.\.MAX"),
    ],
)
def test_a_bad_runs_value_is_one_sentence_naming_the_flag(value, said):
    with pytest.raises(UsageError, match=said):
        parse_runs(value)


def test_runs_survive_a_pickle_as_ray_sends_them():
    import pickle

    again = pickle.loads(pickle.dumps(Runs(20, 3)))
    assert (int(again), again.least, again.adaptive) == (20, 3, True)


def test_clear_cases_stop_where_more_tries_could_not_change_the_verdict():
    rule = Sequential(min_pass_rate=0.5, least=2, most=5)
    assert rule.decide(passes=3, tries=3) == "decided_above"  # 3 of 5 is met whatever follows
    strict = Sequential(min_pass_rate=0.8, least=2, most=5)
    assert strict.decide(passes=0, tries=3) == "decided_below"  # at most 2 of 5: below 0.8
    assert strict.decide(passes=1, tries=1) is None  # fewer than the least tries
    assert strict.decide(passes=0, tries=1, broken=True) == "decided_below"  # an error fails the gate


def test_the_test_decides_where_the_count_cannot_and_otherwise_runs_to_the_most():
    rule = Sequential(min_pass_rate=0.8, least=2, most=20)  # zone 0.7..0.9
    assert rule.decide(passes=12, tries=12) == "decided_above"  # 12 * ln(9/7) >= ln 20
    assert rule.decide(passes=11, tries=11) is None
    assert rule.decide(passes=0, tries=3) == "decided_below"  # 3 * ln(1/3) <= -ln 20
    assert rule.decide(passes=8, tries=10) is None
    assert Sequential(0.8, 2, 10).decide(passes=8, tries=9) == "decided_above"  # the count, before the most
    assert Sequential(0.8, 2, 10).decide(passes=7, tries=10) == "max_tries"  # the most: the fixed-N rule judges
    undecided = Sequential(min_pass_rate=0.5, least=2, most=6)
    assert undecided.decide(passes=2, tries=5) is None
    assert undecided.verdict("max_tries", 3, 6) == "above" and undecided.verdict("max_tries", 2, 6) == "below"


def test_a_gate_of_one_is_failed_by_one_failure_and_never_decided_above_early():
    rule = Sequential(min_pass_rate=1.0, least=2, most=10)
    assert rule.zone == (0.9, 1.0)
    assert rule.decide(passes=3, tries=4) == "decided_below"
    assert rule.decide(passes=9, tries=9) is None
    assert rule.decide(passes=10, tries=10) == "max_tries" and rule.verdict("max_tries", 10, 10) == "above"


@pytest.mark.parametrize(("rate", "wrong"), [(0.7, "decided_above"), (0.9, "decided_below"), (0.55, "decided_above")])
def test_the_test_alone_errs_no_more_often_than_alpha_outside_the_zone(rate, wrong):
    """Ville's bound, checked by simulation on the test alone (a large most, so that the count
    never decides): a rate at the zone's edge is decided the wrong way at most alpha of the time."""
    rule = Sequential(min_pass_rate=0.8 if rate != 0.55 else 0.65, least=1, most=10_000, alpha=0.05)
    rng = random.Random(7)
    errors, trials = 0, 2000
    for _ in range(trials):
        passes = tries = 0
        while (stop := rule.decide(passes, tries)) is None and tries < 400:
            tries += 1
            passes += rng.random() < rate
        errors += stop == wrong
    assert errors / trials <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)


@pytest.mark.parametrize(("least", "most", "rate"), [(2, 10, 0.8), (3, 20, 0.5), (2, 10, 1.0)])
def test_the_estimate_of_a_stopped_case_is_unbiased_where_its_pass_fraction_is_not(least, most, rate):
    """The expectation over every way a case can stop, computed exactly: the estimate's is the
    true pass rate; the pass fraction's is not (a case stops below after a run of failures)."""
    from farm.sequential import _stopping_paths

    rule = Sequential(min_pass_rate=rate, least=least, most=most)
    stops, _ = _stopping_paths(rule)
    assert all(n >= least for _, n in stops)
    biased = False
    for p in (0.3, 0.6, 0.75, 0.9):
        weights = {(s, n): count * p**s * (1 - p) ** (n - s) for (s, n), count in stops.items()}
        assert sum(weights.values()) == pytest.approx(1.0)  # every sequence stops by the most tries
        assert sum(w * rule.estimate(s, n) for (s, n), w in weights.items()) == pytest.approx(p)
        biased = biased or abs(sum(w * s / n for (s, n), w in weights.items()) - p) > 0.01
    assert biased


def test_a_point_the_rule_does_not_stop_at_is_estimated_by_its_pass_fraction():
    rule = Sequential(min_pass_rate=0.8, least=2, most=10)
    assert rule.estimate(1, 2) == 0.5  # a run cut short there
    assert rule.estimate(8, 8) == 1.0 and rule.estimate(0, 3) == 0.0
