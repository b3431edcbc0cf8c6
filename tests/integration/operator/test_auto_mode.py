"""In Auto mode the operator keeps changes that help, reverts those that do not, and stops when
the targets are met — kopf really running against the API emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.integration.operator.harness import (
    DEPLOYMENT,
    cluster,
    condition,
    eventually,
    latency_target,
    operator_running,
    posted,
)
from tests.integration.operator.harness import (
    queueing as queueing_world,
)

from latency_tuner.core.rollout import Reason
from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def queueing(cl: VllmCommandLine) -> dict[str, Any]:
    """Requests queue for a slot until max-num-seqs reaches 64."""
    seqs = int(cl.get("max-num-seqs") or 1024)
    ttft = 2.0 if seqs < 32 else 0.9 if seqs < 64 else 0.3
    waiting = 0.0 if seqs >= 64 else 12.0
    return {
        "ttft": {50: ttft * 0.8, 90: ttft, 95: ttft * 1.05, 99: ttft * 1.2},
        "ttft_mean": ttft * 0.8,
        "queue_time_mean": 0.0 if seqs >= 64 else ttft * 0.7,
        "prefill_time_mean": 0.05,
        "running_mean": float(min(seqs, 40)),
        "running_max": float(min(seqs, 48)),
        "waiting_mean": waiting,
        "waiting_max": waiting * 2,
    }


async def test_a_queueing_deployment_is_tuned_until_its_ttft_target_is_met(tmp_path: Path) -> None:
    args = [MODEL, "--max-num-seqs", "16"]
    async with cluster(tmp_path, queueing, args) as world:
        await world.api.create(latency_target())
        async with operator_running(world, tmp_path):

            async def converged() -> dict[str, Any] | None:
                status = await world.status()
                return status if status.get("phase") == "Converged" else None

            status = await eventually(converged, within=60)
        final_args = await world.args()
    assert final_args == [MODEL, "--max-num-seqs", "64"]
    trials = status["trials"]
    assert [(t["knob"], t["from"], t["to"], t["verdict"]) for t in trials] == [
        ("maxNumSeqs", "16", "32", "Keep"),
        ("maxNumSeqs", "32", "64", "Keep"),
    ]
    assert trials[0]["before"]["ttftSeconds"] == 2.0
    assert trials[0]["after"]["ttftSeconds"] == 0.9
    # What the planner expected of the first trial, and what its windows showed, through the API.
    (prediction,) = trials[0]["predictions"]
    assert prediction["objective"] == "ttft"
    assert prediction["expectedChange"] < 0
    assert prediction["measuredChange"] == pytest.approx(0.9 / 2.0 - 1, abs=1e-3)
    met = condition(status, "TargetsMet")
    assert met is not None
    assert met["status"] == "True"
    assert status["baseline"]["args"] == args
    assert status["diagnosis"]["bottleneck"] in ("None", "Queueing")


def worse_with_32_seqs_better_with_a_bigger_step_budget(cl: VllmCommandLine) -> float:
    if cl.get("max-num-batched-tokens") == "16384":
        return 0.3
    return 3.0 if cl.get("max-num-seqs") == "32" else 2.0


async def test_a_change_that_makes_things_worse_is_reverted_and_a_helpful_one_kept(
    tmp_path: Path,
) -> None:
    args = [MODEL, "--max-num-seqs", "16"]
    profile = queueing_world(worse_with_32_seqs_better_with_a_bigger_step_budget)
    knobs = {"prefixCaching": False, "chunkedPrefill": False, "gpuMemoryUtilization": None}
    async with cluster(tmp_path, profile, args) as world:
        await world.api.create(latency_target(knobs=knobs))
        async with operator_running(world, tmp_path):

            async def converged() -> dict[str, Any] | None:
                status = await world.status()
                return status if status.get("phase") == "Converged" else None

            status = await eventually(converged, within=60)
            reverting = await posted(world, Reason.REVERTING)
            rolled_back = await posted(world, Reason.ROLLED_BACK)
        final_args = await world.args()
    served = [list(cl.render()[1] or []) for _, _, cl in world.served[DEPLOYMENT]]
    assert served == [
        args,
        [MODEL, "--max-num-seqs", "32"],
        args,  # rolled back to the original arguments
        [*args, "--max-num-batched-tokens", "16384"],
    ]
    assert final_args == [*args, "--max-num-batched-tokens", "16384"]
    revert, keep = status["trials"]
    assert (revert["knob"], revert["from"], revert["to"], revert["verdict"]) == (
        "maxNumSeqs", "16", "32", "Revert"
    )  # fmt: skip
    assert (revert["before"]["ttftSeconds"], revert["after"]["ttftSeconds"]) == (2.0, 3.0)
    assert revert["finishedAt"]
    assert (keep["knob"], keep["to"], keep["verdict"]) == ("maxNumBatchedTokens", "16384", "Keep")
    assert status["baseline"]["args"] == args
    assert status["incompatible"] == []  # worse is not broken: 32 may be tried under other loads
    assert reverting
    assert "trial 1" in reverting[0]["message"]
    assert rolled_back
    assert rolled_back[0]["involvedObject"]["name"] == "llama-latency"
