"""The objects the controller writes: ReplicaSets and Pods, with owners and annotations.

Pure builders of request bodies; sending them is the runner's job.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

Body = dict[str, Any]
FINALIZER = "sandbox.latencytuner.io/kubelet"
PORT_ANNOTATION = "sandbox.latencytuner.io/port"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
CHANGE_CAUSE_ANNOTATION = "kubernetes.io/change-cause"


def deployment_path(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"


def key_of(deployment: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of an object."""
    return str(deployment["metadata"]["namespace"]), str(deployment["metadata"]["name"])


def owner(api_version: str, kind: str, meta: Mapping[str, Any]) -> Body:
    """A controller ownerReference to the object with metadata ``meta``."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def replicaset_annotations(deployment: Mapping[str, Any], revision: int) -> dict[str, str]:
    """The revision and, as the Deployment controller copies it, the Deployment's change-cause
    (``kubectl rollout history`` reads both from the ReplicaSets)."""
    found = {REVISION_ANNOTATION: str(revision)}
    cause = (deployment["metadata"].get("annotations") or {}).get(CHANGE_CAUSE_ANNOTATION)
    if cause is not None:
        found[CHANGE_CAUSE_ANNOTATION] = str(cause)
    return found


def replicaset_body(
    deployment: Mapping[str, Any], thash: str, template: Body, revision: int
) -> Body:
    """The ReplicaSet ``<deployment>-<hash>`` for ``template`` (its replicas are set later)."""
    meta = deployment["metadata"]
    labels = {**(template.get("metadata") or {}).get("labels", {}), "pod-template-hash": thash}
    selector = copy.deepcopy((deployment.get("spec") or {}).get("selector") or {})
    selector.setdefault("matchLabels", {})["pod-template-hash"] = thash
    rs_template = copy.deepcopy(template)
    rs_template.setdefault("metadata", {})["labels"] = labels
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{thash}",
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": replicaset_annotations(deployment, revision),
            "ownerReferences": [owner("apps/v1", "Deployment", meta)],
        },
        "spec": {"replicas": 0, "selector": selector, "template": rs_template},
    }


def pod_body(
    namespace: str,
    name: str,
    template: Body,
    thash: str,
    port: int,
    owners: list[Body],
) -> Body:
    """A Pod of ``template``, with our finalizer and where a scraper finds its /metrics."""
    tmeta = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**tmeta.get("labels", {}), "pod-template-hash": thash},
            "annotations": {
                **tmeta.get("annotations", {}),
                PORT_ANNOTATION: str(port),
                # Where a scraper (Prometheus' pod discovery, the operator's direct
                # scrape) finds /metrics: every sandbox pod listens on its own port.
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(port),
            },
            "ownerReferences": owners,
            "finalizers": [FINALIZER],
        },
        "spec": copy.deepcopy(template.get("spec") or {}),
    }
