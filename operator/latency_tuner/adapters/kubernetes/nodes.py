"""GPU facts from node labels (NVIDIA GPU feature discovery and our own override labels)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from latency_tuner.adapters.kubernetes.client import Calls, NotFound, Rest, path
from latency_tuner.controller.ports import NodeGpu

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
# No standard label tells NVLink from PCIe; admins (or the sandbox) can say so with this one.
INTERCONNECT_LABEL = "latencytuner.io/gpu-interconnect"


class Nodes:
    def __init__(self, api_client: Any, *, calls: Calls | None = None) -> None:
        self._calls = calls or Calls("nodes", workers=1)
        self._rest = Rest(api_client)

    async def gpus(self, names: Iterable[str]) -> list[NodeGpu]:
        """GPU labels of the named nodes (missing nodes are skipped)."""
        out = []
        for name in sorted(set(names)):
            try:
                node = await self._calls.run(self._rest, "GET", path("api", "v1", "nodes", name))
            except NotFound:
                continue
            labels = node["metadata"].get("labels") or {}
            count = labels.get(GPU_COUNT_LABEL)
            out.append(
                NodeGpu(
                    node=name,
                    product=labels.get(GPU_PRODUCT_LABEL),
                    count=int(count) if count and count.isdigit() else None,
                    interconnect=labels.get(INTERCONNECT_LABEL),
                )
            )
        return out


__all__ = ["NodeGpu", "Nodes"]
