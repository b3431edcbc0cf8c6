"""One reconcile of one LatencyTarget: observe (adapters) -> decide (core) -> act (adapters).

``Reconciler.run`` gathers the facts ``core.rollout.decide`` needs, writes the status it returns
(one status patch per step), applies the container change it asks for (a guarded JSON patch),
and repeats at once while the decision says so (a trial is recorded before it is applied). It
returns the events to post; the kopf handlers post them. No decision is taken here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from latency_tuner.adapters.kubernetes.client import Conflict, KubernetesError
from latency_tuner.adapters.kubernetes.deployments import (
    ContainerNotFound,
    Deployments,
    DeploymentView,
)
from latency_tuner.adapters.kubernetes.latencytargets import LatencyTargets
from latency_tuner.adapters.kubernetes.nodes import Nodes
from latency_tuner.adapters.metrics import MetricsError, MetricsSource
from latency_tuner.adapters.metrics.scrape import ScrapeSource, ScrapeTarget
from latency_tuner.api.conditions import ConditionType, set_condition
from latency_tuner.api.resource import InvalidLatencyTarget, LatencyTarget
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus, Phase
from latency_tuner.core.cluster import PodFacts
from latency_tuner.core.diagnosis import NotVllm
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.promql import LabelMatcher, default_matchers
from latency_tuner.core.rollout import (
    Decision,
    Facts,
    MetricsFailure,
    Note,
    WindowResult,
    decide,
    windows_needed,
)
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

log = logging.getLogger("latency_tuner.reconcile")

MAX_STEPS = 6  # decisions chained in one reconcile (intent, patch, ...); the rest waits
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"


@dataclass
class Outcome:
    """What a reconcile did, for the handler (events) and the operator's own metrics."""

    notes: list[Note] = field(default_factory=list)
    status: LatencyTargetStatus | None = None
    initial: LatencyTargetStatus | None = None  # the status as read when the reconcile began
    patched: int = 0
    reasons: list[str] = field(default_factory=list)


MetricsFor = Callable[[LatencyTargetSpec, str, str], Awaitable[MetricsSource]]
# The LatencyTargets naming one Deployment: (creationTimestamp, name), oldest first wins.
Claims = Sequence[tuple[str, str]]


