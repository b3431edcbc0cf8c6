"""The operator rewrites a container's arguments only when that container runs vLLM, and only
that container: Postgres, Redis, MinIO, nginx or Envoy style args are not vLLM whatever the
container is called, and a sidecar listed first is never the one tuned.
Findings 2 and 8 of issue 13 and variations on them — kopf against the API emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.integration.operator.harness import (
    SEQS_ONLY,
    World,
    args_patches,
    by_seqs,
    cluster,
    condition,
    eventually,
    latency_target,
    operator_running,
    queueing,
)
from tests.integration.sandbox.trust.support import (
    ARGS,
    IMAGE,
    MODEL,
    container,
    containers_deployment,
    several_more_rounds,
)

NOT_VLLM = {
    "postgres": container("db", "postgres:16", ["postgres", "-c", "max_connections=200"]),
    "minio": container("store", "minio/minio:latest", ["server", "/data", "--console-address",
                                                       ":9001"]),
    "redis": container("cache", "redis:7", ["redis-server", "--maxmemory", "2gb"]),
    "nginx": container("web", "nginx:1.27", ["nginx", "-g", "daemon off;"]),
    "envoy": container("proxy", "envoyproxy/envoy:v1.31", ["-c", "/etc/envoy/envoy.yaml"]),
    # Variations: the container is called vllm, or its args borrow vLLM's flags.
    "redis named vllm": container("vllm", "redis:7", ["redis-server", "--port", "8000"]),
    "a shell named vllm": container("vllm", "busybox:1.36", ["sh", "-c", "sleep 3600"]),
    "postgres with a vLLM flag": container(
        "vllm", "postgres:16", ["postgres", "--max-num-seqs", "8"]
    ),
}  # fmt: skip


async def failed(world: World, name: str) -> dict[str, Any] | None:
    """The Ready condition once the target has Failed (nothing to tune), else None."""
    status = await world.status(name)
    ready = condition(status, "Ready")
    return ready if ready and status.get("phase") == "Failed" else None


@pytest.mark.parametrize("kind", list(NOT_VLLM))
async def test_a_container_that_is_not_vllm_is_refused_and_never_patched(
    tmp_path: Path, kind: str
) -> None:
    spec = NOT_VLLM[kind]
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(containers_deployment([spec], name="other"))
        target = latency_target("other-latency", target="other", knobs=SEQS_ONLY)
        target["spec"]["targetRef"]["container"] = spec["name"]
        await world.api.create(target)
        async with operator_running(world, tmp_path):
            ready = await eventually(lambda: failed(world, "other-latency"))
            await several_more_rounds()
            patches = world.deployment_patches("other")
            after = (await world.deployment("other"))["spec"]["template"]["spec"]["containers"]
    assert (ready["status"], ready["reason"]) == ("False", "NotVllm")
    assert patches == []
    assert after == [spec]


ENVOY = container("envoy", "envoyproxy/envoy:v1.31", ["-c", "/etc/envoy/envoy.yaml",
                                                      "--concurrency", "2"])  # fmt: skip
VLLM = container("server", IMAGE, ARGS)


async def test_without_a_container_name_the_vllm_container_is_tuned_not_the_sidecar_before_it(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(containers_deployment([ENVOY, VLLM], name="meshed"))
        target = latency_target("meshed-latency", target="meshed", knobs=SEQS_ONLY)
        del target["spec"]["targetRef"]["container"]
        await world.api.create(target)
        async with operator_running(world, tmp_path):

            async def patched() -> list[Any]:
                return world.deployment_patches("meshed")

            await eventually(patched)
            containers = (await world.deployment("meshed"))["spec"]["template"]["spec"][
                "containers"
            ]
    envoy, server = containers
    assert envoy == ENVOY  # the sidecar is untouched
    assert server["args"] == [MODEL, "--max-num-seqs", "32"]
    assert args_patches(world.deployment_patches("meshed"), server["args"]) == 1


async def test_two_vllm_containers_without_a_name_are_invalid_and_both_are_named(
    tmp_path: Path,
) -> None:
    second = container("server-b", IMAGE, [MODEL, "--max-num-seqs", "8"])
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(containers_deployment([VLLM, second], name="pair"))
        target = latency_target("pair-latency", target="pair", knobs=SEQS_ONLY)
        del target["spec"]["targetRef"]["container"]
        await world.api.create(target)
        async with operator_running(world, tmp_path):
            ready = await eventually(lambda: failed(world, "pair-latency"))
            await several_more_rounds()
            patches = world.deployment_patches("pair")
    assert ready["status"] == "False"
    assert "'server'" in ready["message"] or "server," in ready["message"], ready
    assert "server-b" in ready["message"]
    assert patches == []
