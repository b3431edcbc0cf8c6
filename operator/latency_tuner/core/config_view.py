"""The vLLM settings the planner reasons about, as effective values.

A flag written on the command line wins; else the engine's own echo of its cache config
(``vllm:cache_config_info`` labels, when the window has them: the running server knows its
defaults better than we do); else vLLM's default for the hardware (``latency_tuner.vllm.
defaults``: V1 prefix caching and chunked prefill on; 8192 batched tokens and 1024 sequences on
GPUs of 70 GiB or more other than A100, else 2048 and 256). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.vllm import defaults
from latency_tuner.vllm.args import VllmCommandLine

DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # reference/vllm-metrics.md (0.9 in older releases)
FALLBACK_BATCHED_TOKENS = 2048
FALLBACK_MAX_NUM_SEQS = 256


@dataclass(frozen=True)
class ConfigView:
    """Effective values of the flags the knobs touch."""

    model: str | None
    max_num_batched_tokens: int
    max_num_seqs: int
    gpu_memory_utilization: float
    prefix_caching: bool
    chunked_prefill: bool
    kv_cache_dtype: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    cpu_offload_gb: float
    enforce_eager: bool
    speculative_config: str | None
    quantization: str | None


def parse_int(text: str | None) -> int | None:
    """vLLM's human-readable integers ("2048", "8k", "8K"); None when absent or unreadable."""
    if text is None:
        return None
    try:
        return defaults.parse_size(text)
    except ValueError:
        return None


def defaults_hardware(hardware: HardwareInfo) -> defaults.Hardware:
    facts = hardware.facts
    return defaults.Hardware(
        gpu_product=hardware.gpu_product,
        gpu_memory_gib=None if facts is None else float(facts.memory_gb),
    )


def _echo_bool(text: str | None) -> bool | None:
    if text is None:
        return None
    return {"true": True, "false": False}.get(text.strip().lower())


def _echo_float(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _typed(value: defaults.Value, kind: type[int] | type[float]) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # unknown default, or a written value that does not parse ("$(SEQS)")
    return kind(value)


def view(
    cl: VllmCommandLine, hardware: HardwareInfo, cache_config: Mapping[str, str] | None = None
) -> ConfigView:
    """The effective configuration of ``cl`` on ``hardware``."""
    echo = cache_config or {}
    config = defaults.effective_config(cl, hardware=defaults_hardware(hardware))

    def written(flag: str) -> bool:
        return defaults.written_value(cl, flag) is not None

    def boolean(flag: str, echo_key: str | None, fallback: bool) -> bool:
        value = config.get(flag)
        if not written(flag) and echo_key is not None:
            echoed = _echo_bool(echo.get(echo_key))
            value = echoed if echoed is not None else value
        return value if isinstance(value, bool) else fallback

    gpu_util = _typed(config.get("gpu-memory-utilization"), float)
    if not written("gpu-memory-utilization"):
        gpu_util = _echo_float(echo.get("gpu_memory_utilization")) or gpu_util
    kv_dtype = config.get("kv-cache-dtype")
    if not written("kv-cache-dtype") and echo.get("cache_dtype"):
        kv_dtype = echo["cache_dtype"]
    batched = _typed(config.get("max-num-batched-tokens"), int)
    seqs = _typed(config.get("max-num-seqs"), int)
    spec = config.get("speculative-config")
    quant = config.get("quantization")
    return ConfigView(
        model=cl.model,
        # Unknown defaults (an unknown GPU, chunking off: the model's length) fall back to
        # the small-GPU values, so a ladder still has a starting rung.
        max_num_batched_tokens=int(batched or FALLBACK_BATCHED_TOKENS),
        max_num_seqs=int(seqs or FALLBACK_MAX_NUM_SEQS),
        gpu_memory_utilization=gpu_util or DEFAULT_GPU_MEMORY_UTILIZATION,
        prefix_caching=boolean("enable-prefix-caching", "enable_prefix_caching", True),
        chunked_prefill=boolean("enable-chunked-prefill", None, True),
        kv_cache_dtype=str(kv_dtype or "auto"),
        tensor_parallel_size=int(_typed(config.get("tensor-parallel-size"), int) or 1),
        pipeline_parallel_size=int(_typed(config.get("pipeline-parallel-size"), int) or 1),
        cpu_offload_gb=_typed(config.get("cpu-offload-gb"), float) or 0.0,
        enforce_eager=config.get("enforce-eager") is True,
        speculative_config=None if spec is None else str(spec),
        quantization=None if quant is None else str(quant),
    )
