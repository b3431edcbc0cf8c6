"""Discovery and OpenAPI documents: what kubectl, kopf and the client read to learn the API.

Pure functions of the served `ResourceDef`s (in registration order); `document` answers a
non-resource GET path, or None when there is no such document.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from latency_tuner.sandbox.apiserver._errors import error
from latency_tuner.sandbox.apiserver._resources import ALL_VERBS, SERVER_VERSION, Body, ResourceDef


def document(defs: Sequence[ResourceDef], path: str, host: str) -> Body | None:
    """The discovery or OpenAPI document at `path` (no trailing slash), None if not one."""
    documents: dict[str, Callable[[], Body]] = {
        "/": lambda: {"paths": sorted(paths(defs))},
        "/version": lambda: dict(SERVER_VERSION),
        "/api": lambda: {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
        },
        "/apis": lambda: {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [group_body(defs, g) for g in groups(defs) if g],
        },
        "/openapi/v2": lambda: openapi_v2(defs),
        "/openapi/v3": lambda: openapi_v3_index(defs),
    }
    if path in documents:
        return documents[path]()
    parts = path.strip("/").split("/")
    if parts[:2] == ["openapi", "v3"] and len(parts) >= 4:
        group, version = ("", parts[-1]) if parts[2] == "api" else (parts[3], parts[-1])
        return openapi_v3_group(defs, group, version)
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups(defs):
        return group_body(defs, parts[1])
    if (len(parts) == 2 and parts[0] == "api") or (len(parts) == 3 and parts[0] == "apis"):
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        if version in groups(defs).get(group, []):
            return resource_list(defs, group, version)
    return None


def groups(defs: Sequence[ResourceDef]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for rdef in defs:
        versions = groups.setdefault(rdef.group, [])
        if rdef.version not in versions:
            versions.append(rdef.version)
    return groups


def paths(defs: Sequence[ResourceDef]) -> set[str]:
    paths = {"/api", "/apis", "/version", "/healthz", "/openapi/v2", "/openapi/v3"}
    for group, versions in groups(defs).items():
        if group:
            paths.add(f"/apis/{group}")
        paths.update(f"/apis/{group}/{v}" if group else f"/api/{v}" for v in versions)
    return paths


def group_body(defs: Sequence[ResourceDef], group: str) -> Body:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in groups(defs)[group]]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def resource_list(defs: Sequence[ResourceDef], group: str, version: str) -> Body:
    resources: list[Body] = []
    for rdef in defs:
        if (rdef.group, rdef.version) != (group, version):
            continue
        entry: Body = {
            "name": rdef.plural,
            "singularName": rdef.singular,
            "namespaced": rdef.namespaced,
            "kind": rdef.kind,
            "verbs": list(ALL_VERBS),
        }
        if rdef.short_names:
            entry["shortNames"] = list(rdef.short_names)
        if rdef.categories:
            entry["categories"] = list(rdef.categories)
        resources.append(entry)
        resources.extend(
            {
                "name": f"{rdef.plural}/{sub}",
                "singularName": "",
                "namespaced": rdef.namespaced,
                "kind": rdef.kind,
                "verbs": ["get", "patch", "update"],
            }
            for sub in sorted(rdef.subresources)
            if sub == "status"
        )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _schemas(
    defs: Sequence[ResourceDef], group: str | None = None, version: str | None = None
) -> Body:
    schemas: Body = {}
    for rdef in defs:
        if rdef.schema is None or (group, version) not in (
            (None, None),
            (rdef.group, rdef.version),
        ):
            continue
        schema = dict(rdef.schema)
        schema["x-kubernetes-group-version-kind"] = [
            {"group": rdef.group, "version": rdef.version, "kind": rdef.kind}
        ]
        prefix = ".".join(reversed(rdef.group.split(".")))
        schemas[f"{prefix}.{rdef.version}.{rdef.kind}"] = schema
    return schemas


def openapi_v2(defs: Sequence[ResourceDef]) -> Body:
    info = {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]}
    return {"swagger": "2.0", "info": info, "paths": {}, "definitions": _schemas(defs)}


def openapi_v3_index(defs: Sequence[ResourceDef]) -> Body:
    paths = {}
    for group, versions in groups(defs).items():
        for version in versions:
            key = f"apis/{group}/{version}" if group else f"api/{version}"
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}"}
    return {"paths": paths}


def openapi_v3_group(defs: Sequence[ResourceDef], group: str, version: str) -> Body:
    if version not in groups(defs).get(group, []):
        raise error(404, "NotFound", "the server could not find the requested resource")
    info = {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]}
    components = {"schemas": _schemas(defs, group, version)}
    return {
        "openapi": "3.0.0",
        "info": info,
        "paths": _openapi_v3_paths(defs, group, version),
        "components": components,
    }


def _openapi_v3_paths(defs: Sequence[ResourceDef], group: str, version: str) -> Body:
    """Write operations with their query parameters and GVK, but no request schemas.

    kubectl reads these to learn that the server validates fields itself (`--validate`
    then works without the protobuf OpenAPI v2), and, finding no request body schema,
    computes strategic merge patches from its compiled-in types, as for any old server.
    """
    paths: Body = {}
    for rdef in defs:
        if (rdef.group, rdef.version) != (group, version):
            continue
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        base += "/namespaces/{namespace}" if rdef.namespaced else ""
        gvk = {"group": group, "version": version, "kind": rdef.kind}
        parameters = [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in ("dryRun", "fieldManager", "fieldValidation")
        ]

        def operation(action: str, gvk: Body = gvk, parameters: Any = parameters) -> Body:
            return {
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": parameters,
                "responses": {"200": {"description": "OK"}},
            }

        paths[f"{base}/{rdef.plural}"] = {"post": operation("post")}
        paths[f"{base}/{rdef.plural}/{{name}}"] = {
            "put": operation("put"),
            "patch": operation("patch"),
        }
    return paths
