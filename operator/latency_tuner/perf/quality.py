"""How much a lossy configuration changes what the simulated model answers.

A quantized checkpoint or an FP8 KV cache makes a real model's greedy output drift from the
16-bit model's: a share of the tokens differ. The simulator has no model, so it states that
share per configuration and the tokenizer replaces that share of output words, deterministically
per prompt and position (``tokenizer.output_text(..., altered=share)``). That is enough to test
a quality gate end to end: the same prompts at temperature 0 give the same answers on two
16-bit pods, and answers that differ in about ``share`` of their words on a lossy one.

The shares below are illustrative orders of magnitude, not measurements (int4 weights drift
most, FP8 weights and the FP8 KV cache less; speculative decoding verifies every draft token
against the target model, so it changes nothing). ``--sim-altered-share`` overrides them.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # config imports this module to resolve the share
    from latency_tuner.perf.config import KvDtype
    from latency_tuner.perf.models import WeightDtype

WEIGHT_DRIFT: dict[WeightDtype, float] = {"bf16": 0.0, "fp8": 0.02, "int4": 0.06}
KV_DRIFT: dict[KvDtype, float] = {"bf16": 0.0, "fp8": 0.01}


def altered_share(weights: WeightDtype, kv: KvDtype, override: float | None = None) -> float:
    """The share of output tokens that differ from the 16-bit model's at temperature 0."""
    if override is not None:
        if not 0.0 <= override <= 1.0:
            raise ValueError(f"altered share must be within [0, 1], got {override}")
        return override
    # Independent drifts: a token survives both with (1 - w)(1 - k).
    return 1.0 - (1.0 - WEIGHT_DRIFT[weights]) * (1.0 - KV_DRIFT[kv])
