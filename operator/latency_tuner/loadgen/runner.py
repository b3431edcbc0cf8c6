"""Drive the load: httpx streaming clients, closed- or open-loop dispatch, chunk timing.

Connections: every in-flight request owns a *slot* (0..concurrency-1) and slot s always uses
client ``s // pool_shard_size``, whose pool holds exactly that many connections - so a request
never queues inside httpx for a connection (that wait would be counted as TTFT) and each
connection is reused by one slot. Several clients rather than one because httpcore 1.0's pool
does O(connections^2) bookkeeping on every request start and end (encode/httpcore#1035): with
one client and 256 streams, that bookkeeping alone saturated the client's core and inflated
measured TTFT by seconds (see benchmarks/bench_client).

Latency is measured from the moment a request is sent, not from its scheduled arrival: when
the open loop is capped by ``concurrency`` the wait for a slot happens before the clock starts
(as in vLLM's ``--max-concurrency``), and ``max_dispatch_lag_s`` reports how far behind
schedule sends fell.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from time import perf_counter_ns, process_time
from typing import Any

import httpx

from latency_tuner.loadgen.config import BenchConfig
from latency_tuner.loadgen.openai import (
    DONE,
    endpoint_path,
    first_model_id,
    parse_chunk,
    request_body,
)
from latency_tuner.loadgen.prompts import PromptFactory
from latency_tuner.loadgen.results import NS, Aggregate, BenchResult, Progress, RequestRecord
from latency_tuner.loadgen.sse import SseDecoder, SseEvent

ProgressCallback = Callable[[Progress], None]
ERROR_BODY_CHARS = 300


class BenchError(Exception):
    """The benchmark could not start (e.g. no model could be discovered)."""


async def run_benchmark(
    config: BenchConfig,
    *,
    on_progress: ProgressCallback | None = None,
    stop: asyncio.Event | None = None,
) -> BenchResult:
    """Run the benchmark described by ``config`` and summarize it.

    ``on_progress`` is called every ``config.progress_interval`` seconds and once at the end.
    Setting ``stop`` ends the run early (in-flight requests are cancelled and counted as
    such); with neither ``requests`` nor ``duration`` it is the only way to end it.
    """
    # identity: SSE is never worth compressing, and raw bytes skip a decoding layer per chunk.
    headers = {"Accept-Encoding": "identity"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    shard = config.pool_shard_size or config.concurrency
    # One TLS context for all clients (each costs ~20 ms of CPU to build), none for plain http.
    tls = httpx.create_ssl_context() if config.base_url.startswith("https://") else False
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=config.base_url,
                    headers=headers,
                    timeout=httpx.Timeout(config.timeout),
                    limits=httpx.Limits(
                        max_connections=min(shard, config.concurrency - first),
                        max_keepalive_connections=min(shard, config.concurrency - first),
                    ),
                    http1=True,
                    http2=False,
                    verify=tls,
                )
            )
            for first in range(0, config.concurrency, shard)
        ]
        model = config.model or await discover_model(clients[0])
        run = _Run(config, clients, shard, model, stop or asyncio.Event(), on_progress)
        return await run.execute()


async def discover_model(client: httpx.AsyncClient) -> str:
    """The first model id that ``GET /v1/models`` lists."""
    try:
        response = await client.get("/v1/models")
        response.raise_for_status()
        model = first_model_id(response.json())
    except (httpx.HTTPError, ValueError) as exc:
        raise BenchError(f"cannot list models at {client.base_url}/v1/models: {exc}") from exc
    if model is None:
        raise BenchError(f"{client.base_url}/v1/models lists no model; pass --model")
    return model


class _Run:
    def __init__(
        self,
        config: BenchConfig,
        clients: Sequence[httpx.AsyncClient],
        shard: int,
        model: str,
        stop: asyncio.Event,
        on_progress: ProgressCallback | None,
    ) -> None:
        self.config = config
        self.clients = clients
        self.shard = shard
        self.model = model
        self.stop = stop
        self.on_progress = on_progress
        self.prompts = PromptFactory(
            prompt_tokens=config.prompt_tokens,
            shared_prefix_tokens=config.shared_prefix_tokens,
            seed=config.seed,
        )
        self.path = endpoint_path(config.chat)
        self.aggregate = Aggregate(output_tokens_wanted=config.output_tokens)
        self.in_flight: set[asyncio.Task[RequestRecord]] = set()
        self.slots = asyncio.Semaphore(config.concurrency)
        self.free_slots = list(range(config.concurrency - 1, -1, -1))  # pop() gives 0 first
        self.slot_of: dict[asyncio.Task[RequestRecord], int] = {}
        self.started_ns = 0
        self.max_lag_ns = 0

    async def execute(self) -> BenchResult:
        stopper = asyncio.create_task(self.stop.wait())
        ticker = asyncio.create_task(self._tick()) if self.on_progress else None
        self.started_ns = perf_counter_ns()
        cpu_started = process_time()
        try:
            await self._dispatch(stopper)
            if self.in_flight and not self.stop.is_set():
                drained = asyncio.gather(*self.in_flight, return_exceptions=True)
                await self._unless_stopped(drained, stopper)
            for task in list(self.in_flight):
                task.cancel()
            await asyncio.gather(*self.in_flight, return_exceptions=True)
        finally:
            ended_ns = perf_counter_ns()
            cpu_s = process_time() - cpu_started
            stopper.cancel()
            if ticker:
                ticker.cancel()
            for task in list(self.in_flight):  # only when we are cancelled ourselves
                task.cancel()
        if self.on_progress:
            self.on_progress(self._progress(ended_ns))
        return self.aggregate.result(
            config=self.config,
            model=self.model,
            duration_s=(ended_ns - self.started_ns) / NS,
            max_dispatch_lag_s=self.max_lag_ns / NS,
            process_cpu_s=cpu_s,
        )

    async def _dispatch(self, stopper: asyncio.Task[Any]) -> None:
        config = self.config
        deadline = self.started_ns + int(config.duration * NS) if config.duration else None
        arrivals = random.Random(config.seed)
        arrival_ns = self.started_ns
        index = 0
        while not self.stop.is_set():
            if config.requests is not None and index >= config.requests:
                return
            if config.rate is not None:
                if index:
                    arrival_ns += int(arrivals.expovariate(config.rate) * NS)
                if deadline is not None and arrival_ns >= deadline:
                    return
                delay = (arrival_ns - perf_counter_ns()) / NS
                if delay > 0 and not await self._unless_stopped(asyncio.sleep(delay), stopper):
                    return
            if not self.slots.locked():
                await self.slots.acquire()  # a free slot: returns at once, no extra task
            elif not await self._unless_stopped(self.slots.acquire(), stopper):
                return
            now = perf_counter_ns()
            if self.stop.is_set() or (deadline is not None and now >= deadline):
                self.slots.release()
                return
            if config.rate is not None:
                self.max_lag_ns = max(self.max_lag_ns, now - arrival_ns)
            slot = self.free_slots.pop()
            task = asyncio.create_task(self._request(index, slot))
            self.slot_of[task] = slot
            self.in_flight.add(task)
            task.add_done_callback(self._finished)
            index += 1

    async def _unless_stopped(self, awaitable: Awaitable[Any], stopper: asyncio.Task[Any]) -> bool:
        """Await ``awaitable`` unless ``stop`` is set first; True when it completed."""
        task = asyncio.ensure_future(awaitable)
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return True
        task.cancel()
        return False

    def _finished(self, task: asyncio.Task[RequestRecord]) -> None:
        self.in_flight.discard(task)
        self.free_slots.append(self.slot_of.pop(task))
        self.slots.release()
        if task.cancelled():
            self.aggregate.cancelled += 1
        elif (exc := task.exception()) is not None:
            # A bug of ours or of httpx must not kill minutes of background load: count it.
            self.aggregate.add_failure(None, f"{type(exc).__name__}: {exc}")
        else:
            self.aggregate.add(task.result())

    async def _request(self, index: int, slot: int) -> RequestRecord:
        prompt = self.prompts.prompt(index)
        body = json.dumps(
            request_body(
                model=self.model,
                prefix=prompt.prefix,
                suffix=prompt.suffix,
                max_tokens=self.config.output_tokens,
                chat=self.config.chat,
            )
        ).encode()
        client = self.clients[slot // self.shard]
        return await stream_request(client, self.path, body, index)

    async def _tick(self) -> None:
        assert self.on_progress is not None
        while True:
            await asyncio.sleep(self.config.progress_interval)
            self.on_progress(self._progress(perf_counter_ns()))

    def _progress(self, now_ns: int) -> Progress:
        aggregate = self.aggregate
        return Progress(
            elapsed_s=(now_ns - self.started_ns) / NS,
            completed=aggregate.completed,
            failed=aggregate.failed,
            in_flight=len(self.in_flight),
            output_tokens=aggregate.output_tokens,
            mean_ttft_s=aggregate.mean_ttft(),
            mean_itl_s=aggregate.mean_itl(),
        )


async def stream_request(
    client: httpx.AsyncClient, path: str, body: bytes, index: int = 0
) -> RequestRecord:
    """Send one streaming request and time every content chunk of its answer."""
    decoder = SseDecoder()
    chunk_ns: list[int] = []
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: int | None = None
    error: str | None = None
    done_ns: int | None = None

    def consume(events: list[SseEvent], now: int) -> None:
        nonlocal prompt_tokens, completion_tokens, error, done_ns
        for event in events:
            if done_ns is not None or error is not None:
                return  # anything after [DONE] or an error is not part of this answer
            if event.data == DONE:
                done_ns = now
                return
            chunk = parse_chunk(event.data)
            if chunk.error is not None:
                error = chunk.error
            elif chunk.text:
                chunk_ns.append(now)
            if chunk.usage is not None:
                prompt_tokens = chunk.usage.prompt_tokens
                completion_tokens = chunk.usage.completion_tokens

    start_ns = perf_counter_ns()
    try:
        async with client.stream(
            "POST", path, content=body, headers={"Content-Type": "application/json"}
        ) as response:
            status = response.status_code
            if status != 200:
                text = (await response.aread()).decode("utf-8", errors="replace")
                error = f"HTTP {status}: {text[:ERROR_BODY_CHARS]}"
            else:
                # Read to the end even after [DONE] so the connection goes back to the pool.
                encoded = response.headers.get("content-encoding", "identity") != "identity"
                reads = response.aiter_bytes() if encoded else response.aiter_raw()
                async for data in reads:
                    arrived_ns = perf_counter_ns()  # before parsing: parsing is not latency
                    consume(decoder.feed(data), arrived_ns)
                consume(decoder.close(), perf_counter_ns())
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    end_ns = done_ns if done_ns is not None else perf_counter_ns()
    if error is None and done_ns is None:
        error = "stream ended without data: [DONE]"
    if error is None and not chunk_ns:
        error = "no tokens generated"
    return RequestRecord(
        index=index,
        start_ns=start_ns,
        end_ns=end_ns,
        chunk_ns=tuple(chunk_ns),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        status=status,
        error=error,
    )
