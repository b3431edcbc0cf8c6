"""A reconcile reads Deployments from kopf's watch (an index) and node GPU labels from a cache,
not from the API server each time; our own patch is never hidden by a watch that lags behind.
The API side is the in-memory fakes of ``latency_tuner.testing.cluster``."""

from __future__ import annotations

import copy
from typing import Any

from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.ports import NodeGpu
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.handlers.caches import CachedNodes, IndexedDeployments, indexed
from latency_tuner.testing.cluster import StaticDeployments, StaticNodes

ARGS = ["meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "16"]


def deployment(rv: str, args: list[str]) -> dict[str, Any]:
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "args": args}
    return {
        "metadata": {"name": "llama", "namespace": "ml", "resourceVersion": rv},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


class Api(StaticDeployments):
    reads = 0

    async def get(self, *, namespace: str, name: str) -> DeploymentView | None:
        self.reads += 1
        return await super().get(namespace=namespace, name=name)

    async def patch_container(self, deployment: DeploymentView, **kwargs: Any) -> DeploymentView:
        await super().patch_container(deployment, **kwargs)
        after = copy.deepcopy(dict(deployment.obj))
        after["metadata"]["resourceVersion"] = "2"
        after["spec"]["template"]["spec"]["containers"][0]["args"] = ["patched"]
        return DeploymentView(after)


async def test_a_deployment_the_watch_holds_is_not_read_from_the_api() -> None:
    api = Api({"llama": deployment("1", ARGS)})
    cached = IndexedDeployments(api)
    cached.attach({"deployment_index": {("ml", "llama"): [deployment("1", ARGS)]}})
    view = await cached.get(namespace="ml", name="llama")
    assert view is not None
    assert view.resource_version == "1"
    assert api.reads == 0


async def test_a_deployment_the_watch_has_not_delivered_is_read_from_the_api() -> None:
    api = Api({"llama": deployment("1", ARGS)})
    cached = IndexedDeployments(api)
    assert await cached.get(namespace="ml", name="llama") is not None  # not attached yet
    cached.attach({"deployment_index": {}})
    assert await cached.get(namespace="ml", name="llama") is not None  # not in the index yet
    assert api.reads == 2


async def test_our_patch_is_seen_until_the_watch_delivers_it_then_the_watch_wins() -> None:
    index: dict[tuple[str, str], list[dict[str, Any]]] = {("ml", "llama"): [deployment("1", ARGS)]}
    cached = IndexedDeployments(Api({"llama": deployment("1", ARGS)}))
    cached.attach({"deployment_index": index})
    before = await cached.get(namespace="ml", name="llama")
    assert before is not None
    config = ContainerConfig(None, ("patched",), "vllm/vllm-openai:v0.11.0", None)
    await cached.patch_container(before, container="vllm", config=config, gpu_resource="g")
    lagging = await cached.get(namespace="ml", name="llama")
    assert lagging is not None
    assert lagging.resource_version == "2"  # the index still holds "1"
    index[("ml", "llama")] = [deployment("3", ["changed", "by", "someone"])]
    later = await cached.get(namespace="ml", name="llama")
    assert later is not None
    assert later.resource_version == "3"


async def test_a_nodes_gpu_labels_are_read_once_per_ttl() -> None:
    now = [0.0]
    api = StaticNodes({"gpu-1": NodeGpu("gpu-1", "NVIDIA-H100-80GB-HBM3", 8, "NVLink")})
    nodes = CachedNodes(api, ttl=300, clock=lambda: now[0])
    for _ in range(5):
        assert [n.product for n in await nodes.gpus(["gpu-1", "gone"])] == ["NVIDIA-H100-80GB-HBM3"]
    assert api.reads == 1
    now[0] = 301.0
    await nodes.gpus(["gpu-1"])
    assert api.reads == 2


def test_the_index_holds_a_deployment_without_its_managed_fields_and_leaves_the_body_alone() -> (
    None
):
    body = deployment("7", ARGS)
    body["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    body["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    held = indexed(body)
    assert "managedFields" not in held["metadata"]
    assert held["metadata"]["annotations"] == body["metadata"]["annotations"]
    assert held["spec"] == body["spec"]
    assert "managedFields" in body["metadata"]  # kopf's body is not changed
