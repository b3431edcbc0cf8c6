"""Patches as the API server applies them: JSON merge patch and strategic merge patch.

Pure functions of (object, patch); JSON patch itself is `jsonpatch`'s. Strategic merge covers
the lists that matter in builtin kinds, not the Go structs' full patch strategies.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from latency_tuner.sandbox.apiserver._resources import Body


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
