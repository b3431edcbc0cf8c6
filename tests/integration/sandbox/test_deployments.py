"""A Deployment applied to the sandbox runs as simulator processes, with Kubernetes' status."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import kubernetes
from tests.integration.sandbox.conftest import FAST
from tests.integration.sandbox.support import (
    MODEL,
    NAMESPACE,
    alive,
    condition,
    deployment,
    eventually,
)

from latency_tuner.sandbox.cluster import Sandbox
from latency_tuner.sandbox.load import BackgroundLoad
from latency_tuner.sandbox.podrunner import NodeHardware, PodInfo
from latency_tuner.sandbox.scenario import Load


async def _deployment(sandbox: Sandbox, name: str = "llm") -> dict[str, Any]:
    obj = await sandbox.get("apps/v1", "Deployment", name)
    assert obj is not None
    return obj


async def _pods(sandbox: Sandbox) -> list[dict[str, Any]]:
    return await sandbox.list("v1", "Pod")


def _patch_args(kube: Any, args: list[str], name: str = "llm") -> None:
    """A strategic merge patch of the container's args, as `kubectl patch` would send."""
    body = {"spec": {"template": {"spec": {"containers": [{"name": "vllm", "args": args}]}}}}
    kubernetes.client.AppsV1Api(kube).patch_namespaced_deployment(name, NAMESPACE, body)


async def _available(sandbox: Sandbox) -> dict[str, Any] | None:
    obj = await _deployment(sandbox)
    status = obj.get("status") or {}
    done = (
        status.get("observedGeneration") == obj["metadata"]["generation"]
        and status.get("availableReplicas") == 1
        and status.get("updatedReplicas") == 1
        and status.get("replicas") == 1
    )
    return obj if done else None


async def test_a_deployment_applied_with_the_kubernetes_client_runs_a_simulator_pod_and_becomes_available(  # noqa: E501
    sandbox: Sandbox, kube: Any
) -> None:
    apps = kubernetes.client.AppsV1Api(kube)
    body: Any = deployment()  # the client takes dicts as well as its models
    await asyncio.to_thread(apps.create_namespaced_deployment, NAMESPACE, body)

    obj = await eventually(lambda: _available(sandbox))

    assert condition(obj, "Available")["status"] == "True"
    assert condition(obj, "Progressing")["reason"] == "NewReplicaSetAvailable"
    [pod] = await _pods(sandbox)
    thash = pod["metadata"]["labels"]["pod-template-hash"]
    assert re.fullmatch(rf"llm-{thash}-[a-z0-9]{{5}}", pod["metadata"]["name"])
    assert len(thash) == 10
    assert pod["metadata"]["labels"]["app"] == "llm"
    assert pod["spec"]["nodeName"] == "sandbox-gpu-0"
    status = pod["status"]
    assert status["phase"] == "Running"
    assert status["podIP"] == "127.0.0.1"
    assert condition(pod, "Ready")["status"] == "True"
    [container] = status["containerStatuses"]
    assert container["ready"] is True
    assert container["restartCount"] == 0
    assert "running" in container["state"]
    [info] = sandbox.pods()
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{info.url}/health")).status_code == 200
    assert info.argv[:2] == ("serve", MODEL)
    assert "--sim-gpus" in info.argv
    assert info.argv[info.argv.index("--sim-gpus") + 1] == "1"
    replicaset = await sandbox.get("apps/v1", "ReplicaSet", f"llm-{thash}")
    assert replicaset is not None
    assert replicaset["status"]["readyReplicas"] == 1