class Reconciler:
    """The shell around ``decide``: the clients it needs are given, never global."""

    def __init__(
        self,
        *,
        deployments: Deployments,
        nodes: Nodes | None,
        latencytargets: LatencyTargets,
        metrics_for: MetricsFor,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        gpu_resource: str = DEFAULT_GPU_RESOURCE,
        pod_targets: Callable[[str, str, Sequence[ScrapeTarget]], None] | None = None,
    ) -> None:
        self.deployments = deployments
        self.nodes = nodes
        self.latencytargets = latencytargets
        self.metrics_for = metrics_for
        self.clock = clock
        self.gpu_resource = gpu_resource
        self.pod_targets = pod_targets

    async def run(self, body: Mapping[str, Any], *, claims: Claims | None = None) -> Outcome:
        """One reconcile. ``claims``: the LatencyTargets that name the same Deployment, as
        (creationTimestamp, name) pairs from the handlers' index; None lists them instead."""
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        # The body a handler was given may predate the status our previous reconcile wrote
        # (a change handler queued behind the lock, a watch event not yet arrived): deciding
        # on that stale status could start a second trial or mistake our own patch for an
        # outside change. The status is our memory, so read it fresh.
        fresh = await self.latencytargets.get(namespace=namespace, name=name)
        if fresh is None:
            return Outcome()
        body = fresh
        meta = body.get("metadata") or {}
        generation = int(meta.get("generation") or 1)
        status = LatencyTargetStatus.model_validate(body.get("status") or {})
        outcome = Outcome(status=status, initial=status)
        try:
            target = LatencyTarget.from_manifest(body)
        except InvalidLatencyTarget as exc:
            await self._invalid_spec(namespace, name, generation, status, exc, outcome)
            return outcome
        spec = target.spec
        for _ in range(MAX_STEPS):
            now = self.clock()
            facts = await self.gather(spec, status, namespace, name, now, claims=claims)
            decision = decide(spec, generation, status, facts, now)
            outcome.reasons.append(decision.reason)
            if decision.status != status:
                await self.latencytargets.write_status(
                    namespace=namespace, name=name, status=decision.status
                )
            outcome.notes.extend(decision.notes)
            outcome.status = status = decision.status
            if decision.apply is not None and not await self._apply(decision, spec, facts, outcome):
                break
            if not decision.again:
                break
        return outcome

    async def _invalid_spec(
        self,
        namespace: str,
        name: str,
        generation: int,
        status: LatencyTargetStatus,
        exc: InvalidLatencyTarget,
        outcome: Outcome,
    ) -> None:
        message = "; ".join(exc.problems)
        now = self.clock()
        conditions = set_condition(
            status.conditions, ConditionType.READY, False, "InvalidSpec", message, now, generation
        )
        new = status.model_copy(
            update={
                "conditions": conditions,
                "phase": Phase.FAILED,
                "observed_generation": generation,
            }
        )
        if new != status:
            await self.latencytargets.write_status(namespace=namespace, name=name, status=new)
            outcome.notes.append(Note("Warning", "InvalidSpec", message))
        outcome.status = new

    async def _apply(
        self, decision: Decision, spec: LatencyTargetSpec, facts: Facts, outcome: Outcome
    ) -> bool:
        assert decision.apply is not None and facts.deployment is not None
        view = DeploymentView(dict(facts.deployment))
        try:
            await self.deployments.patch_container(
                view,
                container=spec.target_ref.container,
                config=decision.apply,
                gpu_resource=self.gpu_resource,
            )
        except Conflict:
            # The Deployment changed since we read it: read again next step, never overwrite.
            log.info("Deployment %s changed while patching; retrying", view.name)
            return False
        outcome.patched += 1
        return True

    # ---- facts --------------------------------------------------------------------------------

    async def gather(
        self,
        spec: LatencyTargetSpec,
        status: LatencyTargetStatus,
        namespace: str,
        name: str,
        now: datetime,
        *,
        claims: Claims | None = None,
    ) -> Facts:
        view = await self.deployments.get(namespace=namespace, name=spec.target_ref.name)
        if view is None:
            return Facts(deployment=None)
        try:
            index = view.container_index(spec.target_ref.container)
        except ContainerNotFound as exc:
            return Facts(deployment=view.obj, container_problem=str(exc))
        container = view.container_config(spec.target_ref.container, self.gpu_resource)
        try:
            command_line: VllmCommandLine | NotVllm = VllmCommandLine.parse(
                list(container.command) if container.command is not None else None,
                list(container.args) if container.args is not None else None,
            )
        except NotVllmError as exc:
            command_line = NotVllm(str(exc))
        pods = await self.deployments.pods(
            view, container=spec.target_ref.container, gpu_resource=self.gpu_resource
        )
        conflict = await self._conflict(spec, namespace, name, claims)
        facts = Facts(
            deployment=view.obj,
            container_index=index,
            container=container,
            command_line=command_line,
            rollout=view.rollout(pods),
            hardware=await self._hardware(spec, pods),
            controller_owner=_controller(view),
            conflict_with=conflict,
            gpu_resource=self.gpu_resource,
        )
        if conflict is not None or isinstance(command_line, NotVllm):
            return facts
        if self.pod_targets is not None:
            self.pod_targets(namespace, name, scrape_targets(view, pods))
        windows = await self._windows(spec, status, namespace, name, now)
        return Facts(**{**facts.__dict__, "windows": windows})

    async def _conflict(
        self, spec: LatencyTargetSpec, namespace: str, name: str, claims: Claims | None
    ) -> str | None:
        """The oldest LatencyTarget for a Deployment owns it; the others stand aside."""
        if claims is None:  # no index (tools, tests): list the namespace's targets
            try:
                items = await self.latencytargets.list(namespace=namespace)
            except KubernetesError:
                return None
            claims = [
                (str(i["metadata"].get("creationTimestamp", "")), str(i["metadata"]["name"]))
                for i in items
                if ((i.get("spec") or {}).get("targetRef") or {}).get("name")
                == spec.target_ref.name
                and not i["metadata"].get("deletionTimestamp")
            ]
        if not claims:
            return None
        owner = min(claims)[1]
        return None if owner == name else owner

    async def _hardware(self, spec: LatencyTargetSpec, pods: Sequence[PodFacts]) -> HardwareInfo:
        override = spec.hardware
        product = interconnect = None
        count = None
        overridden = override is not None and override.gpu_product and override.interconnect
        if self.nodes is not None and not overridden:
            with contextlib.suppress(KubernetesError):
                for node in await self.nodes.gpus(p.node for p in pods if p.node):
                    if node.product:
                        product, count = node.product, node.count
                        if node.interconnect in ("NVLink", "PCIe"):
                            interconnect = node.interconnect
                        break
        return HardwareInfo.from_labels(
            product,
            interconnect=interconnect,  # type: ignore[arg-type]
            gpus_per_node=count,
            override_product=override.gpu_product if override else None,
            override_interconnect=override.interconnect if override else None,
        )

    async def _windows(
        self,
        spec: LatencyTargetSpec,
        status: LatencyTargetStatus,
        namespace: str,
        name: str,
        now: datetime,
    ) -> dict[str, WindowResult]:
        try:
            source = await self.metrics_for(spec, namespace, name)
        except MetricsError as exc:
            return {"current": MetricsFailure(str(exc))}
        matchers = selector(spec, namespace)
        objectives = (spec.objectives.ttft, spec.objectives.itl, spec.objectives.e2e)
        percentiles = [int(o.percentile) for o in objectives if o is not None]
        wanted = windows_needed(spec, status, now)

        async def one(window_end: float, seconds: float) -> WindowResult:
            try:
                return await source.observe(
                    matchers=matchers,
                    window_seconds=seconds,
                    percentiles=percentiles,
                    end=window_end,
                )
            except MetricsError as exc:
                return MetricsFailure(str(exc))

        names = list(wanted)
        results = await asyncio.gather(*(one(wanted[n].end, wanted[n].seconds) for n in names))
        return dict(zip(names, results, strict=True))


