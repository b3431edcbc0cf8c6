"""Real-time behaviour of the simulator process: token pacing, startup failure, shutdown."""

from __future__ import annotations

import itertools
import statistics
import subprocess
import time

import httpx
from tests.integration.simulator.support import MODEL, running_sim, sim_command

from latency_tuner.perf.config import build_engine_config
from latency_tuner.perf.cost import CostModel
from latency_tuner.vllm.args import VllmCommandLine


def test_a_lone_streams_itl_matches_the_cost_model_within_ten_percent() -> None:
    flags = ["--max-model-len", "8192"]
    config = build_engine_config(VllmCommandLine.parse(None, [MODEL, *flags]), gpu="L40S",
                                 num_gpus=1)  # fmt: skip
    cost = CostModel(config)
    prompt, out = 200, 80
    modeled = [cost.step_time(decode_contexts=[prompt + i + 1], prefill_chunks=[])
               for i in range(out - 1)]  # fmt: skip
    assert min(modeled) >= 0.005
    with running_sim(MODEL, *flags, "--sim-gpu", "L40S") as sim:
        body = {"prompt": " ".join(f"w{i}" for i in range(prompt)), "max_tokens": out,
                "stream": True}  # fmt: skip
        arrivals: list[float] = []
        with httpx.stream("POST", f"{sim.url}/v1/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    arrivals.append(time.perf_counter())
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert len(gaps) == out - 1
    measured = statistics.mean(gaps)
    expected = statistics.mean(modeled)
    assert abs(measured - expected) / expected < 0.10, (measured, expected)
    assert abs(statistics.median(gaps) - expected) / expected < 0.10


def test_after_an_idle_spell_a_request_still_takes_its_full_modeled_time() -> None:
    flags = ["--max-model-len", "4096"]
    config = build_engine_config(VllmCommandLine.parse(None, [MODEL, *flags]), gpu="L40S",
                                 num_gpus=1)  # fmt: skip
    one_step = CostModel(config).step_time(decode_contexts=[], prefill_chunks=[(2, 0)])
    with running_sim(MODEL, *flags, "--sim-gpu", "L40S") as sim, httpx.Client() as client:
        for _ in range(3):
            time.sleep(0.01)  # shorter than the engine's catch-up window
            started = time.perf_counter()
            r = client.post(f"{sim.url}/v1/completions", json={"prompt": "a b", "max_tokens": 1})
            elapsed = time.perf_counter() - started
            assert r.status_code == 200
            assert one_step <= elapsed < one_step + 1.0  # the upper bound only guards hangs


def test_tensor_parallel_larger_than_the_gpus_fails_fast_with_vllms_message() -> None:
    started = time.monotonic()
    result = subprocess.run(
        sim_command(MODEL, "--tensor-parallel-size", "2", "--sim-gpus", "1", "--port", "1"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert time.monotonic() - started < 15
    assert "larger than the number of available GPUs (1)" in result.stderr


def test_sigterm_shuts_the_server_down_cleanly() -> None:
    with running_sim(MODEL, "--max-model-len", "4096") as sim:
        assert httpx.get(f"{sim.url}/health").status_code == 200
        code = sim.stop()
    assert code == 0


def test_served_model_name_and_legacy_metrics_reach_the_wire() -> None:
    with running_sim(
        "vllm", "serve", MODEL, "--served-model-name", "llama", "alias", "--max-model-len",
        "4096", "--sim-metrics-version", "legacy",
    ) as sim:  # fmt: skip
        ids = [card["id"] for card in httpx.get(f"{sim.url}/v1/models").json()["data"]]
        assert ids == ["llama", "alias"]
        r = httpx.post(f"{sim.url}/v1/completions", json={"model": "alias", "prompt": "a b"})
        assert r.status_code == 200
        assert r.json()["model"] == "llama"  # vLLM reports the first served name
        assert httpx.post(f"{sim.url}/v1/completions",
                          json={"model": MODEL, "prompt": "a"}).status_code == 404  # fmt: skip
        text = httpx.get(f"{sim.url}/metrics").text
        assert 'vllm:time_per_output_token_seconds_count{engine="0",model_name="llama"}' in text
        assert "vllm:inter_token_latency_seconds" not in text
