"""A trial whose configuration cannot start is rolled back at once and never tried again; a
LatencyTarget deleted with ``onDelete: Restore`` puts the original arguments back first —
kopf running against the API emulator."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.integration.operator.harness import (
    DEPLOYMENT,
    LT_API,
    NAMESPACE,
    SEQS_ONLY,
    args_patches,
    by_seqs,
    cluster,
    condition,
    evaluation,
    eventually,
    latency_target,
    operator_running,
    phase_in,
    posted,
    queueing,
)

from latency_tuner.core.rollout import Reason
from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = [MODEL, "--max-num-seqs", "16"]
SEQS_32 = [MODEL, "--max-num-seqs", "32"]


def crashes_with_32_seqs(cl: VllmCommandLine) -> bool:
    return cl.get("max-num-seqs") == "32"


async def test_a_trial_that_crashes_is_rolled_back_at_once_and_never_tried_again(
    tmp_path: Path,
) -> None:
    # A long progress deadline: the crash, not the deadline, must end the trial.
    target = latency_target(knobs=SEQS_ONLY, evaluation=evaluation(progressDeadline="1m"))
    async with cluster(tmp_path, queueing(by_seqs), ARGS, crashes=crashes_with_32_seqs) as world:
        await world.api.create(target)
        async with operator_running(world, tmp_path):
            loop = asyncio.get_running_loop()
            await eventually(lambda: _patched(world, 1), within=20, every=0.05)
            patched_at = loop.time()
            await eventually(lambda: _patched(world, 2), within=20, every=0.05)
            rolled_back_after = loop.time() - patched_at
            status = await phase_in(world, "Exhausted")
            await asyncio.sleep(1.0)  # a few more rounds: still nothing new
            later = await world.status()
            final_args = await world.args()
            failed_events = await posted(world, Reason.TRIAL_FAILED)
    assert rolled_back_after < 10  # at once, not after the 1-minute deadline
    (trial,) = status["trials"]
    assert (trial["knob"], trial["to"], trial["verdict"]) == ("maxNumSeqs", "32", "Failed")
    assert "CrashLoopBackOff" in trial["reason"]
    (incompatible,) = status["incompatible"]
    assert (incompatible["knob"], incompatible["value"]) == ("maxNumSeqs", "32")
    assert "CrashLoopBackOff" in incompatible["reason"]
    degraded = condition(status, "Degraded")
    assert degraded is not None
    assert (degraded["status"], degraded["reason"]) == ("True", "TrialFailed")
    assert final_args == ARGS
    patches = world.deployment_patches()
    assert len(patches) == 2  # the trial and its rollback; 32 never again
    assert args_patches(patches, SEQS_32) == 1
    assert args_patches(patches, ARGS) == 1
    assert later["trials"] == status["trials"]
    assert failed_events


async def test_deleting_a_target_with_restore_puts_the_original_arguments_back(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY, onDelete="Restore"))
        async with operator_running(world, tmp_path):

            async def kept() -> dict[str, Any] | None:
                status = await world.status()
                trials = status.get("trials") or []
                return status if trials and trials[0]["verdict"] == "Keep" else None

            status = await eventually(kept, within=30, every=0.05)
            assert await world.args() != ARGS
            await world.api.delete(LT_API, "LatencyTarget", "llama-latency", namespace=NAMESPACE)

            async def gone() -> bool:
                found = await world.api.get(
                    LT_API, "LatencyTarget", "llama-latency", namespace=NAMESPACE
                )
                return found is None

            await eventually(gone, within=15)
            restored_args = await world.args()
            patches = len(world.deployment_patches())
            await asyncio.sleep(1.0)  # no timer left to patch it again
            final_args = await world.args()
            restored = await posted(world, Reason.RESTORED)
    assert status["baseline"]["args"] == ARGS
    assert restored_args == ARGS
    assert final_args == ARGS
    assert len(world.deployment_patches()) == patches
    assert restored
    assert DEPLOYMENT in restored[0]["message"]


async def _patched(world: Any, n: int) -> bool:
    return len(world.deployment_patches()) >= n
