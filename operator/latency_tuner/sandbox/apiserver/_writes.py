"""Writes as the API server does them: create, replace, patch, delete, with their rules.

`WritingEmulator` adds to the store what a write must respect: names, namespaces, kinds,
`generateName`, resourceVersion conflicts, the status subresource, server-managed metadata,
finalizers and graceful deletion, CRD schemas (`_schema`), CRDs serving their resources
(`_crd`), `?dryRun=All` and `?fieldValidation=Strict`. Every operation is synchronous, so it is
atomic on the event loop; none of them speaks HTTP.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import secrets
import string
import uuid
from collections.abc import Mapping
from typing import Any

import attrs
import jsonpatch
import kmock

from latency_tuner.sandbox.apiserver._crd import check_crd, crd_status, now_stamp, served_resources
from latency_tuner.sandbox.apiserver._errors import (
    bad_request,
    conflict,
    error,
    invalid,
    not_found,
)
from latency_tuner.sandbox.apiserver._patch import merge_patch, strategic_merge_patch
from latency_tuner.sandbox.apiserver._resources import (
    CRD,
    INITIAL_NAMESPACES,
    NAME_RE,
    NAMESPACES,
    SERVER_MANAGED_METADATA,
    Body,
    ResourceDef,
)
from latency_tuner.sandbox.apiserver._schema import check_schema
from latency_tuner.sandbox.apiserver._store import ObjectStore


@dataclasses.dataclass(frozen=True)
class Options:
    """How a write goes: `?dryRun=All`, `?fieldValidation=Strict` (unknown fields are errors)."""

    dry_run: bool = False
    strict: bool = False


@dataclasses.dataclass(frozen=True)
class Target:
    """What a resource URL addresses."""

    rdef: ResourceDef
    namespace: str | None
    name: str | None
    subresource: str | None


def _spec_part(obj: Mapping[str, Any]) -> Body:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


@attrs.define(kw_only=True)
class WritingEmulator(ObjectStore):
    """The store plus the write operations (see the module docstring)."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for name in INITIAL_NAMESPACES:
            self.create_object(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            )

    # -- operations (synchronous: atomic on the event loop) ----------------------------------------

    def create_object(self, body: Mapping[str, Any], *, namespace: str | None = None) -> Body:
        """Create as POST does; the resource comes from `apiVersion` and `kind`."""
        rdef = self.resource_for(str(body.get("apiVersion", "")), str(body.get("kind", "")))
        namespace = namespace or body.get("metadata", {}).get("namespace")
        return self._create(rdef, namespace, body, Options())

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
        return self._patch(Target(rdef, namespace, name, subresource), patch, patch_type, Options())

    def delete_object(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Body:
        rdef = self.resource_for(api_version, kind)
        return self._delete(Target(rdef, namespace, name, None), {}, Options())

    def _create(self, rdef: ResourceDef, namespace: str | None, body: Any, opts: Options) -> Body:
        if not isinstance(body, Mapping):
            raise bad_request("the body of the request was in an unknown format")
        obj: Body = copy.deepcopy(dict(body))
        self._check_kind(rdef, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
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
            raise invalid(rdef, "", [cause])
        self._check_name(rdef, name)
        if rdef.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            namespace = namespace or body_ns
            if not namespace:
                raise bad_request("a namespace is required for namespaced resources")
            meta["namespace"] = namespace
            if self._load(self._defs["", "v1", "namespaces"], None, namespace) is None:
                raise not_found(self._defs["", "v1", "namespaces"], namespace)
        else:
            meta.pop("namespace", None)
            namespace = None
        if self._load(rdef, namespace, name) is not None:
            details = {"name": name, "group": rdef.group, "kind": rdef.plural}
            message = f'{rdef.group_resource} "{name}" already exists'
            raise error(409, "AlreadyExists", message, details)
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
            meta.pop(key, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_stamp(), generation=1)
        if "status" in rdef.subresources and rdef.plural != "nodes":
            obj.pop("status", None)
            obj.update(self._initial_status(rdef))
        check_schema(rdef, obj, strict=opts.strict)
        if rdef.store_key == CRD:
            check_crd(obj)
            obj["status"] = crd_status(obj)
        if opts.dry_run:
            return obj
        saved = self._save(rdef, obj, "ADDED")
        if rdef.store_key == CRD:
            self._register_crd(saved)
        return saved

    def _replace(self, target: Target, body: Any, opts: Options) -> Body:
        rdef, name = target.rdef, target.name or ""
        if not isinstance(body, Mapping) or not isinstance(body.get("metadata", {}), Mapping):
            raise bad_request("the body of the request was in an unknown format")
        old = self._load(rdef, target.namespace, name)
        if old is None:
            raise not_found(rdef, name)
        new: Body = copy.deepcopy(dict(body))
        self._check_kind(rdef, new)
        body_name = new.get("metadata", {}).get("name")
        if body_name and body_name != name:
            raise bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        return self._update(target, old, new, opts)

    def _patch(self, target: Target, patch: Any, content_type: str, opts: Options) -> Body:
        rdef, name = target.rdef, target.name or ""
        old = self._load(rdef, target.namespace, name)
        if old is None:
            raise not_found(rdef, name)
        new: Any
        if content_type == "application/json-patch+json":
            if not isinstance(patch, list):
                raise bad_request("a JSON patch must be a list of operations")
            try:
                new = jsonpatch.apply_patch(old, patch, in_place=False)
            except jsonpatch.JsonPatchTestFailed as e:
                cause = {"reason": "FieldValueInvalid", "message": f"test operation failed: {e}"}
                raise invalid(rdef, name, [cause]) from None
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                cause = {"reason": "FieldValueInvalid", "message": f"the patch does not apply: {e}"}
                raise invalid(rdef, name, [cause]) from None
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
            raise error(415, "UnsupportedMediaType", message)
        if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
            raise bad_request("the patched object is not a Kubernetes object")
        return self._update(target, old, new, opts)

    def _update(self, target: Target, old: Body, new: Body, opts: Options) -> Body:
        """The common tail of PUT and PATCH: subresource rules, metadata guards, schema, store."""
        rdef, name = target.rdef, target.name or ""
        new_meta = new.setdefault("metadata", {})
        old_meta = old["metadata"]
        wanted_rv = new_meta.get("resourceVersion")
        if wanted_rv not in (None, "") and str(wanted_rv) != old_meta["resourceVersion"]:
            raise conflict(rdef, name)
        if target.subresource == "status":
            merged = copy.deepcopy(old)
            merged.pop("status", None)
            if "status" in new:
                merged["status"] = new["status"]
            new = merged
        elif target.subresource is not None:
            raise error(404, "NotFound", "the server could not find the requested resource")
        elif "status" in rdef.subresources:
            new.pop("status", None)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        new_meta = new["metadata"]
        for key in SERVER_MANAGED_METADATA:
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
                raise invalid(rdef, name, [cause])
        if not new_meta.get("finalizers"):
            new_meta.pop("finalizers", None)
        check_schema(rdef, new, strict=opts.strict)
        if rdef.store_key == CRD:
            check_crd(new)
            new["status"] = crd_status(new)
        if new == old:
            return old  # a no-op write: no new resourceVersion, no event
        if _spec_part(new) != _spec_part(old):
            new_meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if opts.dry_run:
            return new
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
            return self._save(rdef, new, "DELETED")
        saved = self._save(rdef, new, "MODIFIED")
        if rdef.store_key == CRD:
            self._register_crd(saved)
        return saved

    def _delete(self, target: Target, options: Any, opts: Options) -> Body:
        rdef, name = target.rdef, target.name or ""
        obj = self._load(rdef, target.namespace, name)
        if obj is None:
            raise not_found(rdef, name)
        meta = obj["metadata"]
        pre = options.get("preconditions") if isinstance(options, Mapping) else None
        if isinstance(pre, Mapping):
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise conflict(rdef, name)
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise conflict(rdef, name)
        if opts.dry_run:
            return obj
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return obj
            meta["deletionTimestamp"] = now_stamp()
            meta["deletionGracePeriodSeconds"] = 0
            meta["generation"] = int(meta.get("generation", 1)) + 1
            return self._save(rdef, obj, "MODIFIED")
        if rdef.store_key == NAMESPACES:
            self._delete_namespace_contents(name)
        if rdef.store_key == CRD:
            self._drop_crd(obj)
        return self._save(rdef, obj, "DELETED")

    def _delete_namespace_contents(self, namespace: str) -> None:
        for other in {d.store_key: d for d in self._defs.values() if d.namespaced}.values():
            for item in self._items(other, namespace):
                with contextlib.suppress(kmock.KubernetesError):
                    target = Target(other, namespace, item["metadata"]["name"], None)
                    self._delete(target, {}, Options())

    # -- checks ------------------------------------------------------------------------------------

    def _check_kind(self, rdef: ResourceDef, obj: Body) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if (kind and kind != rdef.kind) or (api_version and api_version != rdef.api_version):
            raise bad_request(
                f"the API version in the data ({api_version}) and kind ({kind}) do not match "
                f"the URL's {rdef.api_version} {rdef.kind}"
            )
        obj["apiVersion"], obj["kind"] = rdef.api_version, rdef.kind

    def _check_name(self, rdef: ResourceDef, name: str) -> None:
        if len(name) > 253 or not NAME_RE.match(name):
            message = (
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric "
                "character"
            )
            cause = {"reason": "FieldValueInvalid", "message": message, "field": "metadata.name"}
            raise invalid(rdef, name, [cause])

    @staticmethod
    def _initial_status(rdef: ResourceDef) -> Body:
        if rdef.store_key == NAMESPACES:
            return {"status": {"phase": "Active"}}
        if rdef.store_key == ("", "pods"):
            return {"status": {"phase": "Pending"}}
        return {}

    def _register_crd(self, crd: Body) -> None:
        spec = crd["spec"]
        self.unregister(spec["group"], spec["names"]["plural"])
        for rdef in served_resources(crd):
            self.register(rdef)

    def _drop_crd(self, crd: Body) -> None:
        spec = crd.get("spec") or {}
        plural, group = (spec.get("names") or {}).get("plural"), spec.get("group")
        rdef = next((d for d in self._defs.values() if d.store_key == (group, plural)), None)
        if rdef is not None:
            for item in self._items(rdef, None):
                item["metadata"].pop("finalizers", None)
                self._save(rdef, item, "DELETED")
            self.unregister(rdef.group, rdef.plural)
