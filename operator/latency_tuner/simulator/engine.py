"""The simulated engine: scheduler + cost model + an injected clock.

(Past 500 lines on purpose: the step loop, request lifecycle and metric recording share the
engine's state; the scheduler, cost model, KV cache and metrics families are modules apart.)

``EngineCore`` is synchronous and clock-free: ``begin_step(now)`` schedules and prices a step
with ``CostModel.step_time``; ``finish_step(step, end)`` applies it at ``end`` (tokens out,
requests finished, stats recorded). Two drivers move time:
- ``AsyncEngine`` (HTTP serving): sleeps until each step's modeled end with a ``Clock``
  (``RealClock``), so tokens leave at the modeled times; consecutive steps are chained on the
  modeled end times, so wake-up jitter never accumulates into the measured ITL;
- ``VirtualEngine`` (benchmarks): no asyncio; ``run_until`` / ``run_requests`` /
  ``run_closed_loop`` jump from step to step in virtual time.

Timing follows vLLM V1's metrics: arrival -> first scheduled (queue) -> first token (prefill) ->
last token (decode); TTFT = first token - arrival; e2e = last token - arrival. A step that emits
several tokens of one request (speculative decoding) records ONE inter-token latency sample (the
gap since the previous emission), as vLLM's ``IterationStats`` does; ``RequestRecord.token_gaps``
gives the per-token view (zeros inside a multi-token step).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from latency_tuner.perf.config import SPEC_TYPICAL_ACCEPTANCE as _SPEC_TYPICAL
from latency_tuner.perf.config import EngineConfig, SpecDecode
from latency_tuner.perf.cost import CostModel
from latency_tuner.simulator.acceptance import acceptance_rate, prompt_repetitiveness
from latency_tuner.simulator.clock import Clock, RealClock, VirtualClock
from latency_tuner.simulator.scheduler import (
    Request,
    Scheduler,
    SchedulerOutput,
    StepEvents,
)

__all__ = [
    "AsyncEngine",
    "EngineCore",
    "PlannedStep",
    "RequestOutput",
    "RequestRecord",
    "SimRequest",
    "StatsSink",
    "StepStats",
    "VirtualEngine",
]


@dataclass(frozen=True)
class RequestOutput:
    """New tokens of one request from one step (what a streaming response sends as a chunk)."""

    request_id: str
    start: int  # index of the first new output token
    count: int
    finished: bool
    time: float
    finish_reason: str | None = None  # "length" when finished
    num_prompt_tokens: int = 0
    num_cached_tokens: int = 0


@dataclass(frozen=True)
class RequestRecord:
    """A finished request's timestamps and the latencies vLLM derives from them."""

    request_id: str
    arrival: float
    scheduled: float
    first_token: float
    finish: float
    token_times: tuple[float, ...]
    num_prompt_tokens: int
    num_output_tokens: int
    num_cached_tokens: int
    num_preemptions: int
    queued: float = -1.0  # reached the engine core (after the API server's work)

    @classmethod
    def of(cls, req: Request) -> RequestRecord:
        assert req.first_token_time is not None
        assert req.scheduled_time is not None
        return cls(
            request_id=req.request_id,
            arrival=req.arrival_time,
            scheduled=req.scheduled_time,
            first_token=req.first_token_time,
            finish=req.finish_time if req.finish_time is not None else req.first_token_time,
            token_times=tuple(req.token_times),
            num_prompt_tokens=req.num_prompt_tokens,
            num_output_tokens=req.num_output_tokens,
            num_cached_tokens=max(0, req.num_cached_tokens),
            num_preemptions=req.num_preemptions,
            queued=req.queued_time,
        )

    @property
    def ttft(self) -> float:
        return self.first_token - self.arrival

    @property
    def e2e(self) -> float:
        return self.finish - self.arrival

    @property
    def queue_time(self) -> float:
        return max(0.0, self.scheduled - max(self.arrival, self.queued))

    @property
    def prefill_time(self) -> float:
        return self.first_token - self.scheduled

    @property
    def decode_time(self) -> float:
        return self.finish - self.first_token

    @property
    def inference_time(self) -> float:
        return self.finish - self.scheduled

    @property
    def itls(self) -> list[float]:
        """vLLM's ITL samples: one per step that emitted tokens, after the first."""
        times = sorted(set(self.token_times))
        return [b - a for a, b in itertools.pairwise(times)]

    @property
    def token_gaps(self) -> list[float]:
        """Per output token gap (0 for the 2nd+ token of a multi-token step)."""
        return [b - a for a, b in itertools.pairwise(self.token_times)]

    @property
    def tpot(self) -> float:
        """Mean time per output token after the first: (e2e - ttft) / (n - 1)."""
        n = self.num_output_tokens
        return self.decode_time / (n - 1) if n > 1 else 0.0


