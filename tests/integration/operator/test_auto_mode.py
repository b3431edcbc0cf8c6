"""In Auto mode the operator keeps changes that help, reverts those that do not, and stops when
the targets are met — kopf really running against the API emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.operator.harness import (
    cluster,
    condition,
    eventually,
    latency_target,
    operator_running,
)

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
    met = condition(status, "TargetsMet")
    assert met is not None
    assert met["status"] == "True"
    assert status["baseline"]["args"] == args
    assert status["diagnosis"]["bottleneck"] in ("None", "Queueing")
