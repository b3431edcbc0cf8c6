"""One measurement window of a vLLM Deployment, as a value.

A metrics source (Prometheus or direct scrape) turns the server's metric families into an
``Observation``, or into ``NoData`` when there is nothing to measure (no traffic, a selector
that matches nothing). Failures to reach the source are exceptions of the adapters, never
values here: "no data" is not an error and must not be treated as a bad measurement.

Times are in seconds, rates per second, usage as a 0-1 fraction.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from pydantic import BaseModel, ConfigDict, Field

from latency_tuner.api.durations import format_duration
from latency_tuner.core.noise import count_tolerance, mean_tolerance

# Percentiles every source fetches for TTFT and ITL, whatever the objectives say: the diagnosis
# needs the median and the tail (ITL p99/p50 shows prefill interference); p95 is what a trial
# snapshot records for a latency no objective names, so every snapshot has all three.
BASE_PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)


class LoadFingerprint(BaseModel):
    """What load a window saw; two windows are comparable only if these are close."""

    model_config = ConfigDict(frozen=True)

    request_rate: float = Field(
        description="offered requests per second: the finished ones plus those that piled up "
        "in flight (``Observation.arrival_rate``); the finished rate alone is what a "
        "saturated server manages, and moves with the configuration"
    )
    prompt_tokens_mean: float = Field(description="mean prompt length in tokens")
    generation_tokens_mean: float = Field(description="mean output length in tokens")
    concurrency_mean: float = Field(description="mean running + waiting requests")
    requests: int | None = Field(
        default=None,
        description="requests behind the means: their counting noise widens the "
        "tolerance (``core.noise``); None when unknown",
    )

    def relative_differences(self, other: LoadFingerprint) -> dict[str, float]:
        """Relative difference of each dimension, against the larger of the two values."""

        def rel(a: float, b: float) -> float:
            top = max(abs(a), abs(b))
            return 0.0 if top == 0 else abs(a - b) / top

        return {
            "request_rate": rel(self.request_rate, other.request_rate),
            "concurrency_mean": rel(self.concurrency_mean, other.concurrency_mean),
            "prompt_tokens_mean": rel(self.prompt_tokens_mean, other.prompt_tokens_mean),
            "generation_tokens_mean": rel(
                self.generation_tokens_mean, other.generation_tokens_mean
            ),
        }

    def comparable_to(self, other: LoadFingerprint, tolerance: float) -> bool:
        """The same offered load within ``tolerance`` (relative).

        Requests must have the same shape (prompt and output length). The offered amount is the
        arrival rate for open-loop clients and the requests in flight for closed-loop ones, and
        a change of configuration moves the other one (a faster server completes more requests
        per second for the same closed-loop clients, and holds fewer in flight at the same
        arrival rate): so the load is the same when either of the two stayed.

        ``tolerance`` widens to what the two windows' request counts and mean lengths differ by
        chance (``tolerances_against``): sparse traffic must not fail the comparison by
        counting noise alone.
        """
        if self.server_speed_changed(other, self.tolerance_against(other, tolerance)):
            return True
        moved = self.moved(other, tolerance)
        same_shape = "prompt_tokens_mean" not in moved and "generation_tokens_mean" not in moved
        same_amount = "request_rate" not in moved or "concurrency_mean" not in moved
        return same_shape and same_amount

    def moved(self, other: LoadFingerprint, tolerance: float) -> dict[str, float]:
        """The dimensions that differ beyond their tolerance, each with that tolerance."""
        tolerances = self.tolerances_against(other, tolerance)
        return {
            key: tolerances[key]
            for key, diff in self.relative_differences(other).items()
            if diff > tolerances[key]
        }

    def heavier_or_lighter(self, other: LoadFingerprint, tolerance: float) -> int:
        """+1 when every dimension that moved beyond ``tolerance`` rose in ``other`` (more
        requests per second, more in flight, longer prompts or outputs: a heavier load), -1 when
        every one fell, 0 when they moved both ways or none moved.

        Latency never falls because a load got heavier (nor rises because it got lighter): a
        trial that did better under a heavier load, or worse under a lighter one, is judged
        despite the change. The closed-loop case this matters for: a faster server lets the
        same clients send more requests, and real vLLM's in-flight gauge, set after each engine
        step, shows more in flight once a long prefill step stops hiding them.
        """
        signs = {
            1 if getattr(other, key) > getattr(self, key) else -1
            for key in self.moved(other, tolerance)
        }
        return signs.pop() if len(signs) == 1 else 0

    def tolerance_against(self, other: LoadFingerprint, tolerance: float) -> float:
        """``tolerance``, or the counting noise of the two windows if that is larger."""
        return max(tolerance, count_tolerance(self.requests, other.requests))

    def tolerances_against(self, other: LoadFingerprint, tolerance: float) -> dict[str, float]:
        """Each dimension's tolerance: ``tolerance``, or what chance reaches if larger -- the
        counting noise for the rate and the requests in flight, the noise of a mean over the
        two windows' requests for the mean lengths."""
        count = self.tolerance_against(other, tolerance)
        mean = max(tolerance, mean_tolerance(self.requests, other.requests))
        return {
            "request_rate": count,
            "concurrency_mean": count,
            "prompt_tokens_mean": mean,
            "generation_tokens_mean": mean,
        }

    def server_speed_changed(self, other: LoadFingerprint, tolerance: float) -> bool:
        """The requests in flight moved beyond ``tolerance`` while the finished rate did not
        move with them: the server got faster (fewer in flight, as many or more finished) or
        slower, under the same offered load.

        By Little's law in-flight = finished rate x latency. More (or less) offered load moves
        both the same way; a server that drains its backlog holds far fewer requests while
        finishing as many or more. Such a window's finished requests are also a biased sample
        of the arrivals (a saturated server finishes the short ones, a backlog drains in
        arrival order), so their mean lengths are not compared then.
        """
        if self.concurrency_mean <= 0 or other.concurrency_mean <= 0:
            return False  # unknown (or idle): nothing to tell a faster server by
        rate = _relative_change(self.request_rate, other.request_rate)
        in_flight = _relative_change(self.concurrency_mean, other.concurrency_mean)
        faster = in_flight < -tolerance and rate > -tolerance
        slower = in_flight > tolerance and rate < tolerance
        return faster or slower


