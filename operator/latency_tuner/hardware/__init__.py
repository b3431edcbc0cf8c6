"""The one GPU table: data-sheet specs, achieved efficiencies and name resolution of every GPU
the operator and the simulator know.

``core.hardware`` (what the planner needs to know) and the simulator (its cost model) both read
it. Pure data and functions over the standard library: it must never import the simulator, the
operator's core, adapters or any client, and never do I/O.
"""

from latency_tuner.hardware.gpus import (
    GPUS,
    Architecture,
    GpuSpec,
    Interconnect,
    UnknownGpuError,
    get_gpu,
    normalize_gpu_product,
)

__all__ = [
    "GPUS",
    "Architecture",
    "GpuSpec",
    "Interconnect",
    "UnknownGpuError",
    "get_gpu",
    "normalize_gpu_product",
]
