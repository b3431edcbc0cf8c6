"""The LatencyTarget CustomResourceDefinition, generated from the pydantic models.

pydantic writes JSON Schema (2020-12, with $defs, anyOf-null and numeric exclusive bounds);
Kubernetes wants a *structural* OpenAPI v3 schema: every node typed, no $ref, no anyOf of
types, ``nullable`` instead of a null type, boolean exclusive bounds, and descriptions that
``kubectl explain`` can print. ``structural_schema`` does that conversion and refuses what it
cannot convert, so a new model field cannot silently produce a CRD the API server rejects.
Pure: builds dicts, writes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from latency_tuner.api.resource import GROUP, KIND, PLURAL, SHORT_NAMES, SINGULAR, VERSION
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus

# Keywords that carry no meaning for Kubernetes (or that it forbids) and are dropped.
_DROPPED = {"title", "default", "readOnly", "$defs"}

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {
        "name": "Target",
        "type": "string",
        "jsonPath": ".spec.targetRef.name",
        "description": "The Deployment tuned.",
        "priority": 1,
    },
    {
        "name": "Mode",
        "type": "string",
        "jsonPath": ".spec.mode",
        "description": "Auto, Recommend or Off.",
        "priority": 1,
    },
    {
        "name": "TTFT",
        "type": "string",
        "jsonPath": ".status.observed.ttft",
        "description": "Time to first token at the objective's percentile, latest window.",
    },
    {
        "name": "ITL",
        "type": "string",
        "jsonPath": ".status.observed.itl",
        "description": "Inter-token latency at the objective's percentile, latest window.",
    },
    {
        "name": "Met",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="TargetsMet")].status',
        "description": "Whether every objective was met in the latest window.",
    },
    {
        "name": "Phase",
        "type": "string",
        "jsonPath": ".status.phase",
        "description": "Where the tuning loop stands.",
    },
    {
        "name": "Trials",
        "type": "integer",
        "jsonPath": ".status.trialCount",
        "description": "Trials started.",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


class UnsupportedSchema(ValueError):
    """A model produced JSON Schema that has no structural OpenAPI equivalent."""


def structural_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A structural OpenAPI v3 schema from a pydantic JSON schema (``$defs`` inlined)."""
    return _convert(schema, schema.get("$defs", {}), "")


def _convert(node: dict[str, Any], defs: dict[str, Any], where: str) -> dict[str, Any]:
    node = dict(node)
    if "$ref" in node:
        # The field's own keywords (its description) win over the referenced model's.
        target = defs[node.pop("$ref").removeprefix("#/$defs/")]
        node = {**target, **node}
    if "anyOf" in node:
        options = [option for option in node.pop("anyOf") if option != {"type": "null"}]
        if len(options) != 1:
            raise UnsupportedSchema(f"{where or '(root)'}: a union of {len(options)} types")
        had_null = True
        merged = _convert(options[0], defs, where)
        node = {**merged, **{k: v for k, v in node.items() if k not in merged or k != "type"}}
        # null is kept (nullable) only where it differs from leaving the field out: when the
        # default is a value ("maxNumSeqs: null" means "leave it alone").
        if had_null and node.get("default") is not None:
            node["nullable"] = True
    if "required" in node:
        # A field that may be null is left out when null (status is dumped without nulls), so
        # it cannot be required; pydantic marks computed fields required all the same.
        properties = node.get("properties", {})
        required = [name for name in node.pop("required") if not _allows_null(properties[name])]
        if required:
            node["required"] = required
    out: dict[str, Any] = {}
    description = node.get("description")
    if description is not None:
        out["description"] = _describe(description, node.get("default"))
    for key, value in node.items():
        if key in _DROPPED or key == "description":
            continue
        if key == "properties":
            out[key] = {
                name: _convert(child, defs, f"{where}.{name}") for name, child in value.items()
            }

        elif key == "items":
            out[key] = _convert(value, defs, f"{where}[]")
        elif key == "additionalProperties":
            if value is True:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict):
                out[key] = _convert(value, defs, f"{where}{{}}")
            # False: Kubernetes prunes unknown fields (and kubectl refuses them) by itself.
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key == "uniqueItems":
            if value:
                out["x-kubernetes-list-type"] = "set"  # Kubernetes forbids uniqueItems: true
        elif key in ("anyOf", "oneOf", "allOf", "not"):
            raise UnsupportedSchema(f"{where or '(root)'}: {key} is not structural here")
        else:
            out[key] = value
    if not out.keys() - {"description"}:
        out["x-kubernetes-preserve-unknown-fields"] = True  # `Any`: genuinely free-form
    if "type" not in out and "x-kubernetes-preserve-unknown-fields" not in out:
        raise UnsupportedSchema(f"{where or '(root)'}: no type")
    return _sorted(out)


def _allows_null(node: dict[str, Any]) -> bool:
    return any(option == {"type": "null"} for option in node.get("anyOf", []))


def _describe(text: str, default: Any) -> str:
    text = " ".join(text.split())
    if default not in (None, "", [], {}):
        text += f" Default: {json.dumps(default, separators=(', ', ': '))}."
    return text


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    # Keywords in a fixed order (description first) for a stable, readable YAML; properties
    # keep the models' field order, which is the order a person reads them in.
    head = [key for key in ("description", "type") if key in node]
    return {key: node[key] for key in head + sorted(node.keys() - set(head))}


def missing_descriptions(schema: dict[str, Any], where: str = "") -> list[str]:
    """Paths of properties without a description (``kubectl explain`` would print nothing)."""
    missing = []
    for name, child in schema.get("properties", {}).items():
        path = f"{where}.{name}"
        if not child.get("description"):
            missing.append(path)
        missing += missing_descriptions(child, path)
    if "items" in schema:
        missing += missing_descriptions(schema["items"], f"{where}[]")
    return missing


def openapi_schema() -> dict[str, Any]:
    """The CRD version's openAPIV3Schema: root object with metadata, spec and status."""
    spec = structural_schema(LatencyTargetSpec.model_json_schema(mode="validation"))
    status = structural_schema(LatencyTargetStatus.model_json_schema(mode="serialization"))
    root: dict[str, Any] = {
        "description": (
            "LatencyTarget keeps a vLLM Deployment inside its time-to-first-token and "
            "inter-token latency targets by tuning its arguments one trial at a time."
        ),
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this object.",
                "type": "string",
            },
            "kind": {"description": "Kind is the type of this object.", "type": "string"},
            "metadata": {"description": "Standard object metadata.", "type": "object"},
            "spec": spec,
            "status": status,
        },
        "required": ["spec"],
    }
    missing = missing_descriptions(root)
    if missing:
        raise UnsupportedSchema(f"fields without a description: {', '.join(missing)}")
    return root


def build_crd() -> dict[str, Any]:
    """The CustomResourceDefinition as a dict, ready to dump as YAML or JSON."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
                "categories": ["all"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                }
            ],
        },
    }
    # A deep copy through JSON: no node is shared (YAML would write anchors), and the result
    # is plain JSON data whatever the models put in their schema extras.
    result: dict[str, Any] = json.loads(json.dumps(crd))
    return result
