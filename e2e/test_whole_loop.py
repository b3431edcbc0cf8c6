"""The whole loop, end to end: the API emulator, simulated vLLM pods started by the pod runner,
a real Prometheus, background load, and the operator as its own process (`latency-tuner run`).

Each test runs one shipped scenario (short windows: seconds) and checks what a user would see on
the LatencyTarget and the Deployment.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from e2e.support import (
    condition,
    converged,
    deployment_generation,
    met,
    require_prometheus,
    scenario,
    story,
)

from latency_tuner.sandbox.demo import demo_run, run_demo

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("name", "first_knob"),
    [
        ("queueing", "maxNumSeqs"),
        ("prefix-caching", "prefixCaching"),
        ("prefill-interference", "chunkedPrefill"),
    ],
)
async def test_a_bottleneck_converges_in_auto_mode_within_its_expected_trials(
    tmp_path: Path, name: str, first_knob: str
) -> None:
    require_prometheus()
    chosen = scenario(name)
    with (tmp_path / "progress.log").open("w") as out:
        result = await run_demo(chosen, workdir=tmp_path, within=300, out=out)
    assert result.targets_met, story(result)
    assert result.phase == "Converged"
    assert result.expectations_held, result.problems
    assert result.trials[0]["knob"] == first_knob
    # The trials that met the targets end in a kept one; any after it sought margin (item 3 of
    # issue 12) and were kept or rolled back, never left half-done.
    fixes = [t for t in result.trials if not t.get("refinement")]
    assert fixes[-1]["verdict"] == "Keep", story(result)
    assert all(t["verdict"] in ("Keep", "Revert") for t in result.trials if t.get("refinement"))
    assert result.final_args != result.initial_args


async def test_recommend_mode_publishes_the_patch_and_leaves_the_deployment_untouched(
    tmp_path: Path,
) -> None:
    require_prometheus()
    chosen = scenario("queueing", lambda t: t["spec"].update(mode="Recommend"))
    async with demo_run(chosen, workdir=tmp_path) as run:
        generation = await deployment_generation(run)
        args = await run.container_args()
        await run.sandbox.apply_latency_target()
        status = await run.wait_for(lambda s: bool(s.get("recommendation")), within=120)
        recommendation = status["recommendation"]
        await asyncio.sleep(5)  # a few more reconciles: still nothing applied
        assert await deployment_generation(run) == generation
        assert await run.container_args() == args
        status = await run.status()
    assert recommendation["knob"] == "maxNumSeqs"
    assert recommendation["from"] == "4"
    (op,) = recommendation["patch"]  # the args alone: the command stays as it is
    assert op["path"] == "/spec/template/spec/containers/0/args"
    assert "--max-num-seqs=32" in op["value"]
    assert status.get("trials", []) == []
    assert condition(status, "Progressing")["reason"] == "ModeRecommend"


def _fp8_only_on_a_node_declared_h100(target: dict[str, Any]) -> None:
    # The node is an A100, but the spec says H100: the operator believes FP8 KV can start.
    # With every safe knob off, the FP8 KV cache is the only change left to try.
    target["spec"]["hardware"] = {"gpuProduct": "H100-SXM"}
    target["spec"]["knobs"] = {
        "kvCacheDtype": ["fp8"],
        "prefixCaching": False,
        "chunkedPrefill": False,
        "maxNumBatchedTokens": None,
        "maxNumSeqs": None,
        "gpuMemoryUtilization": None,
    }


async def test_a_trial_that_cannot_start_is_rolled_back_and_recorded_incompatible(
    tmp_path: Path,
) -> None:
    require_prometheus()
    chosen = scenario("fp8-kv-on-a100", _fp8_only_on_a_node_declared_h100)
    async with demo_run(chosen, workdir=tmp_path) as run:
        args = await run.container_args()
        await run.sandbox.apply_latency_target()
        status = await run.wait_for(
            lambda s: s.get("phase") == "Exhausted" and not s.get("currentTrial"), within=240
        )
        final_args = await run.container_args()
        serving = [p for p in run.sandbox.pods() if p.ready]
    assert status.get("phase") == "Exhausted", status
    (trial,) = status["trials"]
    assert (trial["knob"], trial["to"], trial["verdict"]) == ("kvCacheDtype", "fp8", "Failed")
    assert "CrashLoopBackOff" in trial["reason"] or "ProgressDeadlineExceeded" in trial["reason"]
    assert status["incompatible"][0]["knob"] == "kvCacheDtype"
    assert final_args == args
    assert serving, "the original pod kept serving"


def _one_trial(target: dict[str, Any]) -> None:
    # The test counts the patches of the trial the kill interrupts: with trials left, a met
    # target may rightly be refined for margin, a second trial with patches of its own.
    target["spec"].setdefault("evaluation", {})["maxTrials"] = 1


async def test_the_operator_killed_mid_trial_resumes_without_a_second_patch(
    tmp_path: Path,
) -> None:
    require_prometheus()
    chosen = scenario("queueing", _one_trial)
    async with demo_run(chosen, workdir=tmp_path) as run:
        start = await deployment_generation(run)
        await run.sandbox.apply_latency_target()
        status = await run.wait_for(lambda s: s.get("phase") == "Settling", within=120)
        assert status.get("phase") == "Settling", status
        await asyncio.to_thread(run.operator.kill)
        patched = await deployment_generation(run)
        await asyncio.to_thread(run.operator.start)
        status = await run.wait_for(converged, within=180)
        end = await deployment_generation(run)
        baseline = status.get("baseline") or {}
        metrics = await asyncio.to_thread(run.operator.metrics)
    assert converged(status), status
    assert patched == start + 1  # the trial's patch, before the kill
    assert end == patched  # the restarted operator patched nothing again
    assert [t["verdict"] for t in status["trials"]] == ["Keep"]
    assert "--max-num-seqs=4" in baseline.get("args", [])
    assert run.operator.starts == 2
    # The restarted operator judged the trial, and its own metrics say so, naming the target.
    keep = re.search(r'^latency_tuner_trials_total\{([^}]*)verdict="Keep"\} 1\.0$', metrics, re.M)
    assert keep is not None, metrics
    assert 'name="' in keep.group(1)
    assert 'namespace="' in keep.group(1)


async def test_metrics_going_away_stops_all_changes_until_they_are_back(tmp_path: Path) -> None:
    require_prometheus()
    chosen = scenario("queueing")
    async with demo_run(chosen, workdir=tmp_path) as run:
        prometheus = run.sandbox.prometheus
        assert prometheus is not None
        generation = await deployment_generation(run)
        await asyncio.to_thread(prometheus.stop, keep_data=True)
        await run.sandbox.apply_latency_target()

        def unavailable(status: dict[str, Any]) -> bool:
            return condition(status, "MetricsAvailable").get("status") == "False"

        status = await run.wait_for(unavailable, within=60)
        assert unavailable(status), status
        assert condition(status, "MetricsAvailable")["reason"] == "MetricsSourceError"
        down_until = time.monotonic() + 15
        while time.monotonic() < down_until:
            assert await deployment_generation(run) == generation
            assert not (await run.status()).get("currentTrial")
            await asyncio.sleep(2)
        await asyncio.to_thread(prometheus.start)
        status = await run.wait_for(converged, within=180)
    assert met(status), status
    assert condition(status, "MetricsAvailable")["status"] == "True"
    assert len(status["trials"]) >= 1


async def test_a_prometheus_frozen_while_a_trial_is_measured_is_restarted_and_the_trial_judged(
    tmp_path: Path,
) -> None:
    # What CI once saw: the server running, neither scraping nor answering, for minutes. The
    # sandbox restarts it as a kubelet's liveness probe would; the operator waits out the
    # unreadable windows and judges the trial rather than rolling it back.
    require_prometheus()
    async with demo_run(scenario("prefix-caching"), workdir=tmp_path) as run:
        prometheus = run.sandbox.prometheus
        assert prometheus is not None
        await run.sandbox.apply_latency_target()
        status = await run.wait_for(lambda s: s.get("phase") == "Measuring", within=180)
        assert status.get("phase") == "Measuring", await run.explain()
        assert prometheus._process is not None
        os.kill(prometheus._process.pid, signal.SIGSTOP)
        status = await run.wait_for(converged, within=240)
        assert converged(status), await run.explain()
        assert prometheus.restarts == 1
    # The trial measured across the freeze was judged and kept; any after it (for margin, or
    # a window a loaded machine pushed over) was judged too, not left.
    first, *later = status["trials"]
    assert (first["knob"], first["verdict"]) == ("prefixCaching", "Keep"), first
    assert all(t["verdict"] in ("Keep", "Revert") for t in later), later


async def test_without_prometheus_the_operator_scrapes_the_pods_itself_and_converges(
    tmp_path: Path,
) -> None:
    with (tmp_path / "progress.log").open("w") as out:
        result = await run_demo(
            scenario("queueing"), workdir=tmp_path, within=300, out=out, prometheus=False
        )
    assert result.metrics_source == "direct scrape"
    assert result.targets_met, story(result)
    # The first trial is the fix, a kept max-num-seqs change, within the scenario's expected
    # trials; a later one (CI once saw a second kept max-num-seqs trial on a loaded machine)
    # sought margin or answered a window the load pushed over, and was judged, not left.
    first = result.trials[0]
    assert (first["knob"], first["verdict"]) == ("maxNumSeqs", "Keep"), story(result)
    assert result.expectations_held, story(result)
    assert all(t["verdict"] in ("Keep", "Revert") for t in result.trials), story(result)
