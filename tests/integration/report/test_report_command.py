"""`latency-tuner report NAME` against the API emulator: a LatencyTarget with two finished
trials (its status written through the status subresource, as the operator writes it), its
Deployment and its events become report.md, trials.png and result.json, with what tuning cost."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from latency_tuner.api import build_crd
from latency_tuner.api.status import (
    Baseline,
    LatencyTargetStatus,
    MetricSnapshot,
    Phase,
    Trial,
    Verdict,
)
from latency_tuner.cli import report
from latency_tuner.sandbox.apiserver import ApiServer

LT = "tuning.latencytuner.io/v1alpha1"
BEFORE = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "16"]
AFTER = [*BEFORE[:-1], "32"]


def status() -> dict[str, Any]:
    def window(ttft: float) -> MetricSnapshot:
        return MetricSnapshot(ttft_seconds=ttft, itl_seconds=0.02, request_rate=5, requests=300)

    trials = [
        Trial(id=1, knob="maxNumSeqs", from_value="16", to_value="32",
              changes=["--max-num-seqs: 16 -> 32"], started_at="2026-12-02T20:00:00Z",
              finished_at="2026-12-02T20:10:00Z", before=window(2.4), after=window(0.9),
              verdict=Verdict.KEEP, reason="score 3.80 -> 0.80"),
        Trial(id=2, knob="maxNumSeqs", from_value="32", to_value="64",
              changes=["--max-num-seqs: 32 -> 64"], started_at="2026-12-02T20:20:00Z",
              finished_at="2026-12-02T20:35:00Z", before=window(0.9), after=window(1.1),
              verdict=Verdict.REVERT, reason="score 0.80 -> 1.20"),
    ]  # fmt: skip
    return LatencyTargetStatus(
        phase=Phase.EXHAUSTED,
        baseline=Baseline(
            container="vllm", command=BEFORE[:2], args=BEFORE[2:], image="vllm/vllm:v0.11",
            gpu_limit="2", config_hash="abc", captured_at="2026-12-02T20:00:00Z",
        ),
        observed=window(0.9), trials=trials, trial_count=2,
    ).model_dump(mode="json", by_alias=True, exclude_none=True)  # fmt: skip


def event(name: str, kind: str, about: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "ml"},
        "involvedObject": {"apiVersion": LT, "kind": kind, "name": about, "namespace": "ml"},
        "type": "Normal", "reason": reason, "message": message,
        "lastTimestamp": f"2026-12-02T20:0{name[-1]}:00Z",
    }  # fmt: skip


async def populate(api: ApiServer) -> None:
    await api.create(build_crd())
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    await api.create(
        {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "llama", "namespace": "ml"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "llama"}},
                "template": {
                    "metadata": {"labels": {"app": "llama"}},
                    "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm:v0.11",
                                             "command": AFTER[:2], "args": AFTER[2:]}]},
                },
            },
        }
    )  # fmt: skip
    await api.create(
        {
            "apiVersion": LT, "kind": "LatencyTarget",
            "metadata": {"name": "llama", "namespace": "ml"},
            "spec": {
                "targetRef": {"name": "llama", "container": "vllm"},
                "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
            },
        }
    )  # fmt: skip
    await api.patch(LT, "LatencyTarget", "llama", {"status": status()}, namespace="ml",
                    subresource="status")  # fmt: skip
    await api.create(event("e1", "LatencyTarget", "llama", "TrialStarted", "trial 1: 16 -> 32"))
    await api.create(event("e2", "LatencyTarget", "llama", "Kept", "trial 1 kept"))
    await api.create(event("e3", "LatencyTarget", "other", "Kept", "someone else's"))


async def run(*argv: str) -> int:
    return await asyncio.to_thread(report.main, list(argv), {})


async def test_a_live_latency_target_becomes_a_report_with_what_tuning_cost(
    api: ApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await populate(api)
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    out = tmp_path / "report"
    assert await run("llama", "-n", "ml", "--kubeconfig", kubeconfig, "--out", str(out)) == 0
    printed = capsys.readouterr().out

    result = json.loads((out / "result.json").read_text())
    assert [t["to"] for t in result["trials"]] == ["32", "64"]
    assert result["initialArgs"] == BEFORE  # the baseline the operator saved
    assert result["finalArgs"] == AFTER  # the Deployment as it runs now
    assert result["cost"] == {
        "trialCount": 2, "listedTrials": 2, "rollouts": 3, "trialSeconds": 1500.0,
        "gpusPerPod": 2, "replicas": 3, "gpuHours": 2.5,
    }  # fmt: skip
    assert [e["reason"] for e in result["events"]] == ["TrialStarted", "Kept"]  # its own only

    page = (out / "report.md").read_text()
    assert page.strip() in printed  # printed as written
    assert "# latency-tuner report: ml/llama" in page
    assert "- Deployment rollouts caused: 3" in page
    assert "- GPU-hours spent in trials: 2.50 (25m0s of trials x 2 GPU(s) per pod x 3" in page
    assert "| 1 | maxNumSeqs | 16 | 32 | 2.4s | 900ms |" in page
    assert "trial 2 changed: --max-num-seqs: 32 -> 64" in page
    assert "![TTFT and ITL per trial](trials.png)" in page
    assert (out / "trials.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_a_missing_latency_target_and_a_missing_kubeconfig_are_one_line_each(
    api: ApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await api.create(build_crd())
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    assert await run("nope", "-n", "ml", "--kubeconfig", kubeconfig) == report.EXIT_NOT_FOUND
    assert (
        capsys.readouterr().err.strip() == "latency-tuner report: LatencyTarget ml/nope not found"
    )
    missing = str(tmp_path / "missing")
    assert await run("llama", "-n", "ml", "--kubeconfig", missing) == report.EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "no usable kubeconfig" in err
