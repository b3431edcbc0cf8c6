"""What the operator saw of the cluster, as values the decisions read.

Adapters fill these from the Kubernetes API; the core never talks to it. ``ContainerConfig`` is
the part of a Deployment the operator may change (the vLLM container's command, args, image and
GPU limit); ``RolloutFacts`` is what a rollout looks like right now. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ContainerConfig:
    """The vLLM container's launch configuration, as written in the pod template."""

    command: tuple[str, ...] | None
    args: tuple[str, ...] | None
    image: str
    gpu_limit: int | None = None  # the container's limit of the GPU resource, if any

    def fingerprint(self) -> str:
        """A short stable hash: equal configurations, equal fingerprints."""
        blob = json.dumps(
            [self.command, self.args, self.image, self.gpu_limit], separators=(",", ":")
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PodFacts:
    name: str
    node: str | None
    ready: bool
    restarts: int
    # e.g. CrashLoopBackOff, ImagePullBackOff, OOMKilled, Error; None when running fine
    problem: str | None = None
    config_fingerprint: str | None = None  # of the pod's own container, to tell old from new


@dataclass(frozen=True)
class RolloutFacts:
    """A Deployment's rollout as the API reports it, plus its pods."""

    generation: int
    observed_generation: int
    replicas: int
    updated_replicas: int
    ready_replicas: int
    available_replicas: int
    progress_deadline_exceeded: bool = False
    pods: tuple[PodFacts, ...] = field(default_factory=tuple)

    @property
    def complete(self) -> bool:
        """The controller saw the latest template and every replica runs it and is available."""
        return (
            self.observed_generation >= self.generation
            and self.updated_replicas >= self.replicas
            and self.available_replicas >= self.replicas
            and self.ready_replicas >= self.replicas
        )

    def failure(self, fingerprint: str) -> str | None:
        """Why the rollout to ``fingerprint`` is failing, or None while it may still succeed."""
        if self.progress_deadline_exceeded:
            return "ProgressDeadlineExceeded: the Deployment made no progress within its deadline"
        for pod in self.pods:
            if pod.config_fingerprint not in (None, fingerprint):
                continue  # an old pod: its trouble is not this rollout's
            if pod.problem is not None:
                return f"pod {pod.name}: {pod.problem} (restarts: {pod.restarts})"
        return None
