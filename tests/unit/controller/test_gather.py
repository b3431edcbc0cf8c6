"""``controller.gather`` builds a round's facts from the ports: the container under the GPU
resource the spec names, the node's GPUs under the spec's overrides, why a target is blocked,
and the quality gate's answers (none asked for when the samples are refused). The ports are
in-memory fakes (``latency_tuner.testing.cluster``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.controller.gather import gather, quality_answers
from latency_tuner.controller.ports import MetricsSource, NodeGpu, Ports
from latency_tuner.core.cluster import PodFacts
from latency_tuner.core.quality.samples import InvalidSamples, not_lent_message
from latency_tuner.core.rollout import Blocked, Blocker, Ready
from latency_tuner.core.rollout.facts import QualityFailure
from latency_tuner.testing.cluster import StaticDeployments, StaticLatencyTargets, StaticNodes
from latency_tuner.testing.metrics import ScriptedMetrics
from latency_tuner.vllm.args import VllmCommandLine

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
MODEL = "meta-llama/Llama-3.1-70B-Instruct"


def deployment(limits: dict[str, str], command: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.11.0",
        "args": [MODEL, "--tensor-parallel-size", "2"],
        "resources": {"limits": limits},
    }
    if command is not None:
        container["command"], container["args"] = command, []
    return {
        "metadata": {"name": "llama", "namespace": "ml", "generation": 1},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [container]}}},
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                   "readyReplicas": 1, "availableReplicas": 1},
    }  # fmt: skip


def spec(**fields: Any) -> LatencyTargetSpec:
    body: dict[str, Any] = {
        "targetRef": {"name": "llama", "container": "vllm"},
        "objectives": {"itl": {"percentile": 90, "threshold": "30ms"}},
    }
    body.update(fields)
    return LatencyTargetSpec.model_validate(body)


def target(name: str, created: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": created},
        "spec": {"targetRef": {"name": "llama"}},
    }


POD = PodFacts(name="llama-1", node="gpu-node-1", ready=True, restarts=0)
NODE = NodeGpu("gpu-node-1", "NVIDIA-H100-80GB-HBM3", 8, "NVLink")


def ports(
    dep: dict[str, Any] | None, *, targets: list[dict[str, Any]] | None = None
) -> tuple[Ports, StaticNodes]:
    nodes = StaticNodes({"gpu-node-1": NODE})
    metrics = ScriptedMetrics(lambda _dep, _start, _end: None)

    async def metrics_for(_s: LatencyTargetSpec, _ns: str, _name: str) -> MetricsSource:
        return await metrics.metrics_for(_s, _ns, _name)

    deployments = StaticDeployments({"llama": dep} if dep else {}, {"llama": (POD,)})
    return (
        Ports(
            deployments=deployments,
            latencytargets=StaticLatencyTargets(targets or [target("mine", "2026-01-01")]),
            metrics_for=metrics_for,
            nodes=nodes,
        ),
        nodes,
    )


async def round_facts(s: LatencyTargetSpec, p: Ports, name: str = "mine") -> Ready | Blocked:
    return await gather(p, s, LatencyTargetStatus(), "ml", name, NOW)


async def test_the_gpu_resource_of_the_spec_names_the_limit_the_operator_reads() -> None:
    p, _ = ports(deployment({"amd.com/gpu": "2"}))
    tp = {"tensorParallel": {"maxSize": 4, "gpuResource": "amd.com/gpu"}}
    facts = await round_facts(spec(knobs=tp), p)
    assert isinstance(facts, Ready)
    assert facts.gpu_resource == "amd.com/gpu"
    assert facts.container.gpu_limit == 2


async def test_without_tensor_parallelism_the_operator_wide_gpu_resource_is_read() -> None:
    p, _ = ports(deployment({"amd.com/gpu": "2"}))
    facts = await round_facts(spec(), p)
    assert isinstance(facts, Ready)
    assert facts.gpu_resource == "nvidia.com/gpu"
    assert facts.container.gpu_limit is None  # no nvidia.com/gpu limit on this container


async def test_a_spec_naming_the_gpu_still_reads_the_node_for_how_many_it_has() -> None:
    p, nodes = ports(deployment({"nvidia.com/gpu": "2"}))
    hardware = {"gpuProduct": "NVIDIA-A100-SXM4-80GB", "interconnect": "PCIe"}
    facts = await round_facts(spec(hardware=hardware), p)
    assert isinstance(facts, Ready)
    assert nodes.reads == 1
    assert facts.hardware.gpus_per_node == 8  # from the node
    assert facts.hardware.interconnect == "PCIe"  # from the spec
    assert facts.hardware.gpu_product is not None
    assert "A100" in facts.hardware.gpu_product


@pytest.mark.parametrize(
    ("case", "dep", "targets", "blocker", "detail"),
    [
        ("no Deployment", None, None, Blocker.DEPLOYMENT_NOT_FOUND, ""),
        (
            "an older LatencyTarget",
            deployment({}),
            [target("mine", "2026-02-01"), target("older", "2026-01-01")],
            Blocker.CONFLICT,
            "older",
        ),
        ("not vLLM", deployment({}, ["nginx", "-g", "daemon off;"]), None, Blocker.NOT_VLLM, ""),
    ],
)
async def test_a_target_the_operator_cannot_work_on_is_blocked_and_says_why(
    case: str,
    dep: dict[str, Any] | None,
    targets: list[dict[str, Any]] | None,
    blocker: Blocker,
    detail: str,
) -> None:
    p, _ = ports(dep, targets=targets)
    facts = await round_facts(spec(), p)
    assert isinstance(facts, Blocked), case
    assert facts.blocker is blocker
    assert detail in facts.detail


class RefusingProbe:
    """Refuses every ConfigMap, as the Kubernetes adapter refuses one without the opt-in label;
    records every pod asked for answers."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def samples(self, *, namespace: str, name: str, key: str) -> str:
        raise InvalidSamples(not_lent_message(namespace, name))

    async def answers(
        self, base_url: str, model: str, prompts: Sequence[str], *, max_tokens: int
    ) -> tuple[list[str | None], list[str]]:
        self.asked.append(base_url)
        return [None] * len(prompts), []


def serving(name: str, ip: str) -> PodFacts:
    return PodFacts(name=name, node="gpu-node-1", ready=True, restarts=0, ip=ip, metrics_port=8000)


async def test_refused_quality_samples_fail_the_gate_before_any_pod_is_asked() -> None:
    probe = RefusingProbe()
    p = dataclasses.replace(ports(deployment({}))[0], quality=probe)
    gated = spec(quality={"configMap": "team-secrets", "mode": "Reference"})
    got = await quality_answers(
        p,
        gated,
        "ml",
        VllmCommandLine.parse(None, [MODEL]),
        [serving("llama-1", "10.0.0.1")],
        [serving("llama-canary-1", "10.0.0.2")],
    )
    assert got == QualityFailure(not_lent_message("ml", "team-secrets"))
    assert probe.asked == []
