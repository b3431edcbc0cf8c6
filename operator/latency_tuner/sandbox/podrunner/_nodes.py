"""The sandbox's nodes: identical GPU machines, labelled as GPU feature discovery labels them.

Pure data and manifests; creating the Node objects is the runner's job.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Literal

Body = dict[str, Any]
GPU_RESOURCE = "nvidia.com/gpu"

# nvidia.com/gpu.product values GPU feature discovery writes for the simulator's GPUs.
_GPU_LABELS = {
    "H200": "NVIDIA-H200",
    "H100-SXM": "NVIDIA-H100-80GB-HBM3",
    "H100-PCIe": "NVIDIA-H100-PCIe",
    "A100-80G": "NVIDIA-A100-SXM4-80GB",
    "A100-80G-PCIe": "NVIDIA-A100-80GB-PCIe",
    "L40S": "NVIDIA-L40S",
    "L4": "NVIDIA-L4",
    "A10G": "NVIDIA-A10G",
}


def gpu_label_value(gpu: str) -> str:
    """The ``nvidia.com/gpu.product`` label value for a simulator GPU name."""
    return _GPU_LABELS.get(gpu, gpu)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class NodeHardware:
    """The sandbox's nodes: ``nodes`` identical machines with ``gpus`` GPUs of type ``gpu``."""

    gpu: str = "H100-SXM"
    gpus: int = 8
    interconnect: Literal["NVLink", "PCIe"] = "NVLink"
    nodes: int = 1

    def node_names(self) -> list[str]:
        return [f"sandbox-gpu-{i}" for i in range(self.nodes)]

    def node_manifest(self, name: str) -> Body:
        capacity = {"cpu": "64", "memory": "1Ti", "pods": "110", GPU_RESOURCE: str(self.gpus)}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": gpu_label_value(self.gpu),
                    "nvidia.com/gpu.count": str(self.gpus),
                    "latencytuner.io/gpu-interconnect": self.interconnect,
                },
            },
            "spec": {},
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": _now(),
                        "lastTransitionTime": _now(),
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "127.0.0.1"},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {"kubeletVersion": "v1.32.0-sandbox", "operatingSystem": "linux"},
            },
        }
