"""The measurement protocol every method of the benchmark follows, in one place.

- **One clock.** Every method looks at the Deployment on the operator's reconcile timer
  (``TICK_SECONDS``); a new pod is ready ``virtual.STARTUP_SECONDS`` after the patch and is
  seen ready at the first look after that.
- **One window-start rule** (the operator's own: ``core.rollout.trial``): a configuration's
  window starts at the first look at least ``evaluation.settle`` after it was seen ready, lasts
  ``evaluation.window``, and is judged at the first look after it ends. The starting
  configuration is seen ready at the first look (t = one tick) and measured by the same rule,
  by every method; it costs no rollout.
- **One cost.** Every Deployment change is one rollout: a trial, a rollback, a revert to the
  best configuration seen, a move to a configuration that then fails to start. Moving between
  two spellings of one engine configuration is no change.
- **One success rule.** A window the operator's rule lets be judged (``minRequests`` requests,
  or fewer from a busy or saturated server: ``core.saturation.usable``) meets every target, and
  the window twice as long right after it meets them with at least ``minRequests`` requests.
- **The oracle measures steady state**: every allowed configuration on its own trace, after
  ``steady_warmup`` (never a window with a cold start), over ``STEADY_WINDOWS`` windows: long
  enough that a percentile at a jump of a bimodal distribution (decodes that sometimes stall
  behind long prefills) reads the same on another trace (over two windows such a verdict was a
  coin toss). It meets only holding ``minRequests`` per confirming window
  (``steady_min_requests``), as the success rule asks.

Pure arithmetic on virtual seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TICK_SECONDS = 10.0  # the operator's timer interval: when anyone looks at the Deployment
STEADY_MIN_WARMUP = 45.0  # the oracle skips at least this much after a pod starts
STEADY_WINDOWS = 8  # the oracle's window, in evaluation windows
CONFIRM_WINDOWS = 2  # the window that must agree with a meeting one, in evaluation windows


def next_look(t: float) -> float:
    """The first look at or after ``t``."""
    return math.ceil(round(t / TICK_SECONDS, 9)) * TICK_SECONDS


@dataclass(frozen=True)
class TrialWindow:
    start: float
    end: float
    judged: float  # when the method sees the window (the first look after it ends)


def trial_window(seen_ready: float, settle: float, window: float) -> TrialWindow:
    """The window of a configuration seen ready at ``seen_ready`` (a look)."""
    start = next_look(seen_ready + settle)
    return TrialWindow(start, start + window, next_look(start + window))


def confirm_window(judged: float, window: float, not_before: float = 0.0) -> tuple[float, float]:
    """The longer window that must agree with a meeting one: twice as long, right after; with a
    drifting load, starting no sooner than ``drift_settled`` (the oracle scores the drifted
    rate's steady state: a configuration that met the early load must hold there too)."""
    start = max(judged, not_before)
    return start, start + CONFIRM_WINDOWS * window


def steady_min_requests(min_requests: int) -> int:
    """The requests the oracle's steady window must hold for its configuration to count as
    meeting: ``minRequests`` per confirming window, at that rate over ``STEADY_WINDOWS``. A
    configuration too slow to finish ``minRequests`` in a confirming window is never confirmed
    by any method; over a longer window it must not pass on the count alone."""
    return math.ceil(min_requests * STEADY_WINDOWS / CONFIRM_WINDOWS)


def drift_settled(drift_seconds: float, settle: float, window: float) -> float:
    """When a drifting load has been at its drifted rate as long as the oracle warms a pod up
    before it measures (its queue built up, as in the oracle's steady state); 0 without drift.
    No confirming window starts sooner (``confirm_window``)."""
    return drift_seconds + steady_warmup(settle, window) if drift_seconds > 0 else 0.0


def steady_warmup(settle: float, window: float) -> float:
    """How long after its start the oracle ignores a pod: cold caches, the first burst of a
    closed loop, the queue of the rollout."""
    return max(STEADY_MIN_WARMUP, settle + window, 2 * window)
