"""`latency-tuner report NAME` on a LatencyTarget the operator really tuned: the sandbox, the
operator as its own process, a scenario that converges through a trial with a companion flag
(chunked prefill with its token budget). The report is read from the API server like any
cluster's, and says what the status says and what the trials cost."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from e2e.support import converged, require_prometheus, scenario

from latency_tuner.cli import report
from latency_tuner.sandbox.demo import demo_run

pytestmark = pytest.mark.e2e


async def test_the_report_of_a_tuned_target_lists_its_trials_changes_and_cost(
    tmp_path: Path,
) -> None:
    require_prometheus()
    chosen = scenario("prefill-interference")
    async with demo_run(chosen, workdir=tmp_path / "run") as run:
        await run.sandbox.apply_latency_target()
        status = await run.wait_for(converged, within=300)
        assert converged(status), status
        argv = [run.name, "-n", run.sandbox.namespace, "--out", str(tmp_path / "report"),
                "--kubeconfig", str(run.sandbox.kubeconfig_path), "--json"]  # fmt: skip
        code = await asyncio.to_thread(report.main, argv, {})
        status = await run.status()
    assert code == 0
    result = json.loads((tmp_path / "report" / "result.json").read_text())
    assert [t["id"] for t in result["trials"]] == [t["id"] for t in status["trials"]]
    first = result["trials"][0]
    assert first["knob"] == "chunkedPrefill"
    assert "--enable-chunked-prefill: false -> true" in first["changes"]
    assert any(c.startswith("--max-num-batched-tokens:") for c in first["changes"])
    cost = result["cost"]
    rolled_back = sum(t["verdict"] != "Keep" for t in status["trials"])
    assert cost["rollouts"] == len(status["trials"]) + rolled_back
    assert cost["gpusPerPod"] == 1
    assert cost["gpuHours"] > 0
    assert any(e["reason"] == "TrialStarted" for e in result["events"])
    assert "--enable-chunked-prefill" in " ".join(result["finalArgs"])
    assert "--no-enable-chunked-prefill" in " ".join(result["initialArgs"])
    page = (tmp_path / "report" / "report.md").read_text()
    assert "## What tuning cost" in page
    assert (tmp_path / "report" / "trials.png").stat().st_size > 10_000
