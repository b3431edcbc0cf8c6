"""``--enable-chunked-prefill``: split long prefills into chunks scheduled between decodes.

Switched on only (never off), when the spec allows it (``spec.knobs.chunkedPrefill``). Turned
on against prefill interference it comes with a chunk budget (``complete``): alone it keeps the
budget vLLM needed without chunking (at least max-model-len) or its large default (8192 on big
GPUs), and a long prompt still goes in one step that stalls every decode. The budget is
``CHUNKED_PREFILL_BUDGET`` (vLLM's optimization guide names 2048 for better ITL) within the
spec's max-num-batched-tokens bounds; a budget already written at or below it is kept. Pure.
"""

from __future__ import annotations

from dataclasses import replace

from latency_tuner.api.spec import Knobs
from latency_tuner.core.config_view import ConfigView, parse_int
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.knobs.base import Change, KnobClass, KnobName, ToggleKnob
from latency_tuner.vllm.args import VllmCommandLine

CHUNKED_PREFILL_BUDGET = 2048
BUDGET_FLAG = "max-num-batched-tokens"


class ChunkedPrefill(ToggleKnob):
    name = KnobName.CHUNKED_PREFILL
    flag = "enable-chunked-prefill"
    knob_class = KnobClass.SAFE
    what = "enable chunked prefill"

    def enabled(self, cv: ConfigView) -> bool:
        return cv.chunked_prefill

    def allowed(self, knobs: Knobs) -> bool:
        return knobs.chunked_prefill

    def complete(self, change: Change, cl: VllmCommandLine, knobs: Knobs) -> Change:
        bounds = knobs.max_num_batched_tokens
        if change.bottleneck is not Bottleneck.PREFILL_INTERFERENCE or bounds is None:
            return change
        budget = min(max(CHUNKED_PREFILL_BUDGET, bounds.min), bounds.max)
        written = parse_int(cl.get(BUDGET_FLAG))
        if written is not None and written <= budget:
            return change
        return replace(
            change,
            companions=((BUDGET_FLAG, str(budget)),),
            reason=f"{change.reason}; with max-num-batched-tokens {budget} so that each "
            "prefill chunk stalls the decodes for one short step",
        )


KNOB = ChunkedPrefill()
