"""Every option set lints with --strict and renders manifests a strict API server would accept.

Built-in kinds are checked by kubernetes-validate --strict against the oldest Kubernetes the
chart supports (Chart.yaml kubeVersion) and the newest it knows. kopf.dev kinds are checked
against the CRDs the chart ships. monitoring.coreos.com kinds, which kubernetes-validate does
not know, are checked against MONITORING_SCHEMAS below: the subset of prometheus-operator's v1
ServiceMonitor/PodMonitor schema that the chart uses, closed to unknown fields.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

Manifest = dict[str, Any]
KUBERNETES_VERSIONS = ["1.25.0", kubernetes_validate.latest_version()]

# prometheus-operator's Duration type.
_DURATION = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?"
    r"(([0-9]+)ms)?)$",
}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": _STRING_MAP,
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
}
_NAMESPACE_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "any": {"type": "boolean"},
        "matchNames": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
}
_RELABEL_CONFIG = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "action": {
            "enum": [
                "replace",
                "keep",
                "drop",
                "hashmod",
                "labelmap",
                "labeldrop",
                "labelkeep",
                "lowercase",
                "uppercase",
                "keepequal",
                "dropequal",
            ]
        },
        "sourceLabels": {"type": "array", "items": {"type": "string"}},
        "separator": {"type": "string"},
        "targetLabel": {"type": "string"},
        "regex": {"type": "string"},
        "modulus": {"type": "integer"},
        "replacement": {"type": "string"},
    },
}
_ENDPOINT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["port"],
    "properties": {
        "port": {"type": "string", "minLength": 1},
        "path": {"type": "string", "pattern": "^/"},
        "interval": _DURATION,
        "scrapeTimeout": _DURATION,
        "honorLabels": {"type": "boolean"},
        "relabelings": {"type": "array", "items": _RELABEL_CONFIG},
        "metricRelabelings": {"type": "array", "items": _RELABEL_CONFIG},
    },
}
_RULE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["expr"],
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    "properties": {
        "alert": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
        "record": {"type": "string"},
        "expr": {"type": "string", "minLength": 1},
        "for": _DURATION,
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
}
_METADATA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "namespace"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "namespace": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
}

_PROMETHEUS_RULE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["groups"],
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": _DURATION,
                            "rules": {"type": "array", "items": _RULE, "minItems": 1},
                        },
                    },
                }
            },
        },
    },
}


def _monitor_schema(kind: str, endpoints_field: str) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["selector", endpoints_field],
                "properties": {
                    "selector": _LABEL_SELECTOR,
                    "namespaceSelector": _NAMESPACE_SELECTOR,
                    endpoints_field: {"type": "array", "items": _ENDPOINT, "minItems": 1},
                },
            },
        },
    }


MONITORING_SCHEMAS = {
    "ServiceMonitor": _monitor_schema("ServiceMonitor", "endpoints"),
    "PodMonitor": _monitor_schema("PodMonitor", "podMetricsEndpoints"),
    "PrometheusRule": _PROMETHEUS_RULE,
}
# Kinds newer than the oldest Kubernetes the chart supports are validated from their first
# GA release on; the chart refuses to render them for an older cluster (a test checks that).
INTRODUCED_IN = {
    "ValidatingAdmissionPolicy": "1.30.0",
    "ValidatingAdmissionPolicyBinding": "1.30.0",
}


def _shipped_crd_schemas(chart_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> openAPIV3Schema of every CRD version in the chart's crds/."""
    schemas = {}
    for path in sorted((chart_dir / "crds").glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd:
                continue
            spec = crd["spec"]
            for version in spec["versions"]:
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                schemas[key] = version["schema"]["openAPIV3Schema"]
    return schemas


def _validate(manifest: Manifest, crd_schemas: dict[tuple[str, str], dict[str, Any]]) -> None:
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    if api_version.startswith("monitoring.coreos.com/"):
        jsonschema.validate(manifest, MONITORING_SCHEMAS[kind])
    elif (api_version, kind) in crd_schemas:
        schema = crd_schemas[(api_version, kind)]
        # The API server would silently prune unknown top-level fields; the chart must not
        # rely on that.
        assert set(manifest) <= {"apiVersion", "kind", "metadata", *schema.get("properties", {})}
        assert manifest["metadata"]["name"]
        jsonschema.Draft4Validator(schema).validate(manifest)  # OpenAPI 3.0 semantics
    else:
        oldest = INTRODUCED_IN.get(kind)
        versions = [oldest, KUBERNETES_VERSIONS[-1]] if oldest else KUBERNETES_VERSIONS
        for version in versions:
            kubernetes_validate.validate(manifest, version, strict=True)


def test_the_chart_lints_strictly_with_each_option_set(
    helm: Any, chart_dir: Path, option_values: dict[str, Any]
) -> None:
    result = helm.run(
        "lint", "--strict", str(chart_dir), "--values", str(helm.values_file(option_values))
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_every_rendered_manifest_is_valid_for_its_schema(
    render: Callable[[str], list[Manifest]], chart_dir: Path, option_set: str
) -> None:
    manifests = render(option_set)
    assert manifests, "nothing rendered"
    crd_schemas = _shipped_crd_schemas(chart_dir)
    for manifest in manifests:
        _validate(manifest, crd_schemas)


def test_no_two_rendered_objects_share_kind_namespace_and_name(
    render: Callable[[str], list[Manifest]], option_set: str
) -> None:
    keys = [
        (m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"])
        for m in render(option_set)
    ]
    assert len(keys) == len(set(keys))


def test_the_monitoring_schemas_reject_a_misspelt_field() -> None:
    """The hand-written schemas above must be able to fail, or they prove nothing."""
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": "x", "namespace": "y"},
        "spec": {"selector": {}, "podMetricsEndpoints": [{"port": "http", "intervall": "5s"}]},
    }
    with pytest.raises(jsonschema.ValidationError, match="intervall"):
        jsonschema.validate(monitor, MONITORING_SCHEMAS["PodMonitor"])


def test_a_misspelt_field_in_a_built_in_kind_is_caught() -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x"},
        "spec": {"prots": []},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(service, KUBERNETES_VERSIONS[-1], strict=True)
