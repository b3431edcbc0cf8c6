"""A re-check after the cooldown decides on the facts the reconcile already gathered: one
Deployment read, one node read and one metrics window, not two of each. The ports are
in-memory fakes (``latency_tuner.testing``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from latency_tuner.controller.ports import NodeGpu, Ports
from latency_tuner.controller.reconciler import Reconciler
from latency_tuner.core.cluster import PodFacts
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


async def test_a_recheck_after_the_cooldown_reads_the_world_once() -> None:
    target = {
        "metadata": {"name": "lt", "namespace": "ml", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"targetRef": {"name": "llama", "container": "vllm"},
                 "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
                 "evaluation": {"window": "60s", "cooldown": "5m"}},
        "status": {"phase": "Converged", "phaseSince": "2026-12-02T11:00:00Z",
                   "observedGeneration": 1},
    }  # fmt: skip
    deployments = CountingDeployments(
        {"llama": DEPLOYMENT},
        {"llama": (PodFacts(name="llama-1-a", node="gpu-1", ready=True, restarts=0),)},
    )
    nodes = StaticNodes({"gpu-1": NodeGpu("gpu-1", "NVIDIA-H100-80GB-HBM3", 8, "NVLink")})
    script = ScriptedMetrics(lambda *_: queueing_signals(0.3, running_mean=4, running_max=6))
    ports = Ports(
        deployments=deployments,
        latencytargets=StaticLatencyTargets([target]),
        metrics_for=script.metrics_for,
        nodes=nodes,
        clock=lambda: NOW,
    )
    outcome = await Reconciler(ports).run(target, claims=[("2026-01-01T00:00:00Z", "lt")])
    assert outcome.reasons[0] == "cooldown over: checking again"
    assert len(outcome.reasons) >= 2  # and the check itself, on the same facts
    assert (deployments.reads, nodes.reads, script.observe_calls) == (1, 1, 1)
