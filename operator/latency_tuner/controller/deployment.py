"""A Deployment as read: the raw object and the facts the loop takes from it. Pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from latency_tuner.controller.errors import ContainerNotFound
from latency_tuner.core.cluster import ContainerConfig, PodFacts, RolloutFacts
from latency_tuner.core.rollout.facts import DEFAULT_GPU_RESOURCE
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine


@dataclass(frozen=True)
class DeploymentView:
    """A Deployment as read: raw object plus the facts we use."""

    obj: dict[str, Any]

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def resource_version(self) -> str:
        return str(self.obj["metadata"].get("resourceVersion", ""))

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.obj["metadata"].get("annotations") or {})

    @property
    def owner_references(self) -> list[dict[str, Any]]:
        return list(self.obj["metadata"].get("ownerReferences") or [])

    @property
    def controller(self) -> str | None:
        """``Kind/name`` of the controller that owns it (an InferenceService, ...), if any."""
        for ref in self.owner_references:
            if ref.get("controller"):
                return f"{ref.get('kind')}/{ref.get('name')}"
        return None

    @property
    def containers(self) -> list[dict[str, Any]]:
        return list(self.obj["spec"]["template"]["spec"].get("containers") or [])

    @property
    def match_labels(self) -> dict[str, str]:
        return dict((self.obj["spec"].get("selector") or {}).get("matchLabels") or {})

    def container_index(self, name: str | None) -> int:
        """The named container; without a name, the only container, or the only one of
        several that runs vLLM (a sidecar such as Envoy must never get vLLM's flags)."""
        containers = self.containers
        if name is None:
            if not containers:
                raise ContainerNotFound(f"Deployment {self.name} has no containers")
            if len(containers) == 1:
                return 0
            vllm = [i for i, c in enumerate(containers) if _runs_vllm(c)]
            names = ", ".join(str(c.get("name")) for c in containers)
            if len(vllm) == 1:
                return vllm[0]
            if not vllm:
                raise ContainerNotFound(
                    f"none of the containers of Deployment {self.name} ({names}) runs vLLM"
                )
            several = ", ".join(str(containers[i].get("name")) for i in vllm)
            raise ContainerNotFound(
                f"Deployment {self.name} has several containers that look like vLLM "
                f"({several}): name one in spec.targetRef.container"
            )
        for i, c in enumerate(containers):
            if c.get("name") == name:
                return i
        names = ", ".join(str(c.get("name")) for c in containers)
        raise ContainerNotFound(f"Deployment {self.name} has no container {name!r} (has: {names})")

    def container_config(
        self, name: str | None, gpu_resource: str = DEFAULT_GPU_RESOURCE
    ) -> ContainerConfig:
        return container_config(self.containers[self.container_index(name)], gpu_resource)

    def rollout(self, pods: tuple[PodFacts, ...] = ()) -> RolloutFacts:
        status = self.obj.get("status") or {}
        conditions = status.get("conditions") or []
        deadline = any(
            c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded"
            for c in conditions
        )
        return RolloutFacts(
            generation=int(self.obj["metadata"].get("generation", 0)),
            observed_generation=int(status.get("observedGeneration", 0)),
            replicas=int(self.obj["spec"].get("replicas", 1)),
            updated_replicas=int(status.get("updatedReplicas", 0)),
            ready_replicas=int(status.get("readyReplicas", 0)),
            available_replicas=int(status.get("availableReplicas", 0)),
            total_replicas=int(status.get("replicas", 0)),
            progress_deadline_exceeded=deadline,
            pods=pods,
        )


def container_config(container: dict[str, Any], gpu_resource: str) -> ContainerConfig:
    """The part of a container the operator may change, as written in the pod template."""
    limits = (container.get("resources") or {}).get("limits") or {}
    gpu = limits.get(gpu_resource)
    command = container.get("command")
    args = container.get("args")
    return ContainerConfig(
        command=tuple(command) if command is not None else None,
        args=tuple(args) if args is not None else None,
        image=str(container.get("image", "")),
        gpu_limit=int(gpu) if gpu is not None else None,
    )


__all__ = ["DEFAULT_GPU_RESOURCE", "DeploymentView", "container_config"]


def _runs_vllm(container: Mapping[str, Any]) -> bool:
    try:
        VllmCommandLine.of_container(
            container.get("command"), container.get("args"), image=container.get("image")
        )
    except NotVllmError:
        return False
    return True
