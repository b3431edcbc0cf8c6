"""A Prometheus a LatencyTarget names is the tenant's: it never receives the operator's token,
it is not called at all outside the allowed prefixes, and when it hangs, trickles or floods,
only its own target waits; every query stays inside the target's namespace, whatever matchers
the tenant writes. Findings 4, 5, 7 and 9 of issue 13 and variations on them.

The operator runs under kopf against the API emulator with its real Prometheus client; both
"Prometheus" servers are HTTP servers on 127.0.0.1 that record what reaches them. Nothing is
timed: a hanging server is released only after the assertions that must hold while it hangs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web
from tests.integration.operator.harness import (
    LT_API,
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
    HostileServer,
    empty_vector,
    hostile_server,
    several_more_rounds,
)

from latency_tuner.vllm.metrics import FAMILIES

TOKEN = "the-operators-own-token"


def tenant_target(name: str, deployment: str, url: str, **metrics: Any) -> dict[str, Any]:
    target = latency_target(name, target=deployment, knobs=SEQS_ONLY)
    target["spec"]["metrics"] = {"prometheusUrl": url, **metrics}
    return target


async def answered(world: World, name: str) -> dict[str, Any] | None:
    """The MetricsAvailable condition once the operator has finished one observation."""
    return condition(await world.status(name), "MetricsAvailable")


async def metrics_failed(world: World, name: str) -> dict[str, Any] | None:
    found = await answered(world, name)
    return found if found and found["status"] == "False" else None


def settings(own: HostileServer, **more: Any) -> dict[str, Any]:
    return {
        "real_metrics": True,
        "prometheus_url": own.url,
        "prometheus_bearer_token": TOKEN,
        "allow_per_resource_prometheus_url": True,
        "prometheus_timeout_seconds": 1.0,
        **more,
    }


async def test_the_operators_token_goes_to_its_own_prometheus_and_never_to_a_tenants(
    tmp_path: Path,
) -> None:
    async def answer(_: web.Request) -> web.Response:
        return empty_vector()

    async with (
        hostile_server(answer) as own,
        hostile_server(answer) as tenant,
        cluster(tmp_path, queueing(by_seqs), ARGS) as world,
    ):
        await world.add_deployment(ARGS, "theirs")
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        await world.api.create(tenant_target("theirs-latency", "theirs", tenant.url + "/"))
        async with operator_running(world, tmp_path, **settings(own)):
            await eventually(lambda: answered(world, "theirs-latency"))
            await eventually(lambda: answered(world, "llama-latency"))
    assert own.seen
    assert tenant.seen
    assert {s.headers.get("Authorization") for s in own.seen} == {f"Bearer {TOKEN}"}
    leaked = [s.headers for s in tenant.seen if "Authorization" in s.headers or TOKEN in str(s)]
    assert leaked == []


async def test_a_tenant_url_outside_the_allowed_prefixes_is_never_called(tmp_path: Path) -> None:
    async def answer(_: web.Request) -> web.Response:
        return empty_vector()

    async with (
        hostile_server(answer) as own,
        hostile_server(answer) as tenant,
        cluster(tmp_path, queueing(by_seqs), ARGS) as world,
    ):
        # Allowed: the operator's own host under /prom/; the tenant's server is another port.
        await world.add_deployment(ARGS, "theirs")
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        await world.api.create(tenant_target("theirs-latency", "theirs", tenant.url + "/prom/"))
        prefixes = (own.url + "/prom/",)
        async with operator_running(
            world, tmp_path, **settings(own, prometheus_url_prefixes=prefixes)
        ):
            failed = await eventually(lambda: metrics_failed(world, "theirs-latency"))
            await several_more_rounds()
    assert "refused" in failed["message"]
    assert tenant.seen == []


async def test_eight_hanging_prometheus_hold_up_no_other_target(tmp_path: Path) -> None:
    async def hang(_: web.Request) -> web.Response:
        await hanging.release.wait()
        return empty_vector()

    async def answer(_: web.Request) -> web.Response:
        return empty_vector()

    async with (
        hostile_server(hang) as hanging,
        hostile_server(answer) as own,
        cluster(tmp_path, queueing(by_seqs), ARGS) as world,
    ):
        for i in range(8):
            await world.add_deployment(ARGS, f"hostile-{i}")
            url = f"{hanging.url}/tenant-{i}/"  # eight sources, each with its own pool
            await world.api.create(tenant_target(f"hostile-{i}", f"hostile-{i}", url))
        # Long timeouts: the hostile queries stay stuck for the whole test.
        async with operator_running(
            world, tmp_path, **settings(own, prometheus_timeout_seconds=60.0)
        ):

            async def all_stuck() -> bool:
                return hanging.waiting >= 8

            await eventually(all_stuck)
            await world.api.create(latency_target(knobs=SEQS_ONLY))
            healthy = await eventually(lambda: answered(world, "llama-latency"))
            still_stuck = hanging.waiting
            hostile_statuses = [await answered(world, f"hostile-{i}") for i in range(8)]
            hanging.release.set()
    assert healthy["reason"] != "MetricsSourceError", healthy
    assert still_stuck >= 8  # the healthy target was served while all eight hung
    assert hostile_statuses == [None] * 8  # they were indeed still waiting


async def test_a_prometheus_that_trickles_for_ever_fails_only_its_own_target(
    tmp_path: Path,
) -> None:
    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"status": "success", "data": {"result": [')
        while not trickling.release.is_set():
            await response.write(b" ")
            await asyncio.sleep(0.2)
        return response

    async def answer(_: web.Request) -> web.Response:
        return empty_vector()

    async with (
        hostile_server(trickle) as trickling,
        hostile_server(answer) as own,
        cluster(tmp_path, queueing(by_seqs), ARGS) as world,
    ):
        await world.add_deployment(ARGS, "theirs")
        await world.api.create(tenant_target("theirs-latency", "theirs", trickling.url + "/"))
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path, **settings(own)):
            failed = await eventually(lambda: metrics_failed(world, "theirs-latency"))
            healthy = await eventually(lambda: answered(world, "llama-latency"))
    assert "too long" in failed["message"] or "timed out" in failed["message"], failed
    assert healthy["reason"] != "MetricsSourceError", healthy


async def test_a_prometheus_that_answers_200_with_a_huge_body_is_cut_off(tmp_path: Path) -> None:
    chunk = b'{"metric": {"__name__": "x"}, "value": [1, "1"]},' * 2000  # ~100 kB

    async def flood(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"status": "success", "data": {"resultType": "vector", "result": [')
        for _ in range(600):  # 60 MB, far beyond what an aggregate needs
            await response.write(chunk)
        await response.write(b"{}]}}")
        return response

    async def answer(_: web.Request) -> web.Response:
        return empty_vector()

    async with (
        hostile_server(flood) as flooding,
        hostile_server(answer) as own,
        cluster(tmp_path, queueing(by_seqs), ARGS) as world,
    ):
        await world.add_deployment(ARGS, "theirs")
        await world.api.create(tenant_target("theirs-latency", "theirs", flooding.url + "/"))
        async with operator_running(world, tmp_path, **settings(own)):
            failed = await eventually(lambda: metrics_failed(world, "theirs-latency"))
    assert "exceeded" in failed["message"], failed


async def test_a_tenants_matchers_never_widen_the_query_beyond_its_namespace(
    tmp_path: Path,
) -> None:
    async def answer(_: web.Request) -> web.Response:
        return empty_vector()

    escapes = [
        {"label": "namespace", "op": "=~", "value": ".*"},
        {"label": "namespace", "op": "!=", "value": "ml"},
        {"label": "namespace", "op": "!~", "value": "ml"},
        {"label": "namespace", "op": "=", "value": "kube-system"},
        {"label": "app", "op": "=~", "value": ".*"},
    ]
    async with (
        hostile_server(answer) as own,
        cluster(tmp_path, queueing(by_seqs), ARGS) as world,
    ):
        target = latency_target(knobs=SEQS_ONLY)
        target["spec"]["metrics"] = {"matchers": escapes}
        await world.api.create(target)
        async with operator_running(world, tmp_path, **settings(own)):
            await eventually(lambda: answered(world, "llama-latency"))
    queries = [s.query["query"] for s in own.seen if "query" in s.query]
    assert queries
    for query in queries:
        if "{" not in query:
            continue  # vector(1) and the like select nothing
        assert 'namespace="ml"' in query, query
        assert 'namespace=~".*"' not in query, query
        assert "namespace!" not in query, query
        assert "kube-system" not in query, query


async def test_rows_without_labels_and_absurd_numbers_give_a_reason_never_silence(
    tmp_path: Path,
) -> None:
    rows = [
        {"value": [1, "1e308"]},  # no "metric" at all
        {"metric": {}, "value": [1, "1e308"]},
        {"metric": {"__name__": "x"}, "value": [1, "+Inf"]},
        {"metric": {"__name__": "x"}, "value": [1, "NaN"]},
        {"metric": {"__name__": "x"}, "value": "not a pair"},
    ]

    async def absurd(_: web.Request) -> web.Response:
        return web.json_response(
            {"status": "success", "data": {"resultType": "vector", "result": rows}}
        )

    async with (
        hostile_server(absurd) as own,
        cluster(tmp_path, queueing(by_seqs), ARGS) as world,
    ):
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path, **settings(own)):
            metrics = await eventually(lambda: answered(world, "llama-latency"))
            await several_more_rounds()
            status = await world.status()
            patches = world.deployment_patches()
    ready = condition(status, "Ready")
    assert (metrics["status"], metrics["reason"]) == ("False", "MetricsSourceError")
    assert "not an instant vector" in metrics["message"]
    assert ready is not None
    assert ready["reason"] != "ReconcileError"
    assert status["phase"] == "Observing"
    assert patches == []


async def test_every_vllm_series_at_1e308_gives_a_reason_never_silence(tmp_path: Path) -> None:
    names = []
    for family in FAMILIES.values():
        for name in family.candidates:
            base = name.removesuffix("_total")
            names += [name, f"{base}_bucket", f"{base}_sum", f"{base}_count", f"{base}_total"]

    async def overflow(request: web.Request) -> web.Response:
        rows = [{"metric": {"__name__": n, "le": "+Inf"}, "value": [1, "1e308"]} for n in names]
        if "count by" not in request.query.get("query", ""):
            rows = [{"metric": {"le": "+Inf"}, "value": [1, "1e308"]}]
        return web.json_response(
            {"status": "success", "data": {"resultType": "vector", "result": rows}}
        )

    async with (
        hostile_server(overflow) as own,
        cluster(tmp_path, queueing(by_seqs), ARGS) as world,
    ):
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path, **settings(own)):
            metrics = await eventually(lambda: answered(world, "llama-latency"))
            await several_more_rounds()
            status = await world.status()
            patches = world.deployment_patches()
    ready = condition(status, "Ready")
    # No overflow escapes the reconcile: the target keeps a phase and conditions with reasons.
    assert metrics["reason"]
    assert metrics["message"]
    assert ready is not None
    assert ready["reason"] != "ReconcileError"
    assert status["phase"] == "Observing"
    assert patches == []


async def test_absurd_durations_and_numbers_are_refused_when_written(tmp_path: Path) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        refusals: list[str] = []
        absurd: list[tuple[str, dict[str, Any]]] = [
            ("evaluation", {"settle": "100000000h"}),
            ("evaluation", {"window": "876000h"}),
            ("evaluation", {"minRequests": 10**12}),
            ("evaluation", {"maxTrials": 10**9}),
        ]
        for field, value in absurd:
            target = latency_target(f"absurd-{len(refusals)}")
            target["spec"][field] = {**target["spec"][field], **value}
            try:
                await world.api.create(target)
            except Exception as exc:  # the emulator's 422, as the API server's
                refusals.append(str(exc))
            else:
                refusals.append("")
        stored = await world.api.list_objects(LT_API, "LatencyTarget", namespace="ml")
    keys = ["settle", "window", "minRequests", "maxTrials"]
    for refusal, key in zip(refusals, keys, strict=True):
        assert "422" in refusal, refusal
        assert f"spec.evaluation.{key}" in refusal, refusal
    assert stored == []
