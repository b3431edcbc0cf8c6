"""A window with too few requests to act on (a server so slow that one or two finish in it, or
light traffic) is not waited on for ever: the operator acts on the running configuration's
longer window (``Windows.settled``, up to ``SETTLED_WINDOWS`` windows) when that one holds
enough, and judges the trial it starts against that same window, measuring it at least as
long."""

from __future__ import annotations

from datetime import timedelta

from tests.unit.rollout.test_rollout_phases import (
    AFTER,
    BEFORE,
    SETTLE,
    WINDOW,
    Run,
    facts,
    window,
)

from latency_tuner.api.durations import parse_timestamp
from latency_tuner.api.status import Phase
from latency_tuner.core.observation import Observation
from latency_tuner.core.rollout import Windows
from latency_tuner.core.rollout.facts import SETTLED_WINDOWS, windows_needed

# A server with 24 requests in flight all the time that finishes two of them a window: too few
# for a quantile (``saturation.BUSY_MIN_REQUESTS``), and far from evaluation.minRequests (100).
SLOW = {"requests": 2, "request_rate": 2 / WINDOW, "running_mean": 16.0, "waiting_mean": 8.0}


def slow(windows: float) -> Observation:
    """``windows`` windows of the slow server, pooled."""
    return window(
        BEFORE, **{**SLOW, "requests": int(2 * windows), "window_seconds": windows * WINDOW}
    )


def _started_on_three_windows() -> Run:
    run = Run()
    run.step(facts(BEFORE, windows=Windows(current=slow(1))))
    run.later(SETTLE + 3 * WINDOW).step(
        facts(BEFORE, windows=Windows(current=slow(1), settled=slow(3)))
    )
    return run


def test_a_slow_server_is_acted_on_over_its_longer_window() -> None:
    run = _started_on_three_windows()
    assert run.phase() is Phase.ROLLING_OUT
    trial = run.status.current_trial
    assert trial is not None
    assert trial.knob == "maxNumSeqs"
    assert trial.before is not None
    assert (trial.before.window, trial.before.requests) == ("3m0s", 6)
    status, reason, message = run.condition("MetricsAvailable")
    assert (status, reason) == ("True", "Pooled")
    assert "6 requests over the configuration's last 3m0s" in message
    assert "one window of 60s held 2 requests" in message
    assert "over the last 3m0s (6 requests)" in run.condition("TargetsMet")[2]


def test_a_longer_window_that_holds_too_few_too_leaves_the_configuration_alone() -> None:
    quiet = {"requests": 1, "running_mean": 0.1, "waiting_mean": 0.0}  # idle, not slow
    run = Run()
    run.step(facts(BEFORE, windows=Windows(current=window(BEFORE, **quiet))))
    pooled = window(BEFORE, **{**quiet, "requests": 3, "window_seconds": 3 * WINDOW})
    d = run.later(SETTLE + 3 * WINDOW).step(
        facts(BEFORE, windows=Windows(current=window(BEFORE, **quiet), settled=pooled))
    )
    assert d.apply is None
    assert run.phase() is Phase.OBSERVING
    assert run.status.current_trial is None
    assert run.condition("MetricsAvailable")[:2] == ("False", "TooFewRequests")


def test_the_trial_is_judged_against_the_window_it_was_chosen_on_measured_as_long() -> None:
    run = _started_on_three_windows()
    trial = run.status.current_trial
    assert trial is not None
    run.step(facts(BEFORE))
    run.later(5).step(facts(AFTER))
    run.later(SETTLE).step(facts(AFTER))
    assert run.phase() is Phase.MEASURING
    # One evaluation window after the measuring began is not enough: three are.
    assert windows_needed(run.spec, run.status, run.now + timedelta(seconds=WINDOW)).trial is None
    wanted = windows_needed(run.spec, run.status, run.now + timedelta(seconds=3 * WINDOW))
    assert wanted.trial is not None
    assert wanted.trial.seconds == 3 * WINDOW
    assert wanted.baseline is not None
    assert wanted.baseline.seconds == 3 * WINDOW
    assert wanted.baseline.end == parse_timestamp(trial.started_at).timestamp()


def test_a_chosen_on_window_written_into_the_status_is_bounded() -> None:
    run = _started_on_three_windows()
    run.step(facts(BEFORE))
    run.later(5).step(facts(AFTER))
    run.later(SETTLE).step(facts(AFTER))
    trial = run.status.current_trial
    assert trial is not None
    assert trial.before is not None
    later = run.now + timedelta(days=1)
    for written, expected in [
        ("100h", SETTLED_WINDOWS * WINDOW),  # never longer than the operator could have used
        ("1s", WINDOW),  # never shorter than one window
        ("soon", WINDOW),  # not a duration: one window
    ]:
        before = trial.before.model_copy(update={"window": written})
        current = trial.model_copy(update={"before": before})
        status = run.status.model_copy(update={"current_trial": current})
        wanted = windows_needed(run.spec, status, later)
        assert wanted.baseline is not None, written
        assert wanted.trial is not None, written
        assert (wanted.baseline.seconds, wanted.trial.seconds) == (expected, expected), written
