"""vLLM V1's scheduler, step by step, over the simulated KV cache (``kv_cache.py``).

Each step (``vllm/v1/core/sched/scheduler.py``):
1. running requests in order (decodes, and prompts still being prefilled in chunks): each gets
   its remaining tokens (a decode: 1, plus k draft tokens with speculative decoding) within the
   token budget ``max_num_batched_tokens``; when the KV cache has no room, the newest running
   request is preempted (blocks freed, back to the front of the waiting queue, its prefill to be
   recomputed) until the request fits or is itself the victim;
2. then, only if nobody was preempted, waiting requests in FCFS order while fewer than
   ``max_num_seqs`` run: prefix-cache lookup, then a prefill chunk of what is left of the budget
   (chunked prefill on) or the whole prompt if it fits the budget (off: a prompt that does not
   fit is skipped this step, keeping its place at the head of the queue, and a shorter one
   behind it may go first, as vLLM V1 does).
After the step, every request whose computed tokens reach its known tokens samples: a decode
emits 1 + accepted draft tokens; a partial prefill emits nothing. Requests finish at
``max_tokens`` (stop strings and EOS are ignored: the simulator behaves as ``ignore_eos``).

Pure: times arrive as arguments; randomness (draft acceptance) comes from a seeded RNG.
"""

from __future__ import annotations

import enum
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from latency_tuner.simulator.kv_cache import KVCacheManager
from latency_tuner.simulator.tokenizer import output_ids_from_seed, output_seed

__all__ = ["Request", "RequestStatus", "ScheduledRequest", "Scheduler", "SchedulerOutput"]


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"
    ABORTED = "aborted"


