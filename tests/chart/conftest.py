"""Fixtures for the chart tests: find helm, and render the chart for named option sets.

Helm comes from `scripts/install-helm.sh` (.tools/bin/helm) or PATH. Without it the tests skip,
except in CI (CI=true) where a missing helm is a failure: the chart must never go untested there.
Helm runs with its cache/config/data homes in a temp dir, so it never reads or writes the user's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "latency-tuner"
RELEASE = "lt"
RELEASE_NAMESPACE = "lt-system"

Manifest = dict[str, Any]

# Every option set is linted with --strict, rendered, and each manifest validated.
OPTION_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "namespaced": {"watchNamespaces": ["team-a", "team-b"]},
    "peering": {"replicaCount": 3},
    "namespaced-peering": {"replicaCount": 2, "watchNamespaces": ["team-a", "team-b"]},
    "sharded": {"sharding": {"shards": 3}},
    "sharded-peering-namespaced": {
        "sharding": {"shards": 2, "mode": "label", "lease": "5m"},
        "replicaCount": 2,
        "watchNamespaces": ["team-a", "team-b"],
    },
    "prometheus-secret-auth": {
        "prometheus": {
            "url": "https://prometheus.example.internal:9091",
            "bearerToken": {"existingSecret": "prom-token", "key": "bearer"},
            "ca": {"existingSecret": "prom-ca", "key": "ca.pem"},
        }
    },
    "prometheus-ca-configmap": {
        "prometheus": {"ca": {"existingConfigMap": "trust-bundle", "key": "bundle.pem"}}
    },
    "operator-monitors": {
        "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        "podMonitor": {"enabled": True},
    },
    "vllm-podmonitor": {
        "vllmPodMonitor": {"enabled": True, "namespaces": ["inference"], "labels": {"team": "ml"}}
    },
    "vllm-podmonitor-namespaced": {
        "watchNamespaces": ["team-a"],
        "vllmPodMonitor": {"enabled": True},
    },
    "everything-on": {
        "serviceMonitor": {
            "enabled": True,
            "namespace": "monitoring",
            "relabelings": [{"action": "replace", "targetLabel": "cluster", "replacement": "a"}],
            "metricRelabelings": [
                {"action": "drop", "sourceLabels": ["__name__"], "regex": "python_gc_.*"}
            ],
        },
        "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        "grafanaDashboard": {"enabled": True, "namespace": "grafana"},
        "networkPolicy": {
            "enabled": True,
            "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"port": 443}]}],
        },
    },
    "without-admission-policy": {"admissionPolicy": {"enabled": False}},
    "allow-lists": {
        "prometheus": {
            "allowPerResourceUrl": True,
            "perResourceUrlPrefixes": [
                "https://prometheus.team-a.svc:9090/",
                "http://thanos-query.monitoring:10902/tenant/",
            ],
        },
        "variantImages": ["registry.example/ml/", "ghcr.io/org/vllm-openai:"],
    },
    "crds-upgraded-by-helm": {"crds": {"upgrade": True}},
    "json-logs": {"log": {"format": "json", "level": "debug"}},
    "scrape-without-nodes": {
        "metricsSource": "scrape",
        "prometheus": {"url": ""},
        "rbac": {"readNodes": False},
    },
    "scheduling": {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}
                    ]
                }
            }
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "latency-tuner"}},
            }
        ],
        "podAnnotations": {"example.com/owner": "ml-platform"},
        "podLabels": {"team": "ml-platform"},
        "priorityClassName": "system-cluster-critical",
        "imagePullSecrets": ["registry-creds"],
        "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
        "serviceAccount": {"annotations": {"example.com/role": "latency-tuner"}},
    },
}


@dataclass
class Helm:
    """A helm binary with private homes; renders the chart with values written to a file."""

    binary: Path
    home: Path
    _cache: dict[str, list[Manifest]] = field(default_factory=dict)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        return subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, env=env, timeout=120
        )

    def values_file(self, values: Mapping[str, Any]) -> Path:
        fd, name = tempfile.mkstemp(suffix=".yaml", dir=self.home)
        with os.fdopen(fd, "w") as out:
            yaml.safe_dump(dict(values), out)
        return Path(name)

    def template(self, values: Mapping[str, Any]) -> subprocess.CompletedProcess[str]:
        """`helm template` as it ran; for tests that expect it to fail."""
        return self.run(
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            RELEASE_NAMESPACE,
            "--values",
            str(self.values_file(values)),
        )

    def render(self, option_set: str) -> list[Manifest]:
        """The manifests of a named option set (rendered once per session)."""
        if option_set not in self._cache:
            result = self.template(OPTION_SETS[option_set])
            assert result.returncode == 0, result.stderr
            docs = [d for d in yaml.safe_load_all(result.stdout) if d]
            self._cache[option_set] = docs
        return self._cache[option_set]


def find_helm() -> Path | None:
    local = REPO / ".tools" / "bin" / "helm"
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which("helm")
    return Path(found) if found else None


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    binary = find_helm()
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("helm is missing in CI: run scripts/install-helm.sh first")
        pytest.skip("helm not found: run scripts/install-helm.sh (or put helm on PATH)")
    return Helm(binary=binary, home=tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session")
def render(helm: Helm) -> Callable[[str], list[Manifest]]:
    return helm.render


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def chart_dir() -> Path:
    return CHART


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that need helm carry the `helm` marker, so `-m "not helm"` leaves them out."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here) and "helm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.helm)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes `option_set` runs once per named option set."""
    if "option_set" in metafunc.fixturenames:
        metafunc.parametrize("option_set", list(OPTION_SETS))


@pytest.fixture
def option_values(option_set: str) -> dict[str, Any]:
    return OPTION_SETS[option_set]
