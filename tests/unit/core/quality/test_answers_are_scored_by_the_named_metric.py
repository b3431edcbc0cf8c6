"""Each quality metric scores one answer against what it should be."""

from __future__ import annotations

from decimal import Decimal

import pytest

from latency_tuner.core.quality import Metric, extract_answer, score


def test_exact_match_ignores_case_whitespace_and_unicode_width() -> None:
    assert score(Metric.EXACT_MATCH, "Paris", "  paris\n") == 1.0
    assert score(Metric.EXACT_MATCH, "ＡＢＣ", "abc") == 1.0  # full-width folds under NFKC
    assert score(Metric.EXACT_MATCH, "Paris", "Paris, France") == 0.0


def test_similarity_is_the_share_of_words_in_common() -> None:
    assert score(Metric.SIMILARITY, "the cat sat on the mat", "the cat sat on the mat") == 1.0
    half = score(Metric.SIMILARITY, "a b c d", "a b x y")
    assert half == pytest.approx(0.5)
    assert score(Metric.SIMILARITY, "a b c d", "w x y z") == 0.0


def test_similarity_of_two_empty_answers_is_full() -> None:
    assert score(Metric.SIMILARITY, "", "  ") == 1.0


def test_a_marked_answer_wins_over_the_last_number() -> None:
    assert extract_answer("3 + 4 = 7, so #### 7 and then 12 more words") == Decimal(7)


def test_the_last_number_is_the_answer_of_a_worked_solution() -> None:
    assert extract_answer("She has 3 apples, buys 1,200 more: 1,203 apples.") == Decimal(1203)
    assert extract_answer("The result is -2.50") == Decimal("-2.50")


def test_a_reply_without_a_number_has_no_answer() -> None:
    assert extract_answer("I cannot tell.") is None


def test_answers_are_compared_as_numbers_not_text() -> None:
    assert score(Metric.ANSWER, "#### 42", "so the total is 42.0") == 1.0
    assert score(Metric.ANSWER, "#### 42", "so the total is 43") == 0.0
    assert score(Metric.ANSWER, "no number here", "no number either") == 0.0
