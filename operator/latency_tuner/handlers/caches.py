"""What a reconcile reads from memory instead of the API server: Deployments from kopf's watch
(an index), GPU node labels from a cache that re-reads a node after a while.

Deployments change whenever a rollout moves, so only a watch keeps them fresh; a read of one
the watch has not delivered yet (just created) goes to the API. Our own patch is remembered
until the watch delivers it, so the next round never sees the Deployment from before it.
Nodes are cluster-scoped and their GPU labels change only when a node is relabelled: a
cluster-wide watch of every node (and the right to it) would cost more than re-reading the few
nodes that run vLLM pods every few minutes, and would hold kopf's start while
``rbac.readNodes`` is off. Never decides anything; the writes go to the API adapters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import kopf

from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.ports import Deployments, NodeGpu, Nodes
from latency_tuner.core.cluster import ContainerConfig, PodFacts

INDEX = "deployment_index"  # the kwarg kopf passes the index under
NODE_TTL_SECONDS = 300.0

# (namespace, name) -> the Deployment objects of that key (one), as kopf's Index holds them.
DeploymentIndex = Mapping[tuple[str, str], Iterable[Mapping[str, Any]]]


def register(registry: kopf.OperatorRegistry) -> None:
    """Index the watched namespaces' Deployments by (namespace, name)."""

    @kopf.index("apps", "v1", "deployments", id=INDEX, registry=registry)
    def deployment_index(
        namespace: str | None, name: str | None, body: kopf.Body, **_: Any
    ) -> dict[tuple[str | None, str | None], dict[str, Any]]:
        return {(namespace, name): indexed(body)}


def indexed(body: Mapping[str, Any]) -> dict[str, Any]:
    """The Deployment as the index holds it: without ``managedFields``, which the API server
    writes on every object, nobody here reads, and which is often the larger part of a
    Deployment. kopf builds a new body per watch event and never changes an old one, so the
    rest is shared with it, not copied. (The annotations stay whole: a patch built from this
    view adds to them, and an empty map would be replaced.)"""
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k != "managedFields"}
    return {**body, "metadata": meta}


class IndexedDeployments:
    """``ports.Deployments``: reads from the index once ``attach``ed, writes to the API."""

    def __init__(self, api: Deployments) -> None:
        self.api = api
        self.index: DeploymentIndex | None = None
        self.reads_from_api = 0
        # (namespace, name) -> (resourceVersion our patch replaced, the Deployment it returned)
        self._written: dict[tuple[str, str], tuple[str, DeploymentView]] = {}

    def attach(self, kwargs: Mapping[str, Any]) -> None:
        """Take the index from a handler's kwargs (kopf hands indexes to handlers only)."""
        if self.index is None and INDEX in kwargs:
            self.index = kwargs[INDEX]

    async def get(self, *, namespace: str, name: str) -> DeploymentView | None:
        key = (namespace, name)
        found = None if self.index is None else self.index.get(key)
        obj = next(iter(found), None) if found is not None else None
        if obj is None:
            self.reads_from_api += 1
            return await self.api.get(namespace=namespace, name=name)
        view = DeploymentView(dict(obj))
        written = self._written.get(key)
        if written is not None:
            replaced, ours = written
            if view.resource_version == replaced:
                return ours  # the watch has not delivered our patch yet
            del self._written[key]
        return view

    async def pods(
        self, deployment: DeploymentView, *, container: str | None, gpu_resource: str
    ) -> tuple[PodFacts, ...]:
        return await self.api.pods(deployment, container=container, gpu_resource=gpu_resource)

    async def patch_container(
        self,
        deployment: DeploymentView,
        *,
        container: str | None,
        config: ContainerConfig,
        gpu_resource: str,
        annotations: Mapping[str, str] | None = None,
    ) -> DeploymentView:
        after = await self.api.patch_container(
            deployment,
            container=container,
            config=config,
            gpu_resource=gpu_resource,
            annotations=annotations,
        )
        self._written[(deployment.namespace, deployment.name)] = (
            deployment.resource_version,
            after,
        )
        return after


def _is_a_port(deployments: IndexedDeployments, nodes: CachedNodes) -> tuple[Deployments, Nodes]:
    """Never called: lets mypy hold both to the ports they stand in for (the memo is untyped)."""
    return deployments, nodes


class CachedNodes:
    """``ports.Nodes``: each node's GPU labels, read again after ``ttl`` seconds."""

    def __init__(
        self,
        api: Nodes,
        *,
        ttl: float = NODE_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.ttl = ttl
        self._clock = clock
        self._known: dict[str, tuple[float, NodeGpu | None]] = {}  # None: no such node

    async def gpus(self, names: Iterable[str]) -> list[NodeGpu]:
        now = self._clock()
        wanted = sorted(set(names))
        stale = [n for n in wanted if n not in self._known or now - self._known[n][0] >= self.ttl]
        if stale:
            fresh = {node.node: node for node in await self.api.gpus(stale)}
            for name in stale:
                self._known[name] = (now, fresh.get(name))
        return [gpu for n in wanted if (gpu := self._known[n][1]) is not None]
