"""A batching source answers a target's latest window from an instant shared with other
targets (up to ``max_age`` earlier) only while the target just watches and its Deployment has
not changed within that window moved back: a trial's windows and a window just after a
rollout keep their own end."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from latency_tuner.api.durations import format_timestamp
from latency_tuner.api.status import LatencyTargetStatus, Phase
from latency_tuner.controller.gather import shares_instant
from latency_tuner.core.observation import NoData, ObservationResult
from latency_tuner.core.promql import LabelMatcher

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
WINDOW = 60.0


class Batching:
    """Below the seam: only what ``shares_instant`` looks at."""

    max_age = 15.0

    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        return NoData(reason="none", window_seconds=window_seconds)

    observe_recent = observe


class Alone:
    observe = Batching.observe


def status(phase: Phase, stable_for: float | None = None) -> LatencyTargetStatus:
    since = None if stable_for is None else format_timestamp(NOW - timedelta(seconds=stable_for))
    return LatencyTargetStatus(phase=phase, stable_since=since)


@pytest.mark.parametrize("phase", [Phase.OBSERVING, Phase.CONVERGED, Phase.EXHAUSTED])
def test_a_watching_target_shares_the_batch(phase: Phase) -> None:
    source = Batching()
    assert shares_instant(source, status(phase), NOW, WINDOW) is source
    assert shares_instant(source, status(phase, stable_for=WINDOW + 15), NOW, WINDOW) is source


@pytest.mark.parametrize("phase", [Phase.MEASURING, Phase.SETTLING, Phase.ROLLING_OUT])
def test_a_target_in_a_trial_keeps_its_own_end(phase: Phase) -> None:
    assert shares_instant(Batching(), status(phase), NOW, WINDOW) is None


def test_a_window_that_moved_back_would_reach_before_the_last_change_keeps_its_own_end() -> None:
    assert shares_instant(Batching(), status(Phase.OBSERVING, WINDOW + 14), NOW, WINDOW) is None


def test_a_source_that_cannot_batch_is_asked_as_before() -> None:
    assert shares_instant(Alone(), status(Phase.OBSERVING), NOW, WINDOW) is None
