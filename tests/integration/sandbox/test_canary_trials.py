"""Canary trials end to end: the API emulator, simulated vLLM pods behind a label-selecting
"Service", a real Prometheus, load, and the operator as its own process.

A Deployment of two replicas gets canary trials by default: the trial runs on one extra pod
while the Deployment runs one fewer, both arms are judged over the same window, and a kept
change is promoted while a refused one leaves the Deployment's template as it was.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.integration.sandbox.support import eventually

from latency_tuner.core.canary import CANARY_LABEL
from latency_tuner.core.quality.samples import SAMPLES_LABEL
from latency_tuner.sandbox.demo import DemoRun, demo_run
from latency_tuner.sandbox.prometheus import binary
from latency_tuner.sandbox.scenario import Scenario, load_scenario

PROMPTS = [{"prompt": f"Question {i}: what is {i} plus {i}?"} for i in range(12)]


def two_replicas(name: str, change: Callable[[dict[str, Any]], None] | None = None) -> Scenario:
    """A shipped scenario whose Deployment has two replicas (so trials are canaries)."""
    if binary() is None:
        pytest.skip("prometheus is not installed (scripts/setup.sh installs it)")
    data = load_scenario(name).model_dump(mode="json", by_alias=True)
    data["deployment"]["spec"]["replicas"] = 2
    if change is not None:
        change(data)
    return Scenario.from_mapping(data, f"{name} with two replicas")


def queueing_on_two_pods(change: Callable[[dict[str, Any]], None] | None = None) -> Scenario:
    """The queueing scenario on two replicas of one slot each (--max-num-seqs 1, not 4).

    With four slots a pod, a load generator starved of CPU (a loaded CI machine) kept fewer of
    its 24 closed-loop users in flight than the pods had slots: neither arm queued, the first
    window met the target and the trial became a refinement that found no difference. One slot
    a pod queues whatever the generator keeps in flight, and its slower pods ask less of it."""

    def one_slot(data: dict[str, Any]) -> None:
        container = data["deployment"]["spec"]["template"]["spec"]["containers"][0]
        container["args"] = [
            "--max-num-seqs=1" if a == "--max-num-seqs=4" else a for a in container["args"]
        ]
        assert "--max-num-seqs=1" in container["args"]
        if change is not None:
            change(data)

    return two_replicas("queueing", one_slot)


async def main_deployment(run: DemoRun) -> dict[str, Any]:
    found = await run.sandbox.get(
        "apps/v1", "Deployment", run.scenario.deployment_name, run.sandbox.namespace
    )
    assert found is not None
    return dict(found)


async def canaries(run: DemoRun) -> list[dict[str, Any]]:
    every = await run.sandbox.list("apps/v1", "Deployment", run.sandbox.namespace)
    return [d for d in every if CANARY_LABEL in (d["metadata"].get("labels") or {})]


def finished(status: dict[str, Any]) -> bool:
    return bool(status.get("trials")) and not status.get("currentTrial")


class CanaryWatch:
    """Polls the namespace's canary Deployments while a test runs: every uid seen, the most
    seen at once, and the main Deployment's replica counts."""

    def __init__(self, run: DemoRun) -> None:
        self.run = run
        self.uids: set[str] = set()
        self.most = 0
        self.main_replicas: set[int] = set()
        self._task: asyncio.Task[None] | None = None

    async def _poll(self) -> None:
        while True:
            found = await canaries(self.run)
            self.most = max(self.most, len(found))
            self.uids |= {d["metadata"]["uid"] for d in found}
            self.main_replicas.add(int((await main_deployment(self.run))["spec"]["replicas"]))
            await asyncio.sleep(0.5)

    def __enter__(self) -> CanaryWatch:
        self._task = asyncio.create_task(self._poll())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def test_a_better_canary_is_kept_and_promoted(tmp_path: Path) -> None:
    chosen = queueing_on_two_pods()
    async with demo_run(chosen, workdir=tmp_path) as run:
        await run.sandbox.apply_latency_target()
        with CanaryWatch(run) as watch:
            status = await run.wait_for(finished, within=300)
        args = await run.container_args()
        left = await canaries(run)
        main = await main_deployment(run)
    assert finished(status), json.dumps(status, indent=1)
    assert status["strategy"]["name"] == "Canary"
    assert "2 replicas" in status["strategy"]["reason"]
    (trial, *_) = status["trials"]
    assert (trial["knob"], trial["verdict"], trial["strategy"]) == ("maxNumSeqs", "Keep", "Canary")
    assert "Mann-Whitney U" in trial["reason"]
    assert "p=" in trial["reason"]
    assert "--max-num-seqs=1" not in args  # promoted onto the Deployment
    assert left == []  # the canary is gone
    assert main["spec"]["replicas"] == 2  # the replica given back
    assert watch.main_replicas == {1, 2}  # one fewer while the canary ran
    assert watch.most == 1


