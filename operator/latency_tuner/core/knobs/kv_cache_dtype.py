"""``--kv-cache-dtype``: store the KV cache in FP8 instead of the model's dtype.

Lossy and opt-in: tried only with the dtypes listed in ``spec.knobs.kvCacheDtype``, only while
the cache is still ``auto``, and only on GPUs with FP8 support (Ada, Hopper or newer; an
unknown GPU is given the benefit of the doubt, a known one without FP8 is refused). It doubles
the KV capacity (KV pressure) and halves the KV bytes each decode step reads, which matters
with long contexts only: ``prior`` follows vLLM's figures (8B, batch 32: ITL -27% at 8k
context, -40% at 32k, about 0 short or at batch 1). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Cause
from latency_tuner.core.knobs.base import BaseKnob, Context, KnobClass, KnobName, Option, Pull
from latency_tuner.core.load import Load

LONG_CONTEXT = 2048  # tokens of context below which FP8 KV barely changes decode time
SMALL_BATCH = 4  # running requests per pod below which KV reads are a small part of a step


class KvCacheDtype(BaseKnob):
    name = KnobName.KV_CACHE_DTYPE
    flag = "kv-cache-dtype"
    knob_class = KnobClass.LOSSY
    what = "quantize the KV cache"

    def effective(self, cv: ConfigView) -> str:
        return cv.kv_cache_dtype

    def prior(self, load: Load) -> float:
        """The decode-time gain of FP8 KV for the window's context length and batch."""
        context = load.context_tokens
        if context is None or context < LONG_CONTEXT:
            return 0.0
        gain = 0.15 if context < 8192 else 0.27 if context < 32768 else 0.4
        small_batch = load.running is not None and load.running < SMALL_BATCH
        return gain / 2 if small_batch else gain

    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str:
        if not ctx.knobs.kv_cache_dtype:
            return (
                "FP8 KV cache is not allowed: list fp8 in spec.knobs.kvCacheDtype to let the "
                "operator try it"
            )
        if ctx.view.kv_cache_dtype != "auto":
            return []
        if ctx.hardware.supports_fp8 is False:
            return (
                f"FP8 KV cache needs an Ada, Hopper or newer GPU; {ctx.hardware.describe()} "
                "has no FP8 support"
            )
        return [Option(dtype, pull.gain) for dtype in ctx.knobs.kv_cache_dtype]


KNOB = KvCacheDtype()
