"""What the operator saw of the cluster, as values the decisions read.

Adapters fill these from the Kubernetes API; the core never talks to it. ``ContainerConfig`` is
the part of a Deployment the operator may change (the vLLM container's command, args, image and
GPU limit); ``RolloutFacts`` is what a rollout looks like right now. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


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
    ip: str | None = None
    metrics_port: int | None = None  # where vLLM serves /metrics (annotation or container port)
    metrics_path: str = "/metrics"
    unschedulable: bool = False  # PodScheduled=False/Unschedulable: no node has room for it


@dataclass(frozen=True)
class RolloutFacts:
    """A Deployment's rollout as the API reports it, plus its pods."""

    generation: int
    observed_generation: int
    replicas: int  # wanted (spec.replicas)
    updated_replicas: int
    ready_replicas: int
    available_replicas: int
    progress_deadline_exceeded: bool = False
    pods: tuple[PodFacts, ...] = field(default_factory=tuple)
    total_replicas: int | None = None  # status.replicas: old and new pods together

    @property
    def complete(self) -> bool:
        """``kubectl rollout status``'s test: the controller saw the latest template, every
        wanted replica runs it, no old replica is left, and the new ones are available."""
        total = self.updated_replicas if self.total_replicas is None else self.total_replicas
        return (
            self.observed_generation >= self.generation
            and self.updated_replicas >= self.replicas
            and total <= self.updated_replicas
            and self.available_replicas >= self.updated_replicas
        )

    def failure(self, fingerprint: str) -> str | None:
        """Why the rollout to ``fingerprint`` is failing, or None while it may still succeed."""
        # The Deployment's conditions speak of the template it last observed: a deadline
        # exceeded by an earlier template (before our patch was seen) is not this rollout's.
        if self.progress_deadline_exceeded and self.observed_generation >= self.generation:
            return "ProgressDeadlineExceeded: the Deployment made no progress within its deadline"
        for pod in self.pods:
            if pod.config_fingerprint not in (None, fingerprint):
                continue  # an old pod: its trouble is not this rollout's
            if pod.problem is not None:
                return f"pod {pod.name}: {pod.problem} (restarts: {pod.restarts})"
        return None

    def waiting_for_a_node(self, fingerprint: str) -> bool:
        """A pod of the rollout to ``fingerprint`` waits unscheduled (no node: not enough free
        GPUs or other resources), and none of its pods has a problem of its own.

        A rollout that failed so is transient: the cluster was full, the value was never
        tried. A crash on start, a refused flag or an image that cannot be pulled is the
        value's own failure, permanent."""
        new = [p for p in self.pods if p.config_fingerprint in (None, fingerprint)]
        if any(p.problem is not None for p in new):
            return False
        return any(p.node is None and not p.ready for p in new)

    def unschedulable(self, fingerprint: str) -> bool:
        """The scheduler said a pod of the rollout to ``fingerprint`` fits on no node (not
        enough free GPUs or other resources): unlike ``waiting_for_a_node``, not merely a pod
        created an instant ago and not bound yet."""
        return any(
            p.unschedulable and not p.ready
            for p in self.pods
            if p.config_fingerprint in (None, fingerprint)
        )


def _escape(token: str) -> str:
    """JSON-pointer escaping of one path segment (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def container_patch(
    deployment: Mapping[str, Any],
    index: int,
    config: ContainerConfig,
    gpu_resource: str,
    annotations: Mapping[str, str] | None = None,
    retired: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """The RFC 6902 JSON patch that moves container ``index`` of ``deployment`` (a Deployment
    object) to ``config``, sets ``annotations`` and removes those of the ``retired`` keys the
    Deployment has, and changes nothing else. A guard against concurrent writers (a ``test``
    of the resourceVersion) is the caller's to prepend."""
    current = deployment["spec"]["template"]["spec"]["containers"][index]
    base = f"/spec/template/spec/containers/{index}"
    ops: list[dict[str, Any]] = []
    for key, value in (("command", config.command), ("args", config.args)):
        if value is None:
            if key in current:
                ops.append({"op": "remove", "path": f"{base}/{key}"})
        elif list(value) != current.get(key):
            ops.append({"op": "add", "path": f"{base}/{key}", "value": list(value)})
    if config.image and config.image != current.get("image"):
        ops.append({"op": "replace", "path": f"{base}/image", "value": config.image})
    limits = (current.get("resources") or {}).get("limits") or {}
    if config.gpu_limit is not None and str(limits.get(gpu_resource)) != str(config.gpu_limit):
        resources = current.get("resources") or {}
        if "resources" not in current:
            ops.append({"op": "add", "path": f"{base}/resources", "value": {}})
        for part in ("limits", "requests"):
            if part == "requests" and part not in resources:
                continue  # GPU requests default to limits; only rewrite one that is there
            if part not in resources:
                ops.append({"op": "add", "path": f"{base}/resources/{part}", "value": {}})
            path = f"{base}/resources/{part}/{_escape(gpu_resource)}"
            ops.append({"op": "add", "path": path, "value": str(config.gpu_limit)})
    if annotations:
        if not deployment["metadata"].get("annotations"):
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        for name, text in sorted(annotations.items()):
            ops.append(
                {"op": "add", "path": f"/metadata/annotations/{_escape(name)}", "value": text}
            )
    present = deployment["metadata"].get("annotations") or {}
    for name in retired:
        if name in present and name not in (annotations or {}):
            ops.append({"op": "remove", "path": f"/metadata/annotations/{_escape(name)}"})
    return ops
