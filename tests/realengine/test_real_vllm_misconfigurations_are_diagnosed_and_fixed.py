"""The reading, diagnosis and planning path on the real engine, and the planned change applied
to real vLLM.

Each case starts real vLLM on 127.0.0.1 with the tiny model and a planted misconfiguration,
loads it, lets a real Prometheus scrape it under the labels a Kubernetes scrape attaches, reads
the window with the operator's Prometheus source, and runs the operator's diagnosis and planner
on it. The planned change is then rendered onto the Deployment's command line, a new real vLLM
starts with exactly those arguments (as the rolled-out pod would), and the same load runs again.
The real TTFT before and after is printed (``pytest -s``) and must have improved.

- Queueing: ``--max-num-seqs 1`` under 6 concurrent clients -> Queueing, raise max-num-seqs.
- Long prefill: ``--no-enable-prefix-caching`` with 1,800-token prompts sharing 1,700 tokens ->
  LongPrefill, enable prefix caching.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tests.realengine.support import args_after, deployment_line, measure
from tests.unit.core.builders import knobs, objectives

from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.planner import plan
from latency_tuner.loadgen.config import BenchConfig
from latency_tuner.realengine.server import VllmServer
from latency_tuner.sandbox.prometheus import PrometheusRunner

pytestmark = pytest.mark.realengine

# -O0: no torch.compile on the CPU (startup ~1 min instead of ~3, and faster decode on 2 cores).
BASE = ["-O0", "--max-model-len", "2048"]
HARDWARE = HardwareInfo.from_labels(None)  # no GPU the operator knows of


def _before_and_after(
    vllm_py: Path,
    tiny_model: Path,
    prometheus: PrometheusRunner,
    planted: list[str],
    load: BenchConfig,
    target: str,
    allowed: dict[str, object],
    bottleneck: Bottleneck,
    knob: KnobName,
) -> None:
    args = [*BASE, *planted]
    with VllmServer(vllm_py, tiny_model, args) as server:
        print(f"\nreal vLLM started in {server.startup_seconds:.1f} s with {' '.join(args)}")
        load = replace(load, url=server.url)
        before = measure(server, prometheus, load, pod="tiny-5d8f9c7b6-aaaaa")
    print(before.line("before"))
    allowed_knobs = knobs(**allowed)
    command_line = deployment_line(args)
    diagnosis = diagnose(
        before.observation, objectives(ttft=target), command_line, HARDWARE, allowed_knobs
    )
    print(f"diagnosis: {diagnosis.bottleneck}; {'; '.join(diagnosis.conclusions)}")
    assert diagnosis.bottleneck is bottleneck
    assert diagnosis.knobs[0] is knob
    change = plan(diagnosis, before.observation, command_line, allowed_knobs, HARDWARE)
    assert isinstance(change, Change), change
    assert change.knob is knob
    new_args = args_after(change, args)
    print(f"planned change: {change.describe()} -> vllm serve MODEL {' '.join(new_args)}")
    with VllmServer(vllm_py, tiny_model, new_args) as server:
        print(f"real vLLM restarted in {server.startup_seconds:.1f} s")
        load = replace(load, url=server.url)
        after = measure(server, prometheus, load, pod="tiny-7c9d8e6f5-bbbbb")
    print(after.line("after"))
    assert before.bench.ttft is not None
    assert after.bench.ttft is not None
    # The typical request and the average one, not the tail: on 2 CPU cores a restarted real
    # vLLM's first batches can leave a p90 tail of seconds (seen: p50 1.29s -> 0.036s while
    # p90 went 1.36s -> 1.06s), which says nothing about the planned change.
    assert after.bench.ttft.p50 < before.bench.ttft.p50 * 0.7
    assert after.bench.ttft.mean < before.bench.ttft.mean * 0.7
    assert after.observation.ttft[90] < before.observation.ttft[90]


def test_one_sequence_slot_is_diagnosed_as_queueing_and_more_slots_cut_real_ttft(
    vllm_py: Path, tiny_model: Path, prometheus: PrometheusRunner
) -> None:
    load = BenchConfig(url="http://127.0.0.1:1", concurrency=6, prompt_tokens=64,
                       output_tokens=48, duration=25.0, timeout=120)  # fmt: skip
    _before_and_after(vllm_py, tiny_model, prometheus, ["--max-num-seqs", "1"], load,
                      target="500ms", allowed={"maxNumSeqs": {"min": 1, "max": 64}},
                      bottleneck=Bottleneck.QUEUEING, knob=KnobName.MAX_NUM_SEQS)  # fmt: skip


def test_long_shared_prompts_without_prefix_caching_are_diagnosed_and_caching_cuts_real_ttft(
    vllm_py: Path, tiny_model: Path, prometheus: PrometheusRunner
) -> None:
    load = BenchConfig(url="http://127.0.0.1:1", concurrency=1, prompt_tokens=1800,
                       shared_prefix_tokens=1700, output_tokens=8, duration=25.0,
                       timeout=120)  # fmt: skip
    _before_and_after(vllm_py, tiny_model, prometheus, ["--no-enable-prefix-caching"], load,
                      target="100ms", allowed={"prefixCaching": True},
                      bottleneck=Bottleneck.LONG_PREFILL, knob=KnobName.PREFIX_CACHING)  # fmt: skip