@dataclass
class StepStats:
    """One step, as vLLM's SchedulerStats + IterationStats report it."""

    start: float
    end: float
    events: StepEvents
    num_preempted: int
    num_running: int
    num_waiting: int
    kv_cache_usage: float
    prefix_cache_queries: int  # this step's increments, in tokens
    prefix_cache_hits: int
    scheduled_tokens: int


class StatsSink(Protocol):
    def record(self, stats: StepStats) -> None: ...


@dataclass
class PlannedStep:
    output: SchedulerOutput
    duration: float


Listener = Callable[[RequestOutput], None]


def _acceptance_by_prompt(spec: SpecDecode) -> Callable[[Sequence[int]], float] | None:
    if not spec.workload_dependent:
        return None
    typical = _SPEC_TYPICAL.get(spec.method, spec.acceptance_rate)
    return lambda prompt: acceptance_rate(spec.method, typical, prompt_repetitiveness(prompt))


class EngineCore:
    """Scheduler + cost model, stepped by a driver that owns time."""

    def __init__(
        self,
        config: EngineConfig,
        *,
        cost: CostModel | None = None,
        seed: int | None = None,
        sink: StatsSink | None = None,
    ) -> None:
        spec = config.spec
        self.config = config
        self.cost = cost or CostModel(config)
        self.scheduler = Scheduler(
            num_gpu_blocks=config.num_gpu_blocks,
            max_num_seqs=config.max_num_seqs,
            max_num_batched_tokens=config.max_num_batched_tokens,
            max_model_len=config.max_model_len,
            chunked_prefill=config.chunked_prefill,
            prefix_caching=config.prefix_caching,
            block_size=config.block_size,
            num_spec_tokens=spec.num_speculative_tokens if spec else 0,
            acceptance_rate=spec.acceptance_rate if spec else 0.0,
            acceptance_by_prompt=_acceptance_by_prompt(spec) if spec else None,
            seed=config.seed if seed is None else seed,
            altered_share=config.altered_share,
        )
        self.sink = sink
        self._listeners: dict[str, Listener] = {}
        self._last_queries = 0
        self._last_hits = 0
        self.num_steps = 0

    def add_request(
        self,
        request_id: str,
        prompt_token_ids: Sequence[int],
        max_tokens: int,
        arrival: float,
        listener: Listener | None = None,
        *,
        queued: float | None = None,
    ) -> Request:
        """Add a request that arrived at the server at ``arrival`` and reached the engine core
        at ``queued`` (default: ``arrival``)."""
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if not prompt_token_ids:
            raise ValueError("the prompt must have at least one token")
        req = Request(
            request_id,
            list(prompt_token_ids),
            max_tokens,
            arrival,
            queued_time=arrival if queued is None else queued,
        )
        self.scheduler.add_request(req)
        if listener is not None:
            self._listeners[request_id] = listener
        return req

    def abort(self, request_id: str) -> None:
        self._listeners.pop(request_id, None)
        self.scheduler.abort(request_id)

    @property
    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished

    def begin_step(self, now: float) -> PlannedStep | None:
        """Schedule one step at ``now`` and price it; None when nothing can run."""
        output = self.scheduler.schedule(now)
        if not output.scheduled:
            return None
        decodes, prefills, spec = output.cost_inputs()
        duration = self.cost.step_time(
            decode_contexts=decodes, prefill_chunks=prefills, spec_tokens=spec
        )
        return PlannedStep(output, max(duration, 1e-6))

    def finish_step(self, step: PlannedStep, end: float) -> StepEvents:
        """Apply a step at ``end``: deliver tokens to listeners and record stats."""
        sched = self.scheduler
        events = sched.update_from_output(step.output, end)
        self.num_steps += 1
        listeners = self._listeners
        if listeners:
            for req, start, count, done in events.emitted:
                listener = listeners.get(req.request_id)
                if listener is None:
                    continue
                if done:
                    del listeners[req.request_id]
                listener(
                    RequestOutput(
                        req.request_id,
                        start,
                        count,
                        done,
                        end,
                        "length" if done else None,
                        req.num_prompt_tokens,
                        max(0, req.num_cached_tokens),
                    )
                )
        if self.sink is not None:
            stats = sched.kv.stats
            self.sink.record(
                StepStats(
                    start=step.output.start,
                    end=end,
                    events=events,
                    num_preempted=len(step.output.preempted),
                    num_running=sched.num_running,
                    num_waiting=sched.num_waiting,
                    kv_cache_usage=sched.kv.usage,
                    prefix_cache_queries=stats.queries - self._last_queries,
                    prefix_cache_hits=stats.hits - self._last_hits,
                    scheduled_tokens=step.output.total_tokens,
                )
            )
            self._last_queries, self._last_hits = stats.queries, stats.hits
        return events

    def idle_stats(self, now: float) -> StepStats:
        """Gauges with no step (e.g. after an abort), for a sink to refresh."""
        sched = self.scheduler
        return StepStats(
            now, now, StepEvents(), 0, sched.num_running, sched.num_waiting, sched.kv.usage, 0, 0, 0
        )


