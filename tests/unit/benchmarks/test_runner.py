"""The virtual-time runner drives the production reconcile loop to convergence on an easy case."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from tests.unit.benchmarks.support import EASY

from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.reconciler import Outcome, Reconciler
from latency_tuner.convergence.operator_run import run_operator
from latency_tuner.convergence.scenario import parse_scenario
from latency_tuner.convergence.virtual import (
    MemoryLatencyTargets,
    VirtualDeployment,
    VirtualDeployments,
    VirtualNode,
)
from latency_tuner.convergence.world import make_world


def test_the_operator_meets_an_easy_target_in_one_rollout_of_virtual_time() -> None:
    result = run_operator(parse_scenario(EASY), make_world("matched", 0), 0, budget=6)
    assert result.success, result.reason
    assert result.rollouts == 1
    assert len(result.history) == 1
    # 16 slots clear the queue; the model expects 32 to leave TTFT with a clearly larger
    # margin (the refinement it would go on for), so the one move goes there.
    assert result.history[0].startswith("maxNumSeqs 8 -> 32: Keep")
    assert result.final.args == ("--max-num-seqs", "32")


def test_a_configuration_that_cannot_start_is_a_failing_pod_and_a_rollback_is_immediate() -> None:
    scenario = parse_scenario(EASY)
    dep = VirtualDeployment(scenario, make_world("matched", 0), 0)
    start = dep.container
    broken = type(start)(start.command, ("--max-num-seqs", "8", "-tp", "3"), start.image, 3)
    dep.apply(broken)
    dep.advance(40.0)
    rollout = DeploymentView(dep.deployment_object()).rollout(dep.pods())
    assert not rollout.complete
    assert rollout.failure(broken.fingerprint()) is not None
    dep.apply(start)  # back to the pod that still serves: done at once
    assert DeploymentView(dep.deployment_object()).rollout(dep.pods()).complete


def test_the_benchmark_runs_the_production_reconciler_over_its_virtual_adapters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No copy of the loop: every reconcile of the run is ``Reconciler.run`` itself, with the
    benchmark's adapters as its ports, and the run's rollouts are the patches it made."""
    calls: list[tuple[Reconciler, Outcome]] = []
    production = Reconciler.run

    async def spy(self: Reconciler, body: Mapping[str, Any], **kwargs: Any) -> Outcome:
        outcome = await production(self, body, **kwargs)
        calls.append((self, outcome))
        return outcome

    monkeypatch.setattr(Reconciler, "run", spy)
    result = run_operator(parse_scenario(EASY), make_world("matched", 0), 0, budget=6)
    assert result.success, result.reason
    assert calls, "the benchmark never called Reconciler.run"
    for reconciler, _ in calls:
        assert isinstance(reconciler.ports.deployments, VirtualDeployments)
        assert isinstance(reconciler.ports.latencytargets, MemoryLatencyTargets)
        assert isinstance(reconciler.ports.nodes, VirtualNode)
    assert sum(outcome.patched for _, outcome in calls) == result.rollouts
    reasons = [r for _, outcome in calls for r in outcome.reasons]
    assert "trial started" in reasons
    assert "kept" in reasons
