"""GPU specifications from the vendors' data sheets, the fractions of them vLLM's kernels achieve,
and the lookup from a node label or a short name to one canonical GPU.

Units: GB = 1e9 bytes, GiB = 2**30 bytes, TB/s = 1e12 bytes/s, TFLOP/s = 1e12 FLOP/s (dense, no
sparsity), link bandwidths per direction. Pure data: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

__all__ = [
    "GPUS",
    "Architecture",
    "GpuSpec",
    "Interconnect",
    "UnknownGpuError",
    "get_gpu",
    "normalize_gpu_product",
]

Interconnect = Literal["NVLink", "PCIe"]


class Architecture(StrEnum):
    VOLTA = "Volta"
    TURING = "Turing"
    AMPERE = "Ampere"
    ADA = "Ada"
    HOPPER = "Hopper"
    BLACKWELL = "Blackwell"


class UnknownGpuError(ValueError):
    """A GPU name that matches none of the known GPUs."""


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model: data-sheet peaks plus what vLLM's kernels achieve of them."""

    name: str
    architecture: Architecture
    memory_gb: float  # marketed capacity
    memory_gib: float  # what the driver reports (torch.cuda.mem_get_info total)
    hbm_tb_s: float  # peak memory bandwidth (HBM or GDDR)
    bf16_tflops: float  # dense tensor-core peak (FP16 on GPUs without BF16: Volta, Turing)
    fp8_tflops: float | None  # dense; None = no FP8 tensor cores
    sm_count: int
    boost_ghz: float
    link: Interconnect  # GPU-to-GPU path of tensor-parallel collectives
    link_gb_s: float  # per direction, per GPU
    # GPUs joined by ``link``: 8 on HGX/SXM boards, 2 or 4 for NVLink-bridged PCIe cards, 1 when
    # the GPUs only meet over PCIe. Collectives over more GPUs than this cross PCIe and the host.
    link_domain: int
    pcie_gb_s: float  # host link per direction: Gen3 x16 16, Gen4 32, Gen5 64
    tdp_w: int
    kernel_overhead_us: float  # fixed cost of one small (norm/rope/act) kernel inside a graph
    # Achieved fraction of ``hbm_tb_s`` when decode streams BF16 weights (GEMV). HBM3 with TMA
    # (Hopper, Blackwell) and GDDR6 reach ~0.78; Ampere's HBM2e GEMV kernels without TMA ~0.70.
    weight_bw_eff: float = 0.78
    # Sustained tensor-core clock under dense GEMMs / the boost clock the peak is quoted at. Cards
    # that hit their power cap during large GEMMs (L40S at 350 W, L4 at 72 W) run well below boost.
    tensor_clock_factor: float = 1.0

    @property
    def supports_fp8(self) -> bool:
        """FP8 tensor cores (FP8 weights and FP8 KV cache in vLLM): Ada, Hopper or newer."""
        return self.fp8_tflops is not None

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * 2**30

    @property
    def sm_cycles_per_s(self) -> float:
        """SM count x boost clock: what bounds work that is issue-limited rather than memory-
        or tensor-limited (e.g. converting FP8 weights in a GEMV)."""
        return self.sm_count * self.boost_ghz * 1e9


_V, _T, _A = Architecture.VOLTA, Architecture.TURING, Architecture.AMPERE
_L, _H, _B = Architecture.ADA, Architecture.HOPPER, Architecture.BLACKWELL

