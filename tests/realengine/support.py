"""Helpers of the real-engine tier: load a real vLLM server, read it the way the operator does
(a real Prometheus scraping it under Kubernetes-like labels, the operator's Prometheus source),
and turn a planned change into the arguments of the next server."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.core.knobs import Change, apply
from latency_tuner.core.observation import Observation
from latency_tuner.core.promql import default_matchers
from latency_tuner.loadgen.config import BenchConfig
from latency_tuner.loadgen.results import BenchResult
from latency_tuner.loadgen.runner import run_benchmark
from latency_tuner.realengine.server import VllmServer
from latency_tuner.sandbox.prometheus import PrometheusRunner, Target
from latency_tuner.vllm.args import VllmCommandLine

NAMESPACE, DEPLOYMENT = "llm", "tiny"
MODEL_PATH = "/models/tiny"  # the Deployment's model path; the server gets the real folder


@dataclass(frozen=True)
class Measured:
    bench: BenchResult
    observation: Observation

    def line(self, label: str) -> str:
        ttft = self.bench.ttft
        assert ttft is not None
        obs = self.observation
        return (
            f"{label}: {self.bench.completed} requests; real TTFT p50 {ttft.p50 * 1000:.0f} ms "
            f"p90 {ttft.p90 * 1000:.0f} ms; operator saw TTFT p90 {obs.ttft.get(90, 0) * 1000:.0f}"
            f" ms, queue mean {(obs.queue_time_mean or 0) * 1000:.0f} ms, prefill mean "
            f"{(obs.prefill_time_mean or 0) * 1000:.0f} ms, waiting mean {obs.waiting_mean}, "
            f"prefix hit rate {obs.prefix_cache_hit_rate}, KV capacity {obs.kv_capacity_tokens}"
            f" tokens; {obs.coarse_quantile_note() or 'no quantile in a lowest bucket'}"
        )


def measure(
    server: VllmServer, prometheus: PrometheusRunner, load: BenchConfig, pod: str
) -> Measured:
    """Runs ``load`` against ``server`` (scraped as pod ``pod``) and observes its window."""
    prometheus.set_targets(
        [Target(f"127.0.0.1:{server.port}",
                {"namespace": NAMESPACE, "pod": pod, "container": "vllm"})]
    )  # fmt: skip
    prometheus.wait_for_targets(1, timeout=30)
    began = time.time()
    result = asyncio.run(run_benchmark(load))
    assert result.completed > 0, result.errors
    time.sleep(3)  # two more scrapes, so the window's end holds the last requests
    source = PrometheusSource(PrometheusSettings(prometheus.url))
    observation = asyncio.run(
        source.observe(
            matchers=default_matchers(NAMESPACE, DEPLOYMENT), window_seconds=time.time() - began
        )
    )
    assert isinstance(observation, Observation), observation
    return Measured(result, observation)


def deployment_line(args: list[str]) -> VllmCommandLine:
    """The Deployment's container as the operator reads it: ``vllm serve MODEL ARGS``."""
    return VllmCommandLine.parse(["vllm", "serve"], [MODEL_PATH, *args])


def args_after(change: Change, args: list[str]) -> list[str]:
    """The server arguments once the operator's change is applied (model left out)."""
    _, rendered = apply(change, deployment_line(args)).command_line.render()
    assert rendered is not None
    assert rendered[0] == MODEL_PATH
    return rendered[1:]
