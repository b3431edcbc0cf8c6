"""Is the server falling behind its arrivals? Arrivals, saturation and queueing delay of a window.

The finished requests tell what the server managed to serve; when it falls behind, what it did
not serve piles up in flight. So arrivals = finished + growth of the requests in flight
(running + waiting gauges, start to end of the window). A window is *saturated* when the
waiting queue grew by more than the counting noise of the arrivals: with Poisson arrivals a
steady queue wanders by about sqrt(arrivals), a backlog that grows past ``GROWTH_SIGMAS`` of
that is the server finishing fewer requests than arrive. A saturated window is evidence on its
own, however few requests it finished: its latencies of finished requests are lower bounds (the
requests still waiting will be slower). That holds with none finished too (a ``NoData`` window
that carries its gauges): a stalled server, not a quiet one.

Queueing delay by Little's law: mean time in queue = mean queue length / arrival rate. vLLM
records a request's queue time when it finishes but its TTFT at the first token, so under a
growing backlog the queue-time histogram lags (the requests that waited longest have not
finished); the waiting gauge does not.

A window can also be *busy*: requests were in flight all the time (mean running + waiting of
at least one) yet few finished. That is a slow server, not a quiet one: with a fixed number of
clients (a closed loop) the backlog cannot grow, so saturation never shows, and waiting for
``minRequests`` would wait forever. A busy window's latencies are measurements, not bounds;
its few requests make them noisy, which the verdict's noise estimate accounts for.

Values only. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from latency_tuner.core.evidence import Evidence
from latency_tuner.core.observation import Observation, ObservationResult, finite_deltas

GROWTH_SIGMAS = 2.0  # backlog growth beyond this many sqrt(arrivals): not a steady queue wandering
BUSY_IN_FLIGHT = 1.0  # mean requests in flight: the server never idled
BUSY_MIN_REQUESTS = 3  # fewer finished requests than this give no quantile at all


@dataclass(frozen=True)
class Flow:
    """Arrivals against completions over one window (counts summed over pods)."""

    finished: int
    arrivals: float  # finished + growth in flight; the finished count when the gauges are unknown
    backlog_growth: float | None  # waiting requests gained over the window; None if unknown
    window_seconds: float
    waiting_mean: float | None

    @property
    def arrival_rate(self) -> float:
        return self.arrivals / self.window_seconds if self.window_seconds > 0 else 0.0

    @property
    def saturated(self) -> bool:
        """Completions below arrivals with a waiting queue that rises beyond its noise."""
        growth = self.backlog_growth
        if growth is None or growth <= 0 or self.arrivals <= self.finished:
            return False
        return growth > self.growth_noise

    @property
    def queue_delay(self) -> float | None:
        """Mean time a request waits in the queue, by Little's law (seconds); None if unknown."""
        rate = self.arrival_rate
        if self.waiting_mean is None or rate <= 0:
            return None
        return self.waiting_mean / rate

    @property
    def growth_noise(self) -> float:
        """The backlog growth a steady queue reaches by chance over its arrivals."""
        return chance_wander(self.arrivals)

    def evidence(self) -> Evidence:
        """The saturation as a diagnosis fact."""
        return Evidence(
            "backlog_growth",
            self.backlog_growth,
            f"saturated: {self.describe()}",
            self.growth_noise,
            ">",
            "requests",
        )

    def describe(self) -> str:
        growth = self.backlog_growth or 0.0
        return (
            f"{self.arrivals:.0f} requests arrived and {self.finished} finished in the window; "
            f"the waiting queue grew by {growth:.0f}"
        )


def flow(obs: ObservationResult) -> Flow:
    """The window's arrivals, backlog growth and Little's-law queueing delay (of a window
    with no finished request too: its arrivals are what piled up in flight)."""
    return Flow(
        finished=obs.requests,
        arrivals=obs.arrivals,
        backlog_growth=obs.waiting_delta,
        window_seconds=obs.window_seconds,
        waiting_mean=obs.waiting_mean,
    )


def saturated(obs: ObservationResult) -> bool:
    return flow(obs).saturated


def chance_wander(count: float) -> float:
    """How far a steady count (a queue, the requests in flight) wanders by chance over a window
    in which ``count`` requests came or went: ``GROWTH_SIGMAS`` x sqrt(count), as Poisson."""
    return GROWTH_SIGMAS * math.sqrt(max(count, 1.0))


def steady_wander(obs: Observation) -> float:
    """How far a steady server's requests in flight wander over a window by chance, over the
    requests it finished."""
    return chance_wander(obs.requests)


def in_flight_shift(obs: Observation) -> float | None:
    """How far the requests in flight (running + waiting) moved over the window when that is
    beyond ``steady_wander``; else None. A server at its steady state holds about as many in
    flight at the end of a window as at its start; one still filling up after a restart (the
    clients of a closed loop coming back, its batch growing to its new size) or draining a
    backlog is not there yet, and its window's latencies are the transient's."""
    moved = finite_deltas(obs.running_delta, obs.waiting_delta)
    if not moved:
        return None
    shift = sum(moved)
    return shift if abs(shift) > steady_wander(obs) else None


def residence(obs: Observation) -> float | None:
    """The mean time a request spends on the server, from arrival to its end, by Little's law
    (requests in flight over the arrival rate); None when either is unknown or zero."""
    in_flight = (obs.running_mean or 0.0) + (obs.waiting_mean or 0.0)
    rate = obs.arrival_rate
    if obs.running_mean is None or in_flight <= 0 or rate <= 0:
        return None
    return in_flight / rate


def busy(obs: Observation) -> bool:
    """Requests in flight the whole window, and at least a few finished: few requests because
    each is slow, not because few arrive."""
    in_flight = (obs.running_mean or 0.0) + (obs.waiting_mean or 0.0)
    return in_flight >= BUSY_IN_FLIGHT and obs.requests >= BUSY_MIN_REQUESTS


def usable(obs: Observation, min_requests: int) -> bool:
    """Whether a window may be judged at all: ``minRequests`` requests finished, or fewer from
    a saturated or busy server (one finishing too few because it is slow would otherwise be
    waited on forever)."""
    return obs.requests >= min_requests or saturated(obs) or busy(obs)


def queue_delay(obs: Observation) -> tuple[float | None, str]:
    """The mean queueing delay, the larger of two estimates, and a note on where it came from
    ("" for the recorded histogram).

    vLLM records queue time when a request finishes but TTFT at its first token: under a
    growing backlog the queue-time histogram lags behind the TTFT one and understates the
    queue's share. Little's law on the waiting gauge sees the requests still waiting. The
    larger is the better evidence: in a steady queue both estimate the same wait, and under a
    growing one each can only understate it.
    """
    recorded = obs.queue_time_mean
    little = flow(obs).queue_delay
    if little is not None and (recorded is None or little > recorded):
        return little, " by Little's law (waiting requests / arrival rate)"
    return recorded, ""
