"""What the reconcile loop needs from the world, as Protocols, and the errors they may raise.

An implementation is an adapter (Kubernetes, Prometheus, the pods' /metrics) or a stand-in (the
convergence benchmark's virtual Deployment and clock, the test fakes). The loop catches only the
errors below, so an adapter maps its own failures onto them (``KubernetesError`` is a
``ClusterError``, ``Conflict`` a ``StaleWrite``, ``MetricsError`` a ``MetricsUnavailable``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.controller.deployment import DEFAULT_GPU_RESOURCE, DeploymentView
from latency_tuner.controller.errors import (
    ClusterError,
    MetricsUnavailable,
    NameTaken,
    StaleWrite,
)
from latency_tuner.core.canary import Owner
from latency_tuner.core.cluster import ContainerConfig, PodFacts
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.promql import LabelMatcher


@dataclass(frozen=True)
class NodeGpu:
    """What a node's labels say of its GPUs."""

    node: str
    product: str | None
    count: int | None
    interconnect: str | None


class Deployments(Protocol):
    async def get(self, *, namespace: str, name: str) -> DeploymentView | None:
        """The Deployment as it stands, or None when there is none."""
        ...

    async def pods(
        self, deployment: DeploymentView, *, container: str | None, gpu_resource: str
    ) -> tuple[PodFacts, ...]:
        """The Deployment's live pods (old and new during a rollout)."""
        ...

    async def patch_container(
        self,
        deployment: DeploymentView,
        *,
        container: str | None,
        config: ContainerConfig,
        gpu_resource: str,
        annotations: Mapping[str, str] | None = None,
    ) -> DeploymentView:
        """Move the container to ``config`` and set ``annotations`` on the Deployment (who
        changed it and why); ``StaleWrite`` if it changed since ``deployment`` was read."""
        ...


class CanaryDeployments(Protocol):
    """A trial's canary Deployment, found by the main Deployment and the owning target."""

    async def get(self, main: DeploymentView, owner: Owner) -> DeploymentView | None:
        """The canary, None when there is none; ``NameTaken`` when its name is someone
        else's Deployment."""
        ...

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
        """The canary at ``config`` with one replica (created if missing)."""
        ...

    async def scale(self, deployment: DeploymentView, replicas: int) -> DeploymentView:
        """Set a Deployment's spec.replicas; ``StaleWrite`` if it changed since read."""
        ...

    async def remove(self, main: DeploymentView, owner: Owner) -> bool:
        """Delete the canary if it exists and is ours."""
        ...


class QualityProbe(Protocol):
    """What the quality gate reads: the tenant's samples and the pods' answers."""

    async def samples(self, *, namespace: str, name: str, key: str) -> str:
        """The ConfigMap value, only if the ConfigMap carries the opt-in label
        (``core.quality.samples.SAMPLES_LABEL``); ``InvalidSamples`` when it does not, or is
        missing or too large, with a message that quotes nothing of its data."""
        ...

    async def answers(
        self, base_url: str, model: str, prompts: Sequence[str], *, max_tokens: int
    ) -> tuple[list[str | None], list[str]]:
        """One greedy answer per prompt (None where none came) and why some are missing."""
        ...


class Nodes(Protocol):
    async def gpus(self, names: Iterable[str]) -> list[NodeGpu]:
        """GPU labels of the named nodes (missing nodes are skipped)."""
        ...


class LatencyTargets(Protocol):
    async def get(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        """The object as stored now, or None when it is gone."""
        ...

    async def list(self, *, namespace: str) -> list[dict[str, Any]]:
        """Every LatencyTarget of the namespace (to find two naming one Deployment)."""
        ...

    async def write_status(
        self, *, namespace: str, name: str, status: LatencyTargetStatus
    ) -> Mapping[str, Any]:
        """Replace the status subresource."""
        ...


class MetricsSource(Protocol):
    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        """The window ending at ``end`` (unix seconds; None = now) of the selected series.

        Returns ``NoData`` when nothing matches or nothing finished; raises
        ``MetricsUnavailable`` when the source cannot answer.
        """
        ...


@runtime_checkable
class RecentMetricsSource(MetricsSource, Protocol):
    """A source that answers many targets' latest windows from one shared evaluation instant
    (one query per aggregate for all of them, not one per target)."""

    max_age: float  # how far before the asked end the shared instant may be [s]

    async def observe_recent(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        """Like ``observe``, but the window ends at an instant at most ``max_age`` before
        ``end`` (never after it), shared with the other targets asking about then."""
        ...


# The metrics source of one LatencyTarget: (spec, namespace, name) -> source.
MetricsFor = Callable[[LatencyTargetSpec, str, str], Awaitable[MetricsSource]]
# Told where the target's pods are, for a source that scrapes them: (namespace, name, pods).
PodsSeen = Callable[[str, str, Sequence[PodFacts]], None]
Clock = Callable[[], datetime]


def wall_clock() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Ports:
    """Everything the loop reads and writes, given by the shell; never global."""

    deployments: Deployments
    latencytargets: LatencyTargets
    metrics_for: MetricsFor
    nodes: Nodes | None = None  # None: no node labels (hardware from the spec alone)
    clock: Clock = field(default=wall_clock)
    gpu_resource: str = DEFAULT_GPU_RESOURCE  # operator-wide; the spec's TP section may override
    pods_seen: PodsSeen | None = None
    canaries: CanaryDeployments | None = None  # None: trials roll out (no canaries)
    quality: QualityProbe | None = None  # None: no quality gate can run


__all__ = [
    "CanaryDeployments",
    "Clock",
    "ClusterError",
    "Deployments",
    "LatencyTargets",
    "MetricsFor",
    "MetricsSource",
    "MetricsUnavailable",
    "NameTaken",
    "NodeGpu",
    "Nodes",
    "PodsSeen",
    "Ports",
    "QualityProbe",
    "RecentMetricsSource",
    "StaleWrite",
    "wall_clock",
]
