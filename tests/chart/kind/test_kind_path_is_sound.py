"""What can be checked of the kind path without Docker: the manifests a cluster would get,
the LatencyTarget against the CRD's schema, and the shell scripts with shellcheck."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
KIND = REPO / "e2e" / "kind"
SCRIPTS = [
    KIND / "run.sh",
    REPO / "scripts" / "install-helm.sh",
    REPO / "scripts" / "sync-chart-crds.sh",
]


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _latencytarget_schema() -> dict[str, Any]:
    (crd,) = _docs(REPO / "crds" / "latencytarget.yaml")
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("name", ["prometheus.yaml", "vllm-sim.yaml"])
def test_the_kind_manifests_are_strictly_valid(name: str) -> None:
    docs = _docs(KIND / name)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_kind_latencytarget_matches_the_crd_schema() -> None:
    (target,) = _docs(KIND / "latencytarget.yaml")
    # CRD schemas are OpenAPI 3.0: draft-4 semantics (boolean exclusiveMaximum).
    schema = _latencytarget_schema()
    jsonschema.Draft4Validator(schema).validate(target)
    # The API server would prune unknown fields silently; a typo must fail here instead.
    spec_schema = schema["properties"]["spec"]["properties"]
    assert set(target["spec"]) <= set(spec_schema)
    assert set(target["spec"]["evaluation"]) <= set(spec_schema["evaluation"]["properties"])
    assert target["spec"]["targetRef"]["name"] == "vllm-sim"


def test_the_simulator_runs_our_image_as_a_vllm_server() -> None:
    deployments = {
        d["metadata"]["name"]: d for d in _docs(KIND / "vllm-sim.yaml") if d["kind"] == "Deployment"
    }
    pod = deployments["vllm-sim"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["latency-tuner", "sim"]
    assert container["imagePullPolicy"] == "Never"  # loaded by `kind load`, never pulled
    assert {"--sim-gpu=H100-SXM", "--sim-gpus=1", "--port=8000"} <= set(container["args"])
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "8000"


def test_the_load_generator_targets_the_simulator_service() -> None:
    deployments = {
        d["metadata"]["name"]: d for d in _docs(KIND / "vllm-sim.yaml") if d["kind"] == "Deployment"
    }
    (bench,) = deployments["load"]["spec"]["template"]["spec"]["containers"]
    assert bench["command"] == ["latency-tuner", "bench"]
    assert "--url=http://vllm-sim.demo:8000" in bench["args"]


def test_prometheus_keeps_the_labels_the_default_matchers_use() -> None:
    (config_map,) = [d for d in _docs(KIND / "prometheus.yaml") if d["kind"] == "ConfigMap"]
    config = yaml.safe_load(config_map["data"]["prometheus.yml"])
    (job,) = config["scrape_configs"]
    targets = {r.get("target_label") for r in job["relabel_configs"]}
    assert {"namespace", "pod", "__address__"} <= targets


def test_run_sh_waits_for_targets_met_and_installs_the_chart() -> None:
    script = (KIND / "run.sh").read_text()
    assert "set -euo pipefail" in script
    assert re.search(r"kubectl -n demo wait --for=condition=TargetsMet lt/vllm-sim", script)
    assert "charts/latency-tuner" in script
    assert "kind load docker-image" in script


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_shell_scripts_pass_shellcheck(script: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (apt-get install -y shellcheck)")
    result = subprocess.run(
        [shellcheck, "--severity=style", str(script)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout
