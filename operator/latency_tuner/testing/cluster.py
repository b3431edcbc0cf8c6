"""The loop's cluster ports held in memory: Deployments as given (patches recorded, not
applied), node labels, LatencyTargets with their status. For unit tests of the loop's shell
(``controller.gather``, ``controller.Reconciler``) without an API server."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.ports import NodeGpu
from latency_tuner.core.cluster import ContainerConfig, PodFacts


@dataclass
class Patch:
    deployment: str
    container: str | None
    config: ContainerConfig
    gpu_resource: str


@dataclass
class StaticDeployments:
    """``ports.Deployments``: the Deployments of ``objects`` (by name), each with ``pods``."""

    objects: dict[str, dict[str, Any]]
    pods_of: dict[str, tuple[PodFacts, ...]] = field(default_factory=dict)
    patches: list[Patch] = field(default_factory=list)

    async def get(self, *, namespace: str, name: str) -> DeploymentView | None:
        obj = self.objects.get(name)
        return None if obj is None else DeploymentView(obj)

    async def pods(
        self, deployment: DeploymentView, *, container: str | None, gpu_resource: str
    ) -> tuple[PodFacts, ...]:
        return self.pods_of.get(deployment.name, ())

    async def patch_container(
        self,
        deployment: DeploymentView,
        *,
        container: str | None,
        config: ContainerConfig,
        gpu_resource: str,
        annotations: Mapping[str, str] | None = None,
    ) -> DeploymentView:
        self.patches.append(Patch(deployment.name, container, config, gpu_resource))
        return deployment


@dataclass
class StaticNodes:
    """``ports.Nodes``: the GPU labels of the nodes given, by name."""

    gpus_of: Mapping[str, NodeGpu]
    reads: int = 0

    async def gpus(self, names: Iterable[str]) -> list[NodeGpu]:
        self.reads += 1
        return [self.gpus_of[n] for n in sorted(set(names)) if n in self.gpus_of]


@dataclass
class StaticLatencyTargets:
    """``ports.LatencyTargets``: the objects given; ``write_status`` keeps the last status."""

    items: Sequence[dict[str, Any]] = ()
    written: list[LatencyTargetStatus] = field(default_factory=list)

    async def get(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        found = [i for i in self.items if i["metadata"]["name"] == name]
        return found[0] if found else None

    async def list(self, *, namespace: str) -> list[dict[str, Any]]:
        return list(self.items)

    async def write_status(
        self, *, namespace: str, name: str, status: LatencyTargetStatus
    ) -> Mapping[str, Any]:
        self.written.append(status)
        return {}
