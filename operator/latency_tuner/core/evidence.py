"""The vocabulary of a diagnosis: bottlenecks, rule-out findings, causes and evidence.

Values only, shared by the diagnosis, the knob candidates and the planner. No logic here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from latency_tuner.core.score import LABELS, ObjectiveName


class Bottleneck(StrEnum):
    """The stage that makes an objective miss its target (DESIGN section 4)."""

    QUEUEING = "Queueing"  # TTFT: requests wait for a slot (max-num-seqs, KV blocks, replicas)
    LONG_PREFILL = "LongPrefill"  # TTFT: prefill compute of long prompts dominates
    DECODE_BANDWIDTH = "DecodeBandwidth"  # ITL: each decode step reads weights + KV from memory
    PREFILL_INTERFERENCE = "PrefillInterference"  # ITL tail: long prefills stall running decodes
    KV_CACHE_PRESSURE = "KVCachePressure"  # both: preemptions recompute prefills, KV near full
    NONE = "None"  # targets met, or nothing to act on

    @property
    def itl_side(self) -> bool:
        """A decode-side bottleneck (the "(ITL)" rows of the table): knobs help it by their
        decode-time gain, not their prefill-time one."""
        return self in (Bottleneck.DECODE_BANDWIDTH, Bottleneck.PREFILL_INTERFERENCE)


class Finding(StrEnum):
    """Deployment problems ruled out before any tuning (the guide's first step)."""

    NOT_VLLM = "NotVllm"  # the container does not run vLLM's server
    CPU_OFFLOAD = "CpuOffload"  # --cpu-offload-gb > 0 streams weights over PCIe every step
    EAGER_MODE = "EagerMode"  # --enforce-eager turns CUDA graphs off: slower decode steps
    NO_METRICS = "NoMetrics"  # nothing to measure in the window
    LOW_TRAFFIC = "LowTraffic"  # fewer requests than evaluation.minRequests: numbers are noisy


Comparison = Literal[">=", "<=", ">", "<"]


@dataclass(frozen=True)
class Evidence:
    """One measured fact behind the diagnosis, with the threshold it was compared to."""

    signal: str
    value: float | None  # None: nothing measured (an unknown quantile, a configuration fact)
    text: str
    threshold: float | None = None
    comparison: Comparison | None = None
    unit: str | None = None


@dataclass(frozen=True)
class Cause:
    """Why one objective misses: its bottleneck, how far over it is (observed / threshold)."""

    objective: ObjectiveName
    bottleneck: Bottleneck
    ratio: float
    percentile: int

    @property
    def label(self) -> str:
        """ "TTFT p90"."""
        return f"{LABELS[self.objective]} p{self.percentile}"

    @property
    def violation(self) -> float:
        return max(0.0, self.ratio - 1.0)
