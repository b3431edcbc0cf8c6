"""A Kubernetes API emulator good enough for kopf, the `kubernetes` client and kubectl.

It is `kmock.KubernetesEmulator` (kmock 0.8) with its gaps filled in one subclass,
`KubeApiEmulator`, served over real HTTP on 127.0.0.1 by `ApiServer`. It keeps objects in memory
(kmock's `objects` store, so `emulator.objects[...]` assertions still work) and behaves like the
real API server where our operator, kopf, the client and kubectl can tell the difference:

- URLs: `/api/v1/namespaces[/NAME[/status]]` parse (kmock's path parser fails on them); trailing
  slashes are ignored (`/version/`, `/api/`); discovery (`/api`, `/apis`, `/apis/G`, `/apis/G/V`)
  lists builtins and every served CRD version with `namespaced`, `shortNames`, `categories`,
  `verbs` and the `status` subresource; `/openapi/v2` (JSON only) and `/openapi/v3[/apis/G/V]`
  carry the CRDs' schemas, and v3 declares the write operations with their `fieldValidation`
  parameter, so plain `kubectl apply` validates server-side (`?fieldValidation=Strict` makes
  unknown fields of custom resources a 400 instead of pruning them; `?dryRun=All` stores
  nothing) while kubectl keeps computing strategic merge patches from its own types.
- Objects get `uid`, `creationTimestamp`, `generation`, `resourceVersion`; the resourceVersion
  is one cluster-wide counter bumped on every write; `generation` bumps only when something
  outside `metadata` and `status` changes; no-op writes bump nothing and emit no event.
- POST answers 201, fills `metadata.namespace` from the URL, supports `generateName`, refuses
  duplicates (409 AlreadyExists) and objects in missing namespaces (404).
- PUT replaces (409 Conflict on a stale `metadata.resourceVersion`); PATCH takes JSON patch
  (a failed `test` op answers 422 like the real server, which kopf's finalizer logic relies on),
  JSON merge patch, and, for builtin kinds only, strategic merge patch (lists of containers,
  initContainers, ephemeralContainers, volumes, env, imagePullSecrets merge by `name`, ports by
  `containerPort` (or `port`), volumeMounts by `mountPath`, conditions by `type`; finalizers are
  unioned; `$patch: delete|replace` works; `$retainKeys` and `$setElementOrder` are ignored).
  Server-side apply (`application/apply-patch+yaml`) answers 415.
- The `status` subresource: writes to `/status` change only `status`, writes to the object
  never change `status`; status is dropped on create (Pods start `Pending`, Namespaces `Active`,
  Nodes keep theirs, as in Kubernetes).
- Deletion honours finalizers: `deletionTimestamp` is set, the object stays until a write leaves
  `finalizers` empty, then it goes and a DELETED event is emitted. Deleting a Namespace deletes
  what is in it; deleting a CRD stops serving its resource and drops its objects.
- Lists carry `kind`/`apiVersion`/`metadata.resourceVersion`; `labelSelector` (=, ==, !=, in,
  notin, exists, !exists) and `fieldSelector` (=, ==, != on any dotted path, e.g.
  `metadata.name`) filter lists and watches; `Accept: ...;as=Table` gets a NAME/AGE table.
- Watches answer `application/json`, one event per line; they replay from `resourceVersion`
  (410 Gone ERROR event when it is older than the kept history), support
  `sendInitialEvents` + the initial-events-end BOOKMARK, periodic BOOKMARKs when
  `allowWatchBookmarks`, and `timeoutSeconds`. A MODIFIED object that leaves a selector is
  not turned into DELETED (a real server does that).
- Creating a CustomResourceDefinition serves its resource (status set to Established) and
  validates created/replaced/patched custom resources against `openAPIV3Schema` with
  `jsonschema` after defaulting and pruning like the real server: 422 Invalid with a Status
  whose `details.causes` list field paths (`spec.objectives.ttft.percentile`).
- Errors are Kubernetes `Status` bodies with the real reasons (NotFound, AlreadyExists,
  Conflict, Invalid, BadRequest, Expired (410), UnsupportedMediaType, MethodNotAllowed).

Not emulated: controllers (no ReplicaSets/Pods from Deployments, no garbage collection by
ownerReferences), admission, RBAC (any token is accepted), server-side apply, the `scale`
subresource, conversion between CRD versions (one stored body is served under every version),
field selectors beyond equality, Table output for watches. User reactions added with kmock's DSL
(`emulator['get /x'] << ...`) still take precedence, but a write they intercept changes nothing.

Nothing here may be imported by the operator's code paths (see the package docstring).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import copy
import dataclasses
import datetime
import json
import logging
import re
import secrets
import signal
import string
import sys
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import aiohttp.web
import attrs
import celpy
import jsonpatch
import jsonschema
import kmock
import yaml
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

__all__ = [
    "ApiError",
    "ApiServer",
    "KubeApiEmulator",
    "ResourceDef",
    "ThreadedApiServer",
    "main",
    "write_kubeconfig",
]

logger = logging.getLogger(__name__)

# What the operations raise: `.status` is the HTTP code, `.reason` the Kubernetes reason.
ApiError = kmock.KubernetesError

Body = dict[str, Any]
StoreKey = tuple[str, str]  # (group, plural): one store per resource, shared by its versions

_SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-latency-tuner-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SERVER_MANAGED_METADATA = (
    "uid",
    "creationTimestamp",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "name",
    "namespace",
)


# --------------------------------------------------------------------------------------------
# Resources
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ResourceDef:
    """One served group/version/plural, builtin or from a CRD."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    singular: str = ""
    schema: Mapping[str, Any] | None = None  # openAPIV3Schema of a CRD version
    custom: bool = False  # from a CRD: no strategic merge patch, schema validation

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def store_key(self) -> StoreKey:
        return (self.group, self.plural)

    @property
    def group_resource(self) -> str:
        """How the real server names it in messages: `deployments.apps`, `pods`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def kmock_resource(self) -> kmock.resource:
        return kmock.resource(self.group, self.version, self.plural)


def _builtin(
    api_version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool = True,
    short: Sequence[str] = (),
    status: bool = False,
) -> ResourceDef:
    group, _, version = api_version.rpartition("/")
    return ResourceDef(
        group=group,
        version=version,
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        short_names=tuple(short),
        subresources=frozenset({"status"} if status else set()),
        singular=kind.lower(),
    )


BUILTIN_RESOURCES: tuple[ResourceDef, ...] = (
    _builtin("v1", "namespaces", "Namespace", namespaced=False, short=["ns"], status=True),
    _builtin("v1", "nodes", "Node", namespaced=False, short=["no"], status=True),
    _builtin("v1", "pods", "Pod", short=["po"], status=True),
    _builtin("v1", "services", "Service", short=["svc"], status=True),
    _builtin("v1", "endpoints", "Endpoints", short=["ep"]),
    _builtin("v1", "configmaps", "ConfigMap", short=["cm"]),
    _builtin("v1", "secrets", "Secret"),
    _builtin("v1", "serviceaccounts", "ServiceAccount", short=["sa"]),
    _builtin("v1", "events", "Event", short=["ev"]),
    _builtin("v1", "persistentvolumeclaims", "PersistentVolumeClaim", short=["pvc"], status=True),
    _builtin("apps/v1", "deployments", "Deployment", short=["deploy"], status=True),
    _builtin("apps/v1", "replicasets", "ReplicaSet", short=["rs"], status=True),
    _builtin("apps/v1", "statefulsets", "StatefulSet", short=["sts"], status=True),
    _builtin("apps/v1", "daemonsets", "DaemonSet", short=["ds"], status=True),
    _builtin("events.k8s.io/v1", "events", "Event", short=["ev"]),
    _builtin("coordination.k8s.io/v1", "leases", "Lease"),
    _builtin("rbac.authorization.k8s.io/v1", "roles", "Role"),
    _builtin("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
    _builtin("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", namespaced=False),
    _builtin(
        "rbac.authorization.k8s.io/v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
    ),
    _builtin(
        "apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short=["crd", "crds"],
        status=True,
    ),
)
_CRD = ("apiextensions.k8s.io", "customresourcedefinitions")
_NAMESPACES = ("", "namespaces")
_INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


# --------------------------------------------------------------------------------------------
# Errors: Kubernetes Status bodies
# --------------------------------------------------------------------------------------------


def _error(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> kmock.KubernetesError:
    return kmock.KubernetesError(
        status=code, reason=reason, message=message, details=dict(details or {})
    )


def _not_found(rdef: ResourceDef, name: str) -> kmock.KubernetesError:
    details = {"name": name, "group": rdef.group, "kind": rdef.plural}
    return _error(404, "NotFound", f'{rdef.group_resource} "{name}" not found', details)


def _conflict(rdef: ResourceDef, name: str) -> kmock.KubernetesError:
    message = (
        f'Operation cannot be fulfilled on {rdef.group_resource} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    return _error(
        409, "Conflict", message, {"name": name, "group": rdef.group, "kind": rdef.plural}
    )


def _invalid(
    rdef: ResourceDef, name: str, causes: Sequence[Mapping[str, str]]
) -> kmock.KubernetesError:
    texts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified = f"{rdef.kind}.{rdef.group}" if rdef.group else rdef.kind
    details = {"name": name, "group": rdef.group, "kind": rdef.kind, "causes": list(causes)}
    return _error(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', details)


def _bad_request(message: str) -> kmock.KubernetesError:
    return _error(400, "BadRequest", message)


def _status_body(code: int, reason: str, message: str, details: Mapping[str, Any]) -> Body:
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


# --------------------------------------------------------------------------------------------
# Patching
# --------------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge recursively, null deletes, the rest replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: Body = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# Lists of builtin kinds that merge by a key in strategic merge patches (as the Go structs say).
_SMP_MERGE_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "imagePullSecrets": ("name",),
    "ports": ("containerPort", "port"),  # containers' ports, then services' ports
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "conditions": ("type",),
    "hostAliases": ("ip",),
    "ownerReferences": ("uid",),
}
_SMP_PRIMITIVE_MERGE = frozenset({"finalizers"})


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A strategic merge patch for the lists that matter in builtin kinds (see module doc)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return _strip_directives(patch)
    if patch.get("$patch") == "delete":
        return None
    result: Body = dict(target) if isinstance(target, Mapping) else {}
    deletions: list[tuple[str, list[Any]]] = []
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            deletions.append((key.split("/", 1)[1], list(value or [])))
        elif key.startswith("$"):  # $patch, $retainKeys, $setElementOrder/...: ignored
            continue
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _smp_list(key, result[key], value)
        elif isinstance(value, Mapping):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = _strip_directives(value)
    for key, values in deletions:
        if isinstance(result.get(key), list):
            result[key] = [item for item in result[key] if item not in values]
    return result


def _smp_list(key: str, current: list[Any], patch: list[Any]) -> list[Any]:
    if key in _SMP_PRIMITIVE_MERGE:
        return list(current) + [item for item in patch if item not in current]
    if key not in _SMP_MERGE_KEYS:
        return [_strip_directives(item) for item in patch]
    if any(isinstance(item, Mapping) and item.get("$patch") == "replace" for item in patch):
        return [
            _strip_directives(item)
            for item in patch
            if not (isinstance(item, Mapping) and item.get("$patch") == "replace")
        ]
    result = [copy.deepcopy(item) for item in current]
    for item in patch:
        merge_key = next(
            (k for k in _SMP_MERGE_KEYS[key] if isinstance(item, Mapping) and k in item), None
        )
        if merge_key is None:
            result.append(_strip_directives(item))
            continue
        index = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(old, Mapping) and old.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(_strip_directives(item))
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(item) for item in value]
    return value


# --------------------------------------------------------------------------------------------
# CRD schemas: defaulting, pruning, validation
# --------------------------------------------------------------------------------------------


_CHECKED_EXTENSIONS = (
    "x-kubernetes-validations",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
)
_CEL = celpy.Environment()
_CEL_PROGRAMS: dict[str, Any] = {}


def _cel_rules(
    validator: Any, rules: list[Mapping[str, str]], instance: Any, schema: Any
) -> Iterator[jsonschema.ValidationError]:
    """`x-kubernetes-validations`: CEL rules on `self`; transition rules (oldSelf) are skipped."""
    if instance is None:
        return
    for rule in rules:
        if "oldSelf" in rule["rule"]:
            continue
        if rule["rule"] not in _CEL_PROGRAMS:
            _CEL_PROGRAMS[rule["rule"]] = _CEL.program(_CEL.compile(rule["rule"]))
        try:
            result = _CEL_PROGRAMS[rule["rule"]].evaluate({"self": json_to_cel(instance)})
        except CELEvalError as e:  # e.g. duration("5 minutes"): an error, as in Kubernetes
            result = e
        if not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            extra = [p for p in rule.get("fieldPath", "").split(".") if p]
            error = jsonschema.ValidationError(
                rule.get("message") or f"failed rule: {rule['rule']}"
            )
            error.path.extend(extra)
            error.cause_reason = rule.get("reason", "FieldValueInvalid")
            yield error


def _list_type(
    validator: Any, kind: str, instance: Any, schema: Any
) -> Iterator[jsonschema.ValidationError]:
    """`x-kubernetes-list-type: set|map`: no duplicate items (or map keys)."""
    if not isinstance(instance, list) or kind not in ("set", "map"):
        return
    names = schema.get("x-kubernetes-list-map-keys") or []
    seen: list[Any] = []
    for index, item in enumerate(instance):
        key = (
            item if kind == "set" else {n: item.get(n) for n in names if isinstance(item, Mapping)}
        )
        if key in seen:
            error = jsonschema.ValidationError(f"Duplicate value: {json.dumps(key)}")
            error.path.append(index)
            error.cause_reason = "FieldValueDuplicate"
            yield error
        seen.append(key)


_CrdValidator = jsonschema.validators.extend(
    jsonschema.Draft4Validator,
    {"x-kubernetes-validations": _cel_rules, "x-kubernetes-list-type": _list_type},
)


def _to_json_schema(schema: Any) -> Any:
    """Translate a structural OpenAPI v3 schema into JSON Schema draft 4 for `jsonschema`."""
    if isinstance(schema, list):
        return [_to_json_schema(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    result: Body = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties", "definitions"):
            result[key] = {k: _to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"):
            result[key] = _to_json_schema(value)
        elif key in _CHECKED_EXTENSIONS:
            result[key] = value
        elif key == "nullable" or key.startswith("x-kubernetes-"):
            continue
        else:
            result[key] = value
    if schema.get("x-kubernetes-int-or-string"):
        result.pop("type", None)
        result.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if schema.get("nullable") and "type" in result:
        result["type"] = [result["type"], "null"]
        if "enum" in result:
            result["enum"] = [*result["enum"], None]
    return result


def _apply_defaults(schema: Mapping[str, Any], value: Any) -> None:
    if isinstance(value, dict):
        for name, subschema in (schema.get("properties") or {}).items():
            if name not in value and "default" in subschema:
                value[name] = copy.deepcopy(subschema["default"])
            if name in value:
                _apply_defaults(subschema, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for name, item in value.items():
                if name not in (schema.get("properties") or {}):
                    _apply_defaults(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _apply_defaults(schema["items"], item)


def _prune(
    schema: Mapping[str, Any],
    value: Any,
    *,
    top: bool = False,
    path: str = "",
    dropped: list[str] | None = None,
) -> None:
    """Drop fields the schema does not know, as the real server does for structural schemas."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    dropped = [] if dropped is None else dropped
    if isinstance(value, dict):
        known = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        embedded = top or schema.get("x-kubernetes-embedded-resource")
        for name in list(value):
            inner = f"{path}.{name}" if path else name
            if embedded and name in ("apiVersion", "kind", "metadata"):
                continue
            if name in known:
                _prune(known[name], value[name], path=inner, dropped=dropped)
            elif isinstance(extra, Mapping):
                _prune(extra, value[name], path=inner, dropped=dropped)
            elif extra is not True:
                del value[name]
                dropped.append(inner)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            _prune(schema["items"], item, path=f"{path}[{index}]", dropped=dropped)


