"""What the planner needs to know about the GPUs, from a product name.

Node labels (``nvidia.com/gpu.product``: "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB",
"NVIDIA-L40S") or a spec override ("H100-SXM", "h100") are normalised to one canonical name
with a few facts: architecture, memory, memory bandwidth, FP8 support, and the interconnect a
form factor implies. Figures are the dense data-sheet numbers of reference/effect_sizes.md.
Pure data and functions; it never imports the simulator (which has its own, richer model).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Interconnect = Literal["NVLink", "PCIe"]


class Architecture(StrEnum):
    VOLTA = "Volta"
    TURING = "Turing"
    AMPERE = "Ampere"
    ADA = "Ada"
    HOPPER = "Hopper"
    BLACKWELL = "Blackwell"


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


def _gpu(name: str, arch: Architecture, memory_gb: int, tbs: float, link: Interconnect) -> GpuFacts:
    return GpuFacts(name, arch, memory_gb, tbs, link)


_A, _H, _L, _B = Architecture.AMPERE, Architecture.HOPPER, Architecture.ADA, Architecture.BLACKWELL

KNOWN_GPUS: dict[str, GpuFacts] = {
    g.name: g
    for g in (
        _gpu("B200", _B, 180, 8.0, "NVLink"),
        _gpu("H200", _H, 141, 4.8, "NVLink"),
        _gpu("H200-NVL", _H, 141, 4.8, "NVLink"),
        _gpu("H100-SXM", _H, 80, 3.35, "NVLink"),
        _gpu("H100-NVL", _H, 94, 3.9, "NVLink"),
        _gpu("H100-PCIe", _H, 80, 2.0, "PCIe"),
        _gpu("A100-80G", _A, 80, 2.039, "NVLink"),
        _gpu("A100-40G", _A, 40, 1.555, "NVLink"),
        _gpu("A100-80G-PCIe", _A, 80, 1.935, "PCIe"),
        _gpu("A100-40G-PCIe", _A, 40, 1.555, "PCIe"),
        _gpu("L40S", _L, 48, 0.864, "PCIe"),
        _gpu("L40", _L, 48, 0.864, "PCIe"),
        _gpu("L4", _L, 24, 0.30, "PCIe"),
        _gpu("A10G", _A, 24, 0.60, "PCIe"),
        _gpu("A10", _A, 24, 0.60, "PCIe"),
        _gpu("T4", Architecture.TURING, 16, 0.32, "PCIe"),
        _gpu("V100-SXM", Architecture.VOLTA, 32, 0.90, "NVLink"),
        _gpu("V100-PCIe", Architecture.VOLTA, 32, 0.90, "PCIe"),
    )
}

# Product families, longest first so "L40S" wins over "L40" and "L4", "A100" over "A10".
_FAMILIES = (
    "GH200",
    "B200",
    "H200",
    "H100",
    "A100",
    "A10G",
    "A10",
    "L40S",
    "L40",
    "L4",
    "T4",
    "V100",
)
_NOISE = {"NVIDIA", "TESLA", "GEFORCE", "TENSOR", "CORE", "GPU"}


def normalize_gpu_product(product: str) -> str | None:
    """The canonical name of a GPU product label or a hand-written name; None if unknown.

    "NVIDIA-H100-80GB-HBM3" -> "H100-SXM" (the PCIe card is labelled "NVIDIA-H100-PCIe"),
    "NVIDIA-A100-SXM4-80GB" -> "A100-80G", "NVIDIA-A100-PCIE-40GB" -> "A100-40G-PCIe",
    "NVIDIA-L40S" -> "L40S". Names match the simulator's (``--sim-gpu``) where both know a GPU.
    """
    tokens = [t for t in re.split(r"[-_\s/]+", product.strip().upper()) if t and t not in _NOISE]
    family = next((f for f in _FAMILIES for t in tokens if _is_family(t, f)), None)
    if family is None:
        return None
    pcie = any(t.startswith("PCIE") for t in tokens)
    nvl = any(t == "NVL" or t.endswith("NVL") for t in tokens)
    memory = _memory_gb(tokens)
    if family == "GH200":
        return "H200"  # Grace Hopper: H100/H200-class HBM on one board; close enough for advice
    if family == "H200":
        return "H200-NVL" if nvl else "H200"
    if family == "H100":
        if nvl:
            return "H100-NVL"
        return "H100-PCIe" if pcie else "H100-SXM"
    if family == "A100":
        size = "40G" if memory == 40 else "80G"
        return f"A100-{size}-PCIe" if pcie else f"A100-{size}"
    if family == "V100":
        return "V100-PCIe" if pcie else "V100-SXM"
    return family


def _is_family(token: str, family: str) -> bool:
    # "H100" matches "H100" and "H100SXM5"; "A10" must not match "A100", nor "L40" "L40S".
    if not token.startswith(family):
        return False
    rest = token[len(family) :]
    return not rest[:1].isdigit() and not (family == "L40" and rest[:1] == "S")


def _memory_gb(tokens: list[str]) -> int | None:
    for token in tokens:
        match = re.fullmatch(r"(\d+)G[B]?", token)
        if match:
            return int(match.group(1))
    return None


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
