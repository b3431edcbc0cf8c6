"""The Deployment controller and kubelet, reduced to what the operator reads.

``roll`` makes a Deployment's latest template real in an API server (the sandbox's emulator, or
anything with its ``create``/``patch``/``delete``): a new pod with the template's spec, then
either ready (the old pods deleted, the rollout complete) or crash-looping (the old pod kept
serving, the rollout stuck), and the Deployment's status saying so.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

APPS = "apps/v1"


class ObjectStore(Protocol):
    """The in-process face of an API server (``sandbox.apiserver.ApiServer``)."""

    async def create(self, obj: Mapping[str, Any]) -> Any: ...

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Any: ...

    async def delete(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> Any: ...


def pod_status(*, ready: bool, crash: bool = False, ip: str = "10.0.0.7") -> dict[str, Any]:
    """A pod's status as the kubelet reports it: running and ready, or in CrashLoopBackOff."""
    state: dict[str, Any] = (
        {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off restarting"}}
        if crash
        else {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    )
    return {
        "phase": "Running",
        "podIP": ip,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [
            {
                "name": "vllm",
                "ready": ready,
                "restartCount": 3 if crash else 0,
                "state": state,
                "lastState": ({"terminated": {"reason": "Error", "exitCode": 1}} if crash else {}),
            }
        ],
    }


async def roll(
    api: ObjectStore,
    deployment: Mapping[str, Any],
    *,
    pod: str,
    existing: Sequence[str] = (),
    crash: bool = False,
) -> None:
    """Roll ``deployment`` (as read) out to a pod named ``pod``. ``existing``: the names of
    its pods now (``pod`` among them is not created again); ``crash``: the new pod never gets
    ready, so the old ones stay."""
    meta = deployment["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    template = deployment["spec"]["template"]
    if pod not in existing:
        await api.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod,
                    "namespace": namespace,
                    "labels": dict(template["metadata"]["labels"]),
                },
                "spec": copy.deepcopy(template["spec"]),
            }
        )
    generation = meta.get("generation", 1)
    if crash:
        status = {"observedGeneration": generation, "replicas": 2, "updatedReplicas": 1,
                  "readyReplicas": 1, "availableReplicas": 1, "unavailableReplicas": 1}  # fmt: skip
    else:
        for old in existing:
            if old != pod:
                await api.delete("v1", "Pod", old, namespace=namespace)
        status = {"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
                  "readyReplicas": 1, "availableReplicas": 1}  # fmt: skip
    await api.patch(
        "v1", "Pod", pod, {"status": pod_status(ready=not crash, crash=crash)},
        namespace=namespace, subresource="status",
    )  # fmt: skip
    await api.patch(APPS, "Deployment", name, {"status": status}, namespace=namespace,
                    subresource="status")  # fmt: skip
