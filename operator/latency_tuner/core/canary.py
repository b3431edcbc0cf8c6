"""The canary Deployment of a trial: one pod with the new arguments beside the baseline pods.

A rollout trial changes every pod and compares two stretches of time; a canary trial runs one
pod with the candidate configuration next to the unchanged ones, so both arms see the same
minutes of traffic. The canary is a sibling Deployment owned by the LatencyTarget (garbage
collected with it), whose pods carry the main Deployment's pod labels, so the Service and any
router send them the same share of traffic as each baseline pod, plus one label of its own so
neither Deployment's ReplicaSets ever claim the other's pods.

This module derives that Deployment from the main one; it is born with zero replicas and the
main Deployment's template, and the adapter then moves its container with the same guarded
patch a rollout uses, so a canary's arguments are produced by exactly the code that produces
a rollout's.

Pure: objects in, objects out.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from latency_tuner.core.promql import LabelMatcher, escape_regex

CANARY_LABEL = "latencytuner.io/canary-of"  # on a canary and its pods: the main Deployment
TARGET_LABEL = "latencytuner.io/target"  # on a canary and its pods: the LatencyTarget
# 0.1.0 wrote the two labels above under "latency-tuner.io/". A canary made before an upgrade
# keeps them (a Deployment's selector cannot change) and runs until its trial is judged, so a
# main Deployment's pods must still exclude its pods: ``pod_selector`` excludes both keys. The
# canary itself is found by name and owner uid (``is_canary_of``), never by label. Read for one
# release (the one after 0.1.0); drop LEGACY_CANARY_LABEL in the release after that.
LEGACY_CANARY_LABEL = "latency-tuner.io/canary-of"
CANARY_LABELS = (CANARY_LABEL, LEGACY_CANARY_LABEL)
# Kubernetes adds "-<rs hash>-<pod hash>" (about 17 characters) to pod names, which must stay a
# DNS label (63); a short prefix plus a stable hash keeps every canary name unique and short.
_PREFIX_LENGTH = 30
# What the API server, controllers and kubectl write on an object: never copied to a new one.
_SERVER_METADATA = (
    "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
    "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences",
)  # fmt: skip
_SERVER_ANNOTATIONS = (
    "deployment.kubernetes.io/revision",
    "kubectl.kubernetes.io/last-applied-configuration",
)


@dataclass(frozen=True)
class Owner:
    """The LatencyTarget a canary belongs to (its ownerReference)."""

    api_version: str
    kind: str
    name: str
    uid: str


def canary_name(deployment: str, target: str) -> str:
    """``<deployment prefix>-canary-<hash>``: stable for one (Deployment, LatencyTarget) pair,
    so a restarted operator finds the canary it made, and short enough for pod names."""
    digest = hashlib.sha256(f"{deployment}\0{target}".encode()).hexdigest()[:8]
    # Dots are valid in a Deployment name but not in a DNS label (pods get hostnames from it).
    prefix = deployment[:_PREFIX_LENGTH].replace(".", "-").strip("-")
    return f"{prefix}-canary-{digest}" if prefix else f"canary-{digest}"


def _label_value(deployment: str) -> str:
    # A label value is at most 63 characters; a Deployment name may be longer.
    if len(deployment) <= 63:
        return deployment
    return f"{deployment[:54].rstrip('-._')}-{hashlib.sha256(deployment.encode()).hexdigest()[:8]}"


def canary_deployment(main: Mapping[str, Any], owner: Owner) -> dict[str, Any]:
    """A new Deployment with ``main``'s pod template, zero replicas and its own selector.

    Raises ValueError when ``main`` selects pods by ``matchExpressions``: the canary's pods
    must match the Service as the main pods do, and a copied expression could select them
    differently than labels can show.
    """
    metadata = main["metadata"]
    spec = main["spec"]
    selector = spec.get("selector") or {}
    if selector.get("matchExpressions"):
        raise ValueError(
            f"Deployment {metadata['name']} selects its pods with matchExpressions; a canary "
            "needs a matchLabels selector to join the same Service"
        )
    own = {CANARY_LABEL: _label_value(str(metadata["name"])), TARGET_LABEL: owner.name}
    template = copy.deepcopy(spec["template"])
    template.setdefault("metadata", {})
    template["metadata"]["labels"] = {**(template["metadata"].get("labels") or {}), **own}
    annotations = {
        k: v for k, v in (metadata.get("annotations") or {}).items() if k not in _SERVER_ANNOTATIONS
    }
    new_metadata = {
        k: copy.deepcopy(v)
        for k, v in metadata.items()
        if k not in _SERVER_METADATA and k not in ("name", "annotations", "labels")
    }
    new_spec = {
        k: copy.deepcopy(v)
        for k, v in spec.items()
        if k not in ("replicas", "selector", "template", "paused")
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            **new_metadata,
            "name": canary_name(str(metadata["name"]), owner.name),
            "labels": {**(metadata.get("labels") or {}), **own},
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": owner.api_version,
                    "kind": owner.kind,
                    "name": owner.name,
                    "uid": owner.uid,
                    "controller": True,
                    # The LatencyTarget's deletion must not wait on the canary's pods.
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {
            **new_spec,
            "replicas": 0,
            "selector": {"matchLabels": {**(selector.get("matchLabels") or {}), **own}},
            "template": template,
        },
    }


def is_canary_of(obj: Mapping[str, Any], deployment: str, owner: Owner) -> bool:
    """True when ``obj`` is the canary this LatencyTarget made for ``deployment``: the name
    alone could be taken by anyone, so the owner's uid must match too."""
    metadata = obj.get("metadata") or {}
    refs = metadata.get("ownerReferences") or []
    return metadata.get("name") == canary_name(deployment, owner.name) and any(
        r.get("uid") == owner.uid and r.get("controller") for r in refs
    )


def pod_selector(deployment_labels: Mapping[str, str]) -> str:
    """The label selector of a Deployment's own pods: its ``matchLabels``, and, for a main
    Deployment, not a canary's pods (they carry the main pods' labels to join the Service),
    whichever key, current or legacy, the canary was made with."""
    terms = [f"{k}={v}" for k, v in sorted(deployment_labels.items())]
    if not any(key in deployment_labels for key in CANARY_LABELS):
        terms += [f"!{key}" for key in CANARY_LABELS]
    return ",".join(terms)


def canary_pods(canary: str) -> LabelMatcher:
    """The canary's pods: ``<canary>-<replicaset hash>-<suffix>``."""
    return LabelMatcher("pod", "=~", f"{escape_regex(canary)}-[a-z0-9]+-[a-z0-9]+")


def arms(
    selector: Sequence[LabelMatcher], canary: str
) -> tuple[tuple[LabelMatcher, ...], tuple[LabelMatcher, ...]]:
    """The series of each arm of a canary trial, from the Deployment's ``selector``: the
    canary's pods (the selector's matchers but those on the pod name, which speak of the main
    Deployment's pod names, plus the canary's pod names) and the baseline's (the selector
    without the canary's pods: a spec's matchers, ``pod=~"llama-.*"`` or
    ``model_name="llama"``, may select the canary's pods too)."""
    others = tuple(m for m in selector if m.label != "pod")
    baseline = (*selector, LabelMatcher("pod", "!~", f"{escape_regex(canary)}-.*"))
    return (*others, canary_pods(canary)), baseline
