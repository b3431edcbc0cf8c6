"""What the planner needs to know about the GPUs, from a product name.

Node labels (``nvidia.com/gpu.product``: "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB",
"NVIDIA-L40S") or a spec override ("H100-SXM", "h100") are normalised to one canonical name
with a few facts: architecture, memory, memory bandwidth, FP8 support, and the interconnect a
form factor implies. Figures are the dense data-sheet numbers of reference/effect_sizes.md.
The figures come from the one GPU table (``latency_tuner.hardware``), which the simulator's cost
model reads too. Pure data and functions; it never imports the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from latency_tuner.hardware import GPUS, Architecture, Interconnect, normalize_gpu_product

__all__ = [
    "KNOWN_GPUS",
    "Architecture",
    "BandwidthClass",
    "GpuFacts",
    "HardwareInfo",
    "Interconnect",
    "normalize_gpu_product",
]


class BandwidthClass(StrEnum):
    """Memory bandwidth bands; decode speed (ITL) scales with them."""

    LOW = "low"  # GDDR: under 1 TB/s (L4, A10G, L40S, T4)
    MEDIUM = "medium"  # 1-3 TB/s (A100, H100 PCIe)
    HIGH = "high"  # HBM3 and newer: 3 TB/s and more (H100 SXM, H200, B200)


@dataclass(frozen=True)
class GpuFacts:
    name: str
    architecture: Architecture
    memory_gb: int
    bandwidth_tbs: float
    # The interconnect of this form factor when the node has several GPUs (SXM boards carry
    # NVLink; PCIe cards talk over PCIe unless bridged, which labels do not tell).
    interconnect: Interconnect

    @property
    def supports_fp8(self) -> bool:
        # FP8 tensor cores (and vLLM's FP8 KV cache / FP8 weights) need Ada, Hopper or newer.
        return self.architecture in (Architecture.ADA, Architecture.HOPPER, Architecture.BLACKWELL)

    @property
    def bandwidth_class(self) -> BandwidthClass:
        if self.bandwidth_tbs >= 3.0:
            return BandwidthClass.HIGH
        if self.bandwidth_tbs >= 1.0:
            return BandwidthClass.MEDIUM
        return BandwidthClass.LOW


# The planner's view of the one GPU table (latency_tuner.hardware).
KNOWN_GPUS: dict[str, GpuFacts] = {
    name: GpuFacts(name, g.architecture, round(g.memory_gb), g.hbm_tb_s, g.link)
    for name, g in GPUS.items()
}


@dataclass(frozen=True)
class HardwareInfo:
    """The GPUs a Deployment runs on, as far as the operator knows.

    ``gpu_product`` is the canonical name (``normalize_gpu_product``) or None when unknown;
    ``interconnect`` is what the spec or the node says, None when nobody said.
    """

    gpu_product: str | None = None
    interconnect: Interconnect | None = None
    gpus_per_node: int | None = None

    @classmethod
    def from_labels(
        cls,
        gpu_product: str | None,
        *,
        interconnect: Interconnect | None = None,
        gpus_per_node: int | None = None,
        override_product: str | None = None,
        override_interconnect: Interconnect | None = None,
    ) -> HardwareInfo:
        """From a node's product label and GPU count, with the spec's ``hardware`` overrides."""
        product = override_product or gpu_product
        return cls(
            gpu_product=normalize_gpu_product(product) if product else None,
            interconnect=override_interconnect or interconnect,
            gpus_per_node=gpus_per_node,
        )

    @property
    def facts(self) -> GpuFacts | None:
        return KNOWN_GPUS.get(self.gpu_product) if self.gpu_product else None

    @property
    def supports_fp8(self) -> bool | None:
        """FP8 KV cache and FP8 weights: True on Ada/Hopper/Blackwell, False on older, None if
        the GPU is unknown."""
        return None if self.facts is None else self.facts.supports_fp8

    @property
    def effective_interconnect(self) -> Interconnect | None:
        """What was said, else what the form factor implies (SXM boards carry NVLink)."""
        if self.interconnect is not None:
            return self.interconnect
        return None if self.facts is None else self.facts.interconnect

    @property
    def has_nvlink(self) -> bool:
        return self.effective_interconnect == "NVLink"

    @property
    def bandwidth_class(self) -> BandwidthClass | None:
        return None if self.facts is None else self.facts.bandwidth_class

    def higher_bandwidth_gpus(self) -> tuple[GpuFacts, ...]:
        """Known GPUs with at least 1.5x this one's memory bandwidth, fastest first (one name per
        bandwidth: "H200", not also "H200-NVL")."""
        if self.facts is None:
            return ()
        floor = self.facts.bandwidth_tbs * 1.5
        faster: dict[float, GpuFacts] = {}
        for gpu in KNOWN_GPUS.values():
            if gpu.bandwidth_tbs >= floor:
                faster.setdefault(gpu.bandwidth_tbs, gpu)
        return tuple(sorted(faster.values(), key=lambda g: -g.bandwidth_tbs))

    def describe(self) -> str:
        if self.facts is None:
            return self.gpu_product or "an unknown GPU"
        return f"{self.facts.name} ({self.facts.bandwidth_tbs:g} TB/s)"
