"""The simulator's view of the GPU table: ``latency_tuner.hardware`` is the one table (specs,
achieved efficiencies, name lookup), shared with the operator's ``core.hardware``.

Pure data: no I/O.
"""

from __future__ import annotations

from latency_tuner.hardware import GPUS, GpuSpec, UnknownGpuError, get_gpu

__all__ = ["GPUS", "GpuSpec", "UnknownGpuError", "get_gpu"]
