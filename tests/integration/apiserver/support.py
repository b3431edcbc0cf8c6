"""Objects the API emulator tests share: a tiny test CRD, Widgets, Deployments."""

from __future__ import annotations

from typing import Any

WIDGETS = "/apis/tests.example.com/v1/namespaces/default/widgets"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.tests.example.com"},
    "spec": {
        "group": "tests.example.com",
        "scope": "Namespaced",
        "names": {
            "plural": "widgets",
            "singular": "widget",
            "kind": "Widget",
            "shortNames": ["wg"],
            "categories": ["all"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1},
                                    "mode": {"type": "string", "enum": ["A", "B"], "default": "A"},
                                    "range": {
                                        "type": "object",
                                        "properties": {
                                            "min": {"type": "integer"},
                                            "max": {"type": "integer"},
                                        },
                                        "x-kubernetes-validations": [
                                            {
                                                "rule": "self.min <= self.max",
                                                "message": "min must not be greater than max",
                                            }
                                        ],
                                    },
                                    "tags": {
                                        "type": "array",
                                        "items": {"type": "string"},
                                        "x-kubernetes-list-type": "set",
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


def widget(name: str, size: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tests.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size, **spec},
    }


def deployment(name: str, *containers: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": c, "image": f"example/{c}:1", "args": [f"--{c}"]}
                        for c in containers
                    ]
                },
            },
        },
    }
