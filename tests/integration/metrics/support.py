"""A stand-in vLLM metrics endpoint whose observations a test controls."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from latency_tuner.sandbox.prometheus import free_port
from latency_tuner.vllm.metrics import FAMILIES, MetricsVersion, MetricType, Signal


@dataclass
class Exporter:
    """Metric families named as a vLLM server of ``version`` names them."""

    registry: CollectorRegistry
    histograms: dict[Signal, Histogram]
    counters: dict[Signal, Counter]
    gauges: dict[Signal, Gauge]
    port: int


def make_exporter(version: MetricsVersion) -> tuple[Exporter, web.Application]:
    exp = families(version, port=free_port())

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(exp.registry), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return exp, app


def fleet_app(pods: dict[str, Exporter]) -> web.Application:
    """Many simulated pods behind one server: pod ``name`` serves ``/metrics/name`` (a
    Prometheus target sets ``__metrics_path__`` to it)."""

    async def metrics(request: web.Request) -> web.Response:
        exp = pods[request.match_info["pod"]]
        return web.Response(body=generate_latest(exp.registry), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics/{pod}", metrics)
    return app


def families(version: MetricsVersion, *, port: int = 0) -> Exporter:
    """The metric families of one vLLM server of ``version``, in a registry of their own."""
    registry = CollectorRegistry()
    labels = ("model_name", "engine")
    hist: dict[Signal, Histogram] = {}
    ctr: dict[Signal, Counter] = {}
    gau: dict[Signal, Gauge] = {}
    for sig, fam in FAMILIES.items():
        name = fam.name(version)
        if fam.type is MetricType.HISTOGRAM:
            assert fam.buckets is not None
            hist[sig] = Histogram(name, fam.help, labels, buckets=fam.buckets, registry=registry)
        elif fam.type is MetricType.COUNTER:
            ctr[sig] = Counter(name.removesuffix("_total"), fam.help, labels, registry=registry)
        elif sig is not Signal.CACHE_CONFIG:
            gau[sig] = Gauge(name, fam.help, labels, registry=registry)
    info = Gauge(
        FAMILIES[Signal.CACHE_CONFIG].name(version),
        "cache config",
        ("block_size", "cache_dtype", "enable_prefix_caching"),
        registry=registry,
    )
    info.labels("16", "auto", "True").set(1)
    return Exporter(registry, hist, ctr, gau, port)


async def feed(exp: Exporter, *, seconds: float, step: float = 0.1) -> None:
    """Two requests finish every step: TTFT 0.3 s and 0.9 s, ITL 0.02 s; 100 prompt tokens."""
    lab = ("m", "0")
    elapsed = 0.0
    while elapsed < seconds:
        for ttft in (0.3, 0.9):
            exp.histograms[Signal.TTFT].labels(*lab).observe(ttft)
            exp.histograms[Signal.E2E].labels(*lab).observe(ttft + 1.0)
            exp.histograms[Signal.ITL].labels(*lab).observe(0.02)
            exp.histograms[Signal.QUEUE_TIME].labels(*lab).observe(0.1)
            exp.counters[Signal.PROMPT_TOKENS].labels(*lab).inc(100)
            exp.counters[Signal.GENERATION_TOKENS].labels(*lab).inc(50)
        exp.gauges[Signal.REQUESTS_RUNNING].labels(*lab).set(4)
        exp.gauges[Signal.KV_CACHE_USAGE].labels(*lab).set(0.5)
        await asyncio.sleep(step)
        elapsed += step
