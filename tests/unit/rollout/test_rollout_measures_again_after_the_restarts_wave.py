"""A trial window whose requests stayed longer on the server than its pods had served when it
began saw the restart's wave (a closed loop's clients all at once on a cold server), not the
steady load: a Revert on it is not final. The trial is measured once more, over a window that
starts once a residence time has passed since the pods were ready (``verdict._unsteady``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.unit.rollout.test_rollout_phases import (
    AFTER,
    BEFORE,
    DEADLINE,
    WINDOW,
    Run,
    facts,
    judged,
    measuring,
    window,
)

from latency_tuner.api.durations import parse_timestamp
from latency_tuner.api.status import Phase, Verdict
from latency_tuner.core.rollout.facts import windows_needed
from latency_tuner.core.verdict import NOT_STEADY

# 2,000 in flight at 20 requests/s: each request stays 100 s, longer than the settle and the
# window together (30 + 60 s).
LONG_STAYS = 2000.0


def judged_on_a_wave(in_flight: float) -> tuple[Run, datetime]:
    """A trial judged once on a worse window whose ``in_flight`` requests arrive at 20 per
    second (against a baseline alike), and when its pods were ready."""
    run = Run()
    measuring(run)
    trial = run.status.current_trial
    assert trial is not None
    assert trial.ready_at is not None
    stays = {"running_mean": in_flight, "running_max": in_flight}
    worse = window(AFTER, ttft={50: 2.4, 90: 3.0, 95: 3.2, 99: 3.6}, **stays)
    run.later(WINDOW).step(facts(AFTER, windows=judged(window(BEFORE, **stays), worse)))
    return run, parse_timestamp(trial.ready_at)


def test_a_worse_window_of_the_restarts_wave_is_measured_again_after_a_residence_time() -> None:
    run, ready = judged_on_a_wave(LONG_STAYS)
    assert run.phase() is Phase.MEASURING
    again = run.status.current_trial
    assert again is not None
    assert again.measurements == 1
    assert again.measure_started_at is not None
    assert parse_timestamp(again.measure_started_at) == ready + timedelta(seconds=100)
    assert NOT_STEADY in run.condition("Progressing")[2]
    # The window after the wave is the one asked for, and it judges the trial for good.
    ends = ready + timedelta(seconds=100 + WINDOW)
    assert windows_needed(run.spec, run.status, ends - timedelta(seconds=1)).trial is None
    wanted = windows_needed(run.spec, run.status, ends).trial
    assert wanted is not None
    assert wanted.end == ends.timestamp()
    run.now = ends
    worse = window(AFTER, ttft={50: 2.4, 90: 3.0, 95: 3.2, 99: 3.6})
    run.step(facts(AFTER, windows=judged(window(BEFORE), worse)))  # still worse: reverted
    assert run.phase() is Phase.ROLLING_BACK
    reverted = run.status.current_trial
    assert reverted is not None
    assert reverted.verdict is Verdict.REVERT


def test_the_wait_for_the_wave_is_never_longer_than_the_progress_deadline() -> None:
    # The gauges are the pods' own: a server reporting a trillion requests in flight must not
    # hold the trial's change on the Deployment for ever.
    run, ready = judged_on_a_wave(1e12)
    again = run.status.current_trial
    assert again is not None
    assert again.measure_started_at is not None
    assert parse_timestamp(again.measure_started_at) - ready == timedelta(seconds=DEADLINE)