def _demand_the_impossible(data: dict[str, Any]) -> None:
    # Any improvement short of 99.99% is "too little": the canary must be refused (one slot a
    # pod queues for seconds, so the canary's queue-free TTFT is better by 99% and more).
    data["latencyTarget"]["spec"]["evaluation"]["minImprovement"] = 0.9999


async def test_a_refused_canary_never_touches_the_deployments_template(tmp_path: Path) -> None:
    chosen = queueing_on_two_pods(_demand_the_impossible)
    async with demo_run(chosen, workdir=tmp_path) as run:
        before = await main_deployment(run)
        args = await run.container_args()
        await run.sandbox.apply_latency_target()
        with CanaryWatch(run) as watch:
            status = await run.wait_for(finished, within=300)
        after = await main_deployment(run)
        final_args = await run.container_args()
        left = await canaries(run)
    assert finished(status), json.dumps(status, indent=1)
    trial = status["trials"][0]
    assert (trial["verdict"], trial["strategy"]) == ("Revert", "Canary")
    assert "Mann-Whitney U" in trial["reason"]
    assert final_args == args
    assert after["spec"]["template"] == before["spec"]["template"]
    assert after["metadata"]["annotations"].get("deployment.kubernetes.io/revision") == (
        before["metadata"]["annotations"].get("deployment.kubernetes.io/revision")
    )
    assert after["spec"]["replicas"] == 2
    assert watch.uids  # a canary did run
    assert left == []


def _fp8_on_h100_gated_on_quality(data: dict[str, Any]) -> None:
    data["hardware"]["gpu"] = "H100-SXM"  # FP8 KV starts: only quality can refuse it
    # The H100 keeps less free memory at 0.23 than the A100 the scenario was written for.
    container = data["deployment"]["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    args[args.index("--gpu-memory-utilization") + 1] = "0.25"
    data["workload"]["users"] = 32  # the scenario's 16 users per pod, on each of two pods
    spec = data["latencyTarget"]["spec"]
    spec["knobs"] = {
        "kvCacheDtype": ["fp8"],
        "prefixCaching": False,
        "chunkedPrefill": False,
        "maxNumBatchedTokens": None,
        "maxNumSeqs": None,
        "gpuMemoryUtilization": None,
    }
    # The simulator's FP8 KV cache alters 1% of output tokens: agreement about 0.99.
    spec["quality"] = {"configMap": "qa", "mode": "Reference", "tolerance": 0.001}


def quality_configmap(run: DemoRun, data: str, labels: dict[str, str]) -> dict[str, Any]:
    """The ConfigMap ``qa`` the quality gate of ``_fp8_on_h100_gated_on_quality`` names."""
    metadata = {"name": "qa", "namespace": run.sandbox.namespace, "labels": labels}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {"samples.json": data},
    }


async def test_a_lossy_change_that_answers_differently_is_refused_with_its_score(
    tmp_path: Path,
) -> None:
    chosen = two_replicas("fp8-kv-on-a100", _fp8_on_h100_gated_on_quality)
    async with demo_run(chosen, workdir=tmp_path) as run:
        lent = {SAMPLES_LABEL: "true"}
        await run.sandbox.apply(quality_configmap(run, json.dumps(PROMPTS), lent))
        args = await run.container_args()
        await run.sandbox.apply_latency_target()
        status = await run.wait_for(finished, within=300)
        final_args = await run.container_args()
        left = await canaries(run)
    assert finished(status), json.dumps(status, indent=1)
    trial = status["trials"][0]
    assert (trial["knob"], trial["verdict"]) == ("kvCacheDtype", "Revert")
    assert trial["reason"].startswith("quality gate failed")
    quality = trial["quality"]
    assert quality["passed"] is False
    assert (quality["metric"], quality["mode"], quality["samples"]) == (
        "Similarity",
        "Reference",
        len(PROMPTS),
    )
    assert 0.9 < quality["score"] < 0.999
    assert final_args == args
    assert left == []


