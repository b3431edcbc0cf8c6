"""The operator steps back when it should: a paused LatencyTarget applies nothing until
unpaused, an outside change mid-trial pauses tuning without a fight, and a failing metrics
source changes nothing until it is back — kopf running against the API emulator."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.integration.operator.harness import (
    SEQS_ONLY,
    args_patches,
    by_seqs,
    cluster,
    condition,
    eventually,
    latency_target,
    operator_running,
    phase_in,
    posted,
    queueing,
)

from latency_tuner.core.rollout import Reason

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = [MODEL, "--max-num-seqs", "16"]
SEQS_32 = [MODEL, "--max-num-seqs", "32"]
SEQS_64 = [MODEL, "--max-num-seqs", "64"]


async def test_a_paused_target_applies_nothing_and_unpausing_resumes_the_trial(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path):
            await phase_in(world, "Settling", "Measuring")
            await world.set_spec(paused=True)
            paused = await phase_in(world, "Paused")
            generation = (await world.deployment())["metadata"]["generation"]
            patches = len(world.deployment_patches())
            # Longer than the rest of trial 1 (settle 1 s + window 3 s) and the start of trial 2.
            await asyncio.sleep(4.5)
            still = await world.status()
            args_while_paused = await world.args()
            generation_while_paused = (await world.deployment())["metadata"]["generation"]
            patches_while_paused = len(world.deployment_patches())
            await world.set_spec(paused=False)
            converged = await phase_in(world, "Converged")
            resumed = await posted(world, Reason.RESUMED)
        final_args = await world.args()
    assert paused["currentTrial"]["to"] == "32"  # the trial waits with its change in place
    progressing = condition(paused, "Progressing")
    assert progressing is not None
    assert progressing["reason"] == "Paused"
    assert still["phase"] == "Paused"
    assert args_while_paused == SEQS_32
    assert (generation_while_paused, patches_while_paused) == (generation, patches)
    assert resumed
    assert [(t["to"], t["verdict"]) for t in converged["trials"]] == [
        ("32", "Keep"),
        ("64", "Keep"),
    ]
    assert final_args == SEQS_64
    assert args_patches(world.deployment_patches(), SEQS_32) == 1  # resumed, not re-applied


async def test_an_outside_change_mid_trial_pauses_tuning_and_is_not_fought(
    tmp_path: Path,
) -> None:
    theirs = [MODEL, "--max-num-seqs", "48"]
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path):
            await phase_in(world, "Measuring")
            await world.set_args(theirs)
            paused = await phase_in(world, "Paused")
            ticks = world.observe_calls
            await eventually(lambda: _more(world, ticks, 4), within=10)
            after = await world.status()
            args_after = await world.args()
            drift_events = await posted(world, Reason.DRIFT)
    degraded = condition(paused, "Degraded")
    assert degraded is not None
    assert (degraded["status"], degraded["reason"]) == ("True", "Drift")
    assert "changed outside the operator" in degraded["message"]
    assert "currentTrial" not in paused
    (abandoned,) = paused["trials"]
    assert abandoned["verdict"] == "Inconclusive"
    assert "someone else" in abandoned["reason"]
    assert args_after == theirs  # not fought: their arguments stay
    assert after["phase"] == "Paused"
    assert len(world.deployment_patches()) == 1  # only the trial's own patch, ever
    assert drift_events


async def test_a_failing_metrics_source_changes_nothing_until_it_is_back(tmp_path: Path) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS, metrics_down=True) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path):

            async def unavailable() -> dict[str, Any] | None:
                status = await world.status()
                metrics = condition(status, "MetricsAvailable")
                return status if metrics and metrics["reason"] == "MetricsSourceError" else None

            down = await eventually(unavailable, within=15)
            await asyncio.sleep(4.5)  # longer than settle + window: a trial would have started
            still_down = await world.status()
            patches_while_down = len(world.deployment_patches())
            world.metrics_down = False
            trial = await phase_in(world, "RollingOut", "Settling", "Measuring")
    metrics = condition(down, "MetricsAvailable")
    assert metrics is not None
    assert metrics["status"] == "False"
    assert "unreachable" in metrics["message"]
    assert still_down["phase"] == "Observing"
    assert "currentTrial" not in still_down
    assert "baseline" not in still_down
    assert patches_while_down == 0
    back = condition(trial, "MetricsAvailable")
    assert back is not None
    assert back["status"] == "True"
    assert trial["currentTrial"]["to"] == "32"


async def _more(world: Any, start: int, n: int) -> bool:
    return bool(world.observe_calls - start >= n)


async def test_an_unexpected_failure_shows_on_ready_and_in_a_warning_never_silence(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:

        async def broken(*_: Any) -> Any:
            raise RuntimeError("an input nothing foresaw")

        world.script.metrics_for = broken  # type: ignore[method-assign,assignment]
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path):
            (event, *_) = await posted(world, Reason.RECONCILE_ERROR, within=30)

            async def not_ready() -> dict[str, Any] | None:
                ready = condition(await world.status(), "Ready")
                return ready if ready and ready["reason"] == "ReconcileError" else None

            ready = await eventually(not_ready)
        args = await world.args()
    assert event["type"] == "Warning"
    assert "RuntimeError: an input nothing foresaw" in event["message"]
    assert ready["status"] == "False"
    assert "RuntimeError" in ready["message"]
    assert args == ARGS  # nothing was changed