async def test_a_template_change_rolls_the_process_over_with_no_moment_without_a_ready_pod(
    sandbox: Sandbox, kube: Any
) -> None:
    await sandbox.apply(deployment())
    await eventually(lambda: _available(sandbox))
    [old] = sandbox.pods()
    timeline: list[list[PodInfo]] = []
    sampling = True

    async def sample() -> None:
        while sampling:
            timeline.append(sandbox.pods())
            await asyncio.sleep(0.02)

    load = Load(concurrency=2, prompt_tokens=64, output_tokens=16)
    endpoints = sandbox.runner.endpoints if sandbox.runner else list
    async with BackgroundLoad(load, endpoints) as traffic:
        sampler = asyncio.create_task(sample())
        await asyncio.sleep(0.5)
        await asyncio.to_thread(_patch_args, kube, [MODEL, "--max-num-seqs", "16"])
        obj = await eventually(lambda: _available(sandbox))
        await eventually(lambda: asyncio.sleep(0, len(sandbox.pods()) == 1))
        await asyncio.sleep(0.5)
        sampling = False
        await sampler

    # Through the "Service", no request failed while the pods changed.
    assert traffic.result is not None
    assert traffic.result.completed > 10
    assert traffic.result.failed == 0

    [new] = sandbox.pods()
    assert new.name != old.name
    assert new.template_hash != old.template_hash
    assert "--max-num-seqs=16" in new.argv
    assert new.pid is not None
    cmdline = (await asyncio.to_thread(Path(f"/proc/{new.pid}/cmdline").read_bytes)).split(b"\0")
    assert b"--max-num-seqs=16" in cmdline
    assert not alive(old.pid or 0)
    # maxSurge 1 / maxUnavailable 0: always a ready pod, and the old one was left alone (its
    # process serving) until the new one was ready.
    assert all(any(p.ready for p in snapshot) for snapshot in timeline)
    first = next(
        i for i, s in enumerate(timeline) if any(p.ready and p.name == new.name for p in s)
    )
    olds = [next((p for p in s if p.name == old.name), None) for s in timeline[: first + 1]]
    assert all(p is not None and p.pid is not None for p in olds)
    assert not any(p.terminating for p in olds[:-1] if p is not None)
    assert obj["metadata"]["generation"] == 2 == obj["status"]["observedGeneration"]
    assert condition(obj, "Progressing")["reason"] == "NewReplicaSetAvailable"


async def test_a_template_that_cannot_start_crash_loops_beside_the_serving_pod_until_the_deadline(
    sandbox: Sandbox, kube: Any
) -> None:
    await sandbox.apply(deployment(deadline=3))
    await eventually(lambda: _available(sandbox))
    [old] = sandbox.pods()

    # TP 2 on a 1-GPU limit: vLLM (and the simulator) exits at startup.
    await asyncio.to_thread(_patch_args, kube, [MODEL, "--tensor-parallel-size", "2"])

    async def crash_looping() -> dict[str, Any] | None:
        for pod in await _pods(sandbox):
            if pod["metadata"]["name"] == old.name:
                continue
            [status] = pod["status"].get("containerStatuses") or [{}]
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") == "CrashLoopBackOff" and status["restartCount"] > 0:
                return pod
        return None

    failing = await eventually(crash_looping, every=0.05)
    [status] = failing["status"]["containerStatuses"]
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert status["lastState"]["terminated"]["reason"] == "Error"
    assert status["ready"] is False

    async def timed_out() -> dict[str, Any] | None:
        obj = await _deployment(sandbox)
        return (
            obj
            if condition(obj, "Progressing").get("reason") == "ProgressDeadlineExceeded"
            else None
        )

    obj = await eventually(timed_out, within=15)
    assert condition(obj, "Progressing")["status"] == "False"
    assert condition(obj, "Available")["status"] == "True"
    assert obj["status"]["availableReplicas"] == 1
    assert obj["status"]["updatedReplicas"] == 1
    assert obj["status"]["replicas"] == 2
    served = next(p for p in sandbox.pods() if p.name == old.name)
    assert served.ready
    assert served.restart_count == 0
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{served.url}/health")).status_code == 200

    # Rolling back to the old template drops the crashing pod and keeps the old one.
    await asyncio.to_thread(_patch_args, kube, [MODEL, "--max-num-seqs", "8"])
    obj = await eventually(lambda: _available(sandbox))
    await eventually(lambda: asyncio.sleep(0, [p.name for p in sandbox.pods()] == [old.name]))
    assert condition(obj, "Progressing")["reason"] == "NewReplicaSetAvailable"


async def test_deleting_a_deployment_stops_its_processes_and_deletes_its_pods(
    sandbox: Sandbox,
) -> None:
    await sandbox.apply(deployment(replicas=2))
    await eventually(lambda: asyncio.sleep(0, sum(p.ready for p in sandbox.pods()) == 2))
    pids = [p.pid for p in sandbox.pods()]
    thash = sandbox.pods()[0].template_hash

    await sandbox.delete("apps/v1", "Deployment", "llm")

    await eventually(lambda: asyncio.sleep(0, not sandbox.pods()))
    assert await _pods(sandbox) == []
    assert not any(alive(pid or 0) for pid in pids)

    async def replicaset_gone() -> bool:
        return await sandbox.get("apps/v1", "ReplicaSet", f"llm-{thash}") is None

    # The runner deletes the ReplicaSet on its pass after the last pod is gone.
    await eventually(replicaset_gone)
    assert sandbox.targets() == []


