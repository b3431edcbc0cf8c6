"""With nothing left to try, the operator gives up on a configuration only on all it has shown
since it settled (``Windows.settled``: up to ``SETTLED_WINDOWS`` windows), not on its last
window alone: a latency whose percentile sits where its distribution jumps (decodes stalled
by long prefills now and then) misses in one window and meets in the next."""

from __future__ import annotations

from datetime import timedelta

from tests.unit.rollout.test_rollout_phases import (
    BEFORE,
    COOLDOWN,
    SETTLE,
    T0,
    WINDOW,
    Run,
    _nothing_left,
    facts,
    reasons,
    window,
)

from latency_tuner.api.status import Phase
from latency_tuner.core.observation import Observation
from latency_tuner.core.rollout import Reason, Windows
from latency_tuner.core.rollout.facts import SETTLED_WINDOWS, Window, windows_needed

MISSED = {50: 0.5, 90: 0.7, 95: 0.75, 99: 0.9}  # TTFT p90 0.7 s against 0.5 s: 40% over
MET = {50: 0.3, 90: 0.4, 95: 0.45, 99: 0.5}
NEAR = {50: 0.4, 90: 0.52, 95: 0.55, 99: 0.6}  # 4% over: within one window's noise


def longer(ttft: dict[int, float], windows: float) -> Observation:
    """``windows`` windows of the running configuration pooled, with TTFT quantiles ``ttft``."""
    return window(BEFORE, ttft=ttft, window_seconds=windows * WINDOW, requests=int(1200 * windows))


def judged_after(run: Run, seconds: float, current: Observation, settled: Observation) -> None:
    """``run`` seen ``seconds`` after its first round, its last window ``current`` and its
    longer one ``settled``."""
    run.step(facts(BEFORE, windows=Windows(current=current)))
    run.later(seconds).step(facts(BEFORE, windows=Windows(current=current, settled=settled)))


def test_the_longer_window_spans_the_configuration_since_it_settled_up_to_four_windows() -> None:
    run = _nothing_left()
    run.step(facts(BEFORE, windows=Windows(current=window(BEFORE, ttft=NEAR))))
    settled_at = T0 + timedelta(seconds=SETTLE)
    assert run.status.stable_since is not None
    # One whole window since it settled: the current window is all there is.
    assert (
        windows_needed(run.spec, run.status, settled_at + timedelta(seconds=WINDOW)).settled is None
    )
    # Two and a half windows: all of them, in whole seconds.
    at = settled_at + timedelta(seconds=2.5 * WINDOW + 0.7)
    assert windows_needed(run.spec, run.status, at).settled == Window(at.timestamp(), 150.0)
    # Ten windows: the last four.
    at = settled_at + timedelta(seconds=10 * WINDOW)
    assert windows_needed(run.spec, run.status, at).settled == Window(at.timestamp(), 4 * WINDOW)
    # Not while a window is not due to be judged.
    assert windows_needed(run.spec, run.status, settled_at).settled is None


def test_a_last_window_that_misses_on_a_configuration_that_met_over_its_longer_one_converges() -> (
    None
):
    run = _nothing_left()
    judged_after(run, SETTLE + 3 * WINDOW, window(BEFORE, ttft=MISSED), longer(MET, 3))
    assert run.phase() is Phase.CONVERGED
    status, reason, message = run.condition("TargetsMet")
    assert (status, reason) == ("True", "TargetsMet")
    assert "over the last 3m0s (3600 requests)" in message
    assert "TTFT p90 700ms" in message  # what the last window alone read
    assert run.status.observed is not None
    assert run.status.observed.window == "3m0s"  # the figures the decision was taken on
    assert run.status.diagnosis is not None
    assert run.status.diagnosis.findings == ["targets met"]  # and the diagnosis of them


def test_a_configuration_that_missed_over_its_longer_window_too_is_given_up_on() -> None:
    run = _nothing_left()
    judged_after(run, SETTLE + 3 * WINDOW, window(BEFORE, ttft=MISSED), longer(MISSED, 3))
    assert run.phase() is Phase.EXHAUSTED


def test_a_near_miss_is_judged_again_on_a_longer_window_that_includes_it() -> None:
    run = _nothing_left()
    near = window(BEFORE, ttft=NEAR)
    judged_after(run, SETTLE + WINDOW, near, near)
    assert run.condition("Progressing")[:2] == ("False", "NearMiss")
    stable_since = run.status.stable_since
    # The one more window is a whole new one ...
    run.later(WINDOW - 1).step(facts(BEFORE, windows=Windows(current=near)))
    assert run.phase() is Phase.OBSERVING
    assert run.status.stable_since == stable_since
    # ... and the longer window then spans both.
    wanted = windows_needed(run.spec, run.status, run.now + timedelta(seconds=1))
    assert wanted.settled is not None
    assert wanted.settled.seconds == 2 * WINDOW
    d = run.later(1).step(facts(BEFORE, windows=Windows(current=near, settled=longer(MET, 2))))
    assert run.phase() is Phase.CONVERGED
    assert reasons(d) == [Reason.TARGETS_MET]


def test_a_near_miss_over_the_longer_window_too_gives_up_after_the_one_more_window() -> None:
    run = _nothing_left()
    near = window(BEFORE, ttft=NEAR)
    judged_after(run, SETTLE + WINDOW, near, near)
    run.later(WINDOW).step(facts(BEFORE, windows=Windows(current=near, settled=longer(NEAR, 2))))
    assert run.phase() is Phase.EXHAUSTED


def test_a_recheck_after_the_cooldown_stays_converged_on_the_longer_window() -> None:
    run = _nothing_left()
    met = window(BEFORE, ttft=MET)
    judged_after(run, SETTLE + WINDOW, met, met)
    assert run.phase() is Phase.CONVERGED
    # After the cooldown the last window misses; the four before it, pooled, meet.
    run.later(COOLDOWN)
    wanted = windows_needed(run.spec, run.status, run.now)
    assert wanted.settled is not None
    assert wanted.settled.seconds == SETTLED_WINDOWS * WINDOW
    seen = facts(
        BEFORE, windows=Windows(current=window(BEFORE, ttft=MISSED), settled=longer(MET, 4))
    )
    run.step(seen)
    assert run.phase() is Phase.OBSERVING
    run.step(seen)
    assert run.phase() is Phase.CONVERGED
    assert run.condition("TargetsMet")[0] == "True"
