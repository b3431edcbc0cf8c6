"""Engine configurations for the simulator's engine tests (real config code, small knobs)."""

from __future__ import annotations

import dataclasses
from typing import Any

from latency_tuner.perf.config import EngineConfig, build_engine_config
from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def engine_config(
    *flags: str, gpu: str = "H100-SXM", gpus: int = 1, **overrides: Any
) -> EngineConfig:
    """The config vLLM would start with for ``vllm serve MODEL *flags``, then ``overrides``
    (e.g. a tiny ``num_gpu_blocks``) applied on top."""
    cl = VllmCommandLine.parse(None, [MODEL, *flags])
    config = build_engine_config(cl, gpu=gpu, num_gpus=gpus)
    return dataclasses.replace(config, **overrides)


def words(count: int, start: int = 0) -> str:
    return " ".join(f"w{i}" for i in range(start, start + count))
