"""A trial is kept only when it beat the baseline by more than minImprovement and the noise;
different load or too few requests is inconclusive; no data is its own outcome."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from tests.unit.core.builders import healthy, objectives

from latency_tuner.api.status import Verdict
from latency_tuner.core.observation import NoData, Observation
from latency_tuner.core.verdict import MAX_REQUIRED, Judgement, Outcome, judge_trial

TTFT = objectives(ttft="500ms")


def window(ttft_p90: float, **overrides: object) -> Observation:
    return healthy(ttft={50: 0.1, 90: ttft_p90, 99: ttft_p90 * 1.5}, **overrides)


def verdict(
    baseline: Observation | NoData,
    trial: Observation | NoData,
    *,
    baseline_subwindows: Sequence[Observation] = (),
    load_tolerance: float = 0.25,
) -> Judgement:
    return judge_trial(
        baseline,
        trial,
        TTFT,
        min_requests=100,
        min_improvement=0.05,
        baseline_subwindows=baseline_subwindows,
        load_tolerance=load_tolerance,
    )


def test_a_clear_improvement_is_kept_with_the_numbers_in_the_reason() -> None:
    j = verdict(window(0.82), window(0.62))
    assert j.outcome is Outcome.KEEP
    # 600 requests with p50 0.1 s and p99 1.2 s: each p90 is known to ~0.03 s, which is 22%
    # of a 0.64 score at two standard errors.
    assert j.reason == (
        "score 0.64 -> 0.24 (-62%; needs better than -22% (sampling noise)): "
        "TTFT p90 820ms -> 620ms (-24%)"
    )
    assert j.improvement == pytest.approx(0.4 / 0.64)
    assert j.required == pytest.approx(0.219, abs=0.002)
    assert j.outcome.status_verdict is Verdict.KEEP


def test_a_worse_trial_is_reverted_naming_the_regression() -> None:
    j = verdict(window(0.82), window(0.91))
    assert j.outcome is Outcome.REVERT
    assert "TTFT p90 820ms -> 910ms (+11%)" in j.reason
    assert j.outcome.status_verdict is Verdict.REVERT


def test_an_improvement_below_min_improvement_is_reverted() -> None:
    j = verdict(window(0.82), window(0.81))
    assert j.outcome is Outcome.REVERT


def test_an_improvement_within_the_baseline_noise_is_reverted() -> None:
    # Baseline sub-windows scattered 0.6..1.0 s: a 10% better score proves nothing.
    subwindows = [window(0.6), window(1.0), window(0.7), window(0.9)]
    j = verdict(window(0.8), window(0.77), baseline_subwindows=subwindows)
    assert j.outcome is Outcome.REVERT
    assert j.noise > 0.1
    assert "(baseline noise)" in j.reason
    steady = [window(0.80), window(0.81), window(0.79), window(0.80)]
    assert verdict(window(0.8), window(0.6), baseline_subwindows=steady).outcome is Outcome.KEEP


def test_the_noise_gate_never_demands_more_than_halving_the_score() -> None:
    # Bursty sub-windows: 0.5 s, 0.5 s and 2.6 s give a "noise" far above 100%.
    bursty = [window(0.5), window(0.5), window(2.6)]
    j = verdict(window(1.2), window(0.75), baseline_subwindows=bursty)
    assert j.noise > 1.0
    assert j.required == MAX_REQUIRED
    assert j.outcome is Outcome.KEEP
    assert verdict(window(1.2), window(0.9), baseline_subwindows=bursty).outcome is Outcome.REVERT


def test_a_trial_meeting_every_target_the_baseline_missed_is_kept_whatever_the_noise() -> None:
    bursty = [window(0.5), window(0.5), window(2.6)]
    j = verdict(window(0.6), window(0.45), baseline_subwindows=bursty)
    assert j.noise > 1.0
    assert j.outcome is Outcome.KEEP


def test_noise_needs_two_sub_windows_and_a_positive_mean() -> None:
    assert verdict(window(0.8), window(0.77), baseline_subwindows=[window(0.6)]).noise == 0.0
    met = [window(0.2), window(0.3)]
    assert verdict(window(0.8), window(0.77), baseline_subwindows=met).noise == 0.0


def test_when_targets_are_met_before_and_after_the_ratio_sum_breaks_the_tie() -> None:
    j = verdict(window(0.40), window(0.30))
    assert j.outcome is Outcome.KEEP
    assert j.reason.startswith("sum of latency/target ratios (targets met) 0.80 -> 0.60")
    assert verdict(window(0.40), window(0.39)).outcome is Outcome.REVERT


def test_missing_a_target_that_was_met_is_reverted() -> None:
    j = verdict(window(0.4), window(0.6))
    assert j.outcome is Outcome.REVERT
    assert "worse" in j.reason


def test_meeting_the_targets_from_a_miss_is_kept() -> None:
    assert verdict(window(0.6), window(0.45)).outcome is Outcome.KEEP


def test_a_load_that_moved_both_ways_is_inconclusive_and_says_which_numbers_moved() -> None:
    j = verdict(window(0.82), window(0.5, request_rate=4.0, prompt_tokens_mean=300.0))
    assert j.outcome is Outcome.INCONCLUSIVE
    assert j.reason == (
        "load changed: arrival rate 2/s -> 4/s (beyond ±25%); "
        "mean prompt 500 tokens -> 300 tokens (beyond ±25%)"
    )
    assert j.outcome.status_verdict is Verdict.INCONCLUSIVE


def test_a_trial_better_under_a_heavier_load_is_kept_and_says_the_load_moved() -> None:
    # Real vLLM, one closed-loop client, prefix caching turned on: 1.2 -> 6.2 requests/s and
    # the in-flight gauge 0.05 -> 0.4, while TTFT fell tenfold. More load never lowers latency.
    heavier = window(0.1, request_rate=12.0, running_mean=40.0, prompt_tokens_mean=900.0)
    j = verdict(window(0.82), heavier)
    assert j.outcome is Outcome.KEEP
    assert j.reason.endswith(
        "under a heavier load (arrival rate 2/s -> 12/s (beyond ±25%); "
        "requests in flight 8 -> 40 (beyond ±25%); mean prompt 500 tokens -> 900 tokens "
        "(beyond ±25%))"
    )


def test_a_trial_worse_under_a_heavier_load_is_inconclusive_not_reverted() -> None:
    busier = window(1.2, request_rate=6.0, running_mean=30.0)
    j = verdict(window(0.82), busier)
    assert j.outcome is Outcome.INCONCLUSIVE
    assert j.reason.startswith("load changed: arrival rate 2/s -> 6/s")


def test_a_trial_worse_under_a_lighter_load_is_reverted() -> None:
    quieter = window(1.2, request_rate=0.5, running_mean=2.0)
    j = verdict(window(0.82), quieter)
    assert j.outcome is Outcome.REVERT
    assert "under a lighter load (arrival rate 2/s -> 0.5/s" in j.reason


def test_a_load_change_within_tolerance_is_still_comparable() -> None:
    quieter = window(0.5, request_rate=1.65, running_mean=6.6, requests=495)
    j = verdict(window(0.82), quieter)
    assert j.outcome is Outcome.KEEP
    j = verdict(window(0.82), quieter, load_tolerance=0.1)
    assert j.outcome is Outcome.INCONCLUSIVE


def test_closed_loop_clients_served_faster_are_the_same_load() -> None:
    # The same 8 clients in flight complete twice the requests once the server is faster.
    j = verdict(window(0.82), window(0.4, request_rate=4.0))
    assert j.outcome is Outcome.KEEP


def test_open_loop_arrivals_held_in_flight_for_less_time_are_the_same_load() -> None:
    # The same arrival rate keeps fewer requests in flight once the server is faster.
    j = verdict(window(0.82), window(0.4, running_mean=3.0))
    assert j.outcome is Outcome.KEEP


def test_a_saturated_server_that_drains_its_backlog_is_judged_on_the_same_load() -> None:
    # Overloaded before: 100 in flight, 3/s finished, mostly short requests finishing. The fix
    # finishes twice as many with 11 in flight, and its finished requests are longer: the
    # arrivals did not change, the server did.
    saturated = window(8.0, request_rate=3.0, running_mean=60.0, waiting_mean=40.0)
    drained = window(0.4, request_rate=6.0, running_mean=11.0, prompt_tokens_mean=900.0)
    j = verdict(saturated, drained)
    assert j.outcome is Outcome.KEEP


def test_a_server_made_slower_holds_more_in_flight_and_is_reverted_not_inconclusive() -> None:
    slowed = window(2.0, request_rate=1.8, running_mean=30.0, generation_tokens_mean=120.0)
    assert verdict(window(0.82), slowed).outcome is Outcome.REVERT


def test_less_offered_load_moves_rate_and_in_flight_together_and_stays_inconclusive() -> None:
    quieter = window(0.4, request_rate=1.0, running_mean=3.0)
    assert verdict(window(0.82), quieter).outcome is Outcome.INCONCLUSIVE


@pytest.mark.parametrize("which", ["baseline", "trial"])
def test_too_few_requests_in_either_window_is_inconclusive(which: str) -> None:
    few = window(0.5, requests=40, running_mean=0.5, waiting_mean=0.0)  # quiet, not busy
    j = verdict(few, window(0.5)) if which == "baseline" else verdict(window(0.5), few)
    assert j.outcome is Outcome.INCONCLUSIVE
    assert j.reason == f"too few requests in the {which} window: 40 < 100"


@pytest.mark.parametrize("which", ["baseline", "trial"])
def test_an_unknown_quantile_is_inconclusive(which: str) -> None:
    blind = healthy(ttft={50: 0.1})
    j = verdict(blind, window(0.5)) if which == "baseline" else verdict(window(0.5), blind)
    assert j.outcome is Outcome.INCONCLUSIVE
    assert j.reason == f"TTFT p90 unknown in the {which} window"


@pytest.mark.parametrize("which", ["baseline", "trial"])
def test_no_data_is_its_own_outcome_not_a_failure(which: str) -> None:
    empty = NoData(reason="no traffic", window_seconds=300)
    j = verdict(empty, window(0.5)) if which == "baseline" else verdict(window(0.5), empty)
    assert j.outcome is Outcome.NO_DATA
    assert j.reason == f"no data in the {which} window: no traffic"
    assert j.outcome.status_verdict is Verdict.INCONCLUSIVE


def test_a_busy_window_with_few_requests_is_judged_not_inconclusive() -> None:
    # Requests in flight all window: few finished because each was slow (a closed loop).
    slow = window(2.0, requests=12, running_mean=16.0, waiting_mean=4.0)
    fast = window(0.4, requests=60, running_mean=16.0, waiting_mean=0.0)
    assert verdict(slow, fast).outcome is Outcome.KEEP
    # The same counts with the server mostly idle are too few to judge.
    quiet = window(2.0, requests=12, running_mean=0.5, waiting_mean=0.0)
    assert verdict(quiet, fast).outcome is Outcome.INCONCLUSIVE
