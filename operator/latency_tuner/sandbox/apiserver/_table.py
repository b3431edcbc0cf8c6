"""`kubectl get` tables (`Accept: application/json;as=Table`), as a real API server prints them.

Custom resources get the CRD version's `additionalPrinterColumns` (JSONPath cells, `date`
columns shown as ages), as the API server does; built-in kinds the sandbox serves get the
columns the API server's own printers give them (Deployments READY/UP-TO-DATE/AVAILABLE, Pods
READY/STATUS/RESTARTS, Events LAST SEEN/TYPE/REASON/OBJECT/MESSAGE, ...). Pure functions.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from latency_tuner.sandbox.apiserver._resources import ResourceDef

Body = dict[str, Any]
Cell = str | int | float | bool | None


def age(timestamp: str | None, now: datetime.datetime | None = None) -> str:
    """kubectl's short age: `45s`, `5m`, `3h`, `2d` (two units below a day, as kubectl)."""
    if not timestamp:
        return "<unknown>"
    created = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.UTC
    )
    seconds = int(((now or datetime.datetime.now(datetime.UTC)) - created).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


_FILTER = re.compile(r'^\[\?\(@\.([\w.]+)\s*==\s*["\']([^"\']*)["\']\)\]')
_STEP = re.compile(r"^\.([\w-]+)|^\[(\d+)\]")


def json_path(obj: Any, path: str) -> list[Any]:
    """The values at a CRD printer-column path: `.a.b`, `.a[0]`, `.a[?(@.k=="v")].b`."""
    current: list[Any] = [obj]
    rest = path.strip().removeprefix("{").removesuffix("}")
    while rest:
        if match := _FILTER.match(rest):
            key, wanted = match.group(1), match.group(2)
            current = [
                item
                for value in current
                if isinstance(value, list)
                for item in value
                if str(_get(item, key.split("."))) == wanted
            ]
        elif match := _STEP.match(rest):
            name, index = match.group(1), match.group(2)
            nxt: list[Any] = []
            for value in current:
                if name is not None and isinstance(value, Mapping) and name in value:
                    nxt.append(value[name])
                elif index is not None and isinstance(value, list) and int(index) < len(value):
                    nxt.append(value[int(index)])
            current = nxt
        else:
            raise ValueError(f"unsupported JSONPath {path!r}")
        rest = rest[match.end() :]
    return current


def _get(obj: Any, keys: Sequence[str]) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _column(name: str, kind: str = "string", fmt: str = "", priority: int = 0) -> Body:
    return {"name": name, "type": kind, "format": fmt, "description": "", "priority": priority}


def _custom(rdef: ResourceDef) -> tuple[list[Body], Callable[[Body], list[Cell]]]:
    specs = list(rdef.printer_columns)
    if not specs:  # a CRD without columns: the server shows its age
        specs = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    columns = [_column("Name", fmt="name")] + [
        _column(
            str(c["name"]),
            "string" if c.get("type") == "date" else str(c.get("type", "string")),
            str(c.get("format", "")),
            int(c.get("priority", 0)),
        )
        for c in specs
    ]

    def cells(item: Body) -> list[Cell]:
        out: list[Cell] = [item["metadata"]["name"]]
        for c in specs:
            found = json_path(item, str(c["jsonPath"]))
            value = found[0] if found else None
            if c.get("type") == "date":
                out.append(age(value) if isinstance(value, str) else "<unknown>")
            elif isinstance(value, Mapping | list):
                out.append(str(value))
            else:
                out.append(value)
        return out

    return columns, cells


def _containers_ready(pod: Body) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or []) or len(statuses)
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_status(pod: Body) -> str:
    status = pod.get("status") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return str(waiting["reason"])
    return str(status.get("phase") or "Pending")


def _restarts(pod: Body) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount") or 0) for s in statuses)


def _ports(service: Body) -> str:
    ports = (service.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _event_object(event: Body) -> str:
    ref = event.get("involvedObject") or event.get("regarding") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _last_seen(event: Body) -> str:
    stamp = event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
    if isinstance(stamp, str) and "." in stamp:
        stamp = stamp.split(".")[0] + "Z"
    return age(stamp if isinstance(stamp, str) else None)


def _created(item: Body) -> str:
    return age(item["metadata"].get("creationTimestamp"))


_BUILTIN: dict[str, list[tuple[str, Callable[[Body], Cell]]]] = {
    "Deployment": [
        ("Ready", lambda d: f"{_get(d, ['status', 'readyReplicas']) or 0}/"
                            f"{_get(d, ['spec', 'replicas']) or 0}"),
        ("Up-to-date", lambda d: _get(d, ["status", "updatedReplicas"]) or 0),
        ("Available", lambda d: _get(d, ["status", "availableReplicas"]) or 0),
        ("Age", _created),
    ],
    "ReplicaSet": [
        ("Desired", lambda r: _get(r, ["spec", "replicas"]) or 0),
        ("Current", lambda r: _get(r, ["status", "replicas"]) or 0),
        ("Ready", lambda r: _get(r, ["status", "readyReplicas"]) or 0),
        ("Age", _created),
    ],
    "Pod": [
        ("Ready", _containers_ready),
        ("Status", _pod_status),
        ("Restarts", _restarts),
        ("Age", _created),
    ],
    "Event": [
        ("Last Seen", _last_seen),
        ("Type", lambda e: e.get("type")),
        ("Reason", lambda e: e.get("reason")),
        ("Object", _event_object),
        ("Message", lambda e: e.get("message") or e.get("note")),
    ],
    "Namespace": [
        ("Status", lambda n: _get(n, ["status", "phase"]) or "Active"),
        ("Age", _created),
    ],
    "Node": [
        ("Status", lambda n: "Ready"),
        ("Age", _created),
    ],
    "Service": [
        ("Type", lambda s: _get(s, ["spec", "type"]) or "ClusterIP"),
        ("Cluster-IP", lambda s: _get(s, ["spec", "clusterIP"]) or "<none>"),
        ("Port(s)", _ports),
        ("Age", _created),
    ],
}  # fmt: skip


def table(rdef: ResourceDef, items: Sequence[Body], resource_version: str) -> Body:
    """The `meta.k8s.io/v1` Table of ``items``."""
    if rdef.custom:
        columns, cells = _custom(rdef)
    else:
        specs = _BUILTIN.get(rdef.kind, [("Age", _created)])
        columns = [_column("Name", fmt="name")] + [_column(name) for name, _ in specs]

        def cells(item: Body) -> list[Cell]:
            return [item["metadata"]["name"], *(fn(item) for _, fn in specs)]

    rows = [
        {
            "cells": cells(item),
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": item["metadata"],
            },
        }
        for item in items
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    }
