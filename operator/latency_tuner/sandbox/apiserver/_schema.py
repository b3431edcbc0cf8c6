"""CRD schemas as the API server uses them: defaulting, pruning, validation (with CEL rules).

`check_schema` defaults and prunes the object in place, then raises 422 Invalid with the
`details.causes` a real server lists, or 400 for unknown fields under `fieldValidation=Strict`.
Transition rules (`oldSelf`) are not evaluated.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import celpy
import jsonschema
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from latency_tuner.sandbox.apiserver._errors import bad_request, invalid
from latency_tuner.sandbox.apiserver._resources import Body, ResourceDef

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


def check_schema(rdef: ResourceDef, obj: Body, *, strict: bool) -> None:
    """Default, prune and validate `obj` against the CRD schema of `rdef` (none: no check)."""
    if rdef.schema is None:
        return
    _apply_defaults(rdef.schema, obj)
    unknown: list[str] = []
    _prune(rdef.schema, obj, top=True, dropped=unknown)
    if unknown and strict:
        fields = ", ".join(f'unknown field "{path}"' for path in unknown)
        raise bad_request(
            f'{rdef.kind} in version "{rdef.version}" cannot be handled as a {rdef.kind}: '
            f"strict decoding error: {fields}"
        )
    causes = _validation_causes(rdef.schema, obj)
    if causes:
        raise invalid(rdef, obj["metadata"].get("name", ""), causes)
