"""The canary adapter against the API emulator over real HTTP: a canary is born from the main
Deployment with the trial's arguments and one pod, joins the same pods' labels without being
claimable by the main Deployment, is found again after a restart (and after an upgrade that
renamed its labels), leaves a foreign Deployment of the same name alone, and is removed without
touching the main Deployment."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.kubernetes_adapter.test_deployments_adapter import (
    GPU,
    MODEL,
    NS,
    manifest,
    pod,
    vllm_of,
)

from latency_tuner.adapters.kubernetes.canaries import Canaries, CanaryNameTaken
from latency_tuner.adapters.kubernetes.client import Conflict, make_api_client
from latency_tuner.adapters.kubernetes.deployments import Deployments, DeploymentView
from latency_tuner.core.canary import (
    CANARY_LABEL,
    LEGACY_CANARY_LABEL,
    Owner,
    canary_deployment,
    canary_name,
)
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.sandbox.apiserver import ApiServer

OWNER = Owner("tuning.latencytuner.io/v1alpha1", "LatencyTarget", "llama-latency", "uid-1234")
TRIAL_ARGS = [MODEL, "--max-num-seqs", "64"]
TRIAL = ContainerConfig(
    command=None,
    args=tuple(TRIAL_ARGS),
    image="vllm/vllm-openai:v0.11.0",
    gpu_limit=1,
)


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        await server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        main = manifest()
        main["spec"]["replicas"] = 3
        main["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "4", "team": "ml"}
        await server.create(main)
        yield server


def clients(api: ApiServer, tmp_path: Path) -> tuple[Deployments, Canaries]:
    client = make_api_client(str(api.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS)))
    return Deployments(client), Canaries(client)


async def main_of(deployments: Deployments) -> DeploymentView:
    view = await deployments.get(namespace=NS, name="llama")
    assert view is not None
    return view


async def test_a_canary_runs_the_trial_arguments_on_one_pod_beside_the_main_deployment(
    api: ApiServer, tmp_path: Path
) -> None:
    deployments, canaries = clients(api, tmp_path)
    main = await main_of(deployments)
    canary = await canaries.ensure(main, OWNER, container=None, config=TRIAL, gpu_resource=GPU)
    obj: dict[str, Any] = canary.obj
    assert obj["metadata"]["name"] == canary_name("llama", OWNER.name)
    assert obj["spec"]["replicas"] == 1
    assert vllm_of(obj)["args"] == TRIAL_ARGS
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["proxy", "vllm"]
    labels = obj["spec"]["template"]["metadata"]["labels"]
    assert labels["app"] == "llama"  # the Service's selector still picks the canary pod
    assert labels[CANARY_LABEL] == "llama"
    assert obj["spec"]["selector"]["matchLabels"][CANARY_LABEL] == "llama"
    (ref,) = obj["metadata"]["ownerReferences"]
    assert (ref["uid"], ref["controller"]) == (OWNER.uid, True)
    assert obj["metadata"]["annotations"] == {"team": "ml"}  # not the main's revision
    after = await main_of(deployments)
    assert after.obj["spec"] == main.obj["spec"]  # the main Deployment is untouched


async def test_ensuring_twice_changes_nothing_the_second_time(
    api: ApiServer, tmp_path: Path
) -> None:
    deployments, canaries = clients(api, tmp_path)
    main = await main_of(deployments)
    first = await canaries.ensure(main, OWNER, container="vllm", config=TRIAL, gpu_resource=GPU)
    again = await canaries.ensure(main, OWNER, container="vllm", config=TRIAL, gpu_resource=GPU)
    assert again.resource_version == first.resource_version


async def test_a_canary_left_at_zero_replicas_by_a_crash_is_completed_on_restart(
    api: ApiServer, tmp_path: Path
) -> None:
    deployments, canaries = clients(api, tmp_path)
    main = await main_of(deployments)
    # The operator died right after creating the canary, before moving and scaling it.
    await api.create(canary_deployment(main.obj, OWNER))
    canary = await canaries.ensure(main, OWNER, container="vllm", config=TRIAL, gpu_resource=GPU)
    assert canary.obj["spec"]["replicas"] == 1
    assert vllm_of(canary.obj)["args"] == TRIAL_ARGS


def with_legacy_labels(canary: dict[str, Any]) -> dict[str, Any]:
    """``canary`` as 0.1.0 made it: its own labels under latency-tuner.io/."""

    def renamed(labels: dict[str, str]) -> dict[str, str]:
        return {k.replace("latencytuner.io/", "latency-tuner.io/"): v for k, v in labels.items()}

    spec = canary["spec"]
    canary["metadata"]["labels"] = renamed(canary["metadata"]["labels"])
    spec["selector"]["matchLabels"] = renamed(spec["selector"]["matchLabels"])
    spec["template"]["metadata"]["labels"] = renamed(spec["template"]["metadata"]["labels"])
    return canary


async def test_a_canary_made_before_the_label_rename_is_found_kept_apart_and_removed(
    api: ApiServer, tmp_path: Path
) -> None:
    deployments, canaries = clients(api, tmp_path)
    main = await main_of(deployments)
    # The operator was upgraded mid-trial: the canary and its pod carry the old label key.
    old = with_legacy_labels(canary_deployment(main.obj, OWNER))
    assert CANARY_LABEL not in old["spec"]["selector"]["matchLabels"]
    created = await api.create(old)
    old_pod = pod("llama-canary-old")
    old_pod["metadata"]["labels"] = dict(old["spec"]["template"]["metadata"]["labels"])
    assert old_pod["metadata"]["labels"][LEGACY_CANARY_LABEL] == "llama"
    await api.create(old_pod)
    await api.create(pod("llama-main"))
    canary = await canaries.ensure(main, OWNER, container="vllm", config=TRIAL, gpu_resource=GPU)
    assert canary.obj["metadata"]["uid"] == created["metadata"]["uid"]  # found, not made again
    assert vllm_of(canary.obj)["args"] == TRIAL_ARGS
    listed = await deployments.pods(main, container="vllm", gpu_resource=GPU)
    assert [p.name for p in listed] == ["llama-main"]  # the old canary's pod is not the main's
    listed = await deployments.pods(canary, container="vllm", gpu_resource=GPU)
    assert [p.name for p in listed] == ["llama-canary-old"]
    assert await canaries.remove(main, OWNER) is True
    assert await canaries.get(main, OWNER) is None


async def test_a_foreign_deployment_with_the_canary_name_is_never_touched(
    api: ApiServer, tmp_path: Path
) -> None:
    deployments, canaries = clients(api, tmp_path)
    main = await main_of(deployments)
    squatter = manifest()
    squatter["metadata"]["name"] = canary_name("llama", OWNER.name)
    await api.create(squatter)
    with pytest.raises(CanaryNameTaken, match="not owned by LatencyTarget llama-latency"):
        await canaries.ensure(main, OWNER, container="vllm", config=TRIAL, gpu_resource=GPU)
    with pytest.raises(CanaryNameTaken):
        await canaries.remove(main, OWNER)
    kept = await deployments.get(namespace=NS, name=canary_name("llama", OWNER.name))
    assert kept is not None
    assert vllm_of(kept.obj)["args"] == vllm_of(squatter)["args"]


async def test_removing_the_canary_leaves_the_main_deployment_and_is_idempotent(
    api: ApiServer, tmp_path: Path
) -> None:
    deployments, canaries = clients(api, tmp_path)
    main = await main_of(deployments)
    await canaries.ensure(main, OWNER, container="vllm", config=TRIAL, gpu_resource=GPU)
    assert await canaries.remove(main, OWNER) is True
    assert await canaries.remove(main, OWNER) is False
    assert await canaries.get(main, OWNER) is None
    assert (await main_of(deployments)).obj["spec"] == main.obj["spec"]


async def test_the_main_deployment_is_scaled_only_from_the_version_read(
    api: ApiServer, tmp_path: Path
) -> None:
    deployments, canaries = clients(api, tmp_path)
    main = await main_of(deployments)
    smaller = await canaries.scale(main, 2)
    assert smaller.obj["spec"]["replicas"] == 2
    with pytest.raises(Conflict):
        await canaries.scale(main, 1)  # read before the first scale: stale
