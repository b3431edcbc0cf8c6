"""A saturated server that finishes fewer requests per window than minRequests is acted on,
not waited on forever (issue 19: 0 rollouts in 4 of 4 runs where search succeeded)."""

from __future__ import annotations

from tests.unit.rollout.test_rollout_phases import BEFORE, SETTLE, WINDOW, Run, facts, window

from latency_tuner.api.status import Phase


def test_a_saturated_window_below_min_requests_starts_a_trial() -> None:
    # minRequests is 100; 6 requests finished while the waiting queue grew by 60.
    backlog = window(BEFORE, requests=6, request_rate=0.1, running_delta=0.0, waiting_delta=60.0)
    run = Run()
    run.step(facts(BEFORE, current=backlog))
    d = run.later(SETTLE + WINDOW).step(facts(BEFORE, current=backlog))
    assert run.phase() is Phase.ROLLING_OUT, d.reason
    assert run.condition("MetricsAvailable")[:2] == ("True", "Saturated")


def test_a_quiet_window_below_min_requests_still_waits() -> None:
    quiet = window(
        BEFORE,
        requests=6,
        request_rate=0.1,
        running_delta=0.0,
        waiting_delta=0.0,
        running_mean=0.5,
        waiting_mean=0.0,
    )
    run = Run()
    run.step(facts(BEFORE, current=quiet))
    d = run.later(SETTLE + WINDOW).step(facts(BEFORE, current=quiet))
    assert run.phase() is Phase.OBSERVING
    assert d.reason == "no usable window: nothing to act on"


def test_a_busy_window_below_min_requests_says_how_long_a_window_would_hold_them() -> None:
    # 25 requests in the 60 s window (minRequests 100), 40 in flight throughout: each request
    # is slow. It is judged all the same, and the condition says the window the pace needs.
    slow = window(BEFORE, requests=25, request_rate=25 / WINDOW, running_delta=0.0,
                  waiting_delta=0.0)  # fmt: skip
    run = Run()
    run.step(facts(BEFORE, current=slow))
    d = run.later(SETTLE + WINDOW).step(facts(BEFORE, current=slow))
    assert run.phase() is Phase.ROLLING_OUT, d.reason
    status, reason, message = run.condition("MetricsAvailable")
    assert (status, reason) == ("True", "Busy")
    assert message == (
        "25 requests in the window (evaluation.minRequests is 100), but requests were in flight "
        "all the time: the server is slow, not idle; at this pace a window of 4m0s would hold "
        "100 (evaluation.window is 60s)"
    )
