"""What the bench client measures is what Prometheus reports from the simulator's histograms.

One simulated 70B server on two H100s (TTFT ~0.18 s, ITL ~30 ms, ~170 ms when a step also
prefills a prompt), one real Prometheus scraping it every second, and a direct scrape of the
same server, under a Poisson load from bench. Prometheus is asked about exactly the bench's
period (counter values at its end minus those at its start, ``@`` modifier), so both sides count
the same requests; the answer can then differ from bench's percentile only by the histogram's
interpolation inside a bucket and the client's overhead (HTTP, parsing, a busy machine).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httpx
import pytest
from tests.integration.realworld.support import (
    LLAMA_70B,
    NAMESPACE,
    Load,
    RunningServer,
    Server,
    bench_for,
    prometheus_or_skip,
    scrape,
    start_servers,
)

from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.adapters.metrics.scrape import ScrapeSource, ScrapeTarget
from latency_tuner.core.observation import Observation
from latency_tuner.core.promql import default_matchers
from latency_tuner.loadgen.results import BenchResult
from latency_tuner.loadgen.stats import Summary
from latency_tuner.sandbox.prometheus import PrometheusRunner
from latency_tuner.vllm.metrics import ITL_BUCKETS, TTFT_BUCKETS

SERVER = Server("llama", LLAMA_70B, ("--max-model-len", "4096", "-tp", "2"), gpus=2)
# Poisson arrivals at 1.5/s: ~4.5% of decode steps (rate x ~30 ms step) also prefill a new
# prompt (~150 ms), so ITL p50 and p90 lie inside the decode cluster, p99 inside the stall
# cluster - no percentile sits on the gap between the two, where any timing noise moves it far.
LOAD = Load(concurrency=8, prompt_tokens=1536, output_tokens=48, rate=1.5)
BENCH_SECONDS = 10.0
PERCENTILES = (50, 90, 99)
# The client's clock also counts HTTP, SSE parsing and its own scheduling on a busy 2-core
# machine: its values may sit above the server's by this much (and a little below: rounding).
# At p99 that is one request's worst scheduling delay: a CI run measured TTFT p99 297 ms at the
# client against 248 ms in the server's histogram (49 ms, 16%).
CLIENT_LAG = (0.060, 0.15)  # seconds, share of the value; whichever is larger
# The p99 of the ~15 requests of a run is its slowest one, and with it the client's single
# worst delay of the run: another CI run measured TTFT p99 324 ms at the client against 249 ms
# in the server's histogram (75 ms, 23%), the machine busy with the other tests.
TAIL_LAG = (0.100, 0.30)
TAIL = 99
CLIENT_LEAD = (0.002, 0.05)


pytestmark = pytest.mark.prometheus  # a real Prometheus scrapes the simulators


@dataclass(frozen=True)
class Measured:
    bench: BenchResult
    start: float  # unix time just before the first request
    end: float  # unix time after the last request finished and Prometheus scraped it
    prometheus: PrometheusRunner
    server: RunningServer
    by_prometheus: Observation
    by_scrape: Observation


def _selector() -> str:
    labels = SERVER.labels()
    return f'namespace="{labels["namespace"]}",pod="{labels["pod"]}"'


def increase_between(series: str, start: float, end: float, by: str = "") -> str:
    """PromQL for the growth of ``series`` from ``start`` to ``end`` exactly (no extrapolation)."""
    grouping = f" by ({by})" if by else ""
    return (
        f"sum{grouping} ({series}{{{_selector()}}} @ {end:.3f})"
        f" - sum{grouping} ({series}{{{_selector()}}} @ {start:.3f})"
    )


def instant_query(prometheus: PrometheusRunner, expr: str) -> float:
    answer = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": expr}, timeout=10)
    answer.raise_for_status()
    rows = answer.json()["data"]["result"]
    assert len(rows) == 1, (expr, rows)
    return float(rows[0]["value"][1])


def promql_quantile(
    prometheus: PrometheusRunner, metric: str, q: float, start: float, end: float
) -> float:
    """``histogram_quantile`` over the bucket increments between ``start`` and ``end``."""
    buckets = increase_between(f"{metric}_bucket", start, end, by="le")
    return instant_query(prometheus, f"histogram_quantile({q}, {buckets})")


def bucket_span(value: float, buckets: Sequence[float], percentile: int) -> tuple[float, float]:
    """Where an interpolated quantile of the server's histogram may fall for a client-measured
    ``value``: from the lower edge of the bucket holding ``value`` less the client's lag (at
    the tail, one request's), to the upper edge of the bucket holding ``value`` plus its lead."""
    late = TAIL_LAG if percentile >= TAIL else CLIENT_LAG
    lag = max(late[0], late[1] * value)
    lead = max(CLIENT_LEAD[0], CLIENT_LEAD[1] * value)
    edges = (0.0, *buckets)

    def bucket(v: float) -> tuple[float, float]:
        i = min(bisect.bisect_left(edges, v), len(edges) - 1)
        return edges[max(i - 1, 0)], edges[i]

    return bucket(value - lag)[0], bucket(value + lead)[1]


