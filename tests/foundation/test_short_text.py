"""Long messages are cut at a word boundary with an ellipsis, never mid-word."""

from __future__ import annotations

from pike_harness.api import short_text


def test_a_reason_is_cut_at_a_word_boundary_with_an_ellipsis():
    reason = "warm-up call: RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x256 and 128x64)"
    cut = short_text.shorten(reason, 80)
    assert cut == "warm-up call: RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x256…"
    assert len(cut) <= 80


def test_short_text_is_kept_and_one_long_word_is_cut_inside():
    assert short_text.shorten("SyntaxError: line 55", 80) == "SyntaxError: line 55"
    assert short_text.shorten("x" * 50, 20) == "x" * 19 + "…"
