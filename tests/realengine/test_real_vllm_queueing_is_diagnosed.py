"""The whole reading path on the real engine: real vLLM serving the tiny model on 127.0.0.1 with
a planted queueing misconfiguration (``--max-num-seqs 1`` under 6 concurrent clients), scraped
by a real Prometheus under the labels a Kubernetes scrape attaches, read by the operator's
Prometheus metrics source, and diagnosed by the operator's diagnosis and planner: Queueing, with
max-num-seqs as the knob to turn. The real TTFT of the load and what the operator saw are
printed (``pytest -s`` shows them)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.unit.core.builders import knobs, objectives

from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.bench.config import BenchConfig
from latency_tuner.bench.runner import run_benchmark
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import plan
from latency_tuner.core.promql import default_matchers
from latency_tuner.realengine.server import VllmServer
from latency_tuner.sandbox.prometheus import PrometheusRunner, Target, binary
from latency_tuner.vllm.args import VllmCommandLine

pytestmark = pytest.mark.realengine

NAMESPACE, DEPLOYMENT = "llm", "tiny"
POD = "tiny-5d8f9c7b6-x2x7k"  # as a Deployment names its pods: the default selector matches
# -O0: no torch.compile on the CPU (startup ~1 min instead of ~3, and faster decode on 2 cores).
PLANTED = ["-O0", "--max-model-len", "2048", "--max-num-seqs", "1"]
CLIENTS = 6
LOAD_SECONDS = 30.0


@pytest.fixture
def prometheus() -> Iterator[PrometheusRunner]:
    if binary() is None:
        pytest.fail("prometheus is not installed; scripts/setup.sh installs it")
    with PrometheusRunner(scrape_interval="1s") as prom:
        yield prom


@pytest.fixture
def planted_server(vllm_py: Path, tiny_model: Path) -> Iterator[VllmServer]:
    with VllmServer(vllm_py, tiny_model, PLANTED) as server:
        print(f"\nreal vLLM started in {server.startup_seconds:.1f} s: {' '.join(PLANTED)}")
        yield server


def test_real_vllm_with_one_sequence_slot_is_diagnosed_as_queueing_on_max_num_seqs(
    planted_server: VllmServer, prometheus: PrometheusRunner
) -> None:
    prometheus.set_targets(
        [Target(f"127.0.0.1:{planted_server.port}",
                {"namespace": NAMESPACE, "pod": POD, "container": "vllm"})]
    )  # fmt: skip
    prometheus.wait_for_targets(1, timeout=30)
    began = time.time()
    load = BenchConfig(url=planted_server.url, concurrency=CLIENTS, prompt_tokens=64,
                       output_tokens=48, duration=LOAD_SECONDS, timeout=120)  # fmt: skip
    result = asyncio.run(run_benchmark(load))
    assert result.completed > 0, result.errors
    assert result.ttft is not None
    time.sleep(3)  # two more scrapes, so the window's end holds the last requests
    window = time.time() - began
    source = PrometheusSource(PrometheusSettings(prometheus.url))
    observation = asyncio.run(
        source.observe(matchers=default_matchers(NAMESPACE, DEPLOYMENT), window_seconds=window)
    )
    assert isinstance(observation, Observation), observation
    print(f"bench: {result.completed} requests, real TTFT p50 {result.ttft.p50 * 1000:.0f} ms "
          f"p90 {result.ttft.p90 * 1000:.0f} ms; TPOT p50 "
          f"{(result.tpot.p50 * 1000) if result.tpot else float('nan'):.1f} ms")  # fmt: skip
    print(f"operator saw: TTFT {observation.ttft}, queue mean {observation.queue_time_mean}, "
          f"waiting mean {observation.waiting_mean}, running max {observation.running_max}, "
          f"KV capacity {observation.kv_capacity_tokens} tokens, "
          f"coarse: {observation.coarse_quantile_note()}")  # fmt: skip

    # The real server's families reached the operator under their current names.
    assert observation.requests >= result.completed * 0.8
    assert observation.running_max == pytest.approx(1.0)
    assert (observation.waiting_mean or 0.0) > 1.0
    assert observation.kv_capacity_tokens is not None
    assert observation.kv_capacity_tokens > 0
    assert observation.ttft[90] > 0.5

    command_line = VllmCommandLine.parse(["vllm", "serve"], ["/models/tiny", *PLANTED])
    target = objectives(ttft="500ms")
    allowed = knobs(maxNumSeqs={"min": 1, "max": 64})
    hardware = HardwareInfo.from_labels(None)
    diagnosis = diagnose(observation, target, command_line, hardware, allowed)
    print(f"diagnosis: {diagnosis.bottleneck}; {'; '.join(diagnosis.conclusions)}")
    assert diagnosis.bottleneck is Bottleneck.QUEUEING
    assert diagnosis.knobs[0] is KnobName.MAX_NUM_SEQS
    change = plan(diagnosis, observation, command_line, allowed, hardware)
    assert isinstance(change, Change), change
    print(f"planned change: {change.describe()}")
    assert change.knob is KnobName.MAX_NUM_SEQS
    assert change.to_value is not None
    assert int(change.to_value) > 1
