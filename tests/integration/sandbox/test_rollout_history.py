"""``kubectl rollout history`` in the sandbox says who changed the Deployment and why: the
Kubernetes adapter's patch (as the operator sends it) carries the change-cause, and the
sandbox's Deployment controller copies it to the ReplicaSet as Kubernetes' does."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.integration.sandbox.support import MODEL, NAMESPACE, deployment, eventually

from latency_tuner.adapters.kubernetes.client import Conflict, make_api_client
from latency_tuner.adapters.kubernetes.deployments import Deployments
from latency_tuner.controller.attribution import Action, change_annotations
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.sandbox.cluster import Sandbox


async def _kubectl(sandbox: Sandbox, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(sandbox.kubeconfig_path), "-n", NAMESPACE, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_rollout_history_shows_each_change_the_operator_made_and_why(
    sandbox: Sandbox,
) -> None:
    await sandbox.apply(deployment(args=[MODEL, "--max-num-seqs", "8"]))
    deployments = Deployments(make_api_client(str(sandbox.kubeconfig_path)))

    async def revision(number: str) -> Any:
        view = await deployments.get(namespace=NAMESPACE, name="llm")
        annotations = view.annotations if view else {}
        return view if annotations.get("deployment.kubernetes.io/revision") == number else None

    before = await eventually(lambda: revision("1"))
    old = before.container_config("vllm")
    new = ContainerConfig(
        command=None, args=(MODEL, "--max-num-seqs", "16"), image=old.image, gpu_limit=1
    )
    cause = change_annotations(
        namespace=NAMESPACE, name="llm-ttft", action=Action.TRIAL, before=old, after=new,
        trial=1, knob="maxNumSeqs",
    )  # fmt: skip
    # The sandbox's controller still writes the Deployment's status after revision 1 appears;
    # like the operator, re-read and patch again when the guarded patch meets a newer version.
    for _ in range(20):
        try:
            await deployments.patch_container(
                before, container="vllm", config=new, annotations=cause
            )
            break
        except Conflict:
            before = await eventually(lambda: revision("1"))
    else:
        raise AssertionError("the Deployment kept changing under the patch")
    await eventually(lambda: revision("2"))
    history = await _kubectl(sandbox, "rollout", "history", "deployment/llm")
    assert (
        "2         latency-tuner, LatencyTarget llm/llm-ttft: trial 1 (maxNumSeqs): "
        "--max-num-seqs: 8 -> 16"
    ) in history, history
    assert "1         <none>" in history, history
