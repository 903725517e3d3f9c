"""Cutting text short: the limit, the mark, and where the cut falls."""

from __future__ import annotations

from farm.excerpts import clip


def test_text_within_the_limit_is_unchanged():
    assert clip("abc", 3) == "abc"
    assert clip("", 0) == ""


def test_a_cut_text_with_its_mark_fits_the_limit():
    assert clip("abcdef", 4) == "abc…"
    assert clip("abcdefgh", 6, "...") == "abc..."


def test_outside_the_limit_the_mark_follows_the_kept_characters_and_can_count_them():
    assert clip("abcdef", 4, within=False) == "abcd…"
    assert clip("abcdef", 4, "… ({more} more characters)", within=False) == "abcd… (2 more characters)"
    assert clip("abcdef", 4, "… ({length} chars)", within=False) == "abcd… (6 chars)"
