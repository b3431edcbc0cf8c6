"""Properties of one engine step's cost that the scheduler relies on."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from latency_tuner.perf.config import EngineConfig, build_engine_config
from latency_tuner.perf.cost import CostModel, Efficiencies
from latency_tuner.vllm.args import VllmCommandLine


def config(*args: str, gpu: str = "H100-SXM", num_gpus: int = 8) -> EngineConfig:
    line = VllmCommandLine.parse(None, ["meta-llama/Llama-3.1-8B-Instruct", *args])
    return build_engine_config(line, gpu=gpu, num_gpus=num_gpus)


@pytest.fixture
def cost() -> CostModel:
    return CostModel(config("--max-model-len", "32768"))


def test_an_empty_step_costs_nothing(cost: CostModel) -> None:
    assert cost.step_time(decode_contexts=[], prefill_chunks=[]) == 0.0


def test_a_decode_step_costs_more_with_a_longer_context(cost: CostModel) -> None:
    short = cost.step_time(decode_contexts=[512] * 32, prefill_chunks=[])
    long = cost.step_time(decode_contexts=[16384] * 32, prefill_chunks=[])
    assert long > short


def test_a_decode_step_costs_more_with_more_sequences(cost: CostModel) -> None:
    steps = [cost.step_time(decode_contexts=[1024] * b, prefill_chunks=[]) for b in (1, 8, 64)]
    assert steps == sorted(steps)
    assert steps[0] > 0.004  # a batch-1 step still reads all 16 GB of weights


def test_a_prefill_chunk_late_in_a_long_prompt_costs_more_than_the_first(cost: CostModel) -> None:
    first = cost.step_time(decode_contexts=[], prefill_chunks=[(2048, 0)])
    late = cost.step_time(decode_contexts=[], prefill_chunks=[(2048, 16384)])
    assert late > first * 1.2


def test_decodes_riding_along_a_prefill_chunk_are_almost_free(cost: CostModel) -> None:
    alone = cost.step_time(decode_contexts=[], prefill_chunks=[(2048, 0)])
    mixed = cost.step_time(decode_contexts=[1024] * 16, prefill_chunks=[(2048, 0)])
    separate = alone + cost.step_time(decode_contexts=[1024] * 16, prefill_chunks=[])
    assert alone < mixed < separate


def test_verifying_draft_tokens_makes_the_step_longer(cost: CostModel) -> None:
    plain = cost.step_time(decode_contexts=[1024] * 8, prefill_chunks=[])
    verify = cost.step_time(decode_contexts=[1024] * 8, prefill_chunks=[], spec_tokens=3)
    assert verify > plain


def test_tokens_per_step_follow_the_acceptance_formula() -> None:
    spec = json.dumps({"method": "eagle3", "model": "x", "num_speculative_tokens": 3})
    line = VllmCommandLine.parse(
        None, ["meta-llama/Llama-3.1-8B-Instruct", "--speculative-config", spec]
    )
    cfg = build_engine_config(line, gpu="H100-SXM", num_gpus=1, spec_acceptance=0.8)
    assert CostModel(cfg).tokens_per_decode_step_expected() == pytest.approx(
        (1 - 0.8**4) / (1 - 0.8)
    )
    assert CostModel(config()).tokens_per_decode_step_expected() == 1.0


def test_the_kv_bytes_of_a_token_are_layers_times_kv_heads_times_head_dim() -> None:
    assert CostModel(config()).kv_bytes_per_token_per_gpu() == 32 * 2 * 8 * 128 * 2
    assert (
        CostModel(config("--kv-cache-dtype", "fp8")).kv_bytes_per_token_per_gpu()
        == 32 * 2 * 8 * 128
    )
    assert CostModel(config("-tp", "2")).kv_bytes_per_token_per_gpu() == 32 * 2 * 4 * 128 * 2


def test_kv_heads_replicate_when_tp_exceeds_them() -> None:
    line = VllmCommandLine.parse(None, ["meta-llama/Llama-3.1-70B-Instruct", "-tp", "8"])
    tp8 = CostModel(build_engine_config(line, gpu="H100-SXM", num_gpus=8))
    assert tp8.kv_bytes_per_token_per_gpu() == 80 * 2 * 1 * 128 * 2


def test_a_tp_all_reduce_over_pcie_is_slower_than_over_nvlink() -> None:
    nvlink = CostModel(config("-tp", "2")).allreduce_time(2048)
    pcie = CostModel(config("-tp", "2", gpu="L40S")).allreduce_time(2048)
    assert pcie > 3 * nvlink
    assert CostModel(config()).allreduce_time(2048) == 0.0


def test_a_small_nvlink_all_reduce_takes_microseconds() -> None:
    # 0.5 MB at TP2-8 on H100: 11-20 us published; ours must stay in that decade.
    for tp in ("2", "4", "8"):
        seconds = CostModel(config("-tp", tp)).allreduce_time(32)
        assert 5e-6 <= seconds <= 25e-6


def test_lower_bandwidth_efficiency_slows_decode() -> None:
    cfg = config()
    slow = CostModel(cfg, efficiencies=replace(Efficiencies(), weight_bw_bf16=0.6))
    normal = CostModel(cfg)
    one = {"decode_contexts": [1024], "prefill_chunks": []}
    assert slow.step_time(**one) > normal.step_time(**one)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tokens", "low", "high"),
    [(128, 0.25, 0.35), (256, 0.45, 0.55), (512, 0.6, 0.8), (4096, 0.7, 0.85)],
)
def test_achieved_gemm_efficiency_grows_with_tokens_like_the_published_h100_curve(
    tokens: int, low: float, high: float
) -> None:
    cost = CostModel(config())
    m = cost.config.model
    flops = 2.0 * tokens * m.layers * m.linear_params_per_layer
    achieved = flops / cost.linear_time(tokens) / (cost.config.gpu.bf16_tflops * 1e12)
    assert low <= achieved <= high
