"""A slow, huge, trickling or hostile metrics source fails alone, fast and with a clear reason.

The Prometheus a LatencyTarget reads, and the pods it scrapes, may be the tenant's. Each test
serves one misbehaving endpoint on 127.0.0.1 and checks that the source gives up with a
one-line reason, that it holds no more than its own threads, and that a healthy source keeps
answering meanwhile. Nothing here is timed: a hostile server is released only after the
assertion that must hold while it still blocks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from latency_tuner.adapters.metrics import QueryFailed, SourceUnreachable
from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.adapters.metrics.scrape import ScrapeSource, ScrapeTarget
from latency_tuner.core.observation import NoData
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.sandbox.prometheus import free_port

MATCHERS = [LabelMatcher("namespace", "=", "llm")]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(handler: Handler) -> tuple[str, web.AppRunner]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return f"http://127.0.0.1:{port}", runner


@pytest.fixture
async def servers() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        url, runner = await serve(handler)
        runners.append(runner)
        return url

    yield start
    for runner in runners:
        await runner.cleanup()


def empty_vector() -> web.Response:
    body = {"status": "success", "data": {"resultType": "vector", "result": []}}
    return web.json_response(body)


async def test_a_prometheus_that_never_answers_fails_the_observation_within_its_deadline(
    servers: Callable[[Handler], Awaitable[str]],
) -> None:
    release = asyncio.Event()

    async def hang(_: web.Request) -> web.Response:
        await release.wait()
        return empty_vector()

    url = await servers(hang)
    source = PrometheusSource(
        PrometheusSettings(url=url, timeout_seconds=0.5, deadline_seconds=1.0)
    )
    with pytest.raises(SourceUnreachable) as caught:
        await source.observe(matchers=MATCHERS, window_seconds=60)
    assert str(caught.value) == f"Prometheus at {url} is unreachable: timed out"
    release.set()
    source.close()


async def test_a_hung_prometheus_delays_no_other_source_and_takes_no_more_than_its_threads(
    servers: Callable[[Handler], Awaitable[str]],
) -> None:
    release = asyncio.Event()
    all_stuck = asyncio.Event()
    hung_requests = 0

    async def hang(_: web.Request) -> web.Response:
        nonlocal hung_requests
        hung_requests += 1
        if hung_requests == 8:
            all_stuck.set()
        await release.wait()
        return empty_vector()

    async def healthy(_: web.Request) -> web.Response:
        return empty_vector()

    hostile_url, healthy_url = await servers(hang), await servers(healthy)
    hostile = [
        PrometheusSource(
            PrometheusSettings(
                url=hostile_url, timeout_seconds=30.0, deadline_seconds=60.0, concurrency=1
            )
        )
        for _ in range(8)
    ]
    pending = [
        asyncio.create_task(s.observe(matchers=MATCHERS, window_seconds=60)) for s in hostile
    ]
    await all_stuck.wait()  # every hostile source has a query stuck in the server
    # The healthy source answers while all eight are stuck (a shared pool would hang here).
    fine = PrometheusSource(PrometheusSettings(url=healthy_url))
    # The bound only turns a regression into a failure instead of a hang; it is not a speed
    # check (the answer needs milliseconds).
    answer = await asyncio.wait_for(fine.observe(matchers=MATCHERS, window_seconds=60), 60)
    assert isinstance(answer, NoData)
    assert not any(task.done() for task in pending)
    release.set()
    await asyncio.gather(*pending, return_exceptions=True)
    for source in [*hostile, fine]:
        source.close()


async def test_a_huge_answer_is_refused_before_it_is_held(
    servers: Callable[[Handler], Awaitable[str]],
) -> None:
    async def huge(_: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(_)
        await response.write(b'{"status": "success", "data": {"result": [')
        for _i in range(1000):
            await response.write(b'{"metric": {}, "value": [1, "1"]},' * 200)
        return response

    url = await servers(huge)
    source = PrometheusSource(PrometheusSettings(url=url, max_response_bytes=1 << 20))
    with pytest.raises(SourceUnreachable, match=r"answer exceeded 1048576 bytes"):
        await source.observe(matchers=MATCHERS, window_seconds=60)
    source.close()


async def test_a_trickling_answer_is_given_up_on(
    servers: Callable[[Handler], Awaitable[str]],
) -> None:
    release = asyncio.Event()

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        while not release.is_set():  # a byte every 0.2 s: each read is quick, the body never ends
            await response.write(b" ")
            await asyncio.sleep(0.2)
        return response

    url = await servers(trickle)
    source = PrometheusSource(
        PrometheusSettings(url=url, timeout_seconds=1.0, deadline_seconds=30.0)
    )
    with pytest.raises(SourceUnreachable, match="timed out"):
        await source.observe(matchers=MATCHERS, window_seconds=60)
    assert not release.is_set()
    release.set()
    source.close()


async def test_a_redirect_is_not_followed_so_the_token_stays_home(
    servers: Callable[[Handler], Awaitable[str]],
) -> None:
    seen: list[str | None] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return empty_vector()

    target = await servers(elsewhere)

    async def redirect(_: web.Request) -> web.Response:
        raise web.HTTPFound(f"{target}/api/v1/query")

    url = await servers(redirect)
    source = PrometheusSource(PrometheusSettings(url=url, bearer_token="operator-secret"))
    with pytest.raises(SourceUnreachable, match=r"redirects are not followed"):
        await source.observe(matchers=MATCHERS, window_seconds=60)
    assert seen == []
    source.close()


@pytest.mark.parametrize(
    "body",
    [
        {"status": "success", "data": {"result": [{"value": [1, "1"]}]}},  # no "metric"
        {"status": "success", "data": {"result": "all of it"}},
        {"status": "success"},
        [1, 2, 3],
    ],
    ids=["row-without-metric", "result-not-a-list", "no-data", "not-an-object"],
)
async def test_an_answer_that_is_not_prometheus_json_is_a_query_failure_not_a_crash(
    servers: Callable[[Handler], Awaitable[str]], body: object
) -> None:
    async def odd(_: web.Request) -> web.Response:
        return web.Response(text=json.dumps(body), content_type="application/json")

    url = await servers(odd)
    source = PrometheusSource(PrometheusSettings(url=url))
    with pytest.raises(QueryFailed, match=f"Prometheus at {url}"):
        await source.observe(matchers=MATCHERS, window_seconds=60)
    source.close()


async def test_a_refused_connection_reads_as_one_line_without_urllib3_internals() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    source = PrometheusSource(PrometheusSettings(url=url))
    with pytest.raises(SourceUnreachable) as caught:
        await source.observe(matchers=MATCHERS, window_seconds=60)
    assert str(caught.value) == f"Prometheus at {url} is unreachable: connection refused"
    source.close()


async def test_a_scrape_larger_than_the_byte_cap_is_refused_and_stores_nothing(
    servers: Callable[[Handler], Awaitable[str]],
) -> None:
    line = b'vllm:num_requests_running{pad="' + b"x" * 100 + b'"} 1\n'

    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for i in range(20_000):
            await response.write(line.replace(b"pad=", b'i="%d",pad=' % i))
        return response

    url = await servers(huge)
    source = ScrapeSource(
        lambda: [ScrapeTarget(f"{url}/metrics", {"namespace": "llm"})], max_bytes=256 * 1024
    )
    assert await source.scrape_once() == 0
    assert source.last_errors == {f"{url}/metrics": "more than 262144 bytes"}
    with pytest.raises(SourceUnreachable, match="more than 262144 bytes"):
        await source.observe(matchers=MATCHERS, window_seconds=60)
    await source.aclose()


async def test_a_scrape_with_too_many_series_is_refused(
    servers: Callable[[Handler], Awaitable[str]],
) -> None:
    body = "".join(f'vllm:num_requests_running{{i="{i}"}} 1\n' for i in range(600))

    async def many(_: web.Request) -> web.Response:
        return web.Response(text=body)

    url = await servers(many)
    source = ScrapeSource(
        lambda: [ScrapeTarget(f"{url}/metrics", {"namespace": "llm"})], max_series_per_target=500
    )
    assert await source.scrape_once() == 0
    assert source.last_errors == {f"{url}/metrics": "more than 500 series"}
    await source.aclose()


async def test_a_scrape_that_never_ends_is_given_up_at_the_timeout(
    servers: Callable[[Handler], Awaitable[str]],
) -> None:
    release = asyncio.Event()

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        while not release.is_set():
            await response.write(b"# a comment\n")
            await asyncio.sleep(0.1)
        return response

    url = await servers(trickle)
    source = ScrapeSource(
        lambda: [ScrapeTarget(f"{url}/metrics", {"namespace": "llm"})], timeout_seconds=1.0
    )
    assert await source.scrape_once() == 0
    assert not release.is_set()
    release.set()
    await source.aclose()


async def test_more_observations_than_slots_wait_their_turn_on_a_healthy_source(
    servers: Callable[[Handler], Awaitable[str]],
) -> None:
    async def healthy(_: web.Request) -> web.Response:
        await asyncio.sleep(0.05)
        return empty_vector()

    url = await servers(healthy)
    source = PrometheusSource(PrometheusSettings(url=url, concurrency=2))
    answers = await asyncio.gather(
        *(source.observe(matchers=MATCHERS, window_seconds=60) for _ in range(12))
    )
    assert all(isinstance(a, NoData) for a in answers)
    source.close()


async def test_a_backtracking_regex_over_a_tenants_long_label_is_matched_in_linear_time() -> None:
    """`(a+)+b` against 40 `a`s takes Python's `re` about 2^40 steps; RE2 a few dozen."""
    source = ScrapeSource(list)
    long_label = "a" * 40
    source.ingest(f'vllm:num_requests_running{{pod="{long_label}"}} 1\n', {"namespace": "llm"}, 1.0)
    evil = [LabelMatcher("namespace", "=", "llm"), LabelMatcher("pod", "=~", "(a+)+b")]
    # The bound turns a regression (a hang) into a failure; it is not a speed check.
    got = await asyncio.wait_for(source.observe(matchers=evil, window_seconds=60, end=2.0), 60)
    assert isinstance(got, NoData)
    bad = [LabelMatcher("pod", "=~", "(?=a)")]
    with pytest.raises(QueryFailed, match="not an RE2 regular expression"):
        await source.observe(matchers=bad, window_seconds=60, end=2.0)
    await source.aclose()
