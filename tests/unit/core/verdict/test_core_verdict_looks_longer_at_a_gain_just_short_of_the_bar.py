"""A trial whose gain falls just short of the noise bar is not reverted at once: when a trial
window twice as long would clear it (its noise is lower), the verdict asks for that window
(``verdict._near``), once; the longer window is judged with the noise its length leaves."""

from __future__ import annotations

from tests.unit.core.verdict.test_core_verdict_noise_and_saturation import TTFT, sparse

from latency_tuner.core.verdict import Judgement, Outcome, judge_trial


def judge(baseline_p90: float, trial_p90: float, requests: int, *, longer: bool) -> Judgement:
    return judge_trial(
        sparse(baseline_p90, requests), sparse(trial_p90, requests), TTFT,
        min_requests=20, min_improvement=0.05, may_look_longer=longer,
    )  # fmt: skip


def test_a_gain_a_longer_window_would_clear_is_measured_over_one() -> None:
    # 150 requests: -25% against a bar of -27%; twice the requests would ask -23%.
    j = judge(0.9, 0.8, 150, longer=True)
    assert j.outcome is Outcome.INCONCLUSIVE
    assert j.longer
    assert j.reason.startswith("near the bar (score 0.80 -> 0.60 (-25%; needs better than -27%")
    assert "a trial window 2 times as long would need better than -23%" in j.reason


def test_without_leave_to_look_longer_the_same_gain_is_reverted() -> None:
    j = judge(0.9, 0.8, 150, longer=False)
    assert j.outcome is Outcome.REVERT
    assert not j.longer


def test_a_gain_no_longer_window_would_clear_is_reverted_at_once() -> None:
    # 100 requests: -25% against -33%; twice the requests would still ask -29%.
    j = judge(0.9, 0.8, 100, longer=True)
    assert j.outcome is Outcome.REVERT
    assert not j.longer
    # ... and a gain of -10% is noise at any length looked at here.
    assert judge(0.9, 0.86, 150, longer=True).outcome is Outcome.REVERT


def test_a_gain_beyond_the_bar_is_kept_without_a_longer_look() -> None:
    j = judge(0.9, 0.78, 150, longer=True)
    assert j.outcome is Outcome.KEEP
    assert not j.longer


def test_a_trial_window_twice_as_long_is_judged_with_the_lower_noise_of_its_length() -> None:
    # The same -25% over a 120 s trial window of 300 requests against the 60 s baseline of
    # 150: both noise terms shrink. The baseline's thirds (p90 0.77 / 0.90 / 1.03 s) alone
    # would ask -27% of two windows alike; of this pair, -24%. Kept.
    long_trial = sparse(0.8, 300, window_seconds=120.0, request_rate=150 / 60.0)
    j = judge_trial(
        sparse(0.9, 150), long_trial, TTFT, min_requests=20, min_improvement=0.05,
        baseline_subwindows=[sparse(0.767, 50), sparse(0.9, 50), sparse(1.033, 50)],
    )  # fmt: skip
    assert j.outcome is Outcome.KEEP, j.reason
    assert j.required is not None
    assert j.required < 0.25
