"""Background load for a sandbox scenario: the bench client behind a tiny round-robin "Service".

``BackgroundLoad`` runs ``latency_tuner.loadgen.run_benchmark`` with no end (until stopped)
against ``ServiceProxy``, an HTTP proxy on 127.0.0.1 that sends each request to the next ready
pod of the Deployment, as a ClusterIP Service would. Pods come and go in rollouts; the proxy
asks for the current endpoints on every request, so the load follows them without restarts
(requests in flight on a pod that is stopped fail, as they would in a cluster without a
preStop drain; the pod runner drains for ``drain_seconds`` to keep that rare).

It never measures anything for the operator: the operator reads the pods' own metrics.
``progress`` (the bench client's running totals) is there for the demo's display.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Self

import aiohttp
from aiohttp import web

from latency_tuner.loadgen import BenchConfig, BenchResult, Progress, run_benchmark
from latency_tuner.sandbox.prometheus import free_port
from latency_tuner.sandbox.scenario import Load

__all__ = ["BackgroundLoad", "ServiceProxy", "bench_config"]

logger = logging.getLogger(__name__)

Endpoints = Callable[[], Sequence[str]]
# Hop-by-hop headers (RFC 9110) and those aiohttp recomputes.
_DROPPED = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te",
            "trailer", "upgrade", "proxy-connection", "content-encoding"}  # fmt: skip


class ServiceProxy:
    """Round-robin over ``endpoints()`` (base URLs); waits up to ``wait_seconds`` for one."""

    def __init__(self, endpoints: Endpoints, *, wait_seconds: float = 30.0) -> None:
        self._endpoints = endpoints
        self._wait = wait_seconds
        self._turn = itertools.count()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0
        self.requests = 0
        self.failures = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> Self:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=120),
            auto_decompress=False,
        )
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        self.port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _backend(self) -> str | None:
        deadline = time.monotonic() + self._wait
        while True:
            endpoints = list(self._endpoints())
            if endpoints:
                return endpoints[next(self._turn) % len(endpoints)]
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.1)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        self.requests += 1
        backend = await self._backend()
        if backend is None:
            self.failures += 1
            return web.json_response({"error": "no ready pod behind the service"}, status=503)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        body = await request.read()
        try:
            async with self._session.request(
                request.method, backend + request.path_qs, headers=headers, data=body
            ) as upstream:
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for key, value in upstream.headers.items():
                    if key.lower() not in _DROPPED:
                        response.headers[key] = value
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except (aiohttp.ClientError, ConnectionResetError, TimeoutError) as exc:
            self.failures += 1
            if request.transport is None or request.transport.is_closing():
                raise web.HTTPServiceUnavailable() from exc  # the client is gone anyway
            return web.json_response({"error": f"upstream {backend}: {exc}"}, status=502)


def bench_config(load: Load, *, url: str, model: str | None) -> BenchConfig:
    """The bench client's configuration for a scenario's load (no end: stopped by event)."""
    return BenchConfig(
        url=url,
        model=model,
        concurrency=load.concurrency,
        prompt_tokens=load.prompt_tokens,
        output_tokens=load.output_tokens,
        shared_prefix_tokens=load.shared_prefix_tokens,
        rate=load.rate,
        seed=load.seed,
        timeout=120.0,
        progress_interval=1.0,
    )


class BackgroundLoad:
    """The scenario's load against the Deployment's ready pods, until the context ends.

    ::

        load = Load.of(scenario.workload)
        async with BackgroundLoad(load, runner.endpoints, model=scenario.served_model) as running:
            ...  # running.progress, running.proxy.url
        running.result  # the bench summary of the whole run
    """

    def __init__(self, load: Load, endpoints: Endpoints, *, model: str | None = None) -> None:
        self.load = load
        self.model = model
        self.proxy = ServiceProxy(endpoints)
        self.progress: Progress | None = None
        self.result: BenchResult | None = None
        self.error: BaseException | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[BenchResult] | None = None

    async def __aenter__(self) -> Self:
        await self.proxy.start()
        config = bench_config(self.load, url=self.proxy.url, model=self.model)
        self._task = asyncio.create_task(
            run_benchmark(config, stop=self._stop, on_progress=self._on_progress),
            name="background-load",
        )
        return self

    def _on_progress(self, progress: Progress) -> None:
        self.progress = progress

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def stop(self) -> None:
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            done, _ = await asyncio.wait({task}, timeout=10)
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                self.error = TimeoutError("the load did not stop within 10 s")
            elif not task.cancelled() and task.exception() is not None:
                self.error = task.exception()  # a bench failure: reported, not raised
            elif not task.cancelled():
                self.result = task.result()
        await self.proxy.stop()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()
