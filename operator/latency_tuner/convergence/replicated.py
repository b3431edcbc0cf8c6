"""The N-replica virtual world: a Deployment of N simulated vLLM pods behind one Service, and
the canary Deployment a canary trial puts beside it.

Load: the scenario's workload is what one replica serves; N replicas serve N times it (N x the
open rate, N x the closed-loop users), split evenly over every ready pod by ``service.Service``.
At full strength each pod sees the scenario's own load, so the oracle's one-pod steady state
of a configuration is each of its pods' steady state here.

Each Deployment (the main one and the canary) rolls like Kubernetes' Deployment controller
with its default strategy (maxSurge 25% rounded up, maxUnavailable 25% rounded down: with 2 or
3 replicas one new pod at a time, and no old pod removed before a new one is ready): a new pod
is ready ``virtual.STARTUP_SECONDS`` after it starts, with a cold cache; a configuration the
simulator refuses (or that needs more GPUs than a node has) is a pod that never becomes ready,
where the rollout stalls as Kubernetes' does; rolling back to the pods still serving completes
at once (the stuck pods go). Scaling down removes the pods not ready first, then the newest.
Pods are named ``<deployment>-<configuration hash>-p<n>`` and their series carry the
``namespace`` and ``pod`` labels a Prometheus would attach, so the production canary arms
(``core.canary.arms``) select them with the same matchers as in a cluster. The node's GPUs are
not counted (a surge pod always fits), as in the one-replica world.

Ports: ``ReplicatedDeployments`` (``ports.Deployments``, for both Deployments) and
``VirtualCanaries`` (``ports.CanaryDeployments``; the canary object is the production
``core.canary.canary_deployment`` of the main one). The world counts, per configuration, the
requests its pods finished (the benchmark's harm figure). No I/O, no real clock.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.errors import ClusterError, StaleWrite
from latency_tuner.controller.ports import Ports
from latency_tuner.convergence.evaluate import Failed, engine_config
from latency_tuner.convergence.measure import DEPLOYMENT, NAMESPACE, SCRAPE_SECONDS, Pod, Recorder
from latency_tuner.convergence.scenario import Scenario
from latency_tuner.convergence.service import Service
from latency_tuner.convergence.space import start_container
from latency_tuner.convergence.virtual import (
    NODE,
    STARTUP_SECONDS,
    MemoryLatencyTargets,
    container_manifest,
    ports_over,
)
from latency_tuner.convergence.world import Load, World
from latency_tuner.core.canary import Owner, canary_deployment, canary_name
from latency_tuner.core.cluster import ContainerConfig, PodFacts

LABELS = {"app": DEPLOYMENT}


@dataclass
class Replica:
    """One pod of a virtual Deployment."""

    name: str
    container: ContainerConfig
    pod: Pod | None  # None: it never serves (refused, unschedulable)
    ready_at: float
    problem: str | None
    ready: bool = False


def surge_and_unavailable(replicas: int) -> tuple[int, int]:
    """Kubernetes' default RollingUpdate bounds: maxSurge 25% (rounded up), maxUnavailable 25%
    (rounded down); both 0 is not allowed, so a surge of one then."""
    surge, unavailable = math.ceil(replicas * 0.25), math.floor(replicas * 0.25)
    return (surge or (0 if unavailable else 1)), unavailable


class VirtualDeploymentObject:
    """One Deployment: its template's container, wanted replicas and pods."""

    def __init__(self, base: dict[str, Any], container: ContainerConfig, replicas: int) -> None:
        self.base = base  # the object as created: metadata, selector, template
        self.name = str(base["metadata"]["name"])
        self.container = container
        self.replicas = replicas
        self.generation = 1
        self.pods: list[Replica] = []

    def obj(self) -> dict[str, Any]:
        """The Deployment as the API would return it, status included."""
        obj = copy.deepcopy(self.base)
        meta = obj["metadata"]
        meta.update(namespace=NAMESPACE, generation=self.generation,
                    resourceVersion=str(self.generation))  # fmt: skip
        obj["spec"]["replicas"] = self.replicas
        obj["spec"]["template"]["spec"]["containers"] = [container_manifest(self.container)]
        ready = sum(1 for r in self.pods if r.ready)
        obj["status"] = {
            "observedGeneration": self.generation,
            "replicas": len(self.pods),
            "updatedReplicas": sum(1 for r in self.pods if r.container == self.container),
            "readyReplicas": ready,
            "availableReplicas": ready,
        }
        return obj

    def facts(self) -> tuple[PodFacts, ...]:
        return tuple(
            PodFacts(
                name=r.name,
                node=NODE,
                ready=r.ready,
                restarts=3 if r.problem else 0,
                problem=r.problem,
                config_fingerprint=r.container.fingerprint(),
            )
            for r in self.pods
        )

    def view(self) -> DeploymentView:
        return DeploymentView(self.obj())


