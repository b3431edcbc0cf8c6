"""CustomResourceDefinitions: their required fields, their status, the resources they serve.

Pure functions of the CRD body; registering what they return is the store's job.
"""

from __future__ import annotations

import datetime

from latency_tuner.sandbox.apiserver._errors import invalid
from latency_tuner.sandbox.apiserver._resources import BUILTIN_RESOURCES, Body, ResourceDef

_CRD_RESOURCE = next(r for r in BUILTIN_RESOURCES if r.plural == "customresourcedefinitions")


def now_stamp() -> str:
    """The API's timestamp format, second resolution, UTC."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_crd(crd: Body) -> None:
    """422 Invalid unless group, names, scope and versions are there and the name matches."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes = []
    for field, value in (
        ("spec.group", spec.get("group")),
        ("spec.names.plural", names.get("plural")),
        ("spec.names.kind", names.get("kind")),
        ("spec.scope", spec.get("scope")),
        ("spec.versions", spec.get("versions")),
    ):
        if not value:
            causes.append(
                {"reason": "FieldValueRequired", "message": "Required value", "field": field}
            )
    name = crd["metadata"]["name"]
    if not causes and name != f"{names['plural']}.{spec['group']}":
        message = f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'
        causes.append({"reason": "FieldValueInvalid", "message": message, "field": "metadata.name"})
    if causes:
        raise invalid(_CRD_RESOURCE, name, causes)


def crd_status(crd: Body) -> Body:
    """Established at once: names accepted, the storage version stored."""
    spec = crd["spec"]
    now = now_stamp()
    conditions = [
        {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now}
        for t, r, m in (
            ("NamesAccepted", "NoConflicts", "no conflicts found for the names"),
            ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        )
    ]
    stored = [v["name"] for v in spec["versions"] if v.get("storage")] or [
        spec["versions"][0]["name"]
    ]
    return {"acceptedNames": spec["names"], "conditions": conditions, "storedVersions": stored}


def served_resources(crd: Body) -> list[ResourceDef]:
    """One `ResourceDef` per served version, each with its `openAPIV3Schema`."""
    spec = crd["spec"]
    names = spec["names"]
    return [
        ResourceDef(
            group=spec["group"],
            version=version["name"],
            plural=names["plural"],
            kind=names["kind"],
            namespaced=spec.get("scope") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            subresources=frozenset(version.get("subresources") or {}),
            singular=names.get("singular") or names["kind"].lower(),
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
            custom=True,
            printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
        )
        for version in spec["versions"]
        if version.get("served", True)
    ]