def selector(spec: LatencyTargetSpec, namespace: str) -> list[LabelMatcher]:
    """The label matchers of the Deployment's series: the spec's, else the default ones."""
    if spec.metrics.matchers:
        return [LabelMatcher(m.label, m.op, m.value) for m in spec.metrics.matchers]
    return list(default_matchers(namespace, spec.target_ref.name))


def _controller(view: DeploymentView) -> str | None:
    for ref in view.owner_references:
        if ref.get("controller"):
            return f"{ref.get('kind')}/{ref.get('name')}"
    return None


def scrape_targets(view: DeploymentView, pods: Sequence[PodFacts]) -> list[ScrapeTarget]:
    """Where each ready pod serves /metrics (its IP and the annotated or declared port)."""
    out = []
    for pod in pods:
        if pod.ip and pod.metrics_port:
            labels = {"namespace": view.namespace, "pod": pod.name}
            url = f"http://{pod.ip}:{pod.metrics_port}{pod.metrics_path}"
            out.append(ScrapeTarget(url, labels))
    return out


class ScrapePool:
    """Direct-scrape sources, one per LatencyTarget, each scraping in the background."""

    def __init__(self, interval_seconds: float = 5.0) -> None:
        self.interval = interval_seconds
        self._sources: dict[tuple[str, str], ScrapeSource] = {}
        self._targets: dict[tuple[str, str], list[ScrapeTarget]] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._stop = asyncio.Event()

    def set_targets(self, namespace: str, name: str, targets: Sequence[ScrapeTarget]) -> None:
        self._targets[(namespace, name)] = list(targets)

    async def source(self, spec: LatencyTargetSpec, namespace: str, name: str) -> MetricsSource:
        key = (namespace, name)
        if key not in self._sources:
            src = ScrapeSource(lambda: self._targets.get(key, []))
            self._sources[key] = src
            self._tasks[key] = asyncio.create_task(src.run(self.interval, self._stop))
        return self._sources[key]

    async def forget(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        source = self._sources.pop(key, None)
        if source is not None:
            await source.aclose()
        self._targets.pop(key, None)

    async def close(self) -> None:
        self._stop.set()
        for namespace, name in list(self._sources):
            await self.forget(namespace, name)