def _removal_order(replicas: list[Replica]) -> list[Replica]:
    """Which pods a scale-down takes first: not ready, then the newest."""
    return sorted(replicas, key=lambda r: (r.ready, -r.ready_at))


class ReplicatedDeployment:
    """The main Deployment with ``replicas`` pods, the canary beside it, the Service and the
    metrics of every pod, in virtual time."""

    def __init__(self, scenario: Scenario, world: World, seed: int, replicas: int) -> None:
        if replicas < 1:
            raise ValueError("a Deployment needs at least one replica")
        self.scenario = scenario
        self.world = world
        self.seed = seed
        w = scenario.workload
        scaled = w.model_copy(
            update={"rate": None if w.rate is None else w.rate * replicas,
                    "users": None if w.users is None else w.users * replicas}
        )  # fmt: skip
        self.load = Load(scaled, world, seed=seed, stream=f"{scenario.name}:operator")
        self.service = Service(self.load, users=scaled.users or 0, full=replicas)
        self.recorder = Recorder()
        self.now = 0.0
        self.pods_started = 0
        self.canary_rollouts = 0  # configurations put on a canary
        self.template_history: list[ContainerConfig] = []  # the main template, every change
        self._served: dict[str, int] = {}  # requests finished by retired pods, per fingerprint
        self._configs: dict[str, ContainerConfig] = {}
        start = start_container(scenario)
        base = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE, "labels": dict(LABELS)},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": dict(LABELS)},
                "template": {"metadata": {"labels": dict(LABELS)}, "spec": {"containers": []}},
            },
        }
        self.main = VirtualDeploymentObject(base, start, replicas)
        self.template_history.append(start)
        self.canary: VirtualDeploymentObject | None = None
        for _ in range(replicas):  # the starting pods are up at time 0
            replica = self._start(self.main, start, 0.0)
            if replica.pod is None:
                raise ValueError(f"the starting configuration does not start: {replica.problem}")
            replica.ready = True
            self.main.pods.append(replica)
        self._ready: list[Pod] = []
        self._settle(0.0)
        for pod in self._ready:
            pod.sample(self.recorder, 0.0)

    @property
    def container(self) -> ContainerConfig:
        """The main Deployment's template."""
        return self.main.container

    def deployments(self) -> Iterator[VirtualDeploymentObject]:
        yield self.main
        if self.canary is not None:
            yield self.canary

    def by_name(self, name: str) -> VirtualDeploymentObject | None:
        return next((d for d in self.deployments() if d.name == name), None)

    # -- pods -----------------------------------------------------------------------------

    def _start(self, d: VirtualDeploymentObject, container: ContainerConfig, at: float) -> Replica:
        self.pods_started += 1
        name = f"{d.name}-{container.fingerprint()[:8]}-p{self.pods_started}"
        config = engine_config(self.scenario, self.world, container, self.seed)
        if isinstance(config, Failed):
            return Replica(name, container, None, math.inf, config.reason)
        pod = Pod(name, config, self.world, self.load, seed=self.seed + self.pods_started,
                  started=at, fed=True)  # fmt: skip
        return Replica(name, container, pod, at, None)

    def _retire(self, d: VirtualDeploymentObject, replica: Replica) -> None:
        d.pods.remove(replica)
        if replica.pod is not None:
            replica.pod.serving = False
            self._count(replica.container, len(replica.pod.engine.records))

    def _count(self, container: ContainerConfig, n: int) -> None:
        key = container.fingerprint()
        self._configs[key] = container
        self._served[key] = self._served.get(key, 0) + n

    def served(self) -> list[tuple[ContainerConfig, int]]:
        """Requests finished so far, per configuration (every pod, retired or serving)."""
        counts = dict(self._served)
        configs = dict(self._configs)
        for d in self.deployments():
            for r in d.pods:
                if r.pod is not None:
                    key = r.container.fingerprint()
                    configs[key] = r.container
                    counts[key] = counts.get(key, 0) + len(r.pod.engine.records)
        return [(configs[k], n) for k, n in counts.items()]

    def _roll(self, d: VirtualDeploymentObject, now: float) -> None:
        """Kubernetes' Deployment controller for ``d``, until nothing more can move now."""
        surge, unavailable = surge_and_unavailable(d.replicas)
        while True:
            new = [r for r in d.pods if r.container == d.container]
            old = [r for r in d.pods if r.container != d.container]
            if len(new) > d.replicas:  # scaled down
                for r in _removal_order(new)[: len(new) - d.replicas]:
                    self._retire(d, r)
                continue
            stuck = [r for r in old if not r.ready]  # old pods not ready go first, freely
            for r in stuck:
                self._retire(d, r)
            new_unready = sum(1 for r in new if not r.ready)
            can_go = len(d.pods) - (d.replicas - unavailable) - new_unready
            going = _removal_order([r for r in old if r.ready])[: max(0, can_go)]
            for r in going:
                self._retire(d, r)
            up = min(d.replicas + surge - len(d.pods), d.replicas - len(new))
            for _ in range(max(0, up)):
                d.pods.append(self._start(d, d.container, now + STARTUP_SECONDS))
            if not (stuck or going or up > 0):
                return

    def _settle(self, now: float) -> list[Pod]:
        """Both Deployments rolled as far as they can; the Service told of the ready pods.
        Returns the pods that became ready to serve."""
        for d in self.deployments():
            self._roll(d, now)
        ready = [r.pod for d in self.deployments() for r in d.pods if r.ready and r.pod]
        added = [p for p in ready if p not in self._ready]
        if ready != self._ready:
            self.service.set_ready(ready, now)
            self._ready = ready
        return added

    def advance(self, until: float) -> None:
        """Serve until ``until``, scraping every ready pod every ``SCRAPE_SECONDS``; a pod
        that becomes ready joins the Service then (and its Deployment rolls on)."""
        while self.now < until:
            t = min(until, (self.now // SCRAPE_SECONDS + 1) * SCRAPE_SECONDS)
            due = min((r.ready_at for d in self.deployments() for r in d.pods
                       if not r.ready and r.pod is not None), default=math.inf)  # fmt: skip
            if due <= t:
                t = max(self.now, due)
                self.service.run_until(t)
                self.now = t
                for d in self.deployments():
                    for r in d.pods:
                        if r.pod is not None and r.ready_at <= t:
                            r.ready = True
                added = self._settle(t)
                for pod in self._ready if t % SCRAPE_SECONDS == 0 else added:
                    pod.sample(self.recorder, t)
                continue
            self.service.run_until(t)
            self.now = t
            if t % SCRAPE_SECONDS == 0:
                for pod in self._ready:
                    pod.sample(self.recorder, t)

    # -- what the ports do ------------------------------------------------------------------

    def patch(self, d: VirtualDeploymentObject, container: ContainerConfig) -> None:
        """A new pod template (a no-op patch changes nothing, as in Kubernetes)."""
        if container == d.container:
            return
        d.container = container
        d.generation += 1
        if d is self.main:
            self.template_history.append(container)
        else:
            self.canary_rollouts += 1
        self._settle(self.now)

    def scale(self, d: VirtualDeploymentObject, replicas: int) -> None:
        if replicas == d.replicas:
            return
        d.replicas = replicas
        d.generation += 1
        self._settle(self.now)

    def ensure_canary(self, base: dict[str, Any], container: ContainerConfig) -> None:
        """The canary at ``container`` with one replica (created from ``base``, the production
        derivation of the main Deployment: zero replicas, the main template)."""
        if self.canary is None:
            self.canary = VirtualDeploymentObject(base, self.main.container, 0)
        self.patch(self.canary, container)
        self.scale(self.canary, 1)

    def remove_canary(self) -> bool:
        canary = self.canary
        if canary is None:
            return False
        for r in list(canary.pods):
            self._retire(canary, r)
        self.canary = None
        self._settle(self.now)
        return True


def _guarded(world: ReplicatedDeployment, view: DeploymentView) -> VirtualDeploymentObject:
    """The Deployment ``view`` was read from, if it has not changed since (else StaleWrite)."""
    d = world.by_name(view.name)
    if d is None:
        raise ClusterError(f"Deployment {view.name} not found")
    if view.resource_version != str(d.generation):
        raise StaleWrite(f"Deployment {view.name} changed since it was read")
    return d


class ReplicatedDeployments:
    """``ports.Deployments`` over the main Deployment and its canary."""

    def __init__(self, world: ReplicatedDeployment) -> None:
        self.world = world

    async def get(self, *, namespace: str, name: str) -> DeploymentView | None:
        d = self.world.by_name(name) if namespace == NAMESPACE else None
        return None if d is None else d.view()

    async def pods(
        self, deployment: DeploymentView, *, container: str | None, gpu_resource: str
    ) -> tuple[PodFacts, ...]:
        d = self.world.by_name(deployment.name)
        return () if d is None else d.facts()

    async def patch_container(
        self,
        deployment: DeploymentView,
        *,
        container: str | None,
        config: ContainerConfig,
        gpu_resource: str,
        annotations: Mapping[str, str] | None = None,
    ) -> DeploymentView:
        d = _guarded(self.world, deployment)
        self.world.patch(d, config)
        return d.view()


class VirtualCanaries:
    """``ports.CanaryDeployments``: the one canary of the virtual world."""

    def __init__(self, world: ReplicatedDeployment) -> None:
        self.world = world

    async def get(self, main: DeploymentView, owner: Owner) -> DeploymentView | None:
        canary = self.world.canary
        if canary is None or canary.name != canary_name(main.name, owner.name):
            return None
        return canary.view()

    async def ensure(
        self,
        main: DeploymentView,
        owner: Owner,
        *,
        container: str | None,
        config: ContainerConfig,
        gpu_resource: str,
        annotations: dict[str, str] | None = None,
    ) -> DeploymentView:
        self.world.ensure_canary(canary_deployment(main.obj, owner), config)
        assert self.world.canary is not None
        return self.world.canary.view()

    async def scale(self, deployment: DeploymentView, replicas: int) -> DeploymentView:
        d = _guarded(self.world, deployment)
        self.world.scale(d, replicas)
        return d.view()

    async def remove(self, main: DeploymentView, owner: Owner) -> bool:
        return self.world.remove_canary()


def replicated_ports(
    scenario: Scenario, world: ReplicatedDeployment, spec: LatencyTargetSpec
) -> tuple[Ports, MemoryLatencyTargets]:
    """The loop's ports over the N-replica world, canaries included (``spec.strategy``
    decides whether trials use them)."""
    return ports_over(
        scenario,
        spec,
        deployments=ReplicatedDeployments(world),
        recorder=world.recorder,
        now=lambda: world.now,
        canaries=VirtualCanaries(world),
    )