def _relative_change(before: float, after: float) -> float:
    """Signed change against the larger of the two values (-1..1; 0 when both are 0)."""
    top = max(abs(before), abs(after))
    return 0.0 if top == 0 else (after - before) / top


class Observation(BaseModel):
    """The signals of one window (DESIGN section 4)."""

    model_config = ConfigDict(frozen=True)

    window_seconds: float
    requests: int = Field(description="requests finished in the window")
    pods: int = Field(default=1, description="pods (series) that contributed")
    # Quantiles: percentile (50, 90, 95, 99) -> seconds. Holds BASE_PERCENTILES and the
    # objectives' percentiles when the source could compute them.
    ttft: dict[int, float] = Field(default_factory=dict)
    itl: dict[int, float] = Field(default_factory=dict)
    e2e: dict[int, float] = Field(default_factory=dict)
    ttft_mean: float | None = None
    itl_mean: float | None = None
    queue_time_mean: float | None = None
    prefill_time_mean: float | None = None
    decode_time_mean: float | None = None
    request_rate: float = 0.0
    prompt_tokens_mean: float | None = None
    generation_tokens_mean: float | None = None
    running_mean: float | None = None
    running_max: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    # Change of the gauges from the window's start to its end (summed over pods): with the
    # finished count they give the arrivals, which the finished rate alone hides when the
    # server falls behind (``core.saturation``).
    running_delta: float | None = None
    waiting_delta: float | None = None
    kv_cache_usage_mean: float | None = None
    kv_cache_usage_max: float | None = None
    prefix_cache_hit_rate: float | None = Field(
        default=None, description="hits / queries in tokens; None when caching is off or idle"
    )
    preemptions: float | None = Field(default=None, description="preemptions in the window")
    spec_acceptance_rate: float | None = Field(
        default=None, description="accepted / draft tokens; None without speculative decoding"
    )
    cache_config: dict[str, str] = Field(
        default_factory=dict, description="labels of vllm:cache_config_info"
    )
    # With speculative decoding one streamed chunk carries several tokens, and vLLM's
    # inter_token_latency histogram takes one sample per chunk: ``itl`` then holds the
    # per-request time per output token instead, and says so here.
    itl_source: str = Field(
        default="inter_token_latency",
        description="what `itl` measures: inter_token_latency (gaps between streamed chunks) "
        "or request_time_per_output_token (per request, under speculative decoding)",
    )
    itl_per_chunk: dict[int, float] = Field(
        default_factory=dict,
        description="the chunk-gap quantiles when `itl` holds time per output token instead",
    )
    tpot: dict[int, float] = Field(
        default_factory=dict, description="per-request time per output token quantiles"
    )
    tpot_mean: float | None = None
    kv_capacity_tokens: int | None = Field(
        default=None, description="tokens the KV cache holds (from vllm:cache_config_info)"
    )
    kv_max_concurrency: float | None = Field(
        default=None, description="full-length requests the KV cache holds at once"
    )
    lowest_bucket_quantiles: dict[str, float] = Field(
        default_factory=dict,
        description="quantiles (e.g. 'e2e_p50') that lie inside their histogram's lowest bucket "
        "-> that bucket's upper bound: interpolated between 0 and it, not measured",
    )

    def coarse_quantile_note(self, only: Collection[str] | None = None) -> str | None:
        """One sentence for a condition or a diagnosis when quantiles (all, or those named in
        ``only``) rest on the lowest bucket."""
        coarse = {
            name: bound
            for name, bound in self.lowest_bucket_quantiles.items()
            if only is None or name in only
        }
        if not coarse:
            return None
        parts = ", ".join(
            f"{name.replace('_p', ' p')} under {format_duration(bound)}"
            for name, bound in sorted(coarse.items())
        )
        return (
            f"{parts}: inside the lowest histogram bucket, so the value is interpolated, not "
            "measured"
        )

    @property
    def arrivals(self) -> float:
        return arrivals(self.requests, self.running_delta, self.waiting_delta)

    @property
    def arrival_rate(self) -> float:
        """Requests per second that arrived: the finished rate plus the in-flight growth."""
        if self.window_seconds <= 0:
            return self.request_rate
        return self.request_rate + (self.arrivals - self.requests) / self.window_seconds

    @property
    def offered_rate(self) -> float:
        """Requests per second that arrived by conservation: the finished rate plus the growth
        of those in flight, below the finished rate when a backlog drains (it finishes requests
        that arrived before the window); never below 0. Two windows' loads are compared by it:
        a trial that keeps up against a baseline still draining the start's backlog faces the
        same arrivals, not fewer. (``arrival_rate``, never below the finished rate, is the flow
        a server carries, which the queue's Little's law and the model read.)"""
        if self.window_seconds <= 0:
            return self.request_rate
        growth = in_flight_growth(self.running_delta, self.waiting_delta)
        return max(self.request_rate + growth / self.window_seconds, 0.0)

    @property
    def load(self) -> LoadFingerprint:
        return LoadFingerprint(
            request_rate=self.offered_rate,
            prompt_tokens_mean=self.prompt_tokens_mean or 0.0,
            generation_tokens_mean=self.generation_tokens_mean or 0.0,
            concurrency_mean=(self.running_mean or 0.0) + (self.waiting_mean or 0.0),
            requests=self.requests,
        )


