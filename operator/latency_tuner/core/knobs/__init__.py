"""The knobs: what the operator can change, how risky each change is, which bottleneck pulls
which knob, and how to apply one change to a vLLM command line.

One module per knob (``prefix_caching``, ``chunked_prefill``, ``max_num_batched_tokens``,
``max_num_seqs``, ``gpu_memory_utilization``, ``quantization``, ``kv_cache_dtype``,
``speculative_decoding``, ``tensor_parallel``, and the deployment fixes ``cpu_offload`` and
``enforce_eager``), each with one ``KNOB`` implementing the ``Knob`` protocol of ``base``: its
flag and class, the values it offers for a pull, how it renders onto a command line, and how
its current value reads. ``registry.CATALOG`` holds them by name; ``table`` is DESIGN section
4's bottleneck -> knobs table as data, read by the candidates, the planner and the diagnosis.

``apply`` is pure: it returns the new command line, image and GPU limit and leaves patching
the Deployment to the shell. Nothing here ranks candidates or reads history (``core.candidates``
and ``core.planner`` do), and nothing here does I/O.
"""

from __future__ import annotations

from latency_tuner.core.knobs.base import (
    AppliedChange,
    Change,
    Knob,
    KnobClass,
    KnobName,
    format_number,
    ladder_in,
    next_rung,
    rungs_beyond,
    same_value,
)
from latency_tuner.core.knobs.chunked_prefill import CHUNKED_PREFILL_BUDGET
from latency_tuner.core.knobs.gpu_memory_utilization import (
    GPU_MEMORY_STEP,
    next_gpu_memory_utilization,
)
from latency_tuner.core.knobs.max_num_batched_tokens import BATCHED_TOKENS_LADDER
from latency_tuner.core.knobs.max_num_seqs import MAX_NUM_SEQS_LADDER
from latency_tuner.core.knobs.quantization import variant_flags
from latency_tuner.core.knobs.registry import CATALOG, class_of, costliest_class
from latency_tuner.core.knobs.tensor_parallel import TENSOR_PARALLEL_LADDER
from latency_tuner.vllm.args import VllmCommandLine

__all__ = [
    "BATCHED_TOKENS_LADDER",
    "CATALOG",
    "CHUNKED_PREFILL_BUDGET",
    "GPU_MEMORY_STEP",
    "MAX_NUM_SEQS_LADDER",
    "TENSOR_PARALLEL_LADDER",
    "AppliedChange",
    "Change",
    "Knob",
    "KnobClass",
    "KnobName",
    "apply",
    "class_of",
    "costliest_class",
    "format_number",
    "ladder_in",
    "next_gpu_memory_utilization",
    "next_rung",
    "rungs_beyond",
    "same_value",
    "variant_flags",
    "written_value",
]


def apply(change: Change, cl: VllmCommandLine) -> AppliedChange:
    """``cl`` with ``change`` applied. Pure; raises ValueError for a change it cannot apply."""
    applied = CATALOG[change.knob].render(change, cl)
    if not change.companions:
        return applied
    new = applied.command_line
    for flag, value in change.companions:
        new = new.with_value(flag, value)
    return AppliedChange(new, image=applied.image, gpu_limit=applied.gpu_limit)


def written_value(knob: KnobName, cl: VllmCommandLine) -> str | None:
    """The knob's value as the command line writes it (booleans as "true"/"false"); None
    when absent."""
    return CATALOG[knob].written(cl)
