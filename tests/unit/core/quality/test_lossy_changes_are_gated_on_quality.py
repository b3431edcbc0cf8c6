"""The quality gate keeps a lossy configuration only if its answers are good enough."""

from __future__ import annotations

import pytest

from latency_tuner.core.quality import (
    Metric,
    judge_acceptance,
    judge_against_expected,
    judge_against_reference,
)

EXPECTED = ["#### 1", "#### 2", "#### 3", "#### 4", "#### 5"]


def test_a_candidate_as_good_as_the_baseline_passes() -> None:
    verdict = judge_against_expected(
        Metric.ANSWER, EXPECTED, ["1", "2", "3", "4", "9"], ["1", "2", "3", "4", "9"], 0.0
    )
    assert verdict.passed
    assert verdict.candidate_score == verdict.baseline_score == pytest.approx(0.8)


def test_what_the_baseline_gets_wrong_does_not_count_against_the_candidate() -> None:
    baseline = ["1", "0", "0", "4", "5"]  # 0.6
    candidate = ["1", "2", "0", "0", "5"]  # 0.6 on other prompts
    assert judge_against_expected(Metric.ANSWER, EXPECTED, candidate, baseline, 0.0).passed


def test_a_candidate_further_below_the_baseline_than_the_tolerance_fails() -> None:
    candidate = ["1", "2", "3", "0", "0"]  # 0.6 against 1.0
    verdict = judge_against_expected(
        Metric.ANSWER, EXPECTED, candidate, ["1", "2", "3", "4", "5"], 0.2
    )
    assert not verdict.passed
    assert "more than the 0.200 tolerance" in verdict.reason
    assert judge_against_expected(
        Metric.ANSWER, EXPECTED, candidate, ["1", "2", "3", "4", "5"], 0.4
    ).passed


def test_a_failed_request_scores_zero_rather_than_being_skipped() -> None:
    candidate: list[str | None] = ["1", "2", "3", None, None]
    verdict = judge_against_expected(
        Metric.ANSWER, EXPECTED, candidate, ["1", "2", "3", "4", "5"], 0.1
    )
    assert verdict.candidate_score == pytest.approx(0.6)
    assert not verdict.passed


def test_reference_mode_compares_with_the_baselines_own_outputs() -> None:
    baseline = ["the answer is blue", "yes", "42"]
    assert judge_against_reference(Metric.EXACT_MATCH, baseline, list(baseline), 0.0).passed
    drifted = judge_against_reference(
        Metric.EXACT_MATCH, baseline, ["the answer is green", "yes", "42"], 0.1
    )
    assert not drifted.passed
    assert drifted.candidate_score == pytest.approx(2 / 3)


def test_reference_mode_with_no_baseline_answer_fails_rather_than_pass_on_nothing() -> None:
    verdict = judge_against_reference(Metric.SIMILARITY, [None, None], ["a", "b"], 0.5)
    assert not verdict.passed
    assert verdict.samples == 0


@pytest.mark.parametrize(
    ("expected", "candidate", "baseline", "tolerance", "message"),
    [
        ([], [], [], 0.1, "at least one prompt"),
        (["a"], ["a", "b"], ["a"], 0.1, "one answer per prompt"),
        (["a"], ["a"], ["a"], 1.5, "tolerance"),
    ],
)
def test_malformed_gates_are_refused_with_a_clear_error(
    expected: list[str],
    candidate: list[str | None],
    baseline: list[str | None],
    tolerance: float,
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        judge_against_expected(Metric.EXACT_MATCH, expected, candidate, baseline, tolerance)


def test_speculative_decoding_below_its_acceptance_floor_fails() -> None:
    low = judge_acceptance(accepted=30, drafted=100, floor=0.5)
    assert low.passed is False
    assert low.rate == pytest.approx(0.3)
    assert "below the 50% floor" in low.reason
    assert judge_acceptance(accepted=70, drafted=100, floor=0.5).passed is True


def test_a_window_without_drafts_leaves_acceptance_undecided() -> None:
    verdict = judge_acceptance(accepted=0, drafted=0, floor=0.5)
    assert verdict.passed is None
    assert verdict.rate is None
