"""Mode Recommend gives the change in the forms a GitOps user applies: the container's whole
new args list and a kustomize strategic-merge patch that real kustomize (``kubectl kustomize``)
applies to the Deployment to give exactly the recommended container, nothing else changed."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.integration.operator.harness import (
    SEQS_ONLY,
    by_seqs,
    cluster,
    deployment,
    eventually,
    latency_target,
    operator_running,
    queueing,
)

from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.gitops import strategic_merge_patch

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = [MODEL, "--max-num-seqs", "16"]


def kustomize(tmp_path: Path, deployment_obj: dict[str, Any], patch: str) -> dict[str, Any]:
    """The Deployment after kustomize applied ``patch`` to it."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    manifest = {k: v for k, v in deployment_obj.items() if k in ("apiVersion", "kind", "spec")}
    manifest["metadata"] = {
        k: deployment_obj["metadata"][k]
        for k in ("name", "namespace")
        if k in deployment_obj["metadata"]
    }
    (tmp_path / "deployment.yaml").write_text(yaml.safe_dump(manifest))
    (tmp_path / "tuning.yaml").write_text(patch)
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["deployment.yaml"], "patches": [{"path": "tuning.yaml"}]})
    )
    done = subprocess.run(
        [kubectl, "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = yaml.safe_load(done.stdout)
    return result


async def test_a_recommendation_carries_the_args_and_a_patch_kustomize_applies(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY, mode="Recommend"))
        async with operator_running(world, tmp_path):

            async def recommended() -> dict[str, Any] | None:
                return (await world.status()).get("recommendation")

            recommendation = await eventually(recommended, within=30)
            before = await world.deployment()
    assert recommendation["container"] == "vllm"
    assert recommendation["args"] == [MODEL, "--max-num-seqs", "32"]
    assert "command" not in recommendation
    (out := tmp_path / "kustomize").mkdir()
    after = kustomize(out, before, recommendation["kustomizePatch"])
    expected = copy.deepcopy(before["spec"])
    expected["template"]["spec"]["containers"][0]["args"] = recommendation["args"]
    assert after["spec"] == expected


def test_an_image_gpu_and_command_change_applies_whole_with_kustomize(tmp_path: Path) -> None:
    before = deployment(["--max-num-seqs", "16"])
    container = before["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["vllm", "serve", MODEL]
    container["resources"]["requests"] = {"nvidia.com/gpu": "1", "cpu": "4"}
    sidecar = {"name": "proxy", "image": "envoyproxy/envoy:v1.31", "args": ["-c", 'x: "y"']}
    before["spec"]["template"]["spec"]["containers"].append(sidecar)
    target = ContainerConfig(
        command=None,
        args=("vllm", "serve", "org/Llama-AWQ", "--tensor-parallel-size", "2", '--x="q"'),
        image="registry.example/vllm-openai:v0.11.0-awq",
        gpu_limit=2,
    )
    patch = strategic_merge_patch(before, 0, target, "nvidia.com/gpu")
    after = kustomize(tmp_path, before, patch)
    vllm, proxy = after["spec"]["template"]["spec"]["containers"]
    assert vllm == {
        "name": "vllm",
        "image": "registry.example/vllm-openai:v0.11.0-awq",
        "args": list(target.args or ()),
        "ports": [{"name": "http", "containerPort": 8000}],
        "resources": {
            "limits": {"nvidia.com/gpu": "2"},
            "requests": {"nvidia.com/gpu": "2", "cpu": "4"},
        },
    }
    assert proxy == sidecar
