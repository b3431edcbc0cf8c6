"""Validators that judge a LatencyTarget manifest as the API server would, from the CRD.

``schema_errors(..., with_api_server_rules=False)`` is jsonschema alone (what the schema itself
can check); ``True`` adds what the API server also enforces: CEL rules (run with cel-python),
``x-kubernetes-list-type`` uniqueness, and kubectl's strict field validation (unknown fields are
errors, since kubectl 1.27). OpenAPI's ``nullable`` becomes a null type for jsonschema.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import pytest
import yaml
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from latency_tuner.api.crd import build_crd

REPO = Path(__file__).resolve().parents[3]
CRD_FILE = REPO / "crds" / "latencytarget.yaml"
EXAMPLES = REPO / "crds" / "examples"
INVALID_EXAMPLES = EXAMPLES / "invalid"


def load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def openapi_schema() -> dict[str, Any]:
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


def as_json_schema(node: dict[str, Any], strict_fields: bool = True) -> dict[str, Any]:
    """OpenAPI v3 (Kubernetes flavour) -> draft-4 JSON Schema that jsonschema understands."""
    node = copy.deepcopy(node)
    if node.pop("nullable", False):
        node["type"] = [node["type"], "null"]
    if "properties" in node:
        node["properties"] = {
            name: as_json_schema(child, strict_fields) for name, child in node["properties"].items()
        }
        if strict_fields and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
    if "items" in node:
        node["items"] = as_json_schema(node["items"], strict_fields)
    return node


_CEL = celpy.Environment()


def _cel_rules(
    validator: Any, rules: list[dict[str, str]], instance: Any, schema: Any
) -> Iterator[jsonschema.ValidationError]:
    if instance is None:
        return  # like the API server: rules run on non-null values only
    for rule in rules:
        program = _CEL.program(_CEL.compile(rule["rule"]))
        try:
            result = program.evaluate({"self": json_to_cel(instance)})
        except CELEvalError as exc:  # e.g. duration("5 minutes"): an error, as in Kubernetes
            yield jsonschema.ValidationError(f"rule {rule['rule']!r} could not run: {exc}")
            continue
        if not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            yield jsonschema.ValidationError(rule.get("message", f"failed rule: {rule['rule']}"))


def _list_type(
    validator: Any, kind: str, instance: Any, schema: Any
) -> Iterator[jsonschema.ValidationError]:
    if not isinstance(instance, list):
        return
    keys: list[Any]
    if kind == "set":
        keys = [yaml.safe_dump(item) for item in instance]
    elif kind == "map":
        names = schema["x-kubernetes-list-map-keys"]
        keys = [tuple(item.get(name) for name in names) for item in instance]
    else:
        return
    for index, key in enumerate(keys):
        if key in keys[:index]:
            yield jsonschema.ValidationError(f"Duplicate value: {key!r} at index {index}")


ApiServerValidator = jsonschema.validators.extend(
    jsonschema.Draft4Validator,
    {"x-kubernetes-validations": _cel_rules, "x-kubernetes-list-type": _list_type},
)


def schema_errors(manifest: dict[str, Any], *, with_api_server_rules: bool) -> list[str]:
    """ "path: message" for every error, the way kubectl names fields."""
    schema = as_json_schema(openapi_schema())
    cls = ApiServerValidator if with_api_server_rules else jsonschema.Draft4Validator
    errors = cls(schema).iter_errors(manifest)
    return sorted(
        ".".join(str(part) for part in error.absolute_path) + ": " + error.message
        for error in errors
    )


@pytest.fixture(scope="session")
def crd() -> dict[str, Any]:
    return build_crd()


class Judge:
    """The helpers above, as a fixture (tests never import conftest)."""

    load_yaml = staticmethod(load_yaml)
    schema_errors = staticmethod(schema_errors)
    as_json_schema = staticmethod(as_json_schema)


@pytest.fixture(scope="session")
def judge() -> Judge:
    return Judge()
