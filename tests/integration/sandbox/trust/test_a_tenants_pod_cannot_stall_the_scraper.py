"""In scrape mode the operator reads the tenant's own pods, so their labels and their answer
size are the tenant's: a backtracking regex over a long label is matched in linear time off the
event loop, and a flood of series is refused, while every other target keeps its status.
Finding 6 of issue 13 — kopf against the API emulator, the operator's real scraper, the pod's
/metrics served by an HTTP server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from tests.integration.operator.harness import (
    NAMESPACE,
    SEQS_ONLY,
    World,
    by_seqs,
    cluster,
    condition,
    eventually,
    latency_target,
    operator_running,
    queueing,
)
from tests.integration.sandbox.trust.support import (
    ARGS,
    IMAGE,
    container,
    containers_deployment,
    hostile_server,
)

from latency_tuner.vllm.metrics import FAMILIES, MetricType, Signal

# Python's `re` needs about 2**40 steps for this regex on this label; RE2 needs 41.
LONG_LABEL = "a" * 40 + "!"
BACKTRACKING = "(a+)+$"


def exposition(model_name: str, *, series: int = 1) -> bytes:
    """vLLM's running-requests gauge, ``series`` times with different ``engine`` labels."""
    name = FAMILIES[Signal.REQUESTS_RUNNING].current
    assert FAMILIES[Signal.REQUESTS_RUNNING].type is MetricType.GAUGE
    lines = [f"# TYPE {name} gauge"]
    lines += [f'{name}{{model_name="{model_name}",engine="{i}"}} 1' for i in range(series)]
    return ("\n".join(lines) + "\n").encode()


async def scraped_from(world: World, deployment: str, port: int) -> None:
    """Point the Deployment's pod at 127.0.0.1 once the world has rolled it out."""

    async def pods() -> list[dict[str, Any]]:
        found = await world.api.list_objects("v1", "Pod", namespace=NAMESPACE)
        return [p for p in found if p["metadata"]["labels"].get("app") == deployment
                and (p.get("status") or {}).get("podIP")]  # fmt: skip

    (pod,) = await eventually(pods)
    await world.api.patch("v1", "Pod", pod["metadata"]["name"], {"status": {"podIP": "127.0.0.1"}},
                          namespace=NAMESPACE, subresource="status")  # fmt: skip


def tenant_deployment(port: int) -> dict[str, Any]:
    vllm = container("vllm", IMAGE, ARGS, ports=[{"name": "http", "containerPort": port}])
    return containers_deployment([vllm], name="tenant")


async def metrics_condition(world: World, name: str) -> dict[str, Any] | None:
    return condition(await world.status(name), "MetricsAvailable")


async def test_a_backtracking_regex_over_a_long_label_is_answered_and_stalls_no_one(
    tmp_path: Path,
) -> None:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=exposition(LONG_LABEL), content_type="text/plain")

    async with (
        hostile_server(metrics) as pod,
        cluster(tmp_path, queueing(by_seqs), ARGS) as world,
    ):
        port = int(pod.url.rsplit(":", 1)[1])
        await world.api.create(tenant_deployment(port))
        await scraped_from(world, "tenant", port)
        hostile = latency_target("tenant-latency", target="tenant", knobs=SEQS_ONLY)
        hostile["spec"]["metrics"] = {
            "matchers": [{"label": "model_name", "op": "=~", "value": BACKTRACKING}]
        }
        await world.api.create(hostile)
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path, real_metrics=True, metrics_source="scrape"):

            async def scraped_and_matched() -> dict[str, Any] | None:
                found = await metrics_condition(world, "tenant-latency")
                return found if pod.seen and found else None

            matched = await eventually(scraped_and_matched)
            other = await eventually(lambda: metrics_condition(world, "llama-latency"))
    # The regex selected nothing (the label ends in "!"), and said so, instead of hanging.
    assert (matched["status"], matched["reason"]) == ("False", "NoData")
    assert other["reason"]


@pytest.mark.parametrize(
    ("series", "cap"),
    [
        (200_000, "bytes"),  # ~10 MB, as in the 7.9 MB attack: refused while read
        (40_000, "series"),  # ~2 MB, under the byte cap: refused while parsed
    ],
)
async def test_a_pod_that_exposes_a_flood_of_series_is_refused_and_says_why(
    tmp_path: Path, series: int, cap: str
) -> None:
    flood = exposition("m", series=series)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=flood, content_type="text/plain")

    async with (
        hostile_server(metrics) as pod,
        cluster(tmp_path, queueing(by_seqs), ARGS) as world,
    ):
        port = int(pod.url.rsplit(":", 1)[1])
        await world.api.create(tenant_deployment(port))
        await scraped_from(world, "tenant", port)
        await world.api.create(latency_target("tenant-latency", target="tenant", knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path, real_metrics=True, metrics_source="scrape"):

            async def refused() -> dict[str, Any] | None:
                found = await metrics_condition(world, "tenant-latency")
                return found if found and found["reason"] == "MetricsSourceError" else None

            failed = await eventually(refused)
    assert failed["status"] == "False"
    assert "more than" in failed["message"], failed
    assert f" {cap}" in failed["message"], failed
