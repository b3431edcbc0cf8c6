"""A recommended change in the forms a GitOps user applies by hand: the container's whole new
``args`` list (for a Helm chart's values) and a kustomize strategic-merge patch of the
Deployment. Pure: the Deployment as read and the container wanted in, text and lists out.

The patch is YAML written here, not by a YAML library (the core imports none): every scalar is
a JSON string, which YAML reads as a double-quoted string, so no value needs escaping rules of
its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from latency_tuner.core.cluster import ContainerConfig


def _q(value: object) -> str:
    return json.dumps(str(value))


def _list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(_q(v) for v in values) + "]"


def strategic_merge_patch(
    deployment: Mapping[str, Any], index: int, target: ContainerConfig, gpu_resource: str
) -> str:
    """A kustomize ``patches:`` file that moves container ``index`` to ``target``: only the
    fields that change, the container matched by name (strategic merge), lists replaced whole.
    """
    current = deployment["spec"]["template"]["spec"]["containers"][index]
    lines = [
        "apiVersion: apps/v1",
        "kind: Deployment",
        "metadata:",
        f"  name: {_q(deployment['metadata']['name'])}",
        # kustomize matches a patch to its resource by namespace too.
        *(
            [f"  namespace: {_q(namespace)}"]
            if (namespace := deployment["metadata"].get("namespace"))
            else []
        ),
        "spec:",
        "  template:",
        "    spec:",
        "      containers:",
        f"        - name: {_q(current.get('name', ''))}",
    ]
    field = "          {}: {}"
    if target.image and target.image != current.get("image"):
        lines.append(field.format("image", _q(target.image)))
    for key, value in (("command", target.command), ("args", target.args)):
        if value is None:
            if key in current:
                lines.append(field.format(key, "null"))  # strategic merge: delete the field
        elif list(value) != current.get(key):
            lines.append(field.format(key, _list(value)))
    limits = (current.get("resources") or {}).get("limits") or {}
    if target.gpu_limit is not None and str(limits.get(gpu_resource)) != str(target.gpu_limit):
        gpu = f"{{{_q(gpu_resource)}: {_q(target.gpu_limit)}}}"
        requested = gpu_resource in ((current.get("resources") or {}).get("requests") or {})
        parts = f"limits: {gpu}" + (f", requests: {gpu}" if requested else "")
        lines.append(field.format("resources", f"{{{parts}}}"))
    return "\n".join(lines) + "\n"
