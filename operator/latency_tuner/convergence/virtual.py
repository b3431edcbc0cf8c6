"""The convergence benchmark's world behind the loop's ports: a virtual Deployment of simulated
vLLM pods, its node, the LatencyTarget held in memory, simulated metrics and a virtual clock.

The virtual Deployment behaves like a rolling update with one replica: a new configuration
starts a new pod (``STARTUP_SECONDS`` later it is ready and takes the traffic, with a cold
prefix cache; the old pod serves meanwhile); a configuration the simulator refuses to start
(``StartupError``) or that needs more GPUs than a node has is a pod stuck in CrashLoopBackOff /
Unschedulable, which the loop reads from the pods and the Deployment's status; rolling back to
the pod still serving completes at once, as Kubernetes does. The load never stops.

``virtual_ports`` adapts it to ``controller.ports``: the production ``Reconciler`` runs over it
exactly as over the Kubernetes and Prometheus adapters (``ports_over`` does the same for any
virtual world: ``replicated`` adds replicas and canaries). No I/O, no real clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from latency_tuner.api.resource import LatencyTarget
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.controller.deployment import DEFAULT_GPU_RESOURCE, DeploymentView
from latency_tuner.controller.errors import StaleWrite
from latency_tuner.controller.ports import (
    CanaryDeployments,
    Deployments,
    MetricsSource,
    NodeGpu,
    Ports,
)
from latency_tuner.convergence.evaluate import Failed, engine_config
from latency_tuner.convergence.measure import DEPLOYMENT, NAMESPACE, SCRAPE_SECONDS, Pod, Recorder
from latency_tuner.convergence.scenario import Scenario
from latency_tuner.convergence.space import start_container
from latency_tuner.convergence.world import Load, World
from latency_tuner.core.cluster import ContainerConfig, PodFacts
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.simulator.hardware import get_gpu

T0 = datetime(2026, 1, 1, tzinfo=UTC)  # virtual time 0
STARTUP_SECONDS = 30.0
NODE = "gpu-node"
TARGET = "llama-latency"


@dataclass
class _Pending:
    container: ContainerConfig
    pod: Pod | None  # None: it never serves
    ready_at: float
    problem: str | None


class VirtualDeployment:
    """One-replica Deployment of simulated vLLM pods, serving one continuous load."""

    def __init__(self, scenario: Scenario, world: World, seed: int) -> None:
        self.scenario = scenario
        self.world = world
        self.seed = seed
        self.load = Load(scenario.workload, world, seed=seed, stream=f"{scenario.name}:operator")
        self.recorder = Recorder()
        self.container = start_container(scenario)
        self.generation = 1
        self.pods_started = 0
        self.now = 0.0
        pod = self._pod(self.container, 0.0)
        if not isinstance(pod, Pod):
            raise ValueError(f"the starting configuration does not start: {pod.reason}")
        self.serving, self.serving_container = pod, self.container
        self.pending: _Pending | None = None
        self.serving.sample(self.recorder, 0.0)

    def _pod(self, container: ContainerConfig, at: float) -> Pod | Failed:
        config = engine_config(self.scenario, self.world, container, self.seed)
        if isinstance(config, Failed):
            return config
        self.pods_started += 1
        name = f"{DEPLOYMENT}-{container.fingerprint()[:8]}-p{self.pods_started}"
        return Pod(
            name, config, self.world, self.load, seed=self.seed + self.pods_started, started=at
        )

    def apply(self, container: ContainerConfig) -> None:
        """A patch of the pod template: a rollout starts (or completes at once when the pod
        still serving already runs it)."""
        self.container = container
        self.generation += 1
        if container == self.serving_container:
            self.pending = None
            return
        pod = self._pod(container, self.now + STARTUP_SECONDS)
        if isinstance(pod, Failed):
            self.pending = _Pending(container, None, float("inf"), pod.reason)
        else:
            self.pending = _Pending(container, pod, self.now + STARTUP_SECONDS, None)

    def advance(self, until: float) -> None:
        """Serve until ``until``, scraping every ``SCRAPE_SECONDS``; a pod that became ready
        takes the traffic from the old one."""
        while self.now < until:
            t = min(until, (self.now // SCRAPE_SECONDS + 1) * SCRAPE_SECONDS)
            pending = self.pending
            if pending is not None and pending.pod is not None and pending.ready_at <= t:
                t = max(self.now, pending.ready_at)
                self.serving.run_until(t)
                self.serving.serving = False
                self.serving, self.serving_container = pending.pod, pending.container
                self.pending = None
                self.serving.sample(self.recorder, t)
                self.now = t
                continue
            self.serving.run_until(t)
            self.now = t
            if t % SCRAPE_SECONDS == 0:
                self.serving.sample(self.recorder, t)

    def pods(self) -> tuple[PodFacts, ...]:
        """The serving pod, and the new one while a rollout is under way."""
        old = PodFacts(
            name=self.serving.name,
            node=NODE,
            ready=True,
            restarts=0,
            config_fingerprint=self.serving_container.fingerprint(),
        )
        if self.pending is None:
            return (old,)
        new = PodFacts(
            name=f"{DEPLOYMENT}-{self.pending.container.fingerprint()[:8]}-new",
            node=NODE,
            ready=False,
            restarts=3 if self.pending.problem else 0,
            problem=self.pending.problem,
            config_fingerprint=self.pending.container.fingerprint(),
        )
        return (old, new)

    def deployment_object(self) -> dict[str, Any]:
        """The Deployment as the API would return it, status included."""
        container = container_manifest(self.container)
        # One replica: during a rollout the old pod serves and the new one is not ready yet.
        total = 1 if self.pending is None else 2
        return {
            "metadata": {
                "name": DEPLOYMENT,
                "namespace": NAMESPACE,
                "generation": self.generation,
                "resourceVersion": str(self.generation),
            },
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": DEPLOYMENT}},
                "template": {"spec": {"containers": [container]}},
            },
            "status": {
                "observedGeneration": self.generation,
                "replicas": total,
                "updatedReplicas": 1,
                "readyReplicas": 1,
                "availableReplicas": 1,
            },
        }


def container_manifest(c: ContainerConfig) -> dict[str, Any]:
    """The vLLM container of a virtual Deployment's pod template."""
    container: dict[str, Any] = {"name": "vllm", "image": c.image}
    if c.command is not None:
        container["command"] = list(c.command)
    if c.args is not None:
        container["args"] = list(c.args)
    container["resources"] = {"limits": {DEFAULT_GPU_RESOURCE: str(c.gpu_limit or 1)}}
    return container


