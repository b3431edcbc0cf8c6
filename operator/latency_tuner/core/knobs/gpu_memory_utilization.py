"""``--gpu-memory-utilization``: the share of GPU memory vLLM may use; what the weights and
activations leave of it is KV cache.

Raised only, in steps of ``GPU_MEMORY_STEP`` up to the spec's ceiling
(``spec.knobs.gpuMemoryUtilization.max``): more KV blocks admit more requests (queueing) and
preempt fewer (KV pressure). A value that fails to start (OOM) is marked incompatible by the
planner; this module never lowers it. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Cause
from latency_tuner.core.knobs.base import (
    BaseKnob,
    Context,
    KnobClass,
    KnobName,
    Option,
    Pull,
    format_number,
    off_limits,
)

GPU_MEMORY_STEP = 0.03  # about 3% of an 80 GB GPU: ~2.4 GB more KV cache per step


def next_gpu_memory_utilization(current: float, ceiling: float) -> float | None:
    """One step up, never above ``ceiling``; None when already there."""
    if current >= ceiling - 1e-9:
        return None
    return round(min(current + GPU_MEMORY_STEP, ceiling), 2)


class GpuMemoryUtilization(BaseKnob):
    name = KnobName.GPU_MEMORY_UTILIZATION
    flag = "gpu-memory-utilization"
    knob_class = KnobClass.SAFE
    what = "raise gpu-memory-utilization (more KV cache)"

    def number(self, cv: ConfigView) -> float | None:
        return cv.gpu_memory_utilization

    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str:
        ceiling = ctx.knobs.gpu_memory_utilization
        if ceiling is None:
            return off_limits(self.name)
        current = ctx.view.gpu_memory_utilization
        step = next_gpu_memory_utilization(current, ceiling.max)
        if step is None:
            return f"{self.name} is at its ceiling ({format_number(current)})"
        return [Option(format_number(step), pull.gain)]


KNOB = GpuMemoryUtilization()
