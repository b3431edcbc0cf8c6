"""The Deployment controller's arithmetic: pure functions of the Deployment and its pods.

What Kubernetes' deployment controller computes, without the API calls or the processes:
``template_hash`` (the role of ``pod-template-hash``), ``resolve_strategy`` (surge and
unavailability with the API defaults), ``plan_scale`` (which pods to create and which to stop
in one pass of a rolling update, ``Recreate`` or a scale), ``compute_status``
(``calculateStatus`` + ``syncRolloutStatus``: counts and the ``Available``/``Progressing``
conditions) and ``first_fit`` (the scheduler's choice of node by free GPUs).

No I/O, no clock: time arrives as a parameter.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

Body = dict[str, Any]
# Kubernetes' SafeEncodeString alphabet: no vowels, no look-alike digits.
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _parse_time(text: str | None) -> float:
    if not text:
        return 0.0
    parsed = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    return parsed.replace(tzinfo=datetime.UTC).timestamp()


def _encode(digest: bytes, length: int) -> str:
    number = int.from_bytes(digest, "big")
    chars = []
    for _ in range(length):
        number, rest = divmod(number, len(ALPHABET))
        chars.append(ALPHABET[rest])
    return "".join(chars)


def template_hash(template: Mapping[str, Any]) -> str:
    """A stable 10-character hash of a pod template (the role of ``pod-template-hash``)."""
    canonical = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return _encode(hashlib.sha256(canonical.encode()).digest(), 10)


def _int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        scaled = int(value[:-1]) * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(value)


def resolve_strategy(spec: Mapping[str, Any]) -> tuple[str, int, int]:
    """(type, maxSurge, maxUnavailable) with the API defaults (RollingUpdate, 25 %, 25 %);
    surge rounds up and unavailability down, and both zero means one unavailable (as in Go)."""
    strategy = spec.get("strategy") or {}
    kind = str(strategy.get("type") or "RollingUpdate")
    if kind == "Recreate":
        return kind, 0, 0
    rolling = strategy.get("rollingUpdate") or {}
    replicas = int(spec.get("replicas", 1))
    surge = _int_or_percent(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = _int_or_percent(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return kind, surge, min(unavailable, replicas)


@dataclass(frozen=True)
class Counts:
    """What the controller counts from the pods: its ``calculateStatus`` inputs."""

    replicas: int  # active (not terminating) pods
    updated: int  # active pods of the current template
    ready: int
    available: int

    @classmethod
    def of(cls, pods: Sequence[RolloutPod], thash: str, min_ready: float, now: float) -> Counts:
        """Count ``pods`` (terminating ones are not counted) against the template ``thash``."""
        active = [p for p in pods if not p.terminating]
        return cls(
            replicas=len(active),
            updated=sum(1 for p in active if p.template_hash == thash),
            ready=sum(1 for p in active if p.ready),
            available=sum(1 for p in active if p.available(min_ready, now)),
        )


def _condition(kind: str, status: str, reason: str, message: str, now: str) -> Body:
    return {
        "type": kind,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def set_condition(conditions: list[Body], new: Body) -> list[Body]:
    """``SetDeploymentCondition``: same status and reason changes nothing; same status keeps
    the transition time."""
    current = next((c for c in conditions if c.get("type") == new["type"]), None)
    if current is not None:
        if current.get("status") == new["status"] and current.get("reason") == new["reason"]:
            return conditions
        if current.get("status") == new["status"]:
            new = {**new, "lastTransitionTime": current.get("lastTransitionTime")}
    return [c for c in conditions if c.get("type") != new["type"]] + [new]


def compute_status(
    deployment: Mapping[str, Any],
    counts: Counts,
    *,
    rs_name: str,
    new_rs_created: bool,
    now: float,
) -> Body:
    """The Deployment status the controller would write (``calculateStatus`` followed by
    ``syncRolloutStatus``), given the object as last read and the pods counted now."""
    spec = deployment.get("spec") or {}
    old: Mapping[str, Any] = deployment.get("status") or {}
    desired = int(spec.get("replicas", 1))
    _, _, max_unavailable = resolve_strategy(spec)
    stamp = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions: list[Body] = [dict(c) for c in old.get("conditions") or []]
    deadline = spec.get("progressDeadlineSeconds", 600)
    paused = bool(spec.get("paused"))
    if new_rs_created and deadline is not None:
        msg = f'Created new replica set "{rs_name}"'
        conditions = set_condition(
            conditions, _condition("Progressing", "True", "NewReplicaSetCreated", msg, stamp)
        )
    status: Body = {
        "observedGeneration": int(deployment["metadata"].get("generation", 1)),
        "replicas": counts.replicas,
        "updatedReplicas": counts.updated,
        "readyReplicas": counts.ready,
        "availableReplicas": counts.available,
        "unavailableReplicas": max(counts.replicas - counts.available, 0),
    }
    if counts.available >= desired - max_unavailable:
        available = _condition(
            "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.",
            stamp,
        )  # fmt: skip
    else:
        available = _condition(
            "Available", "False", "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.", stamp,
        )  # fmt: skip
    conditions = set_condition(conditions, available)
    if paused:
        msg = "Deployment is paused"
        conditions = set_condition(
            conditions, _condition("Progressing", "Unknown", "DeploymentPaused", msg, stamp)
        )
    elif deadline is None:
        conditions = [c for c in conditions if c.get("type") != "Progressing"]
    else:
        conditions = _progress(conditions, old, status, desired, rs_name, int(deadline), now, stamp)
    status["conditions"] = conditions
    return status


def _progress(
    conditions: list[Body],
    old: Mapping[str, Any],
    new: Mapping[str, int],
    desired: int,
    rs_name: str,
    deadline: int,
    now: float,
    stamp: str,
) -> list[Body]:
    """``syncRolloutStatus``: complete, progressing (lastUpdateTime moves), or timed out."""
    current = next((c for c in conditions if c.get("type") == "Progressing"), None)
    complete_before = (
        new["replicas"] == new["updatedReplicas"]
        and current is not None
        and current.get("reason") == "NewReplicaSetAvailable"
    )
    if complete_before:
        return conditions
    complete = new["updatedReplicas"] == desired == new["replicas"] == new["availableReplicas"]
    old_old = int(old.get("replicas", 0)) - int(old.get("updatedReplicas", 0))
    progressed = (
        new["updatedReplicas"] > int(old.get("updatedReplicas", 0))
        or new["replicas"] - new["updatedReplicas"] < old_old
        or new["readyReplicas"] > int(old.get("readyReplicas", 0))
        or new["availableReplicas"] > int(old.get("availableReplicas", 0))
    )
    if complete:
        msg = f'ReplicaSet "{rs_name}" has successfully progressed.'
        cond = _condition("Progressing", "True", "NewReplicaSetAvailable", msg, stamp)
        return set_condition(conditions, cond)
    if progressed:
        msg = f'ReplicaSet "{rs_name}" is progressing.'
        cond = _condition("Progressing", "True", "ReplicaSetUpdated", msg, stamp)
        if current is not None and current.get("status") == "True":
            cond["lastTransitionTime"] = current.get("lastTransitionTime")
        # Unlike other conditions, the same reason still moves lastUpdateTime on progress.
        return [c for c in conditions if c.get("type") != "Progressing"] + [cond]
    if current is None or current.get("reason") == "NewReplicaSetAvailable":
        return conditions
    timed_out = current.get("reason") == "ProgressDeadlineExceeded" or (
        _parse_time(current.get("lastUpdateTime")) + deadline < now
    )
    if timed_out:
        msg = f'ReplicaSet "{rs_name}" has timed out progressing.'
        cond = _condition("Progressing", "False", "ProgressDeadlineExceeded", msg, stamp)
        return set_condition(conditions, cond)
    return conditions


class RolloutPod(Protocol):
    """What the arithmetic reads of a pod."""

    @property
    def template_hash(self) -> str: ...
    @property
    def terminating(self) -> bool: ...
    @property
    def node(self) -> str | None: ...
    @property
    def created(self) -> float: ...
    @property
    def ready(self) -> bool: ...
    def available(self, min_ready_seconds: float, now: float) -> bool: ...


P = TypeVar("P", bound=RolloutPod)


@dataclass(frozen=True)
class ScalePlan(Generic[P]):
    """One pass of the controller: create ``create`` pods of the current template, then stop
    ``stop`` (in that order: removals are computed as if the new pods already existed)."""

    create: int
    stop: list[P]


def removal_order(pods: Iterable[P], min_ready: float, now: float) -> list[P]:
    """Which pods go first on scale-down: unscheduled, not ready, not available, newest."""
    return sorted(
        pods,
        key=lambda p: (p.node is not None, p.ready, p.available(min_ready, now), -p.created),
    )


def plan_scale(spec: Mapping[str, Any], pods: Sequence[P], thash: str, now: float) -> ScalePlan[P]:
    """What one pass does for ``spec`` when the current template hashes to ``thash``.

    ``Recreate`` stops every old pod and creates new ones only once none is left terminating.
    A rolling update creates up to ``maxSurge`` above the desired count, then stops old pods
    that serve nothing, then available ones down to ``replicas - maxUnavailable``, counting new
    pods that are not yet available against the budget. ``now`` is on the clock of
    ``available`` (monotonic).
    """
    desired = int(spec.get("replicas", 1))
    kind, surge, max_unavailable = resolve_strategy(spec)
    min_ready = float(spec.get("minReadySeconds", 0))
    active = [p for p in pods if not p.terminating]
    new = [p for p in active if p.template_hash == thash]
    old = [p for p in active if p.template_hash != thash]
    if kind == "Recreate":
        if old:
            return ScalePlan(0, old)
        if len(active) < len(pods):
            return ScalePlan(0, [])  # Recreate: the new pods wait until every old one is gone
        surge = 0
    if not old:
        extra = removal_order(new, min_ready, now)[: max(len(new) - desired, 0)]
        return ScalePlan(max(desired - len(new), 0), extra)
    create = max(min(desired - len(new), desired + surge - len(active)), 0)
    min_available = desired - max_unavailable
    # The pods about to be created are active and not available yet.
    new_unavailable = sum(1 for p in new if not p.available(min_ready, now)) + create
    budget = len(active) + create - min_available - new_unavailable
    if budget <= 0:
        return ScalePlan(create, [])
    # First the old pods that serve nothing, then available ones down to minAvailable.
    unhealthy = [p for p in old if not p.available(min_ready, now)]
    stop = removal_order(unhealthy, min_ready, now)[:budget]
    budget -= len(stop)
    available = sum(1 for p in active if p.available(min_ready, now))
    can_remove = min(budget, available - min_available)
    healthy = [p for p in old if p not in stop]
    stop += removal_order(healthy, min_ready, now)[: max(can_remove, 0)]
    return ScalePlan(create, stop)


def first_fit(used: Mapping[str, int], gpus: int, capacity: int) -> str | None:
    """The first node (in ``used``'s order) with ``gpus`` free of ``capacity``, or None."""
    return next((n for n, u in used.items() if u + gpus <= capacity), None)


def unschedulable_message(nodes: int, resource: str) -> str:
    """The scheduler's message for a pod that fits on none of ``nodes`` nodes."""
    return (
        f"0/{nodes} nodes are available: {nodes} Insufficient {resource}. preemption: "
        f"0/{nodes} nodes are available: {nodes} No preemption victims found for incoming pod."
    )