class AsyncEngine:
    """Runs an ``EngineCore`` in (real) time on asyncio; one queue of outputs per request."""

    def __init__(self, core: EngineCore, clock: Clock | None = None, *, max_lag: float = 0.05):
        self.core = core
        self.clock: Clock = clock or RealClock()
        self.max_lag = max_lag  # behind the modeled time by more than this: restart from now
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._pending: set[str] = set()  # submitted, not yet in the engine core

    def add_request(
        self,
        request_id: str,
        prompt_token_ids: Sequence[int],
        max_tokens: int,
        *,
        arrival: float | None = None,
    ) -> asyncio.Queue[RequestOutput]:
        """Hand a request to the engine core now (it arrived at the server at ``arrival``)."""
        queue: asyncio.Queue[RequestOutput] = asyncio.Queue()
        now = self.clock.now()
        self.core.add_request(
            request_id,
            prompt_token_ids,
            max_tokens,
            now if arrival is None else arrival,
            queue.put_nowait,
            queued=now,
        )
        self._wake.set()
        return queue

    async def submit(
        self, request_id: str, prompt_token_ids: Sequence[int], max_tokens: int
    ) -> asyncio.Queue[RequestOutput]:
        """A request arriving at the server now: it reaches the engine core after the server's
        per-request work (``CostModel.request_overhead``)."""
        arrival = self.clock.now()
        self._pending.add(request_id)
        try:
            await self.clock.sleep_until(
                arrival + self.core.cost.request_overhead(len(prompt_token_ids))
            )
        finally:
            self._pending.discard(request_id)
        return self.add_request(request_id, prompt_token_ids, max_tokens, arrival=arrival)

    def in_use(self, request_id: str) -> bool:
        """A request with this id is in the engine or on its way there."""
        return request_id in self._pending or request_id in self.core.scheduler.requests

    def abort(self, request_id: str) -> None:
        self.core.abort(request_id)
        if self.core.sink is not None:
            self.core.sink.record(self.core.idle_stats(self.clock.now()))
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name="engine")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run(self) -> None:
        core, clock = self.core, self.clock
        last_end = -math.inf
        while True:
            if not core.has_unfinished:
                self._wake.clear()
                await self._wake.wait()
                last_end = -math.inf  # idle in between: the next step starts when it is woken
                continue
            now = clock.now()
            # Chain steps on modeled times while we keep up (no drift from late wake-ups).
            start = last_end if now - last_end <= self.max_lag else now
            step = core.begin_step(start)
            if step is None:
                self._wake.clear()
                await self._wake.wait()
                last_end = -math.inf
                continue
            end = start + step.duration
            await clock.sleep_until(end)
            core.finish_step(step, end)
            last_end = end


@dataclass(frozen=True)
class SimRequest:
    """A request for a virtual-time run."""

    prompt_token_ids: Sequence[int]
    max_tokens: int
    arrival: float = 0.0
    request_id: str | None = None


