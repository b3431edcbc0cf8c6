"""The Deployments adapter against the API emulator over real HTTP: the guarded JSON patch
changes only the vLLM container, a stale read is a Conflict (never an overwrite), GPU limit and
image changes land where they belong, 0.1.0's annotations go when a change is annotated, and
pod facts tell a crash loop and an OOM kill (the canaries' pods left out, whichever label key
they were made with)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from latency_tuner.adapters.kubernetes.client import Conflict, make_api_client
from latency_tuner.adapters.kubernetes.deployments import (
    ContainerNotFound,
    Deployments,
    DeploymentView,
)
from latency_tuner.controller.attribution import LAST_CHANGE, LATENCY_TARGET, LEGACY_ANNOTATIONS
from latency_tuner.core.canary import CANARY_LABEL, LEGACY_CANARY_LABEL
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.sandbox.apiserver import ApiServer

NS = "ml"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GPU = "nvidia.com/gpu"
SIDECAR = {
    "name": "proxy",
    "image": "envoyproxy/envoy:v1.31",
    "args": ["--config-path", "/etc/envoy.yaml"],
    "resources": {"limits": {"cpu": "500m"}},
}


def manifest(**vllm: Any) -> dict[str, Any]:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.11.0",
        "args": [MODEL, "--max-num-seqs", "16"],
        "env": [{"name": "HF_HOME", "value": "/cache"}],
        "ports": [{"name": "http", "containerPort": 8000}],
        "resources": {"limits": {GPU: "1", "memory": "40Gi"}, "requests": {GPU: "1"}},
        **vllm,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama", "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "llama"}},
            "template": {
                "metadata": {"labels": {"app": "llama"}},
                "spec": {"containers": [copy.deepcopy(SIDECAR), container]},
            },
        },
    }


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        await server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield server


def adapter(api: ApiServer, tmp_path: Path) -> Deployments:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS)
    return Deployments(make_api_client(str(kubeconfig)))


async def read(deployments: Deployments) -> DeploymentView:
    view = await deployments.get(namespace=NS, name="llama")
    assert view is not None
    return view


def vllm_of(obj: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "vllm")


async def test_a_guarded_patch_changes_only_the_vllm_containers_arguments(
    api: ApiServer, tmp_path: Path
) -> None:
    await api.create(manifest())
    deployments = adapter(api, tmp_path)
    view = await read(deployments)
    before = copy.deepcopy(view.obj)
    config = view.container_config("vllm")
    wanted = ContainerConfig(
        command=None,
        args=(MODEL, "--max-num-seqs", "32"),
        image=config.image,
        gpu_limit=config.gpu_limit,
    )
    after = (await deployments.patch_container(view, container="vllm", config=wanted)).obj
    assert vllm_of(after)["args"] == [MODEL, "--max-num-seqs", "32"]
    assert after["spec"]["template"]["spec"]["containers"][0] == SIDECAR
    unchanged = {k: v for k, v in vllm_of(after).items() if k != "args"}
    assert unchanged == {k: v for k, v in vllm_of(before).items() if k != "args"}
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert after["spec"]["replicas"] == 1
    assert (await read(deployments)).container_config("vllm") == wanted


async def test_a_change_annotated_now_removes_the_annotations_written_under_the_old_domain(
    api: ApiServer, tmp_path: Path
) -> None:
    old = manifest()
    old["metadata"]["annotations"] = {
        "latency-tuner.io/latency-target": "ml/llama-latency",
        "latency-tuner.io/last-change": '{"action": "trial", "trial": 1}',
        "team": "ml",
    }
    await api.create(old)
    deployments = adapter(api, tmp_path)
    view = await read(deployments)
    config = view.container_config("vllm")
    wanted = ContainerConfig(None, (MODEL, "--max-num-seqs", "32"), config.image, config.gpu_limit)
    notes = {LATENCY_TARGET: "ml/llama-latency", LAST_CHANGE: '{"action": "trial", "trial": 2}'}
    after = await deployments.patch_container(
        view, container="vllm", config=wanted, annotations=notes
    )
    assert set(LEGACY_ANNOTATIONS).isdisjoint(after.obj["metadata"]["annotations"])
    assert after.obj["metadata"]["annotations"] == {**notes, "team": "ml"}
    # Gone, they are not removed again (a JSON-patch remove of a missing key would fail).
    again = await deployments.patch_container(
        after, container="vllm", config=config, annotations=notes
    )
    assert again.container_config("vllm") == config


async def test_a_patch_from_a_stale_read_is_a_conflict_and_overwrites_nothing(
    api: ApiServer, tmp_path: Path
) -> None:
    await api.create(manifest())
    deployments = adapter(api, tmp_path)
    stale = await read(deployments)
    theirs = copy.deepcopy(stale.obj["spec"]["template"]["spec"]["containers"])
    theirs[1]["args"] = [MODEL, "--max-num-seqs", "48"]
    patch = {"spec": {"template": {"spec": {"containers": theirs}}}}
    await api.patch("apps/v1", "Deployment", "llama", patch, namespace=NS)
    ours = ContainerConfig(
        command=None, args=(MODEL, "--max-num-seqs", "32"), image="vllm/vllm-openai:v0.11.0",
        gpu_limit=1,
    )  # fmt: skip
    with pytest.raises(Conflict):
        await deployments.patch_container(stale, container="vllm", config=ours)
    assert vllm_of((await read(deployments)).obj)["args"] == [MODEL, "--max-num-seqs", "48"]


async def test_a_gpu_limit_and_image_change_rewrite_limit_request_and_image(
    api: ApiServer, tmp_path: Path
) -> None:
    await api.create(manifest())
    deployments = adapter(api, tmp_path)
    view = await read(deployments)
    wanted = ContainerConfig(
        command=None,
        args=(MODEL, "--tensor-parallel-size", "2"),
        image="vllm/vllm-openai:v0.11.1",
        gpu_limit=2,
    )
    after = vllm_of((await deployments.patch_container(view, container="vllm", config=wanted)).obj)
    assert after["image"] == "vllm/vllm-openai:v0.11.1"
    assert after["resources"] == {"limits": {GPU: "2", "memory": "40Gi"}, "requests": {GPU: "2"}}
    assert after["args"] == [MODEL, "--tensor-parallel-size", "2"]
    assert (await read(deployments)).container_config("vllm").gpu_limit == 2


async def test_a_gpu_limit_is_added_to_a_container_without_resources_under_the_named_resource(
    api: ApiServer, tmp_path: Path
) -> None:
    bare = manifest(command=["vllm", "serve"])
    del vllm_of(bare)["resources"]
    await api.create(bare)
    deployments = adapter(api, tmp_path)
    view = await read(deployments)
    wanted = ContainerConfig(
        command=None, args=(MODEL,), image="vllm/vllm-openai:v0.11.0", gpu_limit=1
    )
    after = vllm_of(
        (
            await deployments.patch_container(
                view, container="vllm", config=wanted, gpu_resource="amd.com/gpu"
            )
        ).obj
    )
    assert after["resources"] == {"limits": {"amd.com/gpu": "1"}}
    assert "command" not in after  # None means "unset", and the old command is removed
    assert after["args"] == [MODEL]


async def test_a_missing_deployment_reads_as_none_and_a_missing_container_names_the_others(
    api: ApiServer, tmp_path: Path
) -> None:
    deployments = adapter(api, tmp_path)
    assert await deployments.get(namespace=NS, name="llama") is None
    await api.create(manifest())
    view = await read(deployments)
    with pytest.raises(ContainerNotFound, match="has no container 'engine' \\(has: proxy, vllm\\)"):
        view.container_index("engine")
    # No name: the one container that runs vLLM, never the Envoy sidecar listed first.
    assert view.container_index(None) == 1


def pod(name: str, *, app: str = "llama") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
        "spec": {
            "nodeName": "gpu-node-1",
            "containers": [copy.deepcopy(SIDECAR), vllm_of(manifest())],
        },
    }


def container_status(**fields: Any) -> dict[str, Any]:
    return {"containerStatuses": [{"name": "vllm", **fields}]}


async def test_pod_facts_tell_a_crash_loop_an_oom_kill_and_a_healthy_pod_apart(
    api: ApiServer, tmp_path: Path
) -> None:
    await api.create(manifest())
    statuses = {
        "llama-crash": {
            "phase": "Running",
            **container_status(
                restartCount=5,
                state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m"}},
                lastState={"terminated": {"reason": "Error", "exitCode": 1}},
            ),
        },
        "llama-oom": {
            "phase": "Running",
            **container_status(
                restartCount=1,
                state={"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                lastState={"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            ),
        },
        "llama-ok": {
            "phase": "Running",
            "podIP": "10.0.0.9",
            "conditions": [{"type": "Ready", "status": "True"}],
            **container_status(restartCount=0, state={"running": {}}),
        },
        "llama-pending": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                }
            ],
        },
        "other-app": {"phase": "Running"},
        "llama-canary-1": {"phase": "Running"},
        "llama-canary-old": {"phase": "Running"},
    }
    for name, status in statuses.items():
        made = pod(name, app="other" if name == "other-app" else "llama")
        if name == "llama-canary-1":  # a canary's pod: the main pods' labels and its own
            made["metadata"]["labels"][CANARY_LABEL] = "llama"
        if name == "llama-canary-old":  # a canary's pod from before the upgrade (0.1.0's key)
            made["metadata"]["labels"][LEGACY_CANARY_LABEL] = "llama"
        await api.create(made)
        await api.patch("v1", "Pod", name, {"status": status}, namespace=NS, subresource="status")
    deployments = adapter(api, tmp_path)
    view = await read(deployments)
    facts = {p.name: p for p in await deployments.pods(view, container="vllm", gpu_resource=GPU)}
    # By the selector, without the canaries' pods.
    assert set(facts) == {"llama-crash", "llama-oom", "llama-ok", "llama-pending"}
    crash, oom, ok = facts["llama-crash"], facts["llama-oom"], facts["llama-ok"]
    assert facts["llama-pending"].unschedulable
    assert not any(p.unschedulable for p in (crash, oom, ok))
    assert crash.problem == "CrashLoopBackOff (last exit: Error, code 1)"
    assert crash.restarts == 5
    assert not crash.ready
    assert oom.problem == "OOMKilled"
    assert ok.problem is None
    assert ok.ready
    assert (ok.ip, ok.metrics_port, ok.metrics_path) == ("10.0.0.9", 8000, "/metrics")
    assert ok.node == "gpu-node-1"
    assert ok.config_fingerprint == view.container_config("vllm").fingerprint()
    rollout = view.rollout(tuple(facts.values()))
    assert rollout.failure(ok.config_fingerprint or "") == (
        "pod llama-crash: CrashLoopBackOff (last exit: Error, code 1) (restarts: 5)"
    )
    assert rollout.failure("another-template") is None  # these pods are not its rollout
    assert rollout.unschedulable(ok.config_fingerprint or "")


async def test_rollout_facts_follow_the_deployment_status(api: ApiServer, tmp_path: Path) -> None:
    await api.create(manifest())
    deployments = adapter(api, tmp_path)
    assert not (await read(deployments)).rollout().complete  # no controller has seen it yet
    done = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
            "availableReplicas": 1}  # fmt: skip
    await api.patch("apps/v1", "Deployment", "llama", {"status": done}, namespace=NS,
                    subresource="status")  # fmt: skip
    assert (await read(deployments)).rollout().complete
    stuck = {
        **done,
        "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
        ],
    }
    await api.patch("apps/v1", "Deployment", "llama", {"status": stuck}, namespace=NS,
                    subresource="status")  # fmt: skip
    rollout = (await read(deployments)).rollout()
    assert rollout.progress_deadline_exceeded
    assert rollout.failure("any") is not None
