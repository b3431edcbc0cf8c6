"""What a run hides from the planner, and the load it offers.

A ``World`` is the hardware and workload as they really are in one run. "matched": the
simulator's default efficiencies (the planner's priors come from the same published figures).
"perturbed": every efficiency drawn uniformly within its published range
(reference/effect_sizes.md: decode weight reads 0.72-0.85 of peak for BF16 and 0.63-0.70 for
FP8, large GEMMs 0.61-0.91 of dense peak and 0.50-0.60 for FP8, PCIe collective rates,
...), plus workload effects: prompt and output lengths 0.85-1.15x what the scenario says and a
speculative acceptance rate of 0.45-0.80. "foreign": structural deviations the planner's
model does not contain, drawn per seed: a per-request CPU and HTTP overhead 3-10x the
simulator's, a cost per preempted request (the recompute's host work and a stall, 5-40 ms)
added to the step that preempts, every efficiency drawn 10-40% *outside* its published range
(below or above, per field), speculative acceptance outside 0.45-0.80, request lengths
0.7-0.85x or 1.15-1.3x, and heavy-tailed step noise (log-normal jitter plus rare Pareto
stalls, as a host hiccup or a GC pause makes them). The draw depends on the seed only; the
simulator's own model is untouched (``measure.Pod`` applies the step-level parts).

``Load`` turns a scenario's workload into requests: Poisson or bursty (on/off modulated
Poisson, same mean) arrivals, or closed-loop users; an open-loop rate may drift linearly to
``drift`` x its start over ``driftSeconds`` (``offset`` starts the load later in that drift:
the oracle measures at the drifted rate); prompts are token ids whose first
``sharedPrefixTokens`` are one of ``prefixGroups`` fixed prefixes, so the simulator's prefix
cache sees real sharing. Deterministic per (scenario, seed, stream). No I/O, no clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Literal

from latency_tuner.convergence.scenario import Workload
from latency_tuner.perf.cost import Efficiencies

WorldKind = Literal["matched", "perturbed", "foreign"]
WORLDS: tuple[WorldKind, ...] = ("matched", "perturbed", "foreign")
_VOCAB = 99_000  # prefix ids live below, unique markers above


@dataclass(frozen=True)
class World:
    kind: WorldKind
    seed: int
    efficiencies: Efficiencies
    spec_acceptance: float | None = None  # None: the simulator's default for the method
    prompt_scale: float = 1.0
    output_scale: float = 1.0
    # foreign only: step noise and preemption cost (0: none, the simulator's own model)
    jitter_sigma: float = 0.0  # log-normal sigma of every step's duration
    stall_probability: float = 0.0  # per step: a Pareto stall is added
    stall_scale_s: float = 0.0  # the Pareto stall's minimum
    stall_alpha: float = 1.5  # its tail index (< 2: infinite variance)
    preemption_s: float = 0.0  # added to a step per request it preempts

    @property
    def key(self) -> str:
        return f"{self.kind}-{self.seed}"


# (field, low, high): the published ranges the perturbed worlds draw from.
RANGES: tuple[tuple[str, float, float], ...] = (
    ("weight_bw_bf16", 0.72, 0.85),
    ("fp8_weight_bytes_per_sm_cycle", 8.1, 9.0),  # FP8 reads at 0.63-0.70 of an H100's peak
    ("weight_bw_int4", 0.66, 0.82),
    ("kv_bw", 0.75, 0.90),
    ("gemm_bf16", 0.61, 0.91),
    ("gemm_fp8", 0.50, 0.60),
    ("attention_flops", 0.45, 0.70),
    ("step_overhead_s", 0.5e-3, 1.2e-3),
    ("eager_layer_cpu_s", 80e-6, 160e-6),
    ("offload_pcie_bw", 0.70, 0.90),
)
# Collectives over PCIe: host-staged and cross-socket rates within 0.5-1.5x the model's.
COLLECTIVE_RANGES: tuple[tuple[str, float, float], ...] = (
    ("host_staged_bw", 0.11, 0.33),
    ("cross_socket_bw", 0.047, 0.14),
)


def make_world(kind: WorldKind, seed: int) -> World:
    if kind == "matched":
        return World("matched", seed, Efficiencies())
    if kind == "foreign":
        return _foreign(seed)
    rng = random.Random(f"world:{seed}")
    drawn: dict[str, Any] = {name: rng.uniform(low, high) for name, low, high in RANGES}
    links: dict[str, Any] = {name: rng.uniform(low, high) for name, low, high in COLLECTIVE_RANGES}
    drawn["collectives"] = replace(Efficiencies().collectives, **links)
    return World(
        "perturbed",
        seed,
        replace(Efficiencies(), **drawn),
        spec_acceptance=rng.uniform(0.45, 0.80),
        prompt_scale=rng.uniform(0.85, 1.15),
        output_scale=rng.uniform(0.85, 1.15),
    )


def _outside(rng: random.Random, low: float, high: float) -> float:
    """A value 10-40% below ``low`` or above ``high`` (fractions of a peak stay below 0.97)."""
    if rng.random() < 0.5:
        return low * rng.uniform(0.6, 0.9)
    value = high * rng.uniform(1.1, 1.4)
    return min(value, 0.97) if high <= 1.0 else value


def _foreign(seed: int) -> World:
    rng = random.Random(f"foreign:{seed}")
    base = Efficiencies()
    drawn: dict[str, Any] = {name: _outside(rng, low, high) for name, low, high in RANGES}
    links: dict[str, Any] = {n: _outside(rng, lo, hi) for n, lo, hi in COLLECTIVE_RANGES}
    drawn["collectives"] = replace(base.collectives, **links)
    # Per-request CPU and HTTP work well beyond the model's: a slow tokenizer, a proxy, TLS.
    drawn["request_overhead_s"] = base.request_overhead_s * rng.uniform(3.0, 10.0)
    drawn["request_overhead_per_token_s"] = base.request_overhead_per_token_s * rng.uniform(3, 10)
    drawn["per_seq_overhead_s"] = base.per_seq_overhead_s * rng.uniform(3.0, 10.0)
    return World(
        "foreign",
        seed,
        replace(base, **drawn),
        spec_acceptance=_outside(rng, 0.45, 0.80),
        prompt_scale=_outside(rng, 0.85, 1.15),
        output_scale=_outside(rng, 0.85, 1.15),
        jitter_sigma=rng.uniform(0.05, 0.20),
        stall_probability=rng.uniform(0.002, 0.01),
        stall_scale_s=rng.uniform(0.005, 0.03),
        stall_alpha=rng.uniform(1.2, 1.8),
        preemption_s=rng.uniform(0.005, 0.04),
    )


@dataclass(frozen=True)
class Request:
    arrival: float
    prompt: list[int]
    max_tokens: int


class Load:
    """Requests of one workload in one world; arrivals are generated lazily, in order."""

    def __init__(
        self, workload: Workload, world: World, *, seed: int, stream: str, offset: float = 0.0
    ) -> None:
        self.workload = workload
        self.offset = offset
        self.world = world
        self._rng = random.Random(f"load:{stream}:{seed}")
        self._count = 0
        self._next_time = 0.0
        self._pending: Request | None = None
        w = workload
        self._prefixes = [
            [(g * 7919 + j * 31 + 1) % _VOCAB for j in range(w.shared_prefix_tokens)]
            for g in range(w.prefix_groups)
        ]
        if w.arrival == "bursty":
            assert w.rate is not None
            share = w.burst_seconds / w.burst_period_seconds
            self._high = w.rate * w.burst_factor
            self._low = max(0.0, (w.rate - self._high * share) / (1 - share))
        else:
            self._high = self._low = w.rate or 0.0
        self._peak = self._high * max(1.0, w.drift)  # thinning bound over the whole drift

    @property
    def closed(self) -> bool:
        return self.workload.arrival == "closed"

    def request(self, arrival: float) -> Request:
        """The next request's shape (prompt ids and output length), arriving at ``arrival``."""
        w, rng, world = self.workload, self._rng, self.world
        n = max(
            2, round(w.prompt_tokens * world.prompt_scale * rng.uniform(1 - w.spread, 1 + w.spread))
        )
        out = max(
            1, round(w.output_tokens * world.output_scale * rng.uniform(1 - w.spread, 1 + w.spread))
        )
        prefix = self._prefixes[rng.randrange(w.prefix_groups)][: n - 2]
        c = self._count
        self._count += 1
        # Two marker tokens make every request's own part unique (chained block hashes).
        marker = [_VOCAB + c % 28_000, _VOCAB + (c // 28_000) % 28_000]
        unique = n - len(prefix) - 2
        return Request(arrival, prefix + marker + list(range(1, unique + 1)), out)

    def think(self) -> float:
        mean = self.workload.think_seconds
        return self._rng.expovariate(1 / mean) if mean > 0 else 0.0

    def _rate(self, t: float) -> float:
        w = self.workload
        in_burst = w.arrival == "bursty" and (t % w.burst_period_seconds) < w.burst_seconds
        base = self._high if in_burst else self._low
        if w.drift_seconds <= 0:
            return base
        progress = min(1.0, (t + self.offset) / w.drift_seconds)
        return base * (1.0 + (w.drift - 1.0) * progress)

    def arrivals_until(self, end: float) -> list[Request]:
        """Open loop: the requests arriving before ``end`` not handed out yet."""
        if self.closed:
            return []
        out: list[Request] = []
        while True:
            if self._pending is None:
                self._pending = self._next_arrival()
            if self._pending.arrival >= end:
                return out
            out.append(self._pending)
            self._pending = None

    def _next_arrival(self) -> Request:
        # Thinning: candidates at the peak rate, kept with probability rate(t) / peak.
        t = self._next_time
        steady = self._high == self._low and self.workload.drift_seconds <= 0
        while True:
            t += self._rng.expovariate(self._peak)
            if steady or self._rng.random() * self._peak < self._rate(t):
                self._next_time = t
                return self.request(t)
