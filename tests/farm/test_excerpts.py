"""Cutting text short: the limit, the mark, and where the cut falls."""

from __future__ import annotations

from farm.excerpts import clip, clip_middle


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


def test_clip_middle_keeps_the_start_and_the_end_where_the_cause_is():
    error = (
        "Cannot get a reply from agent 'a' at POST http://127.0.0.1:18799/v1/chat/completions: the endpoint could not be"
        " reached (Cannot connect to host 127.0.0.1:18799 ssl:default [Connect call failed ('127.0.0.1', 18799)]), after 1 request."
    )
    short = clip_middle(error, 140)
    assert len(short) <= 140 and " … " in short
    assert short.startswith("Cannot get a reply from agent 'a'")
    assert short.endswith("[Connect call failed ('127.0.0.1', 18799)]), after 1 request.")
    assert clip_middle("short", 120) == "short"
    assert len(clip_middle("x" * 500, 50)) == 50