@pytest.fixture(scope="module")
def measured() -> Iterator[Measured]:
    with prometheus_or_skip() as prometheus, start_servers([SERVER]) as servers:
        server = servers[SERVER.deployment]
        scrape(prometheus, [server])

        async def measure() -> Measured:
            target = ScrapeTarget(f"{server.url}/metrics", SERVER.labels())
            direct = ScrapeSource(lambda: [target])
            stop = asyncio.Event()
            scraper = asyncio.create_task(direct.run(1.0, stop))
            await asyncio.sleep(1.5)  # both sources hold a sample from before the load
            start = time.time()
            bench = await bench_for(server.url, LOAD, BENCH_SECONDS)
            await asyncio.sleep(2.5)  # a scrape of both after the last request
            end = time.time()
            stop.set()
            await scraper
            matchers = default_matchers(NAMESPACE, SERVER.deployment)
            window = end - start
            source = PrometheusSource(PrometheusSettings(url=prometheus.url))
            by_prometheus = await source.observe(
                matchers=matchers, window_seconds=window, end=end - 1
            )
            by_scrape = await direct.observe(matchers=matchers, window_seconds=window, end=end - 1)
            await direct.aclose()
            assert isinstance(by_prometheus, Observation), by_prometheus
            assert isinstance(by_scrape, Observation), by_scrape
            return Measured(bench, start, end, prometheus, server, by_prometheus, by_scrape)

        yield asyncio.run(measure())


def _summary(summary: Summary | None, percentile: int) -> float:
    assert summary is not None
    value: float = getattr(summary, f"p{percentile}")
    return value


@pytest.mark.parametrize("percentile", PERCENTILES)
def test_bench_ttft_lies_in_the_bucket_of_prometheus_histogram_quantile(
    measured: Measured, percentile: int
) -> None:
    by_bench = _summary(measured.bench.ttft, percentile)
    by_promql = promql_quantile(
        measured.prometheus,
        "vllm:time_to_first_token_seconds",
        percentile / 100,
        measured.start,
        measured.end,
    )
    low, high = bucket_span(by_bench, TTFT_BUCKETS, percentile)
    assert low <= by_promql <= high, (by_bench, by_promql, (low, high))


@pytest.mark.parametrize("percentile", PERCENTILES)
def test_bench_itl_lies_in_the_bucket_of_prometheus_histogram_quantile(
    measured: Measured, percentile: int
) -> None:
    by_bench = _summary(measured.bench.itl, percentile)
    by_promql = promql_quantile(
        measured.prometheus,
        "vllm:inter_token_latency_seconds",
        percentile / 100,
        measured.start,
        measured.end,
    )
    low, high = bucket_span(by_bench, ITL_BUCKETS, percentile)
    assert low <= by_promql <= high, (by_bench, by_promql, (low, high))


def test_prometheus_counted_exactly_the_requests_bench_completed(measured: Measured) -> None:
    expr = increase_between("vllm:time_to_first_token_seconds_count", measured.start, measured.end)
    counted = instant_query(measured.prometheus, expr)
    assert measured.bench.failed == 0
    assert measured.bench.completed >= 8
    assert counted == measured.bench.completed


def test_the_itl_percentiles_compared_span_several_buckets(measured: Measured) -> None:
    # Otherwise the bucket checks above would compare one bucket with itself.
    itl = measured.bench.itl
    assert itl is not None
    assert bisect.bisect_left(ITL_BUCKETS, itl.p99) > bisect.bisect_left(ITL_BUCKETS, itl.p50) + 1


def test_prometheus_and_the_direct_scrape_give_the_same_observation(measured: Measured) -> None:
    a, b = measured.by_prometheus, measured.by_scrape
    assert a.requests == pytest.approx(b.requests, abs=2)
    for p in PERCENTILES:
        assert a.ttft[p] == pytest.approx(b.ttft[p], rel=0.15), ("ttft", p, a.ttft, b.ttft)
        assert a.itl[p] == pytest.approx(b.itl[p], rel=0.15), ("itl", p, a.itl, b.itl)
    assert a.ttft_mean == pytest.approx(b.ttft_mean, rel=0.1)
    assert a.itl_mean == pytest.approx(b.itl_mean, rel=0.1)
    assert a.request_rate == pytest.approx(b.request_rate, rel=0.15)
    assert a.prompt_tokens_mean == pytest.approx(b.prompt_tokens_mean, rel=0.1)
    assert a.prompt_tokens_mean == pytest.approx(LOAD.prompt_tokens, rel=0.1)
    assert a.generation_tokens_mean == pytest.approx(LOAD.output_tokens, rel=0.1)
    assert a.running_mean == pytest.approx(b.running_mean, rel=0.35, abs=0.5)
    assert a.kv_cache_usage_max == pytest.approx(b.kv_cache_usage_max, rel=0.35)
    assert a.preemptions == b.preemptions == 0
    assert a.cache_config == b.cache_config
    assert a.cache_config["enable_prefix_caching"] == "True"
    assert a.pods == b.pods == 1


def test_both_sources_agree_with_the_mean_ttft_bench_measured(measured: Measured) -> None:
    bench = measured.bench.ttft
    assert bench is not None
    for source in (measured.by_prometheus, measured.by_scrape):
        assert source.ttft_mean is not None
        # The server's clock starts when the request reaches it, after bench's has started.
        lag = max(CLIENT_LAG[0], CLIENT_LAG[1] * bench.mean)
        assert bench.mean - lag <= source.ttft_mean <= bench.mean + CLIENT_LEAD[0]
