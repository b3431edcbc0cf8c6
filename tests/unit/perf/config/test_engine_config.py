"""A valid command line becomes an engine configuration with vLLM V1's effective values."""

from __future__ import annotations

import json

import pytest

from latency_tuner.perf.config import EngineConfig, build_engine_config
from latency_tuner.vllm.args import VllmCommandLine

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def start(model: str, *args: str, gpu: str = "H100-SXM", num_gpus: int = 1) -> EngineConfig:
    return build_engine_config(
        VllmCommandLine.parse(None, [model, *args]), gpu=gpu, num_gpus=num_gpus
    )


def test_v1_defaults_on_an_h100() -> None:
    config = start(LLAMA_8B)
    assert config.prefix_caching is True
    assert config.chunked_prefill is True
    assert config.max_num_batched_tokens == 8192
    assert config.max_num_seqs == 1024
    assert config.gpu_memory_utilization == 0.92
    assert config.max_model_len == 131072
    assert config.block_size == 16
    assert (config.tp, config.pp, config.kv_dtype, config.weight_dtype) == (1, 1, "bf16", "bf16")
    assert config.served_model_name == LLAMA_8B
    assert config.spec is None


@pytest.mark.parametrize("gpu", ["A100-80G", "L40S"])
def test_a100_and_smaller_gpus_get_the_small_batch_defaults(gpu: str) -> None:
    config = start(LLAMA_8B, "--max-model-len", "16384", gpu=gpu)
    assert (config.max_num_batched_tokens, config.max_num_seqs) == (2048, 256)


def test_an_h100_holds_about_450k_tokens_of_llama_8b_kv_cache() -> None:
    # vLLM reports ~28k blocks (~450k tokens) for Llama-3.1-8B on one H100 at 0.92.
    assert 400_000 < start(LLAMA_8B).kv_cache_tokens < 500_000


def test_an_fp8_kv_cache_about_doubles_the_blocks() -> None:
    ratio = (
        start(LLAMA_8B, "--kv-cache-dtype", "fp8").num_gpu_blocks / start(LLAMA_8B).num_gpu_blocks
    )
    assert ratio == pytest.approx(2.0, abs=0.01)


def test_fp8_weights_leave_more_room_for_kv_cache() -> None:
    # 8 of the 15 GiB of BF16 weights become free: ~58 -> ~65 GiB of KV cache.
    assert start(LLAMA_8B, "-q", "fp8").num_gpu_blocks > 1.1 * start(LLAMA_8B).num_gpu_blocks


def test_more_memory_utilization_gives_more_blocks() -> None:
    low = start(LLAMA_8B, "--gpu-memory-utilization", "0.8").num_gpu_blocks
    assert start(LLAMA_8B, "--gpu-memory-utilization", "0.95").num_gpu_blocks > low


def test_cpu_offload_frees_gpu_memory_for_kv_cache() -> None:
    more = start(LLAMA_8B, "--cpu-offload-gb", "4").num_gpu_blocks
    assert more > start(LLAMA_8B).num_gpu_blocks


def test_tensor_parallelism_spreads_weights_and_kv_over_the_gpus() -> None:
    def tokens(tp: int) -> int:
        model = "meta-llama/Llama-3.1-70B-Instruct"
        return start(model, "-tp", str(tp), "--max-model-len", "16384", num_gpus=8).kv_cache_tokens

    # TP2 leaves ~4.5 GiB per GPU after 65.7 GiB of weights; TP4 ~37 GiB, for half the heads.
    assert 20_000 < tokens(2) < 40_000
    assert 400_000 < tokens(4) < 600_000


def test_flags_are_read_in_any_spelling() -> None:
    config = start(
        LLAMA_8B,
        "--max_num_seqs=64",
        "--max-num-batched-tokens",
        "4K",
        "--no-enable-prefix-caching",
        "--enforce-eager",
        "--served-model-name",
        "chat",
        "--max-model-len",
        "32k",
    )
    assert config.max_num_seqs == 64
    assert config.max_num_batched_tokens == 4096
    assert config.prefix_caching is False
    assert config.enforce_eager is True
    assert config.served_model_name == "chat"
    assert config.max_model_len == 32000


def test_chunked_prefill_off_defaults_the_batch_budget_to_the_model_length() -> None:
    config = start(LLAMA_8B, "--no-enable-chunked-prefill", "--max-model-len", "16384")
    assert config.chunked_prefill is False
    assert config.max_num_batched_tokens == 16384


@pytest.mark.parametrize(
    ("model", "weights", "method"),
    [
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "fp8", "fp8"),
        ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "int4", "awq"),
        ("Qwen/Qwen2.5-7B-Instruct-AWQ", "int4", "awq"),
        (LLAMA_8B, "bf16", None),
    ],
)
def test_the_checkpoint_decides_the_weight_dtype(
    model: str, weights: str, method: str | None
) -> None:
    config = start(model, "--max-model-len", "16384")
    assert (config.weight_dtype, config.quantization) == (weights, method)


def test_an_awq_checkpoint_accepts_the_awq_marlin_override() -> None:
    model = "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"
    assert start(model, "-q", "awq_marlin").quantization == "awq_marlin"


def test_quantization_fp8_on_a_bf16_checkpoint_quantizes_online() -> None:
    assert start(LLAMA_8B, "-q", "fp8").weight_dtype == "fp8"


def test_a_speculative_config_gives_method_tokens_and_acceptance() -> None:
    spec = json.dumps({"method": "eagle3", "model": "x/EAGLE3", "num_speculative_tokens": 4})
    config = build_engine_config(
        VllmCommandLine.parse(None, [LLAMA_8B, "--speculative-config", spec]),
        gpu="H100-SXM",
        num_gpus=1,
        spec_acceptance=0.5,
    )
    assert config.spec is not None
    assert (config.spec.method, config.spec.num_speculative_tokens) == ("eagle3", 4)
    assert config.spec.expected_tokens_per_step == pytest.approx(1.9375)


def test_a_draft_model_costs_its_share_of_the_target() -> None:
    spec = json.dumps({"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5})
    config = start(LLAMA_8B, "--speculative-config", spec)
    assert config.spec is not None
    assert config.spec.method == "draft_model"
    assert config.spec.draft_cost_fraction == pytest.approx(1.24 / 8.03)


def test_the_gpu_may_be_named_by_its_node_label() -> None:
    assert start(LLAMA_8B, gpu="NVIDIA-H100-80GB-HBM3").gpu.name == "H100-SXM"