@dataclass(order=True)
class _Arrival:
    time: float
    seq: int
    request: SimRequest = field(compare=False)


class VirtualEngine:
    """An engine in virtual time: synchronous, no asyncio, as fast as the CPU allows."""

    def __init__(
        self,
        config: EngineConfig,
        *,
        seed: int | None = None,
        cost: CostModel | None = None,
        sink: StatsSink | None = None,
        clock: VirtualClock | None = None,
    ) -> None:
        self.clock = clock or VirtualClock()
        self.core = EngineCore(config, cost=cost, seed=seed, sink=sink)
        self.records: list[RequestRecord] = []
        self.on_finish: Callable[[RequestRecord], None] | None = None
        self._arrivals: list[_Arrival] = []
        self._seq = itertools.count()
        self._ids = itertools.count()

    def submit(
        self,
        prompt_token_ids: Sequence[int],
        max_tokens: int,
        *,
        at: float | None = None,
        request_id: str | None = None,
    ) -> str:
        """Queue a request arriving at ``at`` (default: now)."""
        rid = request_id or f"sim-{next(self._ids)}"
        when = self.clock.now() if at is None else at
        sim = SimRequest(prompt_token_ids, max_tokens, when, rid)
        # It reaches the engine core after the server's per-request work.
        ready = when + self.core.cost.request_overhead(len(prompt_token_ids))
        heapq.heappush(self._arrivals, _Arrival(ready, next(self._seq), sim))
        return rid

    def _admit(self, now: float) -> None:
        arrivals = self._arrivals
        while arrivals and arrivals[0].time <= now:
            entry = heapq.heappop(arrivals)
            sim = entry.request
            assert sim.request_id is not None
            self.core.add_request(
                sim.request_id, sim.prompt_token_ids, sim.max_tokens, sim.arrival, queued=entry.time
            )

    def _collect(self, events: StepEvents) -> None:
        for req in events.finished:
            record = RequestRecord.of(req)
            self.records.append(record)
            if self.on_finish is not None:
                self.on_finish(record)

    def run_until(self, t: float) -> None:
        """Simulate until virtual time ``t`` (a step under way at ``t`` completes)."""
        clock, core = self.clock, self.core
        while True:
            now = clock.now()
            self._admit(now)
            if core.has_unfinished:
                if now >= t:
                    return
                step = core.begin_step(now)
                if step is None:
                    sched = core.scheduler
                    stuck = (sched.waiting or sched.running)[0].request_id
                    raise RuntimeError(f"request {stuck} can never be scheduled (KV too small)")
                end = now + step.duration
                clock.advance_to(end)
                self._collect(core.finish_step(step, end))
            elif self._arrivals and self._arrivals[0].time < t:
                clock.advance_to(self._arrivals[0].time)
            else:
                if math.isfinite(t):
                    clock.advance_to(t)
                return

    def run_until_idle(self) -> None:
        self.run_until(math.inf)

    def run_requests(self, requests: Iterable[SimRequest]) -> list[RequestRecord]:
        """Open loop: each request arrives at its own ``arrival``; returns finished records."""
        before = len(self.records)
        for r in requests:
            self.submit(r.prompt_token_ids, r.max_tokens, at=r.arrival, request_id=r.request_id)
        self.run_until_idle()
        return self.records[before:]

    def run_closed_loop(
        self,
        *,
        concurrency: int,
        num_requests: int,
        make_request: Callable[[int], tuple[Sequence[int], int]],
        think_time: float = 0.0,
    ) -> list[RequestRecord]:
        """Closed loop: ``concurrency`` clients, each sends its next request when the previous
        one finishes (plus ``think_time``), until ``num_requests`` were sent."""
        before = len(self.records)
        sent = 0

        def send(at: float) -> None:
            nonlocal sent
            prompt, max_tokens = make_request(sent)
            self.submit(prompt, max_tokens, at=at)
            sent += 1

        previous = self.on_finish

        def next_one(record: RequestRecord) -> None:
            if previous is not None:
                previous(record)
            if sent < num_requests:
                send(record.finish + think_time)

        self.on_finish = next_one
        try:
            for _ in range(min(concurrency, num_requests)):
                send(self.clock.now())
            self.run_until_idle()
        finally:
            self.on_finish = previous
        return self.records[before:]
