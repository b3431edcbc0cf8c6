"""Prometheus and the direct scrape answer the same signals with the same numbers."""

from __future__ import annotations

import asyncio
import time

import pytest
from tests.integration.metrics.support import Exporter, feed

from latency_tuner.adapters.metrics import SourceUnreachable
from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.adapters.metrics.scrape import ScrapeSource, ScrapeTarget
from latency_tuner.core.observation import NoData, Observation
from latency_tuner.core.promql import LabelMatcher, default_matchers
from latency_tuner.sandbox.prometheus import PrometheusRunner, Target, free_port
from latency_tuner.vllm.metrics import MetricsVersion

POD_LABELS = {"namespace": "ml", "pod": "llama-7d9f8c6b5-x2x4z", "container": "vllm"}
MATCHERS = default_matchers("ml", "llama")


async def _run_both(
    exporter: Exporter, prometheus: PrometheusRunner, seconds: float
) -> tuple[PrometheusSource, ScrapeSource]:
    prometheus.set_targets([Target(f"127.0.0.1:{exporter.port}", POD_LABELS)])
    await asyncio.to_thread(prometheus.wait_for_targets, 1)
    scrape = ScrapeSource(
        lambda: [ScrapeTarget(f"http://127.0.0.1:{exporter.port}/metrics", POD_LABELS)]
    )
    stop = asyncio.Event()
    scraper = asyncio.create_task(scrape.run(1.0, stop))
    await feed(exporter, seconds=seconds)
    stop.set()
    await scraper
    return PrometheusSource(PrometheusSettings(url=prometheus.url)), scrape


@pytest.mark.prometheus
async def test_both_sources_give_the_same_latency_and_load(
    exporter: Exporter, prometheus: PrometheusRunner
) -> None:
    prom, scrape = await _run_both(exporter, prometheus, seconds=9)
    end = time.time() - 1  # a moment both have scraped past
    a = await prom.observe(matchers=MATCHERS, window_seconds=6, percentiles=[95], end=end)
    b = await scrape.observe(matchers=MATCHERS, window_seconds=6, percentiles=[95], end=end)
    await scrape.aclose()
    assert isinstance(a, Observation), a
    assert isinstance(b, Observation), b
    # Half the requests took 0.3 s and half 0.9 s: p50 sits at the 0.5 bucket edge region and
    # p90 inside (0.75, 1]; both sources interpolate the same buckets.
    for p in (50, 90, 95):
        assert a.ttft[p] == pytest.approx(b.ttft[p], rel=0.1), p
    assert 0.75 < a.ttft[90] <= 1.0
    assert a.itl[50] == pytest.approx(0.0175, rel=0.2)  # inside the (0.01, 0.025] bucket
    assert a.request_rate == pytest.approx(b.request_rate, rel=0.15)
    assert a.request_rate == pytest.approx(20, rel=0.25)  # 2 requests per 0.1 s step
    assert a.prompt_tokens_mean == pytest.approx(100, rel=0.05)
    assert b.prompt_tokens_mean == pytest.approx(100, rel=0.05)
    assert a.queue_time_mean == pytest.approx(0.1, rel=0.05)
    assert a.running_mean == pytest.approx(4)
    assert b.running_mean == pytest.approx(4)
    assert a.kv_cache_usage_max == pytest.approx(0.5)
    assert b.kv_cache_usage_max == pytest.approx(0.5)
    assert a.cache_config["enable_prefix_caching"] == "True"
    assert b.cache_config == a.cache_config
    assert a.pods == b.pods == 1


@pytest.mark.prometheus
@pytest.mark.parametrize("exporter", [MetricsVersion.LEGACY], indirect=True)
async def test_pre_0_11_metric_names_are_found_by_meaning(
    exporter: Exporter, prometheus: PrometheusRunner
) -> None:
    prom, scrape = await _run_both(exporter, prometheus, seconds=5)
    end = time.time() - 1
    a = await prom.observe(matchers=MATCHERS, window_seconds=3, end=end)
    b = await scrape.observe(matchers=MATCHERS, window_seconds=3, end=end)
    await scrape.aclose()
    assert isinstance(a, Observation)
    assert isinstance(b, Observation)
    assert a.itl[50] == pytest.approx(0.0175, rel=0.2)
    assert b.itl[50] == pytest.approx(0.0175, rel=0.2)
    assert a.kv_cache_usage_mean == pytest.approx(0.5)
    assert b.kv_cache_usage_mean == pytest.approx(0.5)


@pytest.mark.prometheus
async def test_a_selector_that_matches_nothing_is_no_data_not_an_error(
    exporter: Exporter, prometheus: PrometheusRunner
) -> None:
    prom, scrape = await _run_both(exporter, prometheus, seconds=3)
    wrong = [LabelMatcher("namespace", "=", 'ml"} or vector(1) or {x="')]
    a = await prom.observe(matchers=wrong, window_seconds=2)
    b = await scrape.observe(matchers=wrong, window_seconds=2)
    await scrape.aclose()
    assert isinstance(a, NoData)
    assert isinstance(b, NoData)
    assert "no vLLM request series match" in a.reason


@pytest.mark.prometheus
async def test_a_window_without_finished_requests_is_no_data(
    exporter: Exporter, prometheus: PrometheusRunner
) -> None:
    prom, _ = await _run_both(exporter, prometheus, seconds=3)
    await asyncio.sleep(4)  # traffic stopped: the window sees flat counters
    got = await prom.observe(matchers=MATCHERS, window_seconds=2)
    assert isinstance(got, NoData)
    assert got.reason == "no requests finished in the window"


async def test_an_unreachable_prometheus_is_an_error_that_names_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    source = PrometheusSource(PrometheusSettings(url=url, timeout_seconds=2))
    with pytest.raises(SourceUnreachable, match=f"Prometheus at {url} is unreachable"):
        await source.observe(matchers=MATCHERS, window_seconds=60)


async def test_unreachable_pods_are_an_error_of_the_scrape_source() -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    source = ScrapeSource(lambda: [ScrapeTarget(url, POD_LABELS)], timeout_seconds=1)
    assert await source.scrape_once() == 0
    with pytest.raises(SourceUnreachable, match="no target could be scraped"):
        await source.observe(matchers=MATCHERS, window_seconds=60)
    await source.aclose()
