"""A trial window right after a restart can still hold the transient: the clients of a closed
loop coming back, the batch growing to its new size, a backlog draining. Its requests in flight
then move by more than a steady server's count wanders by chance, and a Revert on it is not
final: the verdict says Inconclusive, once (the caller's leave to look again), and the next
window judges the configuration at its steady state (``verdict._unsteady``)."""

from __future__ import annotations

from tests.unit.core.verdict.test_core_verdict_noise_and_saturation import TTFT, sparse

from latency_tuner.core.observation import Observation
from latency_tuner.core.verdict import NOT_STEADY, Judgement, Outcome, judge_trial

REQUESTS = 400  # a steady server's requests in flight wander by about 2 x sqrt(400) = 40


def window(ttft_p90: float, in_flight_moved: float) -> Observation:
    return sparse(ttft_p90, REQUESTS, running_delta=in_flight_moved)


def judge(baseline: Observation, trial: Observation, *, again: bool = True) -> Judgement:
    return judge_trial(
        baseline, trial, TTFT, min_requests=20, min_improvement=0.05, may_look_longer=again
    )


def test_a_worse_trial_window_still_filling_up_is_looked_at_again() -> None:
    j = judge(window(0.9, 0.0), window(1.3, 60.0))
    assert j.outcome is Outcome.INCONCLUSIVE
    assert not j.longer  # a fresh window, not a longer one
    assert j.reason.startswith(f"{NOT_STEADY}: requests in flight +60 over it, beyond the ±40")
    assert "TTFT p90 900ms -> 1.3s" in j.reason


def test_a_worse_trial_window_draining_a_backlog_is_looked_at_again() -> None:
    assert judge(window(0.9, 0.0), window(1.3, -60.0)).outcome is Outcome.INCONCLUSIVE


def test_a_worse_trial_window_whose_count_wandered_by_chance_is_reverted() -> None:
    j = judge(window(0.9, 0.0), window(1.3, 30.0))
    assert j.outcome is Outcome.REVERT
    assert NOT_STEADY not in j.reason


def test_without_leave_to_look_again_a_worse_unsteady_window_is_reverted() -> None:
    assert judge(window(0.9, 0.0), window(1.3, 60.0), again=False).outcome is Outcome.REVERT


def test_a_trial_better_even_in_its_transient_is_kept() -> None:
    assert judge(window(0.9, 0.0), window(0.5, 60.0)).outcome is Outcome.KEEP


def test_against_a_baseline_that_was_not_steady_either_a_worse_trial_is_reverted() -> None:
    assert judge(window(0.9, -60.0), window(1.3, 60.0)).outcome is Outcome.REVERT


def judge_settled(trial: Observation, settled_for: float | None) -> Judgement:
    return judge_trial(
        window(0.9, 0.0), trial, TTFT, min_requests=20, min_improvement=0.05,
        may_look_longer=True, settled_for=settled_for,
    )  # fmt: skip


def test_a_worse_window_of_requests_that_came_with_the_restarts_wave_is_looked_at_again() -> None:
    # 40 in flight at 6.7 requests/s: each stays 6 s (Little's law), longer than the 5 s the
    # pods had served when the window began; the next window waits for those 6 s.
    j = judge_settled(window(1.3, 0.0), settled_for=5.0)
    assert j.outcome is Outcome.INCONCLUSIVE
    assert j.reason.startswith(
        f"{NOT_STEADY}: its requests stayed 6s on the server (Little's law), longer than the 5s"
    )
    assert j.settle_until == 6.0


def test_a_worse_window_begun_after_a_residence_time_is_reverted() -> None:
    assert judge_settled(window(1.3, 0.0), settled_for=10.0).outcome is Outcome.REVERT
    assert judge_settled(window(1.3, 0.0), settled_for=None).outcome is Outcome.REVERT


def test_a_gauge_that_jumped_to_infinity_does_not_make_a_window_unsteady() -> None:
    # A broken (or hostile) exporter's running gauge reads +Inf at the window's end: that says
    # nothing of the flow, and the worse trial is reverted as a steady one would be.
    for jumped in (float("inf"), float("-inf")):
        j = judge(window(0.9, 0.0), window(1.3, jumped))
        assert j.outcome is Outcome.REVERT
        assert NOT_STEADY not in j.reason


def test_a_gauge_that_jumped_to_infinity_adds_no_arrivals() -> None:
    # The same broken gauge must not make the window's load infinite either (the verdict
    # compares loads by arrivals, and the arrival-luck check counts them).
    for jumped in (float("inf"), float("-inf"), float("nan")):
        seen = window(1.3, jumped)
        assert seen.arrivals == REQUESTS
        assert seen.arrival_rate == seen.request_rate
