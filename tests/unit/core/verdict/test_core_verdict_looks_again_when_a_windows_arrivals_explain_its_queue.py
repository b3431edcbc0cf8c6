"""Two windows of one Poisson load count arrivals that differ by about the square root of their
sum, and near a server's capacity the queue follows them steeply. A verdict the queue decided,
on a trial window whose arrivals differed from the baseline's in the direction that explains
it (more for a Revert, fewer for a Keep), is Inconclusive once: the next window judges the
change (``verdict._arrival_luck``)."""

from __future__ import annotations

import math
from typing import Any

from tests.unit.core.builders import healthy, objectives

from latency_tuner.core.observation import Observation
from latency_tuner.core.verdict import Judgement, Outcome, judge_trial

TTFT = objectives(ttft="800ms")
WINDOW = 15.0  # 101 against 124 arrivals: +1.5 standard deviations of their counts


def window(arrivals: int, ttft_p90: float, queue: float, prefill: float = 0.1) -> Observation:
    """A 15 s window of an open load, ``arrivals`` all finished in it, its TTFT the queue plus
    the prefill plus 5 ms of HTTP on average."""
    fields: dict[str, Any] = {
        "window_seconds": WINDOW,
        "requests": arrivals,
        "request_rate": arrivals / WINDOW,
        "ttft": {50: ttft_p90 * 0.6, 90: ttft_p90, 99: ttft_p90 * 1.6},
        "ttft_mean": queue + prefill + 0.005,
        "queue_time_mean": queue,
        "prefill_time_mean": prefill,
        "running_mean": 14.0,
        "running_delta": 0.0,
        "waiting_delta": 0.0,
    }
    return healthy(**fields)


def judge(baseline: Observation, trial: Observation, *, again: bool = True) -> Judgement:
    return judge_trial(
        baseline, trial, TTFT, min_requests=20, min_improvement=0.05, may_look_longer=again
    )


BASELINE = window(101, ttft_p90=0.248, queue=0.045)


def test_a_worse_window_with_more_arrivals_whose_ttft_rose_as_queue_is_looked_at_again() -> None:
    j = judge(BASELINE, window(124, ttft_p90=0.581, queue=0.145))
    assert j.outcome is Outcome.INCONCLUSIVE
    assert not j.longer  # a fresh window of the same length
    assert j.settle_until is None
    assert j.reason.startswith(
        "the trial window had more arrivals than the baseline's (8.27/s against 6.73/s, +1.5 "
        "standard deviations of chance) and most of its TTFT change was queue time (mean 45ms "
        "-> 145ms)"
    )
    assert "TTFT p90 248ms -> 581ms" in j.reason  # the numbers that would have decided


def test_a_worse_window_under_the_same_arrivals_is_reverted() -> None:
    assert judge(BASELINE, window(105, ttft_p90=0.581, queue=0.145)).outcome is Outcome.REVERT


def test_a_worse_window_with_more_arrivals_whose_ttft_rose_as_prefill_is_reverted() -> None:
    # The queue held; the prefill took the extra 100 ms: not what more arrivals do.
    trial = window(124, ttft_p90=0.581, queue=0.045, prefill=0.2)
    assert judge(BASELINE, trial).outcome is Outcome.REVERT


def test_without_leave_to_look_again_a_worse_window_with_more_arrivals_is_reverted() -> None:
    trial = window(124, ttft_p90=0.581, queue=0.145)
    assert judge(BASELINE, trial, again=False).outcome is Outcome.REVERT


def test_a_better_window_with_fewer_arrivals_whose_queue_fell_is_looked_at_again() -> None:
    j = judge(window(124, ttft_p90=0.581, queue=0.145), window(101, ttft_p90=0.248, queue=0.045))
    assert j.outcome is Outcome.INCONCLUSIVE
    assert j.reason.startswith("the trial window had fewer arrivals than the baseline's")


def test_a_better_window_with_more_arrivals_is_kept() -> None:
    # Better despite the heavier load: the arrivals cannot explain it.
    j = judge(window(101, ttft_p90=0.581, queue=0.145), window(124, ttft_p90=0.248, queue=0.045))
    assert j.outcome is Outcome.KEEP


def test_a_queue_time_that_is_not_a_number_leaves_the_verdict_as_it_was() -> None:
    worse = window(124, ttft_p90=0.581, queue=0.145)
    for hostile in (math.nan, math.inf):
        trial = worse.model_copy(update={"queue_time_mean": hostile})
        assert judge(BASELINE, trial).outcome is Outcome.REVERT


def test_a_finished_rate_that_is_not_a_number_leaves_the_verdict_as_it_was() -> None:
    # An arrival rate of inf would read as infinitely many standard deviations of chance.
    worse = window(124, ttft_p90=0.581, queue=0.145)
    for hostile in (math.nan, math.inf):
        trial = worse.model_copy(update={"request_rate": hostile})
        assert judge(BASELINE, trial).outcome is Outcome.REVERT
