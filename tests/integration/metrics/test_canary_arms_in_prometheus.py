"""A canary and a baseline pod scraped by a real Prometheus: each arm's matchers read its own
pod's series only, though the spec's selector matches both."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from tests.integration.metrics.support import Exporter, make_exporter

from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.core.canary import arms, canary_name
from latency_tuner.core.observation import Observation
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.sandbox.prometheus import PrometheusRunner, Target
from latency_tuner.vllm.metrics import MetricsVersion, Signal

CANARY = canary_name("llama", "llama-latency")
# A broad spec selector, as a tenant may write: it matches the canary's pod too.
SELECTOR = (LabelMatcher("namespace", "=", "ml"), LabelMatcher("pod", "=~", "llama-.*"))


async def _serve(app: web.Application, port: int) -> web.AppRunner:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


@pytest.fixture
async def pods() -> AsyncIterator[tuple[Exporter, Exporter]]:
    (main, main_app), (canary, canary_app) = (make_exporter(MetricsVersion.CURRENT) for _ in "ab")
    runners = [await _serve(main_app, main.port), await _serve(canary_app, canary.port)]
    try:
        yield main, canary
    finally:
        for runner in runners:
            await runner.cleanup()


async def _feed(exp: Exporter, ttft: float, per_step: int, seconds: float) -> None:
    for _ in range(round(seconds / 0.1)):
        for _ in range(per_step):
            exp.histograms[Signal.TTFT].labels("m", "0").observe(ttft)
            exp.histograms[Signal.E2E].labels("m", "0").observe(ttft + 1.0)
        await asyncio.sleep(0.1)


@pytest.mark.prometheus
async def test_each_arm_reads_only_its_own_pods_series(
    pods: tuple[Exporter, Exporter], prometheus: PrometheusRunner
) -> None:
    main, canary = pods
    prometheus.set_targets(
        [
            Target(f"127.0.0.1:{main.port}", {"namespace": "ml", "pod": "llama-7d9f8c6b5-x2x4z"}),
            Target(f"127.0.0.1:{canary.port}", {"namespace": "ml", "pod": f"{CANARY}-6c4b-k2l9p"}),
        ]
    )
    await asyncio.to_thread(prometheus.wait_for_targets, 2)
    await asyncio.gather(_feed(main, 0.9, 2, 8), _feed(canary, 0.05, 1, 8))
    end = time.time() - 1
    source = PrometheusSource(PrometheusSettings(url=prometheus.url))
    canary_arm, baseline_arm = arms(SELECTOR, CANARY)
    both, c, b = [
        await source.observe(matchers=m, window_seconds=5, percentiles=[95], end=end)
        for m in (SELECTOR, canary_arm, baseline_arm)
    ]
    assert isinstance(both, Observation), both
    assert isinstance(c, Observation), c
    assert isinstance(b, Observation), b
    assert c.ttft[95] <= 0.1  # the canary's fast requests only
    assert b.ttft[95] > 0.75  # the baseline's slow ones only
    assert c.request_rate == pytest.approx(10, rel=0.3)
    assert b.request_rate == pytest.approx(20, rel=0.3)
    assert both.request_rate == pytest.approx(c.request_rate + b.request_rate, rel=0.05)