@dataclass(eq=False, slots=True)
class Request:
    """One request inside the engine, with the timestamps vLLM's metrics are made from."""

    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    arrival_time: float
    token_ids: list[int] = field(default_factory=list)  # prompt + output so far
    num_computed_tokens: int = 0
    status: RequestStatus = RequestStatus.WAITING
    block_ids: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    num_cached_blocks: int = 0
    spec_tokens: int = 0  # draft tokens to verify in the next step
    num_preemptions: int = 0
    num_cached_tokens: int = -1  # prefix-cache hit of the first scheduling (-1: not yet)
    scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finish_time: float | None = None
    token_times: list[float] = field(default_factory=list)  # one entry per output token
    num_prompt_tokens: int = 0
    output_seed: int = 0
    # When the engine core got it (after the API server's HTTP, input processing and
    # tokenisation): vLLM's queue time starts here, its TTFT at ``arrival_time``.
    queued_time: float = -1.0
    acceptance: float = 0.0  # speculative decoding: per-draft-token acceptance for this request

    def __post_init__(self) -> None:
        if self.queued_time < 0:
            self.queued_time = self.arrival_time
        if not self.token_ids:
            self.token_ids = list(self.prompt_token_ids)
        self.num_prompt_tokens = len(self.prompt_token_ids)
        self.output_seed = output_seed(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def finished(self) -> bool:
        return self.status in (RequestStatus.FINISHED, RequestStatus.ABORTED)


@dataclass(slots=True)
class ScheduledRequest:
    request: Request
    num_tokens: int  # tokens fed to the model this step, drafts included
    num_spec: int  # of which draft tokens
    context_before: int  # tokens already in the KV cache


@dataclass
class SchedulerOutput:
    start: float
    scheduled: list[ScheduledRequest]
    preempted: list[Request]
    newly_scheduled: list[Request]  # scheduled for the first time (queue time ends)
    total_tokens: int
    # For CostModel.step_time: context of each decode (one new token each, plus drafts),
    # (chunk, tokens already cached) of each prefill chunk, drafts per decode.
    decode_contexts: list[int] = field(default_factory=list)
    prefill_chunks: list[tuple[int, int]] = field(default_factory=list)
    spec_tokens: int = 0

    def cost_inputs(self) -> tuple[list[int], list[tuple[int, int]], int]:
        return self.decode_contexts, self.prefill_chunks, self.spec_tokens


@dataclass
class StepEvents:
    """What one step's outputs did, for metrics (vLLM's IterationStats)."""

    emitted: list[tuple[Request, int, int, bool]] = field(default_factory=list)
    # (request, first output index, count, finished)
    num_prompt_tokens: int = 0  # prompts whose first token came out this step (vLLM counts so)
    num_generation_tokens: int = 0
    ttfts: list[float] = field(default_factory=list)
    itls: list[float] = field(default_factory=list)
    finished: list[Request] = field(default_factory=list)
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    spec_accepted_per_pos: list[int] = field(default_factory=list)


class Scheduler:
    def __init__(
        self,
        *,
        num_gpu_blocks: int,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        max_model_len: int,
        chunked_prefill: bool = True,
        prefix_caching: bool = True,
        block_size: int = 16,
        num_spec_tokens: int = 0,
        acceptance_rate: float = 0.0,
        acceptance_by_prompt: Callable[[Sequence[int]], float] | None = None,
        seed: int = 0,
        altered_share: float = 0.0,
    ) -> None:
        self.kv = KVCacheManager(num_gpu_blocks, block_size, prefix_caching)
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_model_len = max_model_len
        self.chunked_prefill = chunked_prefill
        self.num_spec_tokens = num_spec_tokens
        self.acceptance_rate = acceptance_rate
        self.acceptance_by_prompt = acceptance_by_prompt
        self.altered_share = altered_share
        self.rng = random.Random(seed)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        self.num_preemptions = 0

    # --- bookkeeping ---------------------------------------------------------------------------

    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:
            raise ValueError(f"duplicate request id {request.request_id!r}")
        if self.num_spec_tokens:
            by_prompt = self.acceptance_by_prompt
            request.acceptance = (
                self.acceptance_rate if by_prompt is None else by_prompt(request.prompt_token_ids)
            )
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def abort(self, request_id: str) -> Request | None:
        request = self.requests.pop(request_id, None)
        if request is None:
            return None
        if request.status is RequestStatus.RUNNING:
            self.running.remove(request)
            self.kv.free(request)
        elif not request.finished:
            self.waiting.remove(request)
        request.status = RequestStatus.ABORTED
        return request

    @property
    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    # --- scheduling ----------------------------------------------------------------------------

    def _preempt_last(self) -> Request:
        victim = self.running.pop()
        self.kv.free(victim)
        victim.status = RequestStatus.PREEMPTED
        victim.num_computed_tokens = 0
        victim.spec_tokens = 0
        victim.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(victim)
        return victim

    def schedule(self, now: float) -> SchedulerOutput:
        budget = self.max_num_batched_tokens
        decodes: list[int] = []
        prefills: list[tuple[int, int]] = []
        max_spec = 0
        scheduled: list[ScheduledRequest] = []
        preempted: list[Request] = []
        newly: list[Request] = []
        kv = self.kv
        lookahead = self.num_spec_tokens
        limit = self.max_model_len - 1
        size = kv.block_size
        caching = kv.enable_caching

        i = 0
        running = self.running
        while i < len(running) and budget > 0:
            req = running[i]
            computed = req.num_computed_tokens
            known = len(req.token_ids)
            n = known + req.spec_tokens - computed
            if n > budget:
                if not self.chunked_prefill:
                    i += 1  # never split without chunked prefill: wait for a roomier step
                    continue
                n = budget
            if n > limit - computed:
                n = limit - computed
            if n <= 0:
                i += 1
                continue
            total = computed + n
            # Only ask the KV cache when a new block is needed or one became full.
            if (total + lookahead + size - 1) // size > len(req.block_ids) or (
                caching and min(total, known) // size > req.num_cached_blocks
            ):
                fits = True
                while not kv.allocate_slots(req, n, num_lookahead_tokens=lookahead):
                    victim = self._preempt_last()
                    preempted.append(victim)
                    if victim is req:
                        fits = False
                        break
                if not fits:
                    break
            spec = n + computed - known
            if spec < 0:
                spec = 0
            if n - spec == 1 and computed + 1 == known and known > req.num_prompt_tokens:
                decodes.append(known)
                if spec > max_spec:
                    max_spec = spec
            else:
                prefills.append((n, computed))
            scheduled.append(ScheduledRequest(req, n, spec, computed))
            budget -= n
            i += 1

        if not preempted:
            waiting = self.waiting
            skipped: list[Request] = []
            while waiting and budget > 0 and len(running) < self.max_num_seqs:
                req = waiting[0]
                hit_blocks, hit_tokens = kv.get_computed_blocks(req)
                n = len(req.token_ids) - hit_tokens
                if not self.chunked_prefill and n > budget:
                    skipped.append(waiting.popleft())  # too big for what is left: skip it
                    continue
                n = min(n, budget)
                if not kv.allocate_slots(req, n, hit_blocks, hit_tokens, lookahead):
                    break
                kv.record_lookup(len(req.token_ids), hit_tokens)
                waiting.popleft()
                running.append(req)
                req.status = RequestStatus.RUNNING
                req.num_computed_tokens = hit_tokens
                if req.num_cached_tokens < 0:
                    req.num_cached_tokens = hit_tokens
                if req.scheduled_time is None:
                    req.scheduled_time = now
                    newly.append(req)
                scheduled.append(ScheduledRequest(req, n, 0, hit_tokens))
                prefills.append((n, hit_tokens))
                budget -= n
            waiting.extendleft(reversed(skipped))  # skipped requests keep their place

        total = self.max_num_batched_tokens - budget
        return SchedulerOutput(now, scheduled, preempted, newly, total, decodes, prefills, max_spec)

    # --- outputs -------------------------------------------------------------------------------

    def _accepted(self, drafts: int, a: float) -> int:
        """Accepted draft tokens: each accepted with probability ``a``, until one is not."""
        accepted, rng = 0, self.rng
        while accepted < drafts and rng.random() < a:
            accepted += 1
        return accepted

    def update_from_output(self, output: SchedulerOutput, end: float) -> StepEvents:
        """Apply a finished step at time ``end``: sample tokens, finish requests."""
        events = StepEvents()
        any_finished = False
        running_status = RequestStatus.RUNNING
        for s in output.scheduled:
            req = s.request
            if req.status is not running_status:
                continue  # aborted (or preempted) while the step ran
            req.num_computed_tokens += s.num_tokens - s.num_spec
            known = len(req.token_ids)
            if req.num_computed_tokens < known:
                continue  # a chunk of a prompt: nothing sampled yet
            accepted = 0
            if s.num_spec:
                accepted = self._accepted(s.num_spec, req.acceptance)
                events.spec_drafts += 1
                events.spec_draft_tokens += s.num_spec
                events.spec_accepted_tokens += accepted
                per_pos = events.spec_accepted_per_pos
                while len(per_pos) < s.num_spec:
                    per_pos.append(0)
                for p in range(accepted):
                    per_pos[p] += 1
                req.num_computed_tokens += accepted
            start = known - req.num_prompt_tokens
            count = min(1 + accepted, req.max_tokens - start)
            req.token_ids.extend(
                output_ids_from_seed(req.output_seed, start, count, self.altered_share)
            )
            events.num_generation_tokens += count
            if count == 1:
                req.token_times.append(end)
            else:
                req.token_times.extend([end] * count)
            if req.first_token_time is None:
                req.first_token_time = end
                events.num_prompt_tokens += req.num_prompt_tokens
                events.ttfts.append(end - req.arrival_time)
            else:
                assert req.last_token_time is not None
                events.itls.append(end - req.last_token_time)
            req.last_token_time = end
            done = start + count >= req.max_tokens
            if done:
                req.status = RequestStatus.FINISHED
                req.finish_time = end
                self.kv.free(req)
                self.requests.pop(req.request_id, None)
                events.finished.append(req)
                any_finished = True
            elif self.num_spec_tokens:
                remaining = req.max_tokens - start - count
                req.spec_tokens = min(self.num_spec_tokens, remaining - 1)
            events.emitted.append((req, start, count, done))
        if any_finished:
            self.running = [r for r in self.running if r.status is RequestStatus.RUNNING]
        return events
