"""Configurations vLLM refuses to start with are refused, with vLLM-like messages."""

from __future__ import annotations

import json

import pytest

from latency_tuner.perf.config import EngineConfig, StartupError, build_engine_config
from latency_tuner.perf.models import UnknownModelError
from latency_tuner.simulator.hardware import UnknownGpuError
from latency_tuner.vllm.args import VllmCommandLine

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"


def start(model: str, *args: str, gpu: str = "H100-SXM", num_gpus: int = 1) -> EngineConfig:
    return build_engine_config(
        VllmCommandLine.parse(None, [model, *args]), gpu=gpu, num_gpus=num_gpus
    )


def test_tp_larger_than_the_gpus_given_is_refused() -> None:
    with pytest.raises(StartupError, match=r"World size \(4\) is larger than .* GPUs \(2\)"):
        start(LLAMA_70B, "-tp", "4", num_gpus=2)


def test_tp_times_pp_larger_than_the_gpus_given_is_refused() -> None:
    with pytest.raises(StartupError, match=r"World size \(4\)"):
        start(LLAMA_8B, "-tp", "2", "-pp", "2", num_gpus=2)


def test_attention_heads_not_divisible_by_tp_are_refused() -> None:
    # Qwen2.5-7B has 28 attention heads.
    with pytest.raises(StartupError, match=r"attention heads \(28\) must be divisible .* \(8\)"):
        start("Qwen/Qwen2.5-7B-Instruct", "-tp", "8", num_gpus=8)


def test_kv_heads_that_neither_divide_nor_are_divided_by_tp_are_refused() -> None:
    # Qwen2.5-32B: 40 query heads and 8 KV heads; TP 5 divides 40 but not 8.
    with pytest.raises(StartupError, match=r"key/value heads \(8\)"):
        start("Qwen/Qwen2.5-32B-Instruct", "-tp", "5", num_gpus=5)


def test_weights_that_do_not_fit_say_how_many_gib_per_gpu_against_how_many() -> None:
    with pytest.raises(StartupError) as caught:
        start(LLAMA_70B)
    message = str(caught.value)
    assert "131.41 GiB of weights per GPU > 73.23 GiB available" in message
    assert "gpu_memory_utilization=0.92" in message


def test_weights_that_fit_only_with_more_memory_utilization_are_refused_below_it() -> None:
    # 70B FP8 on 2xL40S: ~34 GiB per GPU; fine at 0.92 of 45 GiB, not at 0.7.
    start(LLAMA_70B, "-tp", "2", "-q", "fp8", "--max-model-len", "8192", gpu="L40S", num_gpus=2)
    with pytest.raises(StartupError, match="GiB of weights per GPU"):
        start(LLAMA_70B, "-tp", "2", "-q", "fp8", "--gpu-memory-utilization", "0.7",
              gpu="L40S", num_gpus=2)  # fmt: skip


@pytest.mark.parametrize("gpu", ["A100-80G", "A10G", "A100-80G-PCIe"])
def test_an_fp8_kv_cache_on_a_gpu_without_fp8_is_refused(gpu: str) -> None:
    with pytest.raises(StartupError, match=r"FP8 KV cache needs compute capability >= 8\.9"):
        start("Qwen/Qwen2.5-7B-Instruct", "--kv-cache-dtype", "fp8", "--max-model-len", "4096",
              gpu=gpu)  # fmt: skip


def test_fp8_weights_on_ampere_run_weight_only_like_vllm_marlin() -> None:
    config = start(LLAMA_8B, "-q", "fp8", "--max-model-len", "8192", gpu="A100-80G")
    assert config.weight_dtype == "fp8"


def test_batched_tokens_below_max_model_len_without_chunked_prefill_are_refused() -> None:
    with pytest.raises(StartupError, match=r"max_num_batched_tokens \(2048\) is smaller than "
                                           r"max_model_len \(8192\)"):  # fmt: skip
        start(LLAMA_8B, "--no-enable-chunked-prefill", "--max-num-batched-tokens", "2048",
              "--max-model-len", "8192")  # fmt: skip


