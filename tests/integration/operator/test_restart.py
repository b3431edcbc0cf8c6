"""An operator stopped in the middle of a trial and started again continues from ``.status``:
no second patch, the baseline kept — kopf running against the API emulator, stopped and
started again for real."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.integration.operator.harness import (
    SEQS_ONLY,
    args_patches,
    by_seqs,
    cluster,
    evaluation,
    eventually,
    latency_target,
    operator_running,
    phase_in,
    queueing,
)

from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = [MODEL, "--max-num-seqs", "16"]
SEQS_32 = [MODEL, "--max-num-seqs", "32"]


async def test_a_restart_while_settling_continues_the_trial_without_patching_again(
    tmp_path: Path,
) -> None:
    # A settle time long enough to stop the operator inside it.
    target = latency_target(knobs=SEQS_ONLY, evaluation=evaluation(settle="3s"))
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(target)
        async with operator_running(world, tmp_path):
            await phase_in(world, "Settling")
        stopped = await world.status()
        patches_before = len(world.deployment_patches())
        async with operator_running(world, tmp_path):

            async def kept() -> dict[str, Any] | None:
                status = await world.status()
                trials = status.get("trials") or []
                return status if trials and trials[0]["verdict"] == "Keep" else None

            status = await eventually(kept, within=30, every=0.05)
    assert stopped["phase"] == "Settling"
    assert patches_before == 1
    patches = world.deployment_patches()
    assert args_patches(patches, SEQS_32) == 1  # the trial's patch, once across the restart
    assert not any(args_patches([p], ARGS) for p in patches)  # and no rollback
    trial = status["trials"][0]
    assert trial["startedAt"] == stopped["currentTrial"]["startedAt"]  # the same trial
    assert trial["id"] == 1
    assert status["baseline"] == stopped["baseline"]
    assert status["baseline"]["args"] == ARGS


def worse_with_32_seqs(cl: VllmCommandLine) -> float:
    return 3.0 if cl.get("max-num-seqs") == "32" else 2.0


async def test_a_restart_while_rolling_back_finishes_the_rollback_without_patching_again(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, queueing(worse_with_32_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path):
            await phase_in(world, "Measuring")
            world.stalled = True  # the rollback's rollout will hang until the restart is done
            await phase_in(world, "RollingBack")
            await eventually(lambda: _args_are(world, ARGS), within=10, every=0.05)
        stopped = await world.status()
        patches_before = len(world.deployment_patches())
        async with operator_running(world, tmp_path):
            await asyncio.sleep(1.0)  # several rounds in RollingBack, its patch already there
            waiting = await world.status()
            patches_waiting = len(world.deployment_patches())
            world.stalled = False
            status = await phase_in(world, "Exhausted", "Observing", "Converged")
    assert stopped["phase"] == "RollingBack"
    assert stopped["currentTrial"]["verdict"] == "Revert"
    assert patches_before == 2
    assert waiting["phase"] == "RollingBack"
    assert patches_waiting == 2
    patches = world.deployment_patches()
    assert args_patches(patches, ARGS) == 1  # one rollback patch across the restart
    assert args_patches(patches, SEQS_32) == 1
    (trial,) = status["trials"]
    assert (trial["to"], trial["verdict"]) == ("32", "Revert")
    assert trial["finishedAt"]
    assert status["baseline"] == stopped["baseline"]
    assert status["baseline"]["args"] == ARGS


async def _args_are(world: Any, args: list[str]) -> bool:
    return bool(await world.args() == args)
