"""``--speculative-config``: propose several tokens per step and verify them in one pass.

Opt-in: the configs come from ``spec.knobs.speculativeDecoding.configs`` (passed through as
compact JSON with sorted keys, stable across runs). "Safe": verification keeps the target
model's outputs (greedy exactly, sampling in distribution). Its risk is load-dependent: it
helps at low concurrency and costs at high, so it is tried only while the running requests per
pod stay at or below ``maxConcurrency``, and only while none is set. Expected gain from
EAGLE-3 in vLLM: 2.03x at concurrency 1, 1.71x at 4, 1.66x at 16 (log-linear between); prompt
lookup (ngram, suffix) is credited half of that speed-up. Pure.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from typing import Any

from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Cause
from latency_tuner.core.knobs.base import BaseKnob, Context, KnobClass, KnobName, Option, Pull

SPEEDUPS = ((1.0, 2.03), (4.0, 1.71), (16.0, 1.66))  # (running requests, speed-up)
PROMPT_LOOKUP = ("ngram", "suffix")  # methods without a drafter: fewer tokens accepted


def speculative_json(config: dict[str, Any]) -> str:
    """The --speculative-config value: compact JSON with sorted keys (stable across runs)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def _speedup(concurrency: float) -> float:
    if concurrency <= SPEEDUPS[0][0]:
        return SPEEDUPS[0][1]
    for (c0, s0), (c1, s1) in itertools.pairwise(SPEEDUPS):
        if concurrency <= c1:
            t = math.log(concurrency / c0) / math.log(c1 / c0)
            return s0 + t * (s1 - s0)
    return SPEEDUPS[-1][1]


class SpeculativeDecoding(BaseKnob):
    name = KnobName.SPECULATIVE_DECODING
    flag = "speculative-config"
    knob_class = KnobClass.SAFE
    what = "enable speculative decoding"

    def effective(self, cv: ConfigView) -> str:
        return cv.speculative_config or "none"

    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str:
        spec = ctx.knobs.speculative_decoding
        if spec is None:
            return (
                "speculative decoding is not allowed: add configs to "
                "spec.knobs.speculativeDecoding to let the operator try it"
            )
        if ctx.view.speculative_config is not None:
            return []
        running = ctx.load.running
        if running is None:
            return "speculative decoding needs the running-requests metric to check concurrency"
        if running > spec.max_concurrency:
            return (
                f"speculative decoding is tried only at <= {spec.max_concurrency:g} running "
                f"requests per pod; observed {running:.1f}"
            )
        options: list[Option] = []
        for config in spec.configs:
            speedup = _speedup(running)
            if str(config.get("method", "")).lower() in PROMPT_LOOKUP:
                speedup = 1 + (speedup - 1) / 2
            options.append(
                Option(
                    speculative_json(config), 1 - 1 / speedup, note=f"{running:.1f} running per pod"
                )
            )
        return options


KNOB = SpeculativeDecoding()