# Data sheets: NVIDIA HGX B200, H200 (SXM, NVL), H100 (SXM, NVL, PCIe), A100 (40/80 GB, SXM4 and
# PCIe), L40S, L40, L4, A10, AWS A10G, T4, V100 (SXM2, PCIe). memory_gib as nvidia-smi reports
# the total (e.g. 81559 MiB for an H100 80GB, 143771 MiB H200, 46068 MiB L40S).
GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec("B200", _B, 180, 179.1, 8.0, 2250, 4500, 148, 1.965, "NVLink", 900, 8, 64, 1000,
                2.0),
        GpuSpec("H200", _H, 141, 140.4, 4.8, 989, 1979, 132, 1.98, "NVLink", 450, 8, 64, 700, 2.0),
        GpuSpec("H200-NVL", _H, 141, 140.4, 4.8, 836, 1671, 132, 1.785, "NVLink", 450, 4, 64, 600,
                2.0),
        GpuSpec("H100-SXM", _H, 80, 79.6, 3.35, 989, 1979, 132, 1.98, "NVLink", 450, 8, 64, 700,
                2.0),
        GpuSpec("H100-NVL", _H, 94, 93.6, 3.9, 835, 1671, 132, 1.785, "NVLink", 300, 2, 64, 400,
                2.0),
        GpuSpec("H100-PCIe", _H, 80, 79.6, 2.0, 756, 1513, 114, 1.755, "PCIe", 64, 1, 64, 350,
                2.0),
        GpuSpec("A100-80G", _A, 80, 80.0, 2.039, 312, None, 108, 1.41, "NVLink", 300, 8, 32, 400,
                3.5, weight_bw_eff=0.70),
        GpuSpec("A100-40G", _A, 40, 40.0, 1.555, 312, None, 108, 1.41, "NVLink", 300, 8, 32, 400,
                3.5, weight_bw_eff=0.70),
        GpuSpec("A100-80G-PCIe", _A, 80, 80.0, 1.935, 312, None, 108, 1.41, "PCIe", 32, 1, 32, 300,
                3.5, weight_bw_eff=0.70),
        GpuSpec("A100-40G-PCIe", _A, 40, 40.0, 1.555, 312, None, 108, 1.41, "PCIe", 32, 1, 32, 250,
                3.5, weight_bw_eff=0.70),
        GpuSpec("L40S", _L, 48, 45.0, 0.864, 362, 733, 142, 2.52, "PCIe", 32, 1, 32, 350, 3.0,
                tensor_clock_factor=0.80),
        GpuSpec("L40", _L, 48, 45.0, 0.864, 181, 362, 142, 2.49, "PCIe", 32, 1, 32, 300, 3.0,
                tensor_clock_factor=0.85),
        GpuSpec("L4", _L, 24, 22.5, 0.30, 121, 242, 58, 2.04, "PCIe", 32, 1, 32, 72, 3.0,
                tensor_clock_factor=0.75),
        GpuSpec("A10G", _A, 24, 22.5, 0.60, 70, None, 80, 1.71, "PCIe", 32, 1, 32, 300, 4.0,
                weight_bw_eff=0.70),
        GpuSpec("A10", _A, 24, 22.5, 0.60, 125, None, 72, 1.695, "PCIe", 32, 1, 32, 150, 4.0,
                weight_bw_eff=0.70, tensor_clock_factor=0.85),
        GpuSpec("T4", _T, 16, 15.0, 0.32, 65, None, 40, 1.59, "PCIe", 16, 1, 16, 70, 5.0,
                weight_bw_eff=0.70, tensor_clock_factor=0.75),
        GpuSpec("V100-SXM", _V, 32, 31.7, 0.90, 125, None, 80, 1.53, "NVLink", 150, 8, 16, 300,
                5.0, weight_bw_eff=0.70),
        GpuSpec("V100-PCIe", _V, 32, 31.7, 0.90, 112, None, 80, 1.38, "PCIe", 16, 1, 16, 250, 5.0,
                weight_bw_eff=0.70),
    )
}  # fmt: skip

# Product families, longest first so "L40S" wins over "L40" and "L4", "A100" over "A10".
_FAMILIES = ("GH200", "B200", "H200", "H100", "A100", "A10G", "A10", "L40S", "L40", "L4", "T4",
             "V100")  # fmt: skip
_NOISE = {"NVIDIA", "TESLA", "GEFORCE", "TENSOR", "CORE", "GPU"}


def normalize_gpu_product(product: str) -> str | None:
    """The canonical name of a GPU product label or a hand-written name; None if unknown.

    "NVIDIA-H100-80GB-HBM3" -> "H100-SXM" (the PCIe card is labelled "NVIDIA-H100-PCIe"),
    "NVIDIA-A100-SXM4-80GB" -> "A100-80G", "NVIDIA-A100-PCIE-40GB" -> "A100-40G-PCIe",
    "NVIDIA-L40S" -> "L40S", "h100_sxm" -> "H100-SXM". An A100 whose memory is not stated ("A100",
    "a100_sxm") resolves to the 40 GB card: the conservative reading (less memory, 24% less
    bandwidth than the 80 GB one), never an optimistic one. Node labels always state it.
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
        size = "80G" if memory == 80 else "40G"
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


def get_gpu(name: str) -> GpuSpec:
    """The GPU called ``name`` (canonical name, short alias or node-label value, any case)."""
    canonical = normalize_gpu_product(name)
    if canonical is None or canonical not in GPUS:
        known = ", ".join(GPUS)
        raise UnknownGpuError(f"unknown GPU {name!r}; known GPUs: {known}")
    return GPUS[canonical]