def _field_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _validation_causes(schema: Mapping[str, Any], obj: Body) -> list[dict[str, str]]:
    validator = _CrdValidator(_to_json_schema(schema))
    causes: list[dict[str, str]] = []
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    for err in errors:
        path = _field_path(err.absolute_path)
        shown = json.dumps(err.instance)
        if err.validator == "required":
            for missing in err.validator_value:
                if isinstance(err.instance, Mapping) and missing not in err.instance:
                    field = f"{path}.{missing}" if path else missing
                    causes.append(
                        {
                            "reason": "FieldValueRequired",
                            "message": "Required value",
                            "field": field,
                        }
                    )
        elif err.validator == "enum":
            supported = ", ".join(json.dumps(v) for v in err.validator_value)
            message = f"Unsupported value: {shown}: supported values: {supported}"
            causes.append({"reason": "FieldValueNotSupported", "message": message, "field": path})
        elif err.validator in ("x-kubernetes-validations", "x-kubernetes-list-type"):
            reason = getattr(err, "cause_reason", "FieldValueInvalid")
            message = err.message
            if reason == "FieldValueInvalid":
                shown = json.dumps("object") if isinstance(err.instance, Mapping) else shown
                message = f"Invalid value: {shown}: {err.message}"
            causes.append({"reason": reason, "message": message, "field": path})
        elif err.validator == "type":
            wanted = err.validator_value
            message = f"Invalid value: {shown}: {path} in body must be of type {wanted}: {shown}"
            causes.append({"reason": "FieldValueTypeInvalid", "message": message, "field": path})
        else:
            message = f"Invalid value: {shown}: {path} in body {err.message}"
            causes.append({"reason": "FieldValueInvalid", "message": message, "field": path})
    return causes


