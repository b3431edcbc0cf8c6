"""Create, move and remove a trial's canary Deployment; shrink the main one while it runs.

Every step is idempotent, so a restarted operator calls the same function and lands in the
same place: ``ensure`` creates the canary if it is missing (zero replicas, the main
Deployment's template), moves its container with the rollout's own guarded patch if it is not
at the trial's configuration yet, and scales it to one pod. A Deployment that has the canary's
name but not this LatencyTarget as its controller is never touched.
"""

from __future__ import annotations

from typing import Any

from latency_tuner.adapters.kubernetes.client import (
    JSON_PATCH,
    Calls,
    KubernetesError,
    NotFound,
    Rest,
    namespaced,
)
from latency_tuner.adapters.kubernetes.deployments import Deployments, deployment_path
from latency_tuner.controller.deployment import DEFAULT_GPU_RESOURCE, DeploymentView
from latency_tuner.controller.errors import NameTaken
from latency_tuner.core.canary import Owner, canary_deployment, canary_name, is_canary_of
from latency_tuner.core.cluster import ContainerConfig


class CanaryNameTaken(KubernetesError, NameTaken):
    """A Deployment with the canary's name exists and is not this LatencyTarget's."""


class Canaries:
    def __init__(
        self,
        api_client: Any,
        deployments: Deployments | None = None,
        *,
        calls: Calls | None = None,
    ) -> None:
        self._calls = calls or Calls("canaries", workers=2)
        self._rest = Rest(api_client)
        self._deployments = deployments or Deployments(api_client)

    async def get(self, main: DeploymentView, owner: Owner) -> DeploymentView | None:
        name = canary_name(main.name, owner.name)
        try:
            obj = await self._calls.run(self._rest, "GET", deployment_path(main.namespace, name))
        except NotFound:
            return None
        if not is_canary_of(obj, main.name, owner):
            raise CanaryNameTaken(
                f"Deployment {main.namespace}/{name} exists and is not owned by "
                f"LatencyTarget {owner.name}: not touching it",
                status=409,
            )
        return DeploymentView(obj)

    async def ensure(
        self,
        main: DeploymentView,
        owner: Owner,
        *,
        container: str | None,
        config: ContainerConfig,
        gpu_resource: str = DEFAULT_GPU_RESOURCE,
        annotations: dict[str, str] | None = None,
    ) -> DeploymentView:
        """The canary at ``config`` with one replica, whatever state a previous call left."""
        canary = await self.get(main, owner)
        if canary is None:
            body = canary_deployment(main.obj, owner)
            obj = await self._calls.run(
                self._rest,
                "POST",
                namespaced("apps", "v1", main.namespace, "deployments"),
                body=body,
            )
            canary = DeploymentView(obj)
        current = canary.container_config(container, gpu_resource)
        if current.fingerprint() != config.fingerprint():
            canary = await self._deployments.patch_container(
                canary,
                container=container,
                config=config,
                gpu_resource=gpu_resource,
                annotations=annotations,
            )
        if canary.rollout().replicas != 1:
            canary = await self.scale(canary, 1)
        return canary

    async def scale(self, deployment: DeploymentView, replicas: int) -> DeploymentView:
        """Set ``spec.replicas``, guarded by the resourceVersion read (Conflict if stale)."""
        guard = {"op": "test", "path": "/metadata/resourceVersion"}
        ops = [
            {**guard, "value": deployment.resource_version},
            {"op": "replace", "path": "/spec/replicas", "value": replicas},
        ]
        obj = await self._calls.run(
            self._rest,
            "PATCH",
            deployment_path(deployment.namespace, deployment.name),
            body=ops,
            content_type=JSON_PATCH,
        )
        return DeploymentView(obj)

    async def remove(self, main: DeploymentView, owner: Owner) -> bool:
        """Delete the canary if it exists and is ours; True if one was deleted."""
        canary = await self.get(main, owner)
        if canary is None:
            return False
        try:
            await self._calls.run(
                self._rest,
                "DELETE",
                deployment_path(canary.namespace, canary.name),
                query={"propagationPolicy": "Background"},
            )
        except NotFound:
            return False
        return True
