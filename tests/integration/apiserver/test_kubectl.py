"""kubectl 1.32 (`--validate=false`) applies and gets objects from the emulator."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import yaml
from tests.integration.apiserver.support import WIDGET_CRD, deployment, widget

from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.sandbox.apiserver import ApiServer

REPO = Path(__file__).resolve().parents[3]
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
pytestmark = pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")


async def kubectl(kubeconfig: Path, cache: Path, *args: str, ok: bool = True) -> str:
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        f"--kubeconfig={kubeconfig}",
        f"--cache-dir={cache}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert (process.returncode == 0) == ok, err.decode()
    return out.decode() if ok else err.decode()


async def test_kubectl_applies_a_namespace_and_a_deployment_and_gets_them_back(
    api: ApiServer, tmp_path: Path
) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serving"}}
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump_all([namespace, deployment("vllm", "server")]))
    k = (kubeconfig, tmp_path / "cache")

    applied = await kubectl(*k, "apply", "--validate=false", "-n", "serving", "-f", str(manifest))
    assert "namespace/serving created" in applied
    assert "deployment.apps/vllm created" in applied

    changed = deployment("vllm", "server")
    changed["spec"]["replicas"] = 3
    manifest.write_text(yaml.safe_dump(changed))
    reapplied = await kubectl(*k, "apply", "--validate=false", "-n", "serving", "-f", str(manifest))
    assert "deployment.apps/vllm configured" in reapplied

    listed = json.loads(await kubectl(*k, "get", "deploy", "-n", "serving", "-o", "json"))
    assert [i["metadata"]["name"] for i in listed["items"]] == ["vllm"]
    assert listed["items"][0]["spec"]["replicas"] == 3
    header, row = (await kubectl(*k, "get", "deploy", "-n", "serving")).splitlines()
    assert header.split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert row.split()[:4] == ["vllm", "0/3", "0", "0"]


async def test_kubectl_applies_a_crd_then_its_custom_resources_and_deletes_them(
    api: ApiServer, tmp_path: Path
) -> None:
    k = (api.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
    crd, item = tmp_path / "crd.yaml", tmp_path / "widget.yaml"
    crd.write_text(yaml.safe_dump(WIDGET_CRD))
    item.write_text(yaml.safe_dump(widget("w", size=2)))
    await kubectl(*k, "apply", "--validate=false", "-f", str(crd))
    assert "widget.tests.example.com/w created" in await kubectl(*k, "apply", "-f", str(item))

    item.write_text(yaml.safe_dump(widget("w", size=4)))
    assert "configured" in await kubectl(*k, "apply", "--validate=false", "-f", str(item))
    got = json.loads(await kubectl(*k, "get", "wg", "w", "-o", "json"))
    assert got["spec"] == {"size": 4, "mode": "A"}

    item.write_text(yaml.safe_dump(widget("bad", size=0)))
    refused = await kubectl(*k, "apply", "--validate=false", "-f", str(item), ok=False)
    assert "spec.size" in refused

    assert 'widget.tests.example.com "w" deleted' in await kubectl(*k, "delete", "wg", "w")
    assert await api.get("tests.example.com/v1", "Widget", "w", namespace="default") is None


async def test_kubectl_get_latencytargets_prints_the_crds_columns(
    api: ApiServer, tmp_path: Path
) -> None:
    """What the README promises `kubectl get lt` shows, the sandbox shows too."""
    k = (api.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
    repo = REPO
    await kubectl(*k, "apply", "--validate=false", "-f", str(repo / "crds" / "latencytarget.yaml"))
    await kubectl(*k, "create", "namespace", "llm")
    target = repo / "crds" / "examples" / "minimal-ttft.yaml"
    await kubectl(*k, "apply", "--validate=false", "-n", "llm", "-f", str(target))
    name = "chat-ttft"
    status = LatencyTargetStatus.model_validate(
        {
            "phase": "Converged",
            "trialCount": 2,
            "observed": {"ttftSeconds": 0.052, "itlSeconds": 0.014},
            "conditions": [
                {
                    "type": "TargetsMet",
                    "status": "True",
                    "reason": "TargetsMet",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    ).model_dump(mode="json", by_alias=True, exclude_none=True)  # as the operator writes it
    await kubectl(
        *k,
        "patch",
        "lt",
        name,
        "-n",
        "llm",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )
    header, row = (await kubectl(*k, "get", "lt", "-n", "llm")).splitlines()
    assert header.split() == ["NAME", "TTFT", "ITL", "MET", "PHASE", "TRIALS", "AGE"]
    assert row.split()[:6] == [name, "52ms", "14ms", "True", "Converged", "2"]
    wide_header = (await kubectl(*k, "get", "lt", "-n", "llm", "-o", "wide")).splitlines()[0]
    assert wide_header.split()[:3] == ["NAME", "TARGET", "MODE"]
