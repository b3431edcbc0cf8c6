"""A reconcile handed a stale body (a change handler queued behind the timer's lock, a watch
event not yet arrived) decides on the status as stored, never on the stale copy: the trial in
flight is neither lost nor started twice. The Reconciler runs by hand against the emulator,
with a clock the test moves."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.integration.operator.harness import (
    SEQS_ONLY,
    args_patches,
    by_seqs,
    cluster,
    eventually,
    latency_target,
    queueing,
)

from latency_tuner.adapters.kubernetes.client import make_api_client
from latency_tuner.adapters.kubernetes.deployments import Deployments
from latency_tuner.adapters.kubernetes.latencytargets import LatencyTargets
from latency_tuner.adapters.kubernetes.nodes import Nodes
from latency_tuner.controller.ports import Ports
from latency_tuner.controller.reconciler import Reconciler

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = [MODEL, "--max-num-seqs", "16"]


async def test_a_stale_body_does_not_overwrite_the_trial_in_flight(tmp_path: Path) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        stale = await world.api.create(latency_target(knobs=SEQS_ONLY))
        client = make_api_client(os.environ["KUBECONFIG"])
        now = datetime.now(UTC)
        reconciler = Reconciler(
            Ports(
                deployments=Deployments(client),
                nodes=Nodes(client),
                latencytargets=LatencyTargets(client),
                metrics_for=world.metrics_for,
                clock=lambda: now,
            )
        )
        await reconciler.run(stale)  # the clean window starts after the settle time
        now += timedelta(seconds=5)
        started = await reconciler.run(stale)
        assert started.patched == 1
        in_flight = await world.status()
        assert in_flight["phase"] == "RollingOut"

        async def rolled_out() -> bool:
            dep = await world.deployment()
            return bool(dep.get("status", {}).get("observedGeneration") == 2)

        await eventually(rolled_out, within=5)
        now += timedelta(seconds=0.5)
        again = await reconciler.run(stale)  # the body still has no status at all
        after = await world.status()
    assert again.patched == 0
    assert after["currentTrial"]["id"] == in_flight["currentTrial"]["id"]
    assert after["currentTrial"]["startedAt"] == in_flight["currentTrial"]["startedAt"]
    assert after["phase"] == "Settling"  # it went on from RollingOut
    assert after["baseline"] == in_flight["baseline"]
    assert args_patches(world.deployment_patches(), [MODEL, "--max-num-seqs", "32"]) == 1
