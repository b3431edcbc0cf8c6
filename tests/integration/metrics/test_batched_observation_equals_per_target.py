"""One grouped query per aggregate answers every target of a fleet exactly as the target's own
queries do, against a real Prometheus scraping many simulated pods."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from tests.integration.metrics.support import Exporter, families, fleet_app

from latency_tuner.adapters.metrics import SourceUnreachable
from latency_tuner.adapters.metrics.batch import BatchedPrometheus
from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.core.observation import NoData, Observation, ObservationResult
from latency_tuner.core.promql import LabelMatcher, PromQLError, default_matchers
from latency_tuner.sandbox.prometheus import PrometheusRunner, Target, free_port
from latency_tuner.vllm.metrics import MetricsVersion, Signal

CURRENT, LEGACY = MetricsVersion.CURRENT, MetricsVersion.LEGACY


@dataclass(frozen=True)
class Deployment:
    namespace: str
    name: str
    pods: int
    version: MetricsVersion = CURRENT
    models: tuple[str, ...] = ("m",)
    idle: bool = False


FLEET = [
    Deployment("ml", "llama", 2),
    Deployment("ml", "llama-big", 2),  # its pods' names start like llama's
    Deployment("ml", "mistral", 3),
    Deployment("ml", "qwen", 1, LEGACY),  # pre-0.11 names beside current ones
    Deployment("team-b", "llama", 2),  # same name, other namespace
    Deployment("team-b", "gemma", 4),
    Deployment("team-b", "phi", 1, LEGACY),
    Deployment("team-b", "multi", 2, models=("m", "m2")),
    Deployment("team-c", "idle", 2, idle=True),
    *(Deployment("team-d", f"svc{i}", 3) for i in range(8)),
]


def pod_names(d: Deployment) -> list[str]:
    return [f"{d.name}-7d9f8c6b{i}-x{i}z{len(d.name)}" for i in range(d.pods)]


TARGETS: list[Sequence[LabelMatcher]] = [
    *(default_matchers(d.namespace, d.name) for d in FLEET),
    default_matchers("ml", "ghost"),  # no such Deployment: NoData
    # A spec's own matchers: one model's series across the namespace, and an alternation.
    [LabelMatcher("namespace", "=", "team-b"), LabelMatcher("model_name", "=", "m2")],
    [LabelMatcher("namespace", "=", "team-b"), LabelMatcher("pod", "=~", "(gemma|phi)-.+")],
]


@pytest.fixture
async def fleet() -> AsyncIterator[tuple[int, dict[str, tuple[Deployment, Exporter]]]]:
    pods = {f"{d.namespace}.{pod}": (d, families(d.version)) for d in FLEET for pod in pod_names(d)}
    port = free_port()
    runner = web.AppRunner(fleet_app({key: exp for key, (_, exp) in pods.items()}))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield port, pods
    finally:
        await runner.cleanup()


async def feed(pods: dict[str, tuple[Deployment, Exporter]], seconds: float) -> None:
    """Every pod its own load: latencies, lengths and queues scaled by its position."""
    step, elapsed = 0.1, 0.0
    while elapsed < seconds:
        for i, (d, exp) in enumerate(pods.values()):
            f = 1 + (i % 5) * 0.3
            if d.idle:
                continue
            for model in d.models:
                lab = (model, "0")
                for ttft in (0.1 * f, 0.6 * f):
                    exp.histograms[Signal.TTFT].labels(*lab).observe(ttft)
                    exp.histograms[Signal.E2E].labels(*lab).observe(ttft + 2 * f)
                    exp.histograms[Signal.ITL].labels(*lab).observe(0.015 * f)
                    exp.histograms[Signal.TPOT].labels(*lab).observe(0.02 * f)
                    exp.histograms[Signal.QUEUE_TIME].labels(*lab).observe(0.05 * f)
                    exp.histograms[Signal.PREFILL_TIME].labels(*lab).observe(0.04 * f)
                    exp.histograms[Signal.DECODE_TIME].labels(*lab).observe(1.5 * f)
                    exp.counters[Signal.PROMPT_TOKENS].labels(*lab).inc(100 * f)
                    exp.counters[Signal.GENERATION_TOKENS].labels(*lab).inc(50)
                    exp.counters[Signal.PREFIX_CACHE_QUERIES].labels(*lab).inc(100)
                    exp.counters[Signal.PREFIX_CACHE_HITS].labels(*lab).inc(10 * (i % 4))
                if i % 3 == 0:
                    exp.counters[Signal.PREEMPTIONS].labels(*lab).inc()
                exp.gauges[Signal.REQUESTS_RUNNING].labels(*lab).set(i % 4 + 1)
                exp.gauges[Signal.REQUESTS_WAITING].labels(*lab).set(i % 3)
                exp.gauges[Signal.KV_CACHE_USAGE].labels(*lab).set(0.1 * (i % 7))
        await asyncio.sleep(step)
        elapsed += step


def same(a: Any, b: Any, where: str = "") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict), where
        assert a.keys() == b.keys(), where
        for key in a:
            same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), where
    else:
        assert a == b, where


def assert_same(a: ObservationResult, b: ObservationResult, where: str) -> None:
    assert type(a) is type(b), (where, a, b)
    same(a.model_dump(), b.model_dump(), where)


@pytest.mark.prometheus
async def test_a_batch_answers_every_target_of_a_fleet_as_its_own_queries_do(
    fleet: tuple[int, dict[str, tuple[Deployment, Exporter]]], prometheus: PrometheusRunner
) -> None:
    port, pods = fleet
    prometheus.set_targets(
        [
            Target(
                f"127.0.0.1:{port}",
                {
                    "namespace": d.namespace,
                    "pod": key.split(".", 1)[1],
                    "container": "vllm",
                    "__metrics_path__": f"/metrics/{key}",
                },
            )
            for key, (d, _) in pods.items()
        ]
    )
    await asyncio.to_thread(prometheus.wait_for_targets, len(pods))
    await feed(pods, seconds=7)
    end = time.time() - 1.5
    settings = PrometheusSettings(url=prometheus.url)
    single = PrometheusSource(settings)
    batched = BatchedPrometheus(
        PrometheusSource(PrometheusSettings(url=prometheus.url, max_response_bytes=64 << 20)),
        max_age=60,
    )
    try:
        own = [
            await single.observe(matchers=m, window_seconds=4, percentiles=[90, 95], end=end)
            for m in TARGETS
        ]
        shared = await asyncio.gather(
            *(
                batched.observe_recent(matchers=m, window_seconds=4, percentiles=[90, 95], end=end)
                for m in TARGETS
            )
        )
        for matchers, a, b in zip(TARGETS, own, shared, strict=True):
            assert_same(a, b, str(matchers))
        observed = [o for o in own if isinstance(o, Observation)]
        assert len(observed) == len(TARGETS) - 2  # all but the idle and the ghost
        assert isinstance(own[FLEET.index(Deployment("team-c", "idle", 2, idle=True))], NoData)
        legacy = own[FLEET.index(Deployment("ml", "qwen", 1, LEGACY))]
        assert isinstance(legacy, Observation)
        assert legacy.ttft[90] > 0
        assert batched.batches_sent == 1
        all_targets = batched.queries_sent
        # The batch answers a window ending up to max_age after its instant, not later.
        await batched.observe_recent(matchers=TARGETS[0], window_seconds=4, end=end + 59)
        assert batched.batches_sent == 1
        await batched.observe_recent(matchers=TARGETS[0], window_seconds=4, end=end + 61)
        assert batched.batches_sent == 2
        assert batched.queries_sent == 2 * all_targets
        assert single.queries_sent >= 30 * len(observed)  # each target its own ~32

        # Three targets of one namespace, later: as many queries as for the whole fleet.
        few = BatchedPrometheus(
            PrometheusSource(PrometheusSettings(url=prometheus.url, max_response_bytes=64 << 20)),
            max_age=60,
        )
        later = end + 0.5
        for m in TARGETS[:3]:
            a = await single.observe(matchers=m, window_seconds=4, percentiles=[90], end=later)
            b = await few.observe_recent(matchers=m, window_seconds=4, percentiles=[90], end=later)
            assert_same(a, b, str(m))
        few.close()
        assert few.batches_sent == 1
        assert few.queries_sent == all_targets
        # 41 here: ~34 aggregates, some asked under two name generations (qwen, phi).
        assert all_targets < 2 * 32  # fewer than two targets' own queries

        # At most 8 targets a query: the same answers, from whole namespaces in three chunks.
        chunked = BatchedPrometheus(
            PrometheusSource(PrometheusSettings(url=prometheus.url, max_response_bytes=64 << 20)),
            max_age=60,
            max_targets=8,
        )
        try:
            pieces = await asyncio.gather(
                *(
                    chunked.observe_recent(
                        matchers=m, window_seconds=4, percentiles=[90, 95], end=end
                    )
                    for m in TARGETS
                )
            )
            for matchers, a, b in zip(TARGETS, own, pieces, strict=True):
                assert_same(a, b, str(matchers))
            # Targets asked per namespace: ml 5 (the ghost counts), team-b 6 (its own matchers
            # included), team-c 1, team-d 8 (a chunk of its own: never split).
            assert chunked.chunks(["ml", "team-b", "team-c", "team-d"]) == [
                ["ml"],
                ["team-b", "team-c"],
                ["team-d"],
            ]
            assert chunked.batches_sent == 1
            assert all_targets < chunked.queries_sent <= 4 * all_targets
        finally:
            chunked.close()
    finally:
        single.close()
        batched.close()


@pytest.mark.prometheus
async def test_a_batch_that_fails_fails_every_target_in_it_and_the_next_round_asks_again() -> None:
    # A closed port: every waiter of the batch gets the source's error, none a stale answer.
    url = f"http://127.0.0.1:{free_port()}"
    batched = BatchedPrometheus(PrometheusSource(PrometheusSettings(url=url)), max_age=60)
    try:
        results = await asyncio.gather(
            *(
                batched.observe_recent(matchers=m, window_seconds=4, end=1000.0)
                for m in TARGETS[:4]
            ),
            return_exceptions=True,
        )
        assert all(isinstance(r, SourceUnreachable) for r in results), results
        assert batched.batches_sent == 1
        with pytest.raises(SourceUnreachable):
            await batched.observe_recent(matchers=TARGETS[0], window_seconds=4, end=1000.0)
        assert batched.batches_sent == 2
    finally:
        batched.close()


async def test_a_selector_no_query_may_carry_is_asked_alone_and_never_widens_a_batch() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    batched = BatchedPrometheus(PrometheusSource(PrometheusSettings(url=url)), max_age=60)
    bad = [LabelMatcher("namespace", "=", "ml"), LabelMatcher("a-b", "=", "x")]
    try:
        with pytest.raises(PromQLError):
            await batched.observe_recent(matchers=bad, window_seconds=4, end=1000.0)
        assert batched.batches_sent == 0
    finally:
        batched.close()
