"""``--enable-prefix-caching``: reuse the KV blocks of a prompt prefix already computed.

Switched on only (never off), when the spec allows it (``spec.knobs.prefixCaching``). It costs
under 1% when nothing is shared and skips the shared part of every prefill when something is
(RAG context, system prompts), which also frees KV blocks and queue slots. The table puts it
first for any TTFT-side breach with long prompts. Pure.
"""

from __future__ import annotations

from latency_tuner.api.spec import Knobs
from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.knobs.base import KnobClass, KnobName, ToggleKnob


class PrefixCaching(ToggleKnob):
    name = KnobName.PREFIX_CACHING
    flag = "enable-prefix-caching"
    knob_class = KnobClass.SAFE
    what = "enable prefix caching"

    def enabled(self, cv: ConfigView) -> bool:
        return cv.prefix_caching

    def allowed(self, knobs: Knobs) -> bool:
        return knobs.prefix_caching


KNOB = PrefixCaching()
