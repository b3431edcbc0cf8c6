"""A Sandbox given a scenario comes up with its Deployment rolled out, load flowing, CRD served."""

from __future__ import annotations

import asyncio

from tests.integration.sandbox.conftest import FAST
from tests.integration.sandbox.support import eventually

from latency_tuner.api import API_VERSION, KIND
from latency_tuner.sandbox.cluster import Sandbox
from latency_tuner.sandbox.scenario import load_scenario


async def test_a_scenario_sandbox_serves_the_deployment_under_load_and_accepts_its_target() -> None:
    scenario = load_scenario("queueing")

    async with Sandbox(scenario, prometheus=False, runner_options=FAST) as sandbox:
        deployment = await sandbox.get("apps/v1", "Deployment", scenario.deployment_name)
        assert deployment is not None
        assert deployment["status"]["availableReplicas"] == 1
        [pod] = sandbox.pods()
        assert "--max-num-seqs=4" in pod.argv
        assert [t.labels for t in sandbox.targets()] == [
            {"namespace": "llm", "pod": pod.name, "container": "vllm"}
        ]
        assert sandbox.load is not None
        load = sandbox.load

        async def served() -> bool:
            return load.progress is not None and load.progress.completed >= 10

        await eventually(served, within=20)

        target = await sandbox.apply_latency_target()
        assert (target["apiVersion"], target["kind"]) == (API_VERSION, KIND)
        stored = await sandbox.get(API_VERSION, KIND, scenario.deployment_name)
        assert stored is not None
        assert stored["spec"]["objectives"]["ttft"]["threshold"] == "500ms"
        kubeconfig = sandbox.kubeconfig_path.read_text()
        assert sandbox.api_url in kubeconfig

    assert load.result is not None
    assert load.result.failed == 0
    assert load.error is None
    assert not await asyncio.to_thread(sandbox.kubeconfig_path.exists)
