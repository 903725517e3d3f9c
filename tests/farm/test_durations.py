"""farm.durations: durations as users write them, and as the console shows them."""

from __future__ import annotations

import pytest

from farm.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("30s", 30.0),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("1500ms", 1.5),
        (" 45 ", 45.0),
        ("2.5 s", 2.5),
        ("2m30s", 150.0),
        ("1h30m", 5400.0),
        ("1m500ms", 60.5),
        (10, 10.0),
        (0.25, 0.25),
    ],
)
def test_accepted_forms(written: object, seconds: float):
    assert parse_duration(written) == pytest.approx(seconds)


@pytest.mark.parametrize("written", ["soon", "10 minutes", "2m 30s", "-5s", "m", "", True, None, [30]])
def test_other_forms_name_the_accepted_ones(written: object):
    with pytest.raises(ValueError, match="is not a duration.*30s, 2m, 1h, 2m30s"):
        parse_duration(written)


@pytest.mark.parametrize("written", [0, -1, "0s", "0ms", "0m0s"])
def test_a_duration_must_be_positive(written: object):
    with pytest.raises(ValueError, match="must be positive"):
        parse_duration(written)


@pytest.mark.parametrize("written", [float("inf"), 366 * 86400 + 1, "9000h", "8785h1s"])
def test_a_duration_is_at_most_a_year(written: object):
    with pytest.raises(ValueError, match="at most a year"):
        parse_duration(written)


def test_a_year_itself_is_accepted():
    assert parse_duration(366 * 86400) == 366 * 86400.0


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.0, "0ms"), (0.4567, "457ms"), (1.0, "1.0s"), (59.94, "59.9s"), (60.0, "1m00.0s"), (754.25, "12m34.2s")],
)
def test_format_duration(seconds: float, shown: str):
    assert format_duration(seconds) == shown
