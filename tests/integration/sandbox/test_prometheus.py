"""Prometheus (when installed) scrapes the ready pods with namespace/pod/container labels."""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest
from tests.integration.sandbox.support import NAMESPACE, deployment, eventually

from latency_tuner.sandbox import prometheus
from latency_tuner.sandbox.cluster import Sandbox

pytestmark = pytest.mark.prometheus


@pytest.fixture(autouse=True)
def _needs_prometheus() -> None:
    if prometheus.binary() is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; scripts/setup.sh installs it")
        pytest.skip("prometheus is not installed (scripts/setup.sh installs it as root)")


async def test_prometheus_scrapes_the_pod_under_its_kubernetes_labels() -> None:
    async with Sandbox(namespace=NAMESPACE, prometheus=True) as sandbox:
        await sandbox.apply(deployment())
        await eventually(lambda: asyncio.sleep(0, any(p.ready for p in sandbox.pods())))
        [pod] = sandbox.pods()
        assert sandbox.prometheus_url is not None
        query = f"{sandbox.prometheus_url}/api/v1/query"

        async def scraped() -> list[dict[str, str]]:
            async with httpx.AsyncClient() as http:
                params = {"query": 'vllm:num_requests_running{job="vllm"}'}
                body = (await http.get(query, params=params)).json()
            return [r["metric"] for r in body["data"]["result"]]

        [series] = await eventually(scraped, within=20, every=0.2)

    assert series["namespace"] == NAMESPACE
    assert series["pod"] == pod.name
    assert series["container"] == "vllm"
    assert series["instance"] == f"127.0.0.1:{pod.port}"
