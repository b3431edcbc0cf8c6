"""Effective flag values after vLLM's defaults, size suffixes, and the configuration hash."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latency_tuner.vllm.args import VllmCommandLine
from latency_tuner.vllm.defaults import (
    Hardware,
    config_hash,
    default_value,
    effective_config,
    effective_value,
    parse_size,
    written_value,
)

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
H100 = Hardware(gpu_product="NVIDIA-H100-80GB-HBM3")
A100_80 = Hardware(gpu_product="NVIDIA-A100-SXM4-80GB")
L4 = Hardware(gpu_product="NVIDIA-L4")


def line(*args: str) -> VllmCommandLine:
    return VllmCommandLine.parse(None, [MODEL, *args])


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("2048", 2048),
        ("8k", 8000),
        ("8K", 8192),
        ("32k", 32000),
        ("25.6k", 25600),
        ("1m", 1_000_000),
        ("2M", 2 * 2**20),
        ("1g", 10**9),
        ("1G", 2**30),
        ("1t", 10**12),
        (" 4K ", 4096),
    ],
)
def test_sizes_read_like_vllm_reads_them(text: str, number: int) -> None:
    assert parse_size(text) == number


@pytest.mark.parametrize("text", ["1.5K", "abc", "8kb", ""])
def test_sizes_that_vllm_refuses_are_errors(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - int() and our own message both apply
        parse_size(text)


@pytest.mark.parametrize(
    ("hardware", "memory", "large"),
    [
        (H100, 80.0, True),
        (A100_80, 80.0, False),
        (Hardware(gpu_product="NVIDIA-A100-SXM4-40GB"), 40.0, False),
        (Hardware(gpu_product="NVIDIA H100 NVL"), 94.0, True),
        (Hardware(gpu_product="NVIDIA-H200"), 141.0, True),
        (L4, 24.0, False),
        (Hardware(gpu_product="Tesla-T4"), 16.0, False),
        (Hardware(gpu_product="AMD-Instinct-MI300X"), 192.0, True),
        (Hardware(gpu_memory_gib=96.0), 96.0, True),
        (Hardware(gpu_product="Mystery-GPU"), None, None),
        (Hardware(), None, None),
    ],
)
def test_gpu_memory_and_size_class_come_from_the_product_name(
    hardware: Hardware, memory: float | None, large: bool | None
) -> None:
    assert hardware.memory_gib() == memory
    assert hardware.is_large() is large


def test_v1_defaults_on_a_large_gpu() -> None:
    config = effective_config(line(), engine="v1", hardware=H100)
    assert config == {
        "enable-prefix-caching": True,
        "enable-chunked-prefill": True,
        "enforce-eager": False,
        "max-num-batched-tokens": 8192,
        "max-model-len": None,
        "max-num-seqs": 1024,
        "tensor-parallel-size": 1,
        "pipeline-parallel-size": 1,
        "data-parallel-size": 1,
        "gpu-memory-utilization": 0.92,
        "cpu-offload-gb": 0.0,
        "kv-cache-dtype": "auto",
        "quantization": None,
        "speculative-config": None,
    }


def test_v1_defaults_on_an_a100_are_the_small_gpu_ones() -> None:
    config = effective_config(line(), engine="v1", hardware=A100_80)
    assert config["max-num-batched-tokens"] == 2048
    assert config["max-num-seqs"] == 256


def test_v1_defaults_on_an_unknown_gpu_are_unknown() -> None:
    config = effective_config(line(), engine="v1")
    assert config["max-num-batched-tokens"] is None
    assert config["max-num-seqs"] is None


def test_v0_defaults() -> None:
    config = effective_config(line(), engine="v0", hardware=H100)
    assert config["enable-prefix-caching"] is False
    assert config["enable-chunked-prefill"] is False
    assert config["max-num-batched-tokens"] is None
    assert config["max-num-seqs"] == 256
    assert config["gpu-memory-utilization"] == 0.9


def test_v0_with_chunked_prefill_batches_512_tokens() -> None:
    config = effective_config(line("--enable-chunked-prefill"), engine="v0")
    assert config["max-num-batched-tokens"] == 512
    assert config["max-num-seqs"] == 256


def test_without_chunked_prefill_the_batch_is_the_model_length() -> None:
    config = effective_config(line("--no-enable-chunked-prefill"), engine="v1", hardware=H100)
    assert config["max-num-batched-tokens"] is None
    assert config["max-num-seqs"] == 1024


def test_max_num_seqs_never_exceeds_the_token_budget() -> None:
    config = effective_config(line("--max-num-batched-tokens", "512"), hardware=H100)
    assert config["max-num-seqs"] == 512
    assert default_value("max-num-seqs", hardware=H100, max_num_batched_tokens=100) == 100


def test_written_values_win_and_are_typed() -> None:
    config = effective_config(
        line(
            "--max-num-batched-tokens",
            "8k",
            "--max-num-seqs",
            "64",
            "--gpu-memory-utilization=0.85",
            "-tp",
            "2",
            "--kv-cache-dtype",
            "FP8",
            "--speculative-config",
            '{"num_speculative_tokens": 3, "method": "ngram"}',
            "--enforce-eager",
            "--max-model-len",
            "32k",
        ),
        hardware=L4,
    )
    assert config["max-num-batched-tokens"] == 8000
    assert config["max-num-seqs"] == 64
    assert config["gpu-memory-utilization"] == 0.85
    assert config["tensor-parallel-size"] == 2
    assert config["kv-cache-dtype"] == "fp8"
    assert config["speculative-config"] == '{"method":"ngram","num_speculative_tokens":3}'
    assert config["enforce-eager"] is True
    assert config["max-model-len"] == 32000


def test_values_that_do_not_parse_come_back_as_written() -> None:
    odd = line("--max-num-seqs", "$(SEQS)", "--speculative-config", "{oops", "--enforce-eager=x")
    assert written_value(odd, "max-num-seqs") == "$(SEQS)"
    assert written_value(odd, "speculative-config") == "{oops"
    assert written_value(odd, "enforce-eager") == "x"
    assert written_value(odd, "served-model-name") is None
    assert written_value(line("--port", "80"), "port") == "80"


def test_effective_value_takes_any_spelling() -> None:
    assert effective_value(line("-tp", "4"), "tp") == 4
    assert effective_value(line(), "max_num_seqs", hardware=H100) == 1024
    assert effective_value(line("--port", "80"), "port") == "80"
    assert effective_value(line(), "port") is None


def test_the_hash_is_short_hex_and_stable() -> None:
    digest = config_hash(line("--max-num-seqs", "64"), hardware=H100)
    assert len(digest) == 16
    int(digest, 16)
    assert digest == config_hash(line("--max-num-seqs", "64"), hardware=H100)
    assert len(config_hash(line(), length=8)) == 8


def test_the_hash_ignores_spelling_order_and_equals_form() -> None:
    a = line("--max-num-seqs", "64", "-tp", "2", "--port", "80", "--trust-remote-code")
    b = line(
        "--trust-remote-code=true", "--port=80", "--tensor_parallel_size=2", "--max_num_seqs=64"
    )
    assert config_hash(a, hardware=H100) == config_hash(b, hardware=H100)


def test_the_hash_ignores_writing_a_default_explicitly() -> None:
    explicit = line("--enable-prefix-caching", "--max-num-batched-tokens", "8192")
    assert config_hash(explicit, hardware=H100) == config_hash(line(), hardware=H100)


def test_the_hash_changes_with_a_tuning_value_a_model_or_another_flag() -> None:
    base = config_hash(line("--max-num-seqs", "64"), hardware=H100)
    assert config_hash(line("--max-num-seqs", "65"), hardware=H100) != base
    assert config_hash(line("--max-num-seqs", "64", "--port", "1"), hardware=H100) != base
    other = VllmCommandLine.parse(None, ["other/model", "--max-num-seqs", "64"])
    assert config_hash(other, hardware=H100) != base


def test_the_hash_folds_boolean_spellings_of_other_flags() -> None:
    assert config_hash(line("--no-trust-remote-code")) == config_hash(
        line("--trust-remote-code=false")
    )
    assert config_hash(line("--headless")) == config_hash(line("--headless=1"))
    assert config_hash(line("--headless=maybe")) != config_hash(line("--headless"))


@settings(max_examples=100)
@given(st.permutations([("--max-num-seqs", "64"), ("-tp", "2"), ("--port", "80"), ("--seed", "1")]))
def test_the_hash_is_the_same_for_every_order(pairs: list[tuple[str, str]]) -> None:
    shuffled = line(*[t for pair in pairs for t in pair])
    ordered = line("--max-num-seqs", "64", "-tp", "2", "--port", "80", "--seed", "1")
    assert config_hash(shuffled, hardware=L4) == config_hash(ordered, hardware=L4)
