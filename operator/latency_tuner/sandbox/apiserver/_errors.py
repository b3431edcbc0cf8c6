"""Errors as the real API server phrases them: Kubernetes `Status` bodies with their reasons.

Pure: builds exceptions and bodies, raises nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import kmock

from latency_tuner.sandbox.apiserver._resources import Body, ResourceDef


def error(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> kmock.KubernetesError:
    return kmock.KubernetesError(
        status=code, reason=reason, message=message, details=dict(details or {})
    )


def not_found(rdef: ResourceDef, name: str) -> kmock.KubernetesError:
    details = {"name": name, "group": rdef.group, "kind": rdef.plural}
    return error(404, "NotFound", f'{rdef.group_resource} "{name}" not found', details)


def conflict(rdef: ResourceDef, name: str) -> kmock.KubernetesError:
    message = (
        f'Operation cannot be fulfilled on {rdef.group_resource} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    return error(409, "Conflict", message, {"name": name, "group": rdef.group, "kind": rdef.plural})


def invalid(
    rdef: ResourceDef, name: str, causes: Sequence[Mapping[str, str]]
) -> kmock.KubernetesError:
    texts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified = f"{rdef.kind}.{rdef.group}" if rdef.group else rdef.kind
    details = {"name": name, "group": rdef.group, "kind": rdef.kind, "causes": list(causes)}
    return error(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> kmock.KubernetesError:
    return error(400, "BadRequest", message)


def status_body(code: int, reason: str, message: str, details: Mapping[str, Any]) -> Body:
    body: Body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = dict(details)
    return body
