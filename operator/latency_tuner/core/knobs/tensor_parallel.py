"""``--tensor-parallel-size``: split each layer over more GPUs of one node.

Costly and opt-in (``spec.knobs.tensorParallel``): each step reads a share of the weights per
GPU and the prefill compute splits, at the price of more GPUs per replica, so the change also
sets the container's GPU limit (tensor x pipeline size). Raised one rung of
``TENSOR_PARALLEL_LADDER`` at a time, up to the spec's ``maxSize`` and the GPUs per node. Its
all-reduces need NVLink: over PCIe it is refused unless ``force`` is set, and then expected to
keep only ``PCIE_TP_FACTOR`` of its gain. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from latency_tuner.api.spec import TensorParallel as TensorParallelSpec
from latency_tuner.core.config_view import ConfigView, parse_int
from latency_tuner.core.evidence import Cause
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs.base import (
    AppliedChange,
    BaseKnob,
    Change,
    Context,
    KnobClass,
    KnobName,
    Option,
    Pull,
    next_rung,
)
from latency_tuner.vllm.args import VllmCommandLine

TENSOR_PARALLEL_LADDER: tuple[int, ...] = (1, 2, 4, 8)
PCIE_TP_FACTOR = 0.3  # forced TP over PCIe keeps a fraction of its NVLink gain (effect sizes)


class TensorParallel(BaseKnob):
    name = KnobName.TENSOR_PARALLEL
    flag = "tensor-parallel-size"
    knob_class = KnobClass.COSTLY
    what = "raise tensor parallelism"

    def number(self, cv: ConfigView) -> float | None:
        return float(cv.tensor_parallel_size)

    def render(self, change: Change, cl: VllmCommandLine) -> AppliedChange:
        if change.to_value is None:
            return AppliedChange(cl.without(self.flag))
        size = parse_int(change.to_value)
        if size is None:
            raise ValueError(f"tensor-parallel size {change.to_value!r} is not a number")
        pipeline = parse_int(cl.get("pipeline-parallel-size")) or 1
        return AppliedChange(cl.with_value(self.flag, change.to_value), gpu_limit=size * pipeline)

    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str:
        tp = ctx.knobs.tensor_parallel
        if tp is None:
            return "tensor parallelism is not allowed (spec.knobs.tensorParallel)"
        gain = pull.gain
        if not ctx.hardware.has_nvlink:
            link = ctx.hardware.effective_interconnect or "unknown"
            if not allowed_on(tp, ctx.hardware):
                return (
                    f"tensor parallelism needs NVLink (interconnect: {link}); over PCIe its "
                    "all-reduces can make latency worse (set tensorParallel.force to try)"
                )
            gain *= PCIE_TP_FACTOR
        limit = min(tp.max_size, ctx.hardware.gpus_per_node or tp.max_size)
        rungs = [size for size in TENSOR_PARALLEL_LADDER if size <= limit]
        step = next_rung(rungs, ctx.view.tensor_parallel_size, +1)
        if step is None:
            return f"tensor parallelism is at its limit ({ctx.view.tensor_parallel_size} GPUs)"
        return [Option(str(step), gain)]


def allowed_on(tp: TensorParallelSpec | None, hardware: HardwareInfo) -> bool:
    """Whether the spec lets tensor parallelism be raised on this hardware at all: allowed, and
    over an NVLink-class interconnect unless ``force`` is set."""
    return tp is not None and (tp.force or hardware.has_nvlink)


KNOB = TensorParallel()