class NoData(BaseModel):
    """Nothing to measure in the window: no traffic, or a selector that matches no series."""

    model_config = ConfigDict(frozen=True)

    reason: str
    window_seconds: float
    requests: int = 0
    # The in-flight gauges, when the window had them: requests that piled up while none
    # finished are a stalled server, not a quiet one (``core.saturation``).
    running_delta: float | None = None
    waiting_delta: float | None = None
    waiting_mean: float | None = None

    @property
    def arrivals(self) -> float:
        return arrivals(self.requests, self.running_delta, self.waiting_delta)


ObservationResult = Observation | NoData


def arrivals(finished: int, running_delta: float | None, waiting_delta: float | None) -> float:
    """The requests a window's server had to take in: those finished plus the growth of those in
    flight (running and waiting, start to end of the window); the finished count when the
    gauges are unknown or fell (a backlog draining finishes requests that arrived before the
    window, and the flow it carried is what it finished; ``Observation.offered_rate`` counts
    what arrived, for comparing loads)."""
    return max(float(finished), finished + in_flight_growth(running_delta, waiting_delta))


def in_flight_growth(running_delta: float | None, waiting_delta: float | None) -> float:
    """How many more requests were in flight at a window's end than at its start (0 when the
    gauges are unknown; a gauge that jumped to infinity is left out)."""
    return sum(finite_deltas(running_delta, waiting_delta))


def finite_deltas(*deltas: float | None) -> list[float]:
    """The gauges' changes over a window that are known and finite: one that jumped to
    infinity (a broken or hostile exporter) says nothing of the requests that came or went."""
    return [d for d in deltas if d is not None and math.isfinite(d)]
