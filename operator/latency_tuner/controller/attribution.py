"""What the operator writes on a Deployment it changes, so anyone can tell who changed it, what
and why: ``kubectl rollout history`` shows ``kubernetes.io/change-cause``, ``kubectl get deploy
-o yaml`` the ``latencytuner.io/...`` annotations, and the patch names the field manager.

Pure: values in, annotations out. The Kubernetes adapter sends them with the patch.
"""

from __future__ import annotations

import json
from enum import StrEnum

from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

FIELD_MANAGER = "latency-tuner"  # the ``fieldManager`` of every write to a Deployment
CHANGE_CAUSE = "kubernetes.io/change-cause"  # shown by ``kubectl rollout history``
LATENCY_TARGET = "latencytuner.io/latency-target"  # namespace/name of the LatencyTarget
LAST_CHANGE = "latencytuner.io/last-change"  # JSON: action, trial, knob, changed arguments
# 0.1.0 wrote the two above under "latency-tuner.io/". Nothing reads them; the next change the
# operator makes to a Deployment removes them, so no stale record sits beside the current one.
# Drop after one release, with core.canary.LEGACY_CANARY_LABEL.
LEGACY_ANNOTATIONS = ("latency-tuner.io/latency-target", "latency-tuner.io/last-change")

_ABSENT = "(absent)"
_SET = "(set)"  # a flag written without a value


class Action(StrEnum):
    """Why the operator changed the Deployment."""

    TRIAL = "trial"  # rolled out a trial's change
    ROLLBACK = "rollback"  # put back the configuration from before a trial
    RESTORE = "restore"  # the LatencyTarget was deleted with onDelete: Restore


def changed_arguments(before: ContainerConfig, after: ContainerConfig) -> list[str]:
    """Each difference as ``--flag: old -> new`` (image and GPU limit included), in order."""
    changes: list[str] = []
    old, new = _flags(before), _flags(after)
    for key in [*old, *(k for k in new if k not in old)]:
        a, b = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if a != b:
            changes.append(f"{key}: {a} -> {b}")
    if before.image != after.image:
        changes.append(f"image: {before.image} -> {after.image}")
    if before.gpu_limit != after.gpu_limit:
        changes.append(f"gpu limit: {before.gpu_limit} -> {after.gpu_limit}")
    return changes


def _flags(config: ContainerConfig) -> dict[str, str]:
    try:
        cl = VllmCommandLine.parse(config.command, config.args)
    except NotVllmError:
        # Not readable as vLLM's command line: compare the words themselves.
        words = [*(config.command or ()), *(config.args or ())]
        return {"command line": " ".join(words)}
    found = {"model": cl.model or _ABSENT}
    for key, value in cl.flags():
        found[f"--{key}"] = _SET if value is None else value
    return found


def change_annotations(
    *,
    namespace: str,
    name: str,
    action: Action,
    before: ContainerConfig,
    after: ContainerConfig,
    trial: int | None = None,
    knob: str | None = None,
) -> dict[str, str]:
    """The annotations of one change by LatencyTarget ``namespace/name``."""
    changes = changed_arguments(before, after)
    what = {
        Action.TRIAL: f"trial {trial} ({knob})",
        Action.ROLLBACK: f"rollback of trial {trial} ({knob})",
        Action.RESTORE: "restore of the original arguments (LatencyTarget deleted)",
    }[action]
    cause = f"latency-tuner, LatencyTarget {namespace}/{name}: {what}: " + (
        "; ".join(changes) or "no argument changed"
    )
    record = {"action": action.value, "trial": trial, "knob": knob, "changes": changes}
    return {
        CHANGE_CAUSE: cause,
        LATENCY_TARGET: f"{namespace}/{name}",
        LAST_CHANGE: json.dumps({k: v for k, v in record.items() if v is not None}),
    }
