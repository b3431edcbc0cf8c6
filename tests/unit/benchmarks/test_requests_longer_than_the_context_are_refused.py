"""The benchmark's pods refuse a request longer than max-model-len, as vLLM's API server does
(HTTP 400 before the engine sees it), instead of handing the engine a request that can never
finish (the harder suite's foreign KV-pressure run crashed on one)."""

from __future__ import annotations

from pathlib import Path

from latency_tuner.cli.sim import parse_command_line
from latency_tuner.convergence.measure import Pod
from latency_tuner.convergence.scenario import load_scenario
from latency_tuner.convergence.world import Load, make_world
from latency_tuner.perf.config import build_engine_config

HARD = Path(__file__).resolve().parents[3] / "benchmarks" / "scenarios-hard"


def _pod(max_model_len: int) -> Pod:
    # Closed loop, 16 users, prompts around 9,000 tokens (spread 0.2) plus 400 output tokens.
    scenario = load_scenario(HARD / "g1-18-kv-pressure.yaml")
    world = make_world("matched", 0)
    load = Load(scenario.workload, world, seed=0, stream="t")
    flags = ["serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", str(max_model_len)]
    config = build_engine_config(parse_command_line(flags), gpu="H100-SXM", num_gpus=1)
    return Pod("llama-0", config, world, load, seed=0, started=0.0)


def test_requests_beyond_the_context_are_refused_and_the_rest_are_served() -> None:
    pod = _pod(9_500)
    pod.run_until(120.0)
    assert pod.refused > 0
    assert len(pod.engine.records) > 0
    # Nothing the engine holds is longer than the model: every request can finish.
    held = [*pod.engine.core.scheduler.running, *pod.engine.core.scheduler.waiting]
    assert all(r.num_prompt_tokens + r.max_tokens <= 9_500 for r in held)


def test_a_context_too_short_for_every_request_leaves_users_idle_not_a_hang() -> None:
    pod = _pod(2_048)
    pod.run_until(60.0)
    assert pod.refused >= 16
    assert pod.engine.records == []
