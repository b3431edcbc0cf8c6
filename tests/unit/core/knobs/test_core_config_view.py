"""Effective values: written flag, else the engine's config echo, else vLLM's default."""

from __future__ import annotations

from tests.unit.core.builders import A100, H100, command_line

from latency_tuner.core.config_view import parse_int, view
from latency_tuner.core.hardware import HardwareInfo


def test_defaults_follow_the_gpu_size() -> None:
    big, small = view(command_line(), H100), view(command_line(), A100)
    assert (big.max_num_batched_tokens, big.max_num_seqs) == (8192, 1024)
    assert (small.max_num_batched_tokens, small.max_num_seqs) == (2048, 256)
    assert big.prefix_caching
    assert big.chunked_prefill
    assert (big.kv_cache_dtype, big.tensor_parallel_size, big.cpu_offload_gb) == ("auto", 1, 0.0)
    assert big.enforce_eager is False
    assert big.speculative_config is None
    assert big.quantization is None


def test_an_unknown_gpu_falls_back_to_small_gpu_defaults() -> None:
    cv = view(command_line(), HardwareInfo())
    assert (cv.max_num_batched_tokens, cv.max_num_seqs) == (2048, 256)


def test_written_flags_win_in_any_spelling() -> None:
    cl = command_line(
        "--max_num_batched_tokens=8k",
        "--max-num-seqs",
        "64",
        "-tp",
        "2",
        "--kv-cache-dtype",
        "fp8",
        "--no-enable-prefix-caching",
        "--enforce-eager",
        "--cpu-offload-gb",
        "4",
        "-q",
        "awq",
        "--speculative-config",
        '{"method": "ngram"}',
    )
    cv = view(cl, H100)
    assert cv.max_num_batched_tokens == 8000
    assert cv.max_num_seqs == 64
    assert cv.tensor_parallel_size == 2
    assert cv.kv_cache_dtype == "fp8"
    assert cv.prefix_caching is False
    assert cv.enforce_eager is True
    assert cv.cpu_offload_gb == 4.0
    assert cv.quantization == "awq"
    assert cv.speculative_config == '{"method":"ngram"}'


def test_the_engine_echo_beats_defaults_but_not_written_flags() -> None:
    echo = {
        "enable_prefix_caching": "False",
        "gpu_memory_utilization": "0.9",
        "cache_dtype": "fp8_e5m2",
    }
    cv = view(command_line(), H100, echo)
    assert (cv.prefix_caching, cv.gpu_memory_utilization, cv.kv_cache_dtype) == (
        False,
        0.9,
        "fp8_e5m2",
    )
    written = view(command_line("--gpu-memory-utilization", "0.8"), H100, echo)
    assert written.gpu_memory_utilization == 0.8


def test_unreadable_values_fall_back_to_defaults() -> None:
    cl = command_line("--max-num-seqs", "$(SEQS)", "--gpu-memory-utilization", "lots")
    cv = view(cl, H100, {"enable_prefix_caching": "maybe", "gpu_memory_utilization": "x"})
    assert cv.max_num_seqs == 256  # written but unreadable: unknown, the small-GPU fallback
    assert cv.gpu_memory_utilization == 0.92
    assert cv.prefix_caching is True


def test_human_readable_sizes() -> None:
    assert parse_int("8k") == 8000
    assert parse_int("8K") == 8192
    assert parse_int(None) is None
    assert parse_int("lots") is None


def test_an_unreadable_echo_is_ignored() -> None:
    cv = view(command_line(), H100, {"gpu_memory_utilization": "x"})
    assert cv.gpu_memory_utilization == 0.92