# --------------------------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------------------------

_LABEL_TERM = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9_.-]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)


def _split_terms(selector: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [term for term in terms if term.strip()]


def label_selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """Kubernetes label selector syntax: `a=b,c!=d,e in (f,g),h notin (i),j,!k`."""
    for term in _split_terms(selector):
        match = _LABEL_TERM.match(term)
        if match is None:
            raise _bad_request(f"unable to parse requirement: {term!r}")
        key = match["key"]
        if match["op"] in ("=", "=="):
            ok = labels.get(key) == match["value"]
        elif match["op"] == "!=":
            ok = labels.get(key) != match["value"]
        elif match["setop"]:
            values = {v.strip() for v in match["values"].split(",") if v.strip()}
            ok = (labels.get(key) in values) == (match["setop"] == "in")
            ok = ok and (match["setop"] == "notin" or key in labels)
        else:
            ok = key in labels
        if bool(match["neg"]) == ok:
            return False
    return True


def field_selector_matches(selector: str, obj: Mapping[str, Any]) -> bool:
    """Equality field selectors on any dotted path: `metadata.name=x,status.phase!=Running`."""
    for term in _split_terms(selector):
        found = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if found is None:
            raise _bad_request(f"invalid field selector: {term!r}")
        path, op, wanted = found.groups()
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        actual = (
            "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        )
        if (actual == wanted) != (op != "!="):
            return False
    return True


# --------------------------------------------------------------------------------------------
# The emulator
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Event:
    rv: int
    type: str
    store: StoreKey
    namespace: str | None
    obj: Body


@dataclasses.dataclass(frozen=True)
class _Options:
    """How a write goes: `?dryRun=All`, `?fieldValidation=Strict` (unknown fields are errors)."""

    dry_run: bool = False
    strict: bool = False


@dataclasses.dataclass(frozen=True)
class _Target:
    """What a resource URL addresses."""

    rdef: ResourceDef
    namespace: str | None
    name: str | None
    subresource: str | None


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    created = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.UTC
    )
    seconds = int((datetime.datetime.now(datetime.UTC) - created).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _spec_part(obj: Mapping[str, Any]) -> Body:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


@attrs.define(kw_only=True)
class KubeApiEmulator(kmock.KubernetesEmulator):
    """kmock's Kubernetes emulator with the gaps filled (see the module docstring).

    kmock's own implicit fallbacks (discovery, list/watch/fetch/create/update/delete) are replaced
    wholesale: requests that no user reaction answers are served by `_serve()`.
    """

    bookmark_interval: float = 30.0  # seconds between BOOKMARKs on quiet watches
    history_size: int = 10_000  # watch events kept for replays from a resourceVersion
    versions_kept: int = 50  # past versions per object in kmock's `objects[...].history`
    requests_kept: int = 10_000  # requests kept in kmock's `requests` (for assertions)

    _defs: dict[tuple[str, str, str], ResourceDef] = attrs.field(factory=dict, init=False)
    _rv: int = attrs.field(default=1, init=False)
    _events: collections.deque[_Event] = attrs.field(init=False)
    _compacted_rv: int = attrs.field(default=0, init=False)  # replays from before it get 410
    _watchers: set[asyncio.Queue[_Event | None]] = attrs.field(factory=set, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    _request_count: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        # Deliberately not calling kmock's: its fallbacks are what we replace.
        self._events = collections.deque(maxlen=self.history_size)
        for rdef in BUILTIN_RESOURCES:
            self.register(rdef)
        for name in _INITIAL_NAMESPACES:
            self.create_object(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            )

    # -- resource registry -------------------------------------------------------------------------

    def register(self, rdef: ResourceDef) -> None:
        """Serve a resource (and list it in discovery)."""
        self._defs[rdef.group, rdef.version, rdef.plural] = rdef
        info = self.resources[rdef.kmock_resource]  # kmock's view, for its users
        info.kind, info.namespaced, info.singular = rdef.kind, rdef.namespaced, rdef.singular
        info.shortnames, info.subresources = set(rdef.short_names), set(rdef.subresources)
        info.verbs, info.categories = set(_ALL_VERBS), set(rdef.categories)

    def unregister(self, group: str, plural: str) -> None:
        for key in [k for k in self._defs if (k[0], k[2]) == (group, plural)]:
            rdef = self._defs.pop(key)
            with contextlib.suppress(KeyError):
                del self.resources[rdef.kmock_resource]

    def resource_for(self, api_version: str, kind_or_plural: str) -> ResourceDef:
        group, _, version = api_version.rpartition("/")
        for rdef in self._defs.values():
            if (rdef.group, rdef.version) == (group, version) and kind_or_plural in (
                rdef.kind,
                rdef.plural,
            ):
                return rdef
        raise _error(404, "NotFound", f"the server doesn't have a resource type {kind_or_plural!r}")

    # -- the store ---------------------------------------------------------------------------------

    def _store_key(self, rdef: ResourceDef, namespace: str | None, name: str) -> Any:
        # One store per group/plural: every served version of a CRD sees the same objects.
        first = next(d for d in self._defs.values() if d.store_key == rdef.store_key)
        return (first.kmock_resource, namespace if rdef.namespaced else None, name)

    def _load(self, rdef: ResourceDef, namespace: str | None, name: str) -> Body | None:
        key = self._store_key(rdef, namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        obj: Body = copy.deepcopy(self.objects[key].raw)
        obj["apiVersion"] = rdef.api_version  # no conversion: one body under every version
        return obj

    def _items(self, rdef: ResourceDef, namespace: str | None) -> list[Body]:
        found = []
        for (res, ns, _name), stored in self.objects.items():
            mine = (res.group, res.plural) == rdef.store_key and not stored.deleted
            if mine and (namespace is None or ns == namespace):
                obj: Body = copy.deepcopy(stored.raw)
                obj["apiVersion"] = rdef.api_version
                found.append(obj)
        return sorted(
            found, key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"])
        )

    def _save(self, rdef: ResourceDef, obj: Body, event: str) -> Body:
        self._rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self._rv)
        key = self._store_key(rdef, meta.get("namespace"), meta["name"])
        if event == "DELETED":
            self.objects[key].delete()
        elif key in self.objects:
            history = self.objects[key].history
            history.append(copy.deepcopy(obj))  # a new version in kmock's history
            del history[: -self.versions_kept]  # bounded, for long demos
        else:
            self.objects[key] = copy.deepcopy(obj)
        self._emit(
            _Event(self._rv, event, rdef.store_key, meta.get("namespace"), copy.deepcopy(obj))
        )
        return obj

    def _emit(self, event: _Event) -> None:
        if len(self._events) == self._events.maxlen and self._events:
            self._compacted_rv = self._events[0].rv
        self._events.append(event)
        for queue in self._watchers:
            queue.put_nowait(event)

    def close_watches(self) -> None:
        """End every open watch (before the HTTP server stops)."""
        self._closing = True
        for queue in self._watchers:
            queue.put_nowait(None)

    # -- operations (synchronous: atomic on the event loop) ----------------------------------------

    def create_object(self, body: Mapping[str, Any], *, namespace: str | None = None) -> Body:
        """Create as POST does; the resource comes from `apiVersion` and `kind`."""
        rdef = self.resource_for(str(body.get("apiVersion", "")), str(body.get("kind", "")))
        namespace = namespace or body.get("metadata", {}).get("namespace")
        return self._create(rdef, namespace, body, _Options())

    def get_object(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Body | None:
        return self._load(self.resource_for(api_version, kind), namespace, name)

    def list_objects(self, api_version: str, kind: str, namespace: str | None = None) -> list[Body]:
        return self._items(self.resource_for(api_version, kind), namespace)

    def patch_object(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        patch_type: str = "application/merge-patch+json",
    ) -> Body:
        rdef = self.resource_for(api_version, kind)
        return self._patch(
            _Target(rdef, namespace, name, subresource), patch, patch_type, _Options()
        )

    def delete_object(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Body:
        rdef = self.resource_for(api_version, kind)
        return self._delete(_Target(rdef, namespace, name, None), {}, _Options())

    def _create(self, rdef: ResourceDef, namespace: str | None, body: Any, opts: _Options) -> Body:
        if not isinstance(body, Mapping):
            raise _bad_request("the body of the request was in an unknown format")
        obj: Body = copy.deepcopy(dict(body))
        self._check_kind(rdef, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise _bad_request("metadata must be an object")
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(
                secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5)
            )
            meta["name"] = f"{meta['generateName']}{suffix}"
        name = str(meta.get("name") or "")
        if not name:
            cause = {
                "reason": "FieldValueRequired",
                "message": "Required value: name or generateName is required",
                "field": "metadata.name",
            }
            raise _invalid(rdef, "", [cause])
        self._check_name(rdef, name)
        if rdef.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise _bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            namespace = namespace or body_ns
            if not namespace:
                raise _bad_request("a namespace is required for namespaced resources")
            meta["namespace"] = namespace
            if self._load(self._defs["", "v1", "namespaces"], None, namespace) is None:
                raise _not_found(self._defs["", "v1", "namespaces"], namespace)
        else:
            meta.pop("namespace", None)
            namespace = None
        if self._load(rdef, namespace, name) is not None:
            details = {"name": name, "group": rdef.group, "kind": rdef.plural}
            message = f'{rdef.group_resource} "{name}" already exists'
            raise _error(409, "AlreadyExists", message, details)
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
            meta.pop(key, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        if "status" in rdef.subresources and rdef.plural != "nodes":
            obj.pop("status", None)
            obj.update(self._initial_status(rdef))
        self._check_schema(rdef, obj, opts)
        if rdef.store_key == _CRD:
            self._check_crd(obj)
            obj["status"] = self._crd_status(obj)
        if opts.dry_run:
            return obj
        saved = self._save(rdef, obj, "ADDED")
        if rdef.store_key == _CRD:
            self._register_crd(saved)
        return saved

    def _replace(self, target: _Target, body: Any, opts: _Options) -> Body:
        rdef, name = target.rdef, target.name or ""
        if not isinstance(body, Mapping) or not isinstance(body.get("metadata", {}), Mapping):
            raise _bad_request("the body of the request was in an unknown format")
        old = self._load(rdef, target.namespace, name)
        if old is None:
            raise _not_found(rdef, name)
        new: Body = copy.deepcopy(dict(body))
        self._check_kind(rdef, new)
        body_name = new.get("metadata", {}).get("name")
        if body_name and body_name != name:
            raise _bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        return self._update(target, old, new, opts)

    def _patch(self, target: _Target, patch: Any, content_type: str, opts: _Options) -> Body:
        rdef, name = target.rdef, target.name or ""
        old = self._load(rdef, target.namespace, name)
        if old is None:
            raise _not_found(rdef, name)
        new: Any
        if content_type == "application/json-patch+json":
            if not isinstance(patch, list):
                raise _bad_request("a JSON patch must be a list of operations")
            try:
                new = jsonpatch.apply_patch(old, patch, in_place=False)
            except jsonpatch.JsonPatchTestFailed as e:
                cause = {"reason": "FieldValueInvalid", "message": f"test operation failed: {e}"}
                raise _invalid(rdef, name, [cause]) from None
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                cause = {"reason": "FieldValueInvalid", "message": f"the patch does not apply: {e}"}
                raise _invalid(rdef, name, [cause]) from None
        elif content_type == "application/merge-patch+json":
            new = merge_patch(old, patch)
        elif content_type == "application/strategic-merge-patch+json" and not rdef.custom:
            new = strategic_merge_patch(old, patch)
        else:
            accepted = ["application/json-patch+json", "application/merge-patch+json"]
            accepted += [] if rdef.custom else ["application/strategic-merge-patch+json"]
            message = (
                "the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(accepted)}"
            )
            raise _error(415, "UnsupportedMediaType", message)
        if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
            raise _bad_request("the patched object is not a Kubernetes object")
        return self._update(target, old, new, opts)

    def _update(self, target: _Target, old: Body, new: Body, opts: _Options) -> Body:
        """The common tail of PUT and PATCH: subresource rules, metadata guards, schema, store."""
        rdef, name = target.rdef, target.name or ""
        new_meta = new.setdefault("metadata", {})
        old_meta = old["metadata"]
        wanted_rv = new_meta.get("resourceVersion")
        if wanted_rv not in (None, "") and str(wanted_rv) != old_meta["resourceVersion"]:
            raise _conflict(rdef, name)
        if target.subresource == "status":
            merged = copy.deepcopy(old)
            merged.pop("status", None)
            if "status" in new:
                merged["status"] = new["status"]
            new = merged
        elif target.subresource is not None:
            raise _error(404, "NotFound", "the server could not find the requested resource")
        elif "status" in rdef.subresources:
            new.pop("status", None)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        new_meta = new["metadata"]
        for key in _SERVER_MANAGED_METADATA:
            if key in old_meta:
                new_meta[key] = old_meta[key]
            else:
                new_meta.pop(key, None)
        new["apiVersion"], new["kind"] = rdef.api_version, rdef.kind
        if old_meta.get("deletionTimestamp"):
            added = set(new_meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
            if added:
                cause = {
                    "reason": "FieldValueForbidden",
                    "message": (
                        "Forbidden: no new finalizers can be added if the object is being deleted"
                    ),
                    "field": "metadata.finalizers",
                }
                raise _invalid(rdef, name, [cause])
        if not new_meta.get("finalizers"):
            new_meta.pop("finalizers", None)
        self._check_schema(rdef, new, opts)
        if rdef.store_key == _CRD:
            self._check_crd(new)
            new["status"] = self._crd_status(new)
        if new == old:
            return old  # a no-op write: no new resourceVersion, no event
        if _spec_part(new) != _spec_part(old):
            new_meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if opts.dry_run:
            return new
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
            return self._save(rdef, new, "DELETED")
        saved = self._save(rdef, new, "MODIFIED")
        if rdef.store_key == _CRD:
            self._register_crd(saved)
        return saved

    def _delete(self, target: _Target, options: Any, opts: _Options) -> Body:
        rdef, name = target.rdef, target.name or ""
        obj = self._load(rdef, target.namespace, name)
        if obj is None:
            raise _not_found(rdef, name)
        meta = obj["metadata"]
        pre = options.get("preconditions") if isinstance(options, Mapping) else None
        if isinstance(pre, Mapping):
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise _conflict(rdef, name)
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise _conflict(rdef, name)
        if opts.dry_run:
            return obj
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return obj
            meta["deletionTimestamp"] = _now()
            meta["deletionGracePeriodSeconds"] = 0
            meta["generation"] = int(meta.get("generation", 1)) + 1
            return self._save(rdef, obj, "MODIFIED")
        if rdef.store_key == _NAMESPACES:
            self._delete_namespace_contents(name)
        if rdef.store_key == _CRD:
            self._drop_crd(obj)
        return self._save(rdef, obj, "DELETED")

    def _delete_namespace_contents(self, namespace: str) -> None:
        for other in {d.store_key: d for d in self._defs.values() if d.namespaced}.values():
            for item in self._items(other, namespace):
                with contextlib.suppress(kmock.KubernetesError):
                    target = _Target(other, namespace, item["metadata"]["name"], None)
                    self._delete(target, {}, _Options())

    # -- checks ------------------------------------------------------------------------------------

    def _check_kind(self, rdef: ResourceDef, obj: Body) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if (kind and kind != rdef.kind) or (api_version and api_version != rdef.api_version):
            raise _bad_request(
                f"the API version in the data ({api_version}) and kind ({kind}) do not match "
                f"the URL's {rdef.api_version} {rdef.kind}"
            )
        obj["apiVersion"], obj["kind"] = rdef.api_version, rdef.kind

    def _check_name(self, rdef: ResourceDef, name: str) -> None:
        if len(name) > 253 or not _NAME_RE.match(name):
            message = (
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric "
                "character"
            )
            cause = {"reason": "FieldValueInvalid", "message": message, "field": "metadata.name"}
            raise _invalid(rdef, name, [cause])

    def _check_schema(self, rdef: ResourceDef, obj: Body, opts: _Options) -> None:
        if rdef.schema is None:
            return
        _apply_defaults(rdef.schema, obj)
        unknown: list[str] = []
        _prune(rdef.schema, obj, top=True, dropped=unknown)
        if unknown and opts.strict:
            fields = ", ".join(f'unknown field "{path}"' for path in unknown)
            raise _bad_request(
                f'{rdef.kind} in version "{rdef.version}" cannot be handled as a {rdef.kind}: '
                f"strict decoding error: {fields}"
            )
        causes = _validation_causes(rdef.schema, obj)
        if causes:
            raise _invalid(rdef, obj["metadata"].get("name", ""), causes)

    @staticmethod
    def _initial_status(rdef: ResourceDef) -> Body:
        if rdef.store_key == _NAMESPACES:
            return {"status": {"phase": "Active"}}
        if rdef.store_key == ("", "pods"):
            return {"status": {"phase": "Pending"}}
        return {}

    # -- CRDs --------------------------------------------------------------------------------------

    def _check_crd(self, crd: Body) -> None:
        rdef = self._defs["apiextensions.k8s.io", "v1", "customresourcedefinitions"]
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
            causes.append(
                {"reason": "FieldValueInvalid", "message": message, "field": "metadata.name"}
            )
        if causes:
            raise _invalid(rdef, name, causes)

    @staticmethod
    def _crd_status(crd: Body) -> Body:
        spec = crd["spec"]
        now = _now()
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

    def _register_crd(self, crd: Body) -> None:
        spec = crd["spec"]
        names = spec["names"]
        self.unregister(spec["group"], names["plural"])
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            self.register(
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
                    schema=schema,
                    custom=True,
                )
            )

    def _drop_crd(self, crd: Body) -> None:
        spec = crd.get("spec") or {}
        plural, group = (spec.get("names") or {}).get("plural"), spec.get("group")
        rdef = next((d for d in self._defs.values() if d.store_key == (group, plural)), None)
        if rdef is not None:
            for item in self._items(rdef, None):
                item["metadata"].pop("finalizers", None)
                self._save(rdef, item, "DELETED")
            self.unregister(rdef.group, rdef.plural)

    # -- HTTP --------------------------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # Replaces kmock's entry point because its request parser fails on /api/v1/namespaces.
        body = await raw_request.read()
        try:
            try:
                data = json.loads(body) if body else None
            except ValueError:
                data = None
            try:
                target = self._parse_target(raw_request.path)
            except kmock.KubernetesError:  # unknown resource: 404 later, unless a reaction answers
                target = None
            method = raw_request.method.upper()
            params = dict(raw_request.query)
            request = kmock.Request(
                id=self._request_count,
                raw_request=raw_request,
                url=raw_request.url,
                method=method,
                params=params,
                headers=dict(raw_request.headers),
                cookies=dict(raw_request.cookies),
                body=body,
                text=body.decode("utf-8", errors="replace"),
                data=data,
                action=self._guess_action(target, method, params),
                resource=target.rdef.kmock_resource if target else None,
                namespace=target.namespace if target else None,
                name=target.name if target else None,
                subresource=target.subresource if target else None,
            )
            self._request_count += 1
            self._requests.append(request)
            del self._requests[: -self.requests_kept]
            return await self._handle(request)
        except kmock.KubernetesError as e:
            return await self._render_error(e)
        except Exception as e:
            logger.exception(
                "The API emulator failed on %s %s", raw_request.method, raw_request.path
            )
            return await self._render_error(e)

    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        if isinstance(exc, kmock.KubernetesError):
            body = _status_body(exc.status, exc.reason or "", exc.message or "", exc.details or {})
        else:
            body = _status_body(500, "InternalError", f"an error on the server: {exc!r}", {})
        return aiohttp.web.json_response(body, status=body["code"])

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        try:  # the user's reactions (kmock's DSL) first, skipping kmock's emulator logic
            response: aiohttp.web.StreamResponse = await kmock.RawHandler._handle(self, request)
            return response
        except NotImplementedError:
            return await self._serve(request)

    @staticmethod
    def _guess_action(target: _Target | None, method: str, params: Mapping[str, str]) -> Any:
        if target is None:
            return None
        if method == "GET":
            if params.get("watch") in ("true", "1"):
                return kmock.action.WATCH
            return kmock.action.FETCH if target.name else kmock.action.LIST
        return {
            "POST": kmock.action.CREATE,
            "PUT": kmock.action.UPDATE,
            "PATCH": kmock.action.UPDATE,
            "DELETE": kmock.action.DELETE,
        }.get(method)

    def _parse_target(self, path: str) -> _Target | None:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 3 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 4 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and (group, version, rest[2]) in self._defs:
            namespace, rest = rest[1], rest[2:]
        rdef = self._defs.get((group, version, rest[0]))
        if rdef is None:
            raise _error(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        subresource = "/".join(rest[2:]) or None
        return _Target(rdef, namespace if rdef.namespaced else None, name, subresource)

    async def _serve(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        path = "/" + "/".join(p for p in request.url.path.split("/") if p)
        method = request.method.value if hasattr(request.method, "value") else str(request.method)
        raw = request._raw_request
        assert raw is not None
        target = self._parse_target(path)  # 404 for unknown resources
        if target is None:
            if method not in ("GET", "HEAD"):
                raise _error(405, "MethodNotAllowed", f"{method} is not supported on {path}")
            return self._serve_static(path, raw)
        params = request.params
        opts = _Options(
            dry_run=params.get("dryRun") == "All",
            strict=params.get("fieldValidation") == "Strict",
        )
        rdef = target.rdef
        if target.subresource not in (None, "status") or (
            target.subresource == "status" and "status" not in rdef.subresources
        ):
            raise _error(404, "NotFound", "the server could not find the requested resource")
        if method == "GET" and params.get("watch") in ("true", "1"):
            return await self._stream_watch(target, params, raw)
        if method == "GET" and target.name is None:
            items = self._select(self._items(rdef, target.namespace), params)
            if "as=Table" in raw.headers.get("Accept", ""):
                return aiohttp.web.json_response(self._table(rdef, items))
            return aiohttp.web.json_response(self._list_body(rdef, items))
        if method == "GET":
            obj = self._load(rdef, target.namespace, target.name or "")
            if obj is None:
                raise _not_found(rdef, target.name or "")
            if "as=Table" in raw.headers.get("Accept", ""):
                return aiohttp.web.json_response(self._table(rdef, [obj]))
            return aiohttp.web.json_response(obj)
        if method == "POST" and target.name is None:
            created = self._create(rdef, target.namespace, request.data, opts)
            return aiohttp.web.json_response(created, status=201)
        if method == "PUT" and target.name is not None:
            return aiohttp.web.json_response(self._replace(target, request.data, opts))
        if method == "PATCH" and target.name is not None:
            content_type = raw.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if request.data is None:
                raise _bad_request("the body of the request was in an unknown format")
            return aiohttp.web.json_response(self._patch(target, request.data, content_type, opts))
        if method == "DELETE" and target.name is not None:
            return aiohttp.web.json_response(self._delete(target, request.data, opts))
        if method == "DELETE":
            items = self._select(self._items(rdef, target.namespace), params)
            for item in items:
                meta = item["metadata"]
                self._delete(_Target(rdef, meta.get("namespace"), meta["name"], None), {}, opts)
            return aiohttp.web.json_response(self._list_body(rdef, items))
        raise _error(405, "MethodNotAllowed", f"{method} is not supported on {path}")

    def _select(self, items: list[Body], params: Mapping[str, str]) -> list[Body]:
        labels, fields = params.get("labelSelector"), params.get("fieldSelector")
        return [item for item in items if self._matches(item, labels, fields)]

    @staticmethod
    def _matches(obj: Mapping[str, Any], labels: str | None, fields: str | None) -> bool:
        if labels and not label_selector_matches(labels, obj["metadata"].get("labels") or {}):
            return False
        return not (fields and not field_selector_matches(fields, obj))

    def _list_body(self, rdef: ResourceDef, items: list[Body]) -> Body:
        return {
            "kind": f"{rdef.kind}List",
            "apiVersion": rdef.api_version,
            "metadata": {"resourceVersion": str(self._rv)},
            "items": items,
        }

    def _table(self, rdef: ResourceDef, items: list[Body]) -> Body:
        columns = [
            {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "", "priority": 0},
        ]
        rows = [
            {
                "cells": [
                    item["metadata"]["name"],
                    _age(item["metadata"].get("creationTimestamp")),
                ],
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
            "metadata": {"resourceVersion": str(self._rv)},
            "columnDefinitions": columns,
            "rows": rows,
        }

    # -- watch -------------------------------------------------------------------------------------

    async def _stream_watch(
        self, target: _Target, params: Mapping[str, str], raw: aiohttp.web.BaseRequest
    ) -> aiohttp.web.StreamResponse:
        rdef = target.rdef
        labels, fields = params.get("labelSelector"), params.get("fieldSelector")
        if target.name:
            fields = ",".join(f for f in (fields, f"metadata.name={target.name}") if f)
        bookmarks = params.get("allowWatchBookmarks") in ("true", "1")
        since = params.get("resourceVersion") or "0"
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        if not since.isdigit():
            raise _bad_request(f"invalid resource version: {since!r}")

        def wanted(event: _Event) -> bool:
            return (
                event.store == rdef.store_key
                and (target.namespace is None or event.namespace == target.namespace)
                and self._matches(event.obj, labels, fields)
            )

        def shown(event_type: str, obj: Body) -> bytes:
            obj = dict(obj, apiVersion=rdef.api_version)
            return json.dumps({"type": event_type, "object": obj}).encode() + b"\n"

        # Registration and the snapshot happen in one synchronous step: no write can slip between.
        queue: asyncio.Queue[_Event | None] = asyncio.Queue()
        response = aiohttp.web.StreamResponse()
        self._watchers.add(queue)
        try:
            initial: list[bytes] = []
            if int(since) == 0:
                items = self._select(
                    self._items(rdef, target.namespace),
                    {"labelSelector": labels or "", "fieldSelector": fields or ""},
                )
                initial = [shown("ADDED", item) for item in items]
                if params.get("sendInitialEvents") == "true" and bookmarks:
                    initial.append(self._bookmark(rdef, initial_end=True))
            elif int(since) < self._compacted_rv:
                gone = _status_body(
                    410, "Expired", f"too old resource version: {since} ({self._compacted_rv})", {}
                )
                initial = [json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n"]
                queue.put_nowait(None)
            else:
                replay = [e for e in self._events if e.rv > int(since) and wanted(e)]
                initial = [shown(e.type, e.obj) for e in replay]
            sent_rv = self._rv
            response.headers["Content-Type"] = "application/json"
            await response.prepare(raw)
            for chunk in initial:
                await response.write(chunk)
            loop = asyncio.get_running_loop()
            deadline = None if timeout is None else loop.time() + timeout
            while not self._closing:
                wait = self.bookmark_interval if bookmarks else None
                if deadline is not None:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    wait = left if wait is None else min(wait, left)
                try:
                    event = await asyncio.wait_for(queue.get(), timeout=wait)
                except TimeoutError:
                    if bookmarks and (deadline is None or loop.time() < deadline):
                        await response.write(self._bookmark(rdef))
                    continue
                if event is None:
                    break
                if event.rv > sent_rv and wanted(event):
                    await response.write(shown(event.type, event.obj))
            with contextlib.suppress(ConnectionError):
                await response.write_eof()
            return response
        except ConnectionError:
            return response  # the client went away; nothing left to say
        finally:
            self._watchers.discard(queue)

    def _bookmark(self, rdef: ResourceDef, *, initial_end: bool = False) -> bytes:
        meta: Body = {"resourceVersion": str(self._rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": rdef.kind, "apiVersion": rdef.api_version, "metadata": meta}
        return json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"

    # -- discovery & friends -----------------------------------------------------------------------

    def _serve_static(self, path: str, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if path in ("/healthz", "/readyz", "/livez"):
            return aiohttp.web.Response(text="ok")
        documents: dict[str, Any] = {
            "/": lambda: {"paths": sorted(self._paths())},
            "/version": lambda: dict(_SERVER_VERSION),
            "/api": lambda: {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": raw.host or "127.0.0.1"}
                ],
            },
            "/apis": lambda: {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group_body(g) for g in self._groups() if g],
            },
            "/openapi/v2": self._openapi_v2,
            "/openapi/v3": self._openapi_v3_index,
        }
        if path in documents:
            return aiohttp.web.json_response(documents[path]())
        parts = path.strip("/").split("/")
        if parts[:2] == ["openapi", "v3"] and len(parts) >= 4:
            group, version = ("", parts[-1]) if parts[2] == "api" else (parts[3], parts[-1])
            return aiohttp.web.json_response(self._openapi_v3_group(group, version))
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in self._groups():
            return aiohttp.web.json_response(self._group_body(parts[1]))
        if (len(parts) == 2 and parts[0] == "api") or (len(parts) == 3 and parts[0] == "apis"):
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            if version in self._groups().get(group, []):
                return aiohttp.web.json_response(self._resource_list(group, version))
        raise _error(404, "NotFound", "the server could not find the requested resource")

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for rdef in self._defs.values():
            versions = groups.setdefault(rdef.group, [])
            if rdef.version not in versions:
                versions.append(rdef.version)
        return groups

    def _paths(self) -> set[str]:
        paths = {"/api", "/apis", "/version", "/healthz", "/openapi/v2", "/openapi/v3"}
        for group, versions in self._groups().items():
            if group:
                paths.add(f"/apis/{group}")
            paths.update(f"/apis/{group}/{v}" if group else f"/api/{v}" for v in versions)
        return paths

    def _group_body(self, group: str) -> Body:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self._groups()[group]]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": versions,
            "preferredVersion": versions[0],
        }

    def _resource_list(self, group: str, version: str) -> Body:
        resources: list[Body] = []
        for rdef in self._defs.values():
            if (rdef.group, rdef.version) != (group, version):
                continue
            entry: Body = {
                "name": rdef.plural,
                "singularName": rdef.singular,
                "namespaced": rdef.namespaced,
                "kind": rdef.kind,
                "verbs": list(_ALL_VERBS),
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

    def _schemas(self, group: str | None = None, version: str | None = None) -> Body:
        schemas: Body = {}
        for rdef in self._defs.values():
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

    def _openapi_v2(self) -> Body:
        info = {"title": "Kubernetes", "version": _SERVER_VERSION["gitVersion"]}
        return {"swagger": "2.0", "info": info, "paths": {}, "definitions": self._schemas()}

    def _openapi_v3_index(self) -> Body:
        paths = {}
        for group, versions in self._groups().items():
            for version in versions:
                key = f"apis/{group}/{version}" if group else f"api/{version}"
                paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}"}
        return {"paths": paths}

    def _openapi_v3_group(self, group: str, version: str) -> Body:
        if version not in self._groups().get(group, []):
            raise _error(404, "NotFound", "the server could not find the requested resource")
        info = {"title": "Kubernetes", "version": _SERVER_VERSION["gitVersion"]}
        components = {"schemas": self._schemas(group, version)}
        return {
            "openapi": "3.0.0",
            "info": info,
            "paths": self._openapi_v3_paths(group, version),
            "components": components,
        }

    def _openapi_v3_paths(self, group: str, version: str) -> Body:
        """Write operations with their query parameters and GVK, but no request schemas.

        kubectl reads these to learn that the server validates fields itself (`--validate`
        then works without the protobuf OpenAPI v2), and, finding no request body schema,
        computes strategic merge patches from its compiled-in types, as for any old server.
        """
        paths: Body = {}
        for rdef in self._defs.values():
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


# --------------------------------------------------------------------------------------------
# Serving
# --------------------------------------------------------------------------------------------


class ApiServer:
    """The emulator on 127.0.0.1:<port> (a free one by default), as an async context manager.

    ::

        async with ApiServer() as api:
            kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
            await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        bookmark_interval: float = 30.0,
        history_size: int = 10_000,
    ) -> None:
        self.emulator = KubeApiEmulator(
            bookmark_interval=bookmark_interval, history_size=history_size
        )
        self._host = host
        self._port = port
        self._runner: aiohttp.web.ServerRunner | None = None

    @property
    def url(self) -> str:
        if self._runner is None:
            raise RuntimeError("The API server is not running.")
        host, port = self._runner.addresses[0][:2]
        return f"http://{host}:{port}"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    async def __aenter__(self) -> Self:
        await self.emulator.__aenter__()
        server = aiohttp.web.Server(self.emulator, handler_cancellation=True)
        self._runner = aiohttp.web.ServerRunner(server, shutdown_timeout=1.0)
        await self._runner.setup()
        site = aiohttp.web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.emulator.close_watches()
        await asyncio.sleep(0)  # let the watches see their end-of-stream
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.emulator.__aexit__(exc_type, exc_value, traceback)

    async def serve_forever(self) -> None:
        """Serve until cancelled."""
        await asyncio.Event().wait()

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        """Write a kubeconfig for this server: plain HTTP, a dummy bearer token."""
        return write_kubeconfig(path, self.url, namespace=namespace)

    async def create(self, obj: Mapping[str, Any]) -> Body:
        """Create as POST would (validation, defaults, events); returns the stored object."""
        return self.emulator.create_object(obj)

    async def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> Body | None:
        """The object, or None when absent. `kind` may also be the plural."""
        return self.emulator.get_object(api_version, kind, name, namespace)

    async def list_objects(
        self, api_version: str, kind: str, *, namespace: str | None = None
    ) -> list[Body]:
        return self.emulator.list_objects(api_version, kind, namespace)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Body:
        """A JSON merge patch, to the object or (subresource="status") to its status."""
        return self.emulator.patch_object(
            api_version, kind, name, patch, namespace=namespace, subresource=subresource
        )

    async def delete(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> Body:
        return self.emulator.delete_object(api_version, kind, name, namespace)

    async def apply_manifests(self, text: str) -> list[Body]:
        """Create every document of a YAML stream (CRDs first would be the caller's order)."""
        return [self.emulator.create_object(doc) for doc in yaml.safe_load_all(text) if doc]

    @classmethod
    def run_in_thread(cls, **kwargs: Any) -> ThreadedApiServer:
        """Start one in a thread of its own (for code that blocks: kubectl, sync clients)."""
        return ThreadedApiServer(**kwargs).start()


class ThreadedApiServer:
    """An `ApiServer` on its own event loop in a daemon thread; a sync context manager."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._server: ApiServer | None = None
        self._failure: BaseException | None = None

    def start(self, timeout: float = 10.0) -> Self:
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._server is None:
            raise RuntimeError(f"The API server did not start: {self._failure!r}")
        return self

    async def _main(self) -> None:
        try:
            async with ApiServer(**self._kwargs) as server:
                self._server, self._loop, self._stop = (
                    server,
                    asyncio.get_running_loop(),
                    asyncio.Event(),
                )
                self._ready.set()
                await self._stop.wait()
        except BaseException as e:
            self._failure = e
            self._ready.set()
            raise

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def server(self) -> ApiServer:
        if self._server is None:
            raise RuntimeError("The API server is not running.")
        return self._server

    @property
    def url(self) -> str:
        return self.server.url

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        return self.server.write_kubeconfig(path, namespace=namespace)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one of the server's coroutine methods on its loop and wait for the result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(fn(*args, **kwargs), self._loop).result(10)

    def create(self, obj: Mapping[str, Any]) -> Body:
        result: Body = self.call(self.server.create, obj)
        return result

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> Body | None:
        result: Body | None = self.call(
            self.server.get, api_version, kind, name, namespace=namespace
        )
        return result


def write_kubeconfig(path: str | Path, url: str, *, namespace: str = "default") -> Path:
    """A kubeconfig naming one plain-HTTP server and a dummy token (the emulator ignores it)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": url}}],
        "users": [{"name": "emulator", "user": {"token": "dummy-token"}}],
        "contexts": [
            {
                "name": "emulator",
                "context": {"cluster": "emulator", "user": "emulator", "namespace": namespace},
            }
        ],
        "current-context": "emulator",
    }
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target


def _iter_manifests(paths: Sequence[str]) -> Iterator[Body]:
    for path in paths:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if doc:
                yield doc


async def _serve_cli(args: argparse.Namespace) -> int:
    async with ApiServer(
        host=args.host, port=args.port, bookmark_interval=args.bookmark_interval
    ) as api:
        for doc in _iter_manifests(args.manifest):
            await api.create(doc)
        if args.kubeconfig:
            api.write_kubeconfig(args.kubeconfig)
        print(f"apiserver listening on {api.url}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m latency_tuner.sandbox.apiserver --port N --kubeconfig PATH [--manifest F]...`"""
    parser = argparse.ArgumentParser(
        prog="latency_tuner.sandbox.apiserver", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig", help="write a kubeconfig for this server here")
    parser.add_argument("--manifest", action="append", default=[], help="YAML to create at start")
    parser.add_argument("--bookmark-interval", type=float, default=30.0)
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("aiohttp.access").setLevel(logging.INFO if args.verbose else logging.WARNING)
    return asyncio.run(_serve_cli(args))


if __name__ == "__main__":
    sys.exit(main())
