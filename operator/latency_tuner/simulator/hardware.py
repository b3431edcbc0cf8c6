"""GPU specifications (dense peaks from the vendors' data sheets) and name lookup.

Pure data: no I/O. Efficiencies (achieved fractions of these peaks) live in ``cost.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["GPUS", "GpuSpec", "UnknownGpuError", "get_gpu"]

Link = Literal["NVLink", "PCIe"]


class UnknownGpuError(ValueError):
    """A GPU name that matches none of the known GPUs."""


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. Units: GB = 1e9 bytes, TB/s = 1e12 bytes/s, TFLOP/s = 1e12 FLOP/s."""

    name: str
    memory_gb: float  # marketed capacity
    hbm_tb_s: float  # peak memory bandwidth
    bf16_tflops: float  # dense
    fp8_tflops: float | None  # dense; None = no FP8 tensor cores (Ampere)
    link: Link  # GPU-to-GPU path used by tensor-parallel all-reduce
    link_gb_s: float  # per direction
    pcie_gb_s: float  # host link, used by CPU weight offload
    memory_gib: float  # what the driver reports (torch.cuda.mem_get_info total), GiB
    kernel_overhead_us: float  # fixed cost of one small (norm/rope/act) kernel inside a graph

    @property
    def supports_fp8(self) -> bool:
        return self.fp8_tflops is not None

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * 2**30


# memory_gib: 81559 MiB (H100 80GB), 143771 MiB (H200), 81920 MiB (A100 80GB),
# 46068 MiB (L40S), 23034 MiB (L4), 23028 MiB (A10G) as nvidia-smi reports them.
GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec("H200", 141, 4.8, 989, 1979, "NVLink", 450, 64, 140.4, 2.0),
        GpuSpec("H100-SXM", 80, 3.35, 989, 1979, "NVLink", 450, 64, 79.6, 2.0),
        GpuSpec("H100-PCIe", 80, 2.0, 756, 1513, "PCIe", 64, 64, 79.6, 2.0),
        GpuSpec("A100-80G", 80, 2.039, 312, None, "NVLink", 300, 32, 80.0, 3.5),
        GpuSpec("A100-80G-PCIe", 80, 1.935, 312, None, "PCIe", 32, 32, 80.0, 3.5),
        GpuSpec("L40S", 48, 0.864, 362, 733, "PCIe", 32, 32, 45.0, 3.0),
        GpuSpec("L4", 24, 0.30, 121, 242, "PCIe", 32, 32, 22.5, 3.0),
        GpuSpec("A10G", 24, 0.60, 70, None, "PCIe", 32, 32, 22.5, 4.0),
    )
}

# Normalised spellings (lowercase, no "nvidia", separators removed) -> canonical name. Covers the
# nvidia.com/gpu.product node label values and the short names used in reference data.
_ALIASES: dict[str, str] = {
    "h200": "H200",
    "h200sxm": "H200",
    "h200141gbhbm3e": "H200",
    "h100": "H100-SXM",
    "h100sxm": "H100-SXM",
    "h100sxm5": "H100-SXM",
    "h10080gbhbm3": "H100-SXM",
    "h100sxm580gb": "H100-SXM",
    "h100pcie": "H100-PCIe",
    "h10080gbpcie": "H100-PCIe",
    "h100pcie80gb": "H100-PCIe",
    "a100": "A100-80G",
    "a10080g": "A100-80G",
    "a100sxm": "A100-80G",
    "a10080gsxm": "A100-80G",
    "a100sxm480gb": "A100-80G",
    "a10080gbsxm": "A100-80G",
    "a10080gpcie": "A100-80G-PCIe",
    "a10080gbpcie": "A100-80G-PCIe",
    "a100pcie": "A100-80G-PCIe",
    "a100pcie80gb": "A100-80G-PCIe",
    "l40s": "L40S",
    "l4": "L4",
    "a10g": "A10G",
}


def _normalise(name: str) -> str:
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    return key.removeprefix("nvidia")


def get_gpu(name: str) -> GpuSpec:
    """The GPU called ``name`` (canonical name, short alias or node-label value, any case)."""
    key = _normalise(name)
    canonical = _ALIASES.get(key) or next((g for g in GPUS if _normalise(g) == key), None)
    if canonical is None:
        known = ", ".join(GPUS)
        raise UnknownGpuError(f"unknown GPU {name!r}; known GPUs: {known}")
    return GPUS[canonical]