def test_batched_tokens_below_max_num_seqs_are_refused() -> None:
    with pytest.raises(StartupError, match=r"must be greater than or equal to max_num_seqs"):
        start(LLAMA_8B, "--max-num-batched-tokens", "256", "--max-num-seqs", "512")


def test_no_memory_left_for_kv_blocks_is_refused() -> None:
    # 8B BF16 (~15 GiB) on an L4 at 0.7 of 22.5 GiB leaves nothing after activations.
    with pytest.raises(StartupError, match="No available memory for the cache blocks"):
        start(LLAMA_8B, "--gpu-memory-utilization", "0.7", "--max-model-len", "4096", gpu="L4")


def test_a_max_model_len_the_kv_cache_cannot_hold_is_refused_with_the_estimate() -> None:
    # 8B on an L4 with its default 128k context: vLLM's well-known failure.
    with pytest.raises(StartupError, match=r"max seq len \(131072\).*estimated maximum model len"):
        start(LLAMA_8B, gpu="L4")


def test_a_max_model_len_above_the_models_is_refused() -> None:
    with pytest.raises(StartupError, match=r"max_model_len \(65536\) is greater than the derived"):
        start("Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "64K")


@pytest.mark.parametrize(
    ("model", "quantization", "checkpoint"),
    [
        ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "fp8", "awq"),
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "awq", "fp8"),
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "awq", "gptq"),
    ],
)
def test_a_quantization_that_conflicts_with_the_checkpoint_is_refused(
    model: str, quantization: str, checkpoint: str
) -> None:
    with pytest.raises(StartupError, match=rf"model config \({checkpoint}\) does not match .* "
                                           rf"\({quantization}\)"):  # fmt: skip
        start(model, "-q", quantization, "--max-model-len", "8192")


def test_awq_on_an_unquantized_checkpoint_finds_no_quantization_config() -> None:
    with pytest.raises(StartupError, match="Cannot find the config file for awq"):
        start(LLAMA_8B, "-q", "awq")


def test_an_unknown_quantization_is_an_invalid_choice() -> None:
    with pytest.raises(StartupError, match="invalid choice: 'int3'"):
        start(LLAMA_8B, "-q", "int3")


def test_cpu_offload_makes_a_model_fit_that_otherwise_would_not() -> None:
    with pytest.raises(StartupError, match="No available memory"):
        start(LLAMA_8B, "--max-model-len", "8192", "--gpu-memory-utilization", "0.7", gpu="L4")
    config = start(LLAMA_8B, "--max-model-len", "8192", "--gpu-memory-utilization", "0.7",
                   "--cpu-offload-gb", "6", gpu="L4")  # fmt: skip
    assert config.cpu_offload_gb == 6.0
    assert config.num_gpu_blocks > 0


def test_a_speculative_config_without_num_speculative_tokens_is_refused() -> None:
    spec = json.dumps({"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"})
    with pytest.raises(StartupError, match="num_speculative_tokens must be provided"):
        start(LLAMA_8B, "--speculative-config", spec)


def test_an_unknown_speculative_method_is_refused() -> None:
    spec = json.dumps({"method": "oracle", "num_speculative_tokens": 3})
    with pytest.raises(StartupError, match="Unsupported speculative method: 'oracle'"):
        start(LLAMA_8B, "--speculative-config", spec)


def test_an_unknown_model_is_refused_listing_the_known_families() -> None:
    with pytest.raises(UnknownModelError, match=r"known families .*Llama-3.1-8B.*Qwen2.5-32B"):
        start("google/gemma-2-9b-it")


def test_an_unknown_gpu_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(
        UnknownGpuError, match=r"unknown GPU 'TPU-v5'; known GPUs: B200, H200, H200-NVL"
    ):
        start(LLAMA_8B, gpu="TPU-v5")


def test_zero_max_num_seqs_is_refused() -> None:
    with pytest.raises(StartupError, match="must be at least 1"):
        start(LLAMA_8B, "--max-num-seqs", "0")
