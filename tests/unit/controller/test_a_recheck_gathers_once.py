"""A re-check after the cooldown decides on the facts the reconcile already gathered: one
Deployment read, one node read and one metrics window (with its thirds), not two of each, and
one status write for its two steps; targets met again post no second TargetsMet Event. The
ports are in-memory fakes (``latency_tuner.testing``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from latency_tuner.controller.ports import NodeGpu, Ports
from latency_tuner.controller.reconciler import Reconciler
from latency_tuner.core.cluster import PodFacts
from latency_tuner.core.rollout.facts import BASELINE_SUBWINDOWS
from latency_tuner.testing.cluster import StaticDeployments, StaticLatencyTargets, StaticNodes
from latency_tuner.testing.metrics import ScriptedMetrics, queueing_signals

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CONTAINER = {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
             "args": ["meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "16"]}  # fmt: skip
DEPLOYMENT = {
    "metadata": {"name": "llama", "namespace": "ml", "generation": 1},
    "spec": {"replicas": 1, "template": {"spec": {"containers": [CONTAINER]}}},
    "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
               "readyReplicas": 1, "availableReplicas": 1},
}  # fmt: skip


class CountingDeployments(StaticDeployments):
    reads = 0

    async def get(self, *, namespace: str, name: str) -> Any:
        self.reads += 1
        return await super().get(namespace=namespace, name=name)


def converged_target(conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "lt", "namespace": "ml", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"targetRef": {"name": "llama", "container": "vllm"},
                 "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
                 "evaluation": {"window": "60s", "cooldown": "5m"}},
        "status": {"phase": "Converged", "phaseSince": "2026-12-02T11:00:00Z",
                   "stableSince": "2026-12-02T10:00:00Z", "observedGeneration": 1,
                   "conditions": conditions},
    }  # fmt: skip


def ports_for(
    target: dict[str, Any], deployments: StaticDeployments, script: ScriptedMetrics
) -> tuple[Ports, StaticNodes, StaticLatencyTargets]:
    nodes = StaticNodes({"gpu-1": NodeGpu("gpu-1", "NVIDIA-H100-80GB-HBM3", 8, "NVLink")})
    targets = StaticLatencyTargets([target])
    ports = Ports(
        deployments=deployments,
        latencytargets=targets,
        metrics_for=script.metrics_for,
        nodes=nodes,
        clock=lambda: NOW,
    )
    return ports, nodes, targets


def met_window() -> ScriptedMetrics:
    return ScriptedMetrics(lambda *_: queueing_signals(0.3, running_mean=4, running_max=6))


def pods() -> dict[str, tuple[PodFacts, ...]]:
    return {"llama": (PodFacts(name="llama-1-a", node="gpu-1", ready=True, restarts=0),)}


async def test_a_recheck_after_the_cooldown_reads_the_world_once() -> None:
    target = converged_target([])
    deployments = CountingDeployments({"llama": DEPLOYMENT}, pods())
    script = met_window()
    ports, nodes, targets = ports_for(target, deployments, script)
    outcome = await Reconciler(ports).run(target, claims=[("2026-01-01T00:00:00Z", "lt")])
    assert outcome.reasons[0] == "cooldown over: checking again"
    assert len(outcome.reasons) >= 2  # and the check itself, on the same facts
    # One window, read whole and in thirds (their spread bars a change for margin, should the
    # targets be met), and the configuration's longer window (what a give-up is judged on):
    # one gather for both steps.
    windows = 1 + BASELINE_SUBWINDOWS + 1
    assert (deployments.reads, nodes.reads, script.observe_calls) == (1, 1, windows)
    assert len(targets.written) == 1  # Converged -> Observing -> Converged: one write
    assert targets.written[0].phase.value == "Converged"


async def test_targets_met_again_at_a_recheck_post_no_second_targets_met_event() -> None:
    met = {"type": "TargetsMet", "status": "True", "reason": "TargetsMet", "message": "met",
           "lastTransitionTime": "2026-12-02T11:00:00Z", "observedGeneration": 1}  # fmt: skip
    target = converged_target([met])
    ports, _, _ = ports_for(
        target, CountingDeployments({"llama": DEPLOYMENT}, pods()), met_window()
    )
    outcome = await Reconciler(ports).run(target, claims=[("2026-01-01T00:00:00Z", "lt")])
    assert outcome.status is not None
    assert outcome.status.phase.value == "Converged"
    assert "TargetsMet" not in [n.reason for n in outcome.notes]


async def test_targets_met_that_were_missed_before_post_a_targets_met_event() -> None:
    missed = {"type": "TargetsMet", "status": "False", "reason": "TargetsMissed",
              "message": "missed", "lastTransitionTime": "2026-12-02T11:00:00Z",
              "observedGeneration": 1}  # fmt: skip
    target = converged_target([missed])
    target["status"]["phase"] = "Observing"
    ports, _, _ = ports_for(
        target, CountingDeployments({"llama": DEPLOYMENT}, pods()), met_window()
    )
    outcome = await Reconciler(ports).run(target, claims=[("2026-01-01T00:00:00Z", "lt")])
    assert outcome.status is not None
    assert outcome.status.phase.value == "Converged"
    assert "TargetsMet" in [n.reason for n in outcome.notes]