class VirtualDeployments:
    """``ports.Deployments`` over the one virtual Deployment."""

    def __init__(self, deployment: VirtualDeployment) -> None:
        self.deployment = deployment

    async def get(self, *, namespace: str, name: str) -> DeploymentView | None:
        if (namespace, name) != (NAMESPACE, DEPLOYMENT):
            return None
        return DeploymentView(self.deployment.deployment_object())

    async def pods(
        self, deployment: DeploymentView, *, container: str | None, gpu_resource: str
    ) -> tuple[PodFacts, ...]:
        return self.deployment.pods()

    async def patch_container(
        self,
        deployment: DeploymentView,
        *,
        container: str | None,
        config: ContainerConfig,
        gpu_resource: str,
        annotations: Mapping[str, str] | None = None,
    ) -> DeploymentView:
        if deployment.resource_version != str(self.deployment.generation):
            raise StaleWrite(f"Deployment {DEPLOYMENT} changed since it was read")
        self.deployment.apply(config)
        return DeploymentView(self.deployment.deployment_object())


class VirtualNode:
    """``ports.Nodes``: the scenario's node, labelled as GPU feature discovery would."""

    def __init__(self, scenario: Scenario) -> None:
        self.gpu = NodeGpu(
            node=NODE,
            product=get_gpu(scenario.gpu).name,
            count=scenario.gpu_budget,
            interconnect=scenario.effective_interconnect,
        )

    async def gpus(self, names: Iterable[str]) -> list[NodeGpu]:
        return [self.gpu] if NODE in set(names) else []


class MemoryLatencyTargets:
    """``ports.LatencyTargets``: the one LatencyTarget, its status kept in memory."""

    def __init__(self, spec: LatencyTargetSpec) -> None:
        metadata = {
            "name": TARGET,
            "namespace": NAMESPACE,
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        }
        self.body = LatencyTarget(metadata=metadata, spec=spec).to_manifest()
        self.status = LatencyTargetStatus()

    async def get(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        if (namespace, name) != (NAMESPACE, TARGET):
            return None
        status = self.status.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {**self.body, "status": status}

    async def list(self, *, namespace: str) -> list[dict[str, Any]]:
        return [self.body] if namespace == NAMESPACE else []

    async def write_status(
        self, *, namespace: str, name: str, status: LatencyTargetStatus
    ) -> Mapping[str, Any]:
        self.status = status
        return self.body


class SimulatedMetrics:
    """``ports.MetricsSource``: windows of the simulated pods' metric families."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        assert end is not None, "virtual time has no 'now' of its own"
        return self.recorder.observe(
            end=end - T0.timestamp(),
            seconds=window_seconds,
            percentiles=percentiles,
            matchers=matchers,
        )


def virtual_ports(
    scenario: Scenario, deployment: VirtualDeployment, spec: LatencyTargetSpec
) -> tuple[Ports, MemoryLatencyTargets]:
    """The loop's ports over ``deployment``; the clock is its virtual time."""
    return ports_over(
        scenario,
        spec,
        deployments=VirtualDeployments(deployment),
        recorder=deployment.recorder,
        now=lambda: deployment.now,
    )


def ports_over(
    scenario: Scenario,
    spec: LatencyTargetSpec,
    *,
    deployments: Deployments,
    recorder: Recorder,
    now: Callable[[], float],
    canaries: CanaryDeployments | None = None,
) -> tuple[Ports, MemoryLatencyTargets]:
    """The loop's ports over a virtual world: its Deployments (and canaries, if it runs
    them), the metrics its ``recorder`` holds, the LatencyTarget in memory, the scenario's
    node; the clock is the world's virtual time ``now()``."""
    targets = MemoryLatencyTargets(spec)
    metrics = SimulatedMetrics(recorder)

    async def metrics_for(_spec: LatencyTargetSpec, _namespace: str, _name: str) -> MetricsSource:
        return metrics

    ports = Ports(
        deployments=deployments,
        latencytargets=targets,
        metrics_for=metrics_for,
        nodes=VirtualNode(scenario),
        clock=lambda: T0 + timedelta(seconds=now()),
        canaries=canaries,
    )
    return ports, targets