async def test_a_deleted_pod_is_replaced_like_a_replicaset_would(sandbox: Sandbox) -> None:
    await sandbox.apply(deployment())
    await eventually(lambda: _available(sandbox))
    [first] = sandbox.pods()

    await sandbox.delete("v1", "Pod", first.name)

    async def replaced() -> bool:
        names = [p["metadata"]["name"] for p in await _pods(sandbox)]
        return len(names) == 1 and names[0] != first.name and bool(await _available(sandbox))

    await eventually(replaced)
    assert not alive(first.pid or 0)


async def test_a_pod_asking_for_more_gpus_than_a_node_has_stays_pending_unschedulable(
    sandbox: Sandbox,
) -> None:
    await sandbox.apply(deployment(gpus=4, args=[MODEL, "--tensor-parallel-size", "4"]))

    async def pending() -> dict[str, Any] | None:
        pods = await _pods(sandbox)
        if pods and condition(pods[0], "PodScheduled").get("reason") == "Unschedulable":
            return pods[0]
        return None

    pod = await eventually(pending)
    assert pod["status"]["phase"] == "Pending"
    assert "Insufficient nvidia.com/gpu" in condition(pod, "PodScheduled")["message"]
    obj = await _deployment(sandbox)
    assert condition(obj, "Available")["status"] == "False"
    assert sandbox.pods()[0].pid is None


async def test_nodes_carry_the_gpu_labels_the_operator_reads(sandbox: Sandbox) -> None:
    [node] = await sandbox.list("v1", "Node")
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "2"
    assert labels["latencytuner.io/gpu-interconnect"] == "NVLink"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"


async def _kubectl(sandbox: Sandbox, *args: str, stdin: bytes | None = None) -> str:
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(sandbox.kubeconfig_path), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(stdin), 30)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_kubectl_applies_a_deployment_and_gets_its_pods_and_rollout(sandbox: Sandbox) -> None:
    manifest = json.dumps(deployment()).encode()

    await _kubectl(sandbox, "apply", "--validate=false", "-f", "-", stdin=manifest)
    await _kubectl(sandbox, "rollout", "status", "deployment/llm", "--timeout=30s")
    text = await _kubectl(sandbox, "get", "pods,deploy", "-n", NAMESPACE)

    [pod] = sandbox.pods()
    assert f"pod/{pod.name}" in text, text
    assert "deployment.apps/llm" in text, text
    # The emulator's tables have NAME and AGE only; the status fields come through as JSON.
    phase = await _kubectl(sandbox, "get", "pod", pod.name, "-o", "jsonpath={.status.phase}")
    assert phase == "Running"
    ready = await _kubectl(
        sandbox, "get", "deploy", "llm", "-o", "jsonpath={.status.readyReplicas}"
    )
    assert ready == "1"


async def test_two_replicas_roll_one_at_a_time_and_never_drop_below_two_ready() -> None:
    async with Sandbox(
        namespace=NAMESPACE, hardware=NodeHardware(gpus=8), prometheus=False, runner_options=FAST
    ) as sandbox:
        await sandbox.apply(deployment(replicas=2))
        await eventually(lambda: asyncio.sleep(0, sum(p.ready for p in sandbox.pods()) == 2))
        old = {p.name for p in sandbox.pods()}
        ready_counts: list[int] = []
        active_counts: list[int] = []
        sampling = True

        async def sample() -> None:
            while sampling:
                ready_counts.append(sum(p.ready for p in sandbox.pods()))
                active_counts.append(sum(not p.terminating for p in sandbox.pods()))
                await asyncio.sleep(0.02)

        sampler = asyncio.create_task(sample())
        await sandbox.apply(deployment(replicas=2, args=[MODEL, "--max-num-seqs", "32"]))

        async def rolled() -> bool:
            pods = sandbox.pods()
            return len(pods) == 2 and all(p.ready and p.name not in old for p in pods)

        await eventually(rolled)
        sampling = False
        await sampler

    assert min(ready_counts) >= 2
    assert max(active_counts) == 3  # maxSurge 1 (25% of 2, rounded up), room for more
