"""Read a Deployment's vLLM container and rollout, and change that container by JSON patch.

Every write is a JSON patch that first ``test``s the Deployment's ``resourceVersion``: if anyone
changed the Deployment since we read it, the patch fails with ``Conflict`` instead of
overwriting their change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latency_tuner.adapters.kubernetes.client import JSON_PATCH, Calls, NotFound, Rest, namespaced
from latency_tuner.controller.attribution import FIELD_MANAGER, LEGACY_ANNOTATIONS
from latency_tuner.controller.deployment import (
    DEFAULT_GPU_RESOURCE,
    DeploymentView,
    container_config,
)
from latency_tuner.controller.errors import ContainerNotFound
from latency_tuner.core.canary import pod_selector
from latency_tuner.core.cluster import ContainerConfig, PodFacts, container_patch

VLLM_PORT = 8000  # vLLM's default --port
# Waiting reasons that mean a container will not start by itself.
_STUCK = {
    "CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
    "CreateContainerError", "InvalidImageName", "RunContainerError",
}  # fmt: skip


def deployment_path(namespace: str, name: str) -> str:
    """The API path of a Deployment."""
    return namespaced("apps", "v1", namespace, "deployments", name)


class Deployments:
    """Deployment reads and guarded patches; blocking calls run in a thread."""

    def __init__(self, api_client: Any, *, calls: Calls | None = None) -> None:
        self._calls = calls or Calls("deployments", workers=4)
        self._rest = Rest(api_client)

    async def get(self, *, namespace: str, name: str) -> DeploymentView | None:
        try:
            obj = await self._calls.run(self._rest, "GET", deployment_path(namespace, name))
        except NotFound:
            return None
        return DeploymentView(obj)

    async def pods(
        self, deployment: DeploymentView, *, container: str | None, gpu_resource: str
    ) -> tuple[PodFacts, ...]:
        # A canary's pods carry the main pods' labels: the main Deployment's own exclude them.
        selector = pod_selector(deployment.match_labels)
        listing = await self._calls.run(
            self._rest,
            "GET",
            namespaced("", "v1", deployment.namespace, "pods"),
            query={"labelSelector": selector},
        )
        return tuple(
            pod_facts(p, container, gpu_resource)
            for p in listing.get("items", [])
            if not p["metadata"].get("deletionTimestamp")
        )

    async def patch_container(
        self,
        deployment: DeploymentView,
        *,
        container: str | None,
        config: ContainerConfig,
        gpu_resource: str = DEFAULT_GPU_RESOURCE,
        annotations: Mapping[str, str] | None = None,
    ) -> DeploymentView:
        """Set the container's command/args/image/GPU limit to ``config`` and the Deployment's
        ``annotations`` (who changed it and why; 0.1.0's ``LEGACY_ANNOTATIONS`` go), as field
        manager ``latency-tuner``, guarded by the resourceVersion read. Raises ``Conflict`` if
        the Deployment changed meanwhile."""
        ops = [
            {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": deployment.resource_version,
            },
            *container_patch(
                deployment.obj,
                deployment.container_index(container),
                config,
                gpu_resource,
                annotations or {},
                retired=LEGACY_ANNOTATIONS if annotations else (),
            ),
        ]
        obj = await self._calls.run(
            self._rest,
            "PATCH",
            deployment_path(deployment.namespace, deployment.name),
            query={"fieldManager": FIELD_MANAGER},
            body=ops,
            content_type=JSON_PATCH,
        )
        return DeploymentView(obj)


def pod_facts(pod: dict[str, Any], container: str | None, gpu_resource: str) -> PodFacts:
    spec_containers = pod.get("spec", {}).get("containers") or []
    spec = next(
        (c for c in spec_containers if container is None or c.get("name") == container),
        None,
    )
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    status: dict[str, Any] = next(
        (s for s in statuses if spec is not None and s.get("name") == spec.get("name")),
        {},
    )
    restarts = int(status.get("restartCount", 0))
    problem = None
    waiting = (status.get("state") or {}).get("waiting") or {}
    last = (status.get("lastState") or {}).get("terminated") or {}
    if waiting.get("reason") in _STUCK:
        problem = str(waiting["reason"])
        if last.get("reason"):
            problem += f" (last exit: {last['reason']}, code {last.get('exitCode')})"
    elif last.get("reason") == "OOMKilled":
        problem = "OOMKilled"
    elif (pod.get("status") or {}).get("phase") == "Failed":
        problem = "pod Failed"
    conditions = (pod.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    unschedulable = any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in conditions
    )
    annotations = pod["metadata"].get("annotations") or {}
    port = annotations.get("prometheus.io/port")
    if port is None and spec is not None:
        ports = spec.get("ports") or []
        named = [p for p in ports if p.get("name") in ("http", "metrics")]
        port = (named or ports or [{"containerPort": VLLM_PORT}])[0].get("containerPort")
    return PodFacts(
        name=str(pod["metadata"]["name"]),
        ip=(pod.get("status") or {}).get("podIP"),
        metrics_port=int(port) if port is not None and str(port).isdigit() else None,
        metrics_path=str(annotations.get("prometheus.io/path", "/metrics")),
        node=pod.get("spec", {}).get("nodeName"),
        ready=ready,
        unschedulable=unschedulable,
        restarts=restarts,
        problem=problem,
        config_fingerprint=container_config(spec, gpu_resource).fingerprint() if spec else None,
    )


__all__ = [
    "DEFAULT_GPU_RESOURCE",
    "ContainerNotFound",
    "DeploymentView",
    "Deployments",
    "container_config",
    "pod_facts",
]
