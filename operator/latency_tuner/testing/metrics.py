"""A scripted metrics source: what a window of a Deployment shows is a function the caller
gives, so a test or a benchmark can make a target slow, fast, silent or unreachable."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.controller.errors import MetricsUnavailable
from latency_tuner.controller.ports import MetricsSource
from latency_tuner.core.observation import NoData, Observation, ObservationResult
from latency_tuner.core.promql import LabelMatcher

# (Deployment, window start, window end) -> its signals, or None when nothing was served.
Answer = Callable[[str, float, float], dict[str, Any] | None]


def observation(window: float, **signals: Any) -> Observation:
    """An Observation with plausible defaults for a steady 20 req/s load; ``signals``
    override (``ttft={90: 2.0}``, ``waiting_mean=12.0``, ...)."""
    values: dict[str, Any] = {
        "window_seconds": window,
        "requests": 200,
        "request_rate": 20.0,
        "prompt_tokens_mean": 512.0,
        "generation_tokens_mean": 128.0,
        "running_mean": 8.0,
        "running_max": 10.0,
        "waiting_mean": 0.0,
        "waiting_max": 0.0,
        "kv_cache_usage_mean": 0.3,
        "kv_cache_usage_max": 0.4,
        "preemptions": 0.0,
        "itl": {50: 0.02, 90: 0.025, 95: 0.027, 99: 0.03},
        "itl_mean": 0.021,
    }
    values.update(signals)
    return Observation(**values)


def queueing_signals(ttft: float, *, running_mean: float, running_max: float) -> dict[str, Any]:
    """Signals of a Deployment whose TTFT p90 is ``ttft``; above 0.5 s it is waiting for a slot
    (requests queue): the diagnosis says Queueing while it is that slow."""
    slow = ttft > 0.5
    return {
        "ttft": {50: ttft * 0.8, 90: ttft, 95: ttft * 1.05, 99: ttft * 1.2},
        "ttft_mean": ttft * 0.8,
        "queue_time_mean": ttft * 0.7 if slow else 0.0,
        "prefill_time_mean": 0.05,
        "running_mean": running_mean,
        "running_max": running_max,
        "waiting_mean": 12.0 if slow else 0.0,
        "waiting_max": 24.0 if slow else 0.0,
    }


class ScriptedMetrics:
    """Prometheus' stand-in for every LatencyTarget: ``metrics_for`` is the operator's
    ``controller.ports.MetricsFor``. ``unreachable`` set: every query fails as Prometheus
    down would. ``observe_calls`` counts the windows asked for."""

    def __init__(self, answer: Answer, *, clock: Callable[[], float] = time.time) -> None:
        self.answer = answer
        self.clock = clock
        self.unreachable: str | None = None
        self.observe_calls = 0

    async def metrics_for(
        self, spec: LatencyTargetSpec, namespace: str, name: str
    ) -> MetricsSource:
        return _Source(self, spec.target_ref.name)


class _Source:
    def __init__(self, script: ScriptedMetrics, deployment: str) -> None:
        self.script = script
        self.deployment = deployment

    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        self.script.observe_calls += 1
        if self.script.unreachable is not None:
            raise MetricsUnavailable(self.script.unreachable)
        stop = self.script.clock() if end is None else end
        signals = self.script.answer(self.deployment, stop - window_seconds, stop)
        if signals is None:
            return NoData(
                reason="no requests finished in the window", window_seconds=window_seconds
            )
        return observation(window_seconds, **signals)