async def test_a_configmap_without_the_opt_in_label_refuses_the_lossy_change_and_lends_nothing(
    tmp_path: Path,
) -> None:
    # Any ConfigMap of the namespace, which the LatencyTarget's author may not be able to read.
    marker = "db-password-hunter2"
    private = json.dumps([{"prompt": f"{marker} {p['prompt']}"} for p in PROMPTS])
    chosen = two_replicas("fp8-kv-on-a100", _fp8_on_h100_gated_on_quality)
    async with demo_run(chosen, workdir=tmp_path) as run:
        await run.sandbox.apply(quality_configmap(run, private, {"app": "billing"}))
        args = await run.container_args()
        await run.sandbox.apply_latency_target()
        status = await run.wait_for(finished, within=300)
        final_args = await run.container_args()
        left = await canaries(run)
        events = await run.sandbox.list("v1", "Event", run.sandbox.namespace)
    assert finished(status), json.dumps(status, indent=1)
    trial = status["trials"][0]
    assert (trial["knob"], trial["verdict"]) == ("kvCacheDtype", "Revert")
    assert trial["reason"].startswith("quality gate could not run: ConfigMap qa in namespace")
    assert f"not labelled {SAMPLES_LABEL}=true" in trial["reason"]
    assert not trial.get("quality")  # no pod was asked, so nothing was scored
    assert final_args == args
    assert left == []
    log = (tmp_path / "operator.log").read_text()
    for seen in (json.dumps(status), json.dumps(events), log):
        assert marker not in seen


async def test_the_operator_killed_mid_canary_resumes_without_a_second_canary(
    tmp_path: Path,
) -> None:
    chosen = queueing_on_two_pods()
    async with demo_run(chosen, workdir=tmp_path) as run:
        await run.sandbox.apply_latency_target()
        with CanaryWatch(run) as watch:
            status = await run.wait_for(lambda s: s.get("phase") == "Settling", within=180)
            assert status.get("phase") == "Settling", await run.explain()
            await asyncio.to_thread(run.operator.kill)
            await asyncio.sleep(2)
            await asyncio.to_thread(run.operator.start)
            status = await run.wait_for(finished, within=300)
        left = await canaries(run)
        main = await main_deployment(run)
    assert finished(status), json.dumps(status, indent=1)
    assert [t["verdict"] for t in status["trials"]][:1] == ["Keep"], json.dumps(status, indent=1)
    assert run.operator.starts == 2
    assert len(watch.uids) == 1  # the restarted operator found its canary, made none
    assert watch.most == 1
    assert left == []
    assert main["spec"]["replicas"] == 2


def _on_delete(policy: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["latencyTarget"]["spec"]["onDelete"] = policy

    return change


@pytest.mark.parametrize("policy", ["Keep", "Restore"])
async def test_deleting_the_target_mid_canary_removes_the_canary_and_gives_the_replica_back(
    tmp_path: Path, policy: str
) -> None:
    chosen = queueing_on_two_pods(_on_delete(policy))
    async with demo_run(chosen, workdir=tmp_path) as run:
        args = await run.container_args()
        await run.sandbox.apply_latency_target()
        status = await run.wait_for(lambda s: s.get("phase") == "Settling", within=180)
        assert status.get("phase") == "Settling", await run.explain()
        assert len(await canaries(run)) == 1
        await run.sandbox.delete(
            "tuning.latencytuner.io/v1alpha1", "LatencyTarget", run.name, run.sandbox.namespace
        )

        async def cleaned() -> bool:
            main = await main_deployment(run)
            return (
                not await canaries(run) and main["spec"]["replicas"] == 2 and not await run.target()
            )

        await eventually(cleaned, within=60, every=0.5)
        assert await run.container_args() == args  # nothing to restore: never touched
