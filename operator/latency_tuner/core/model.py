"""A performance model of the running deployment, calibrated on its window, that forecasts what
a candidate configuration does to TTFT, ITL and e2e under the same load.

The roofline cost of each engine step (``latency_tuner.perf``) gives, for the running
configuration and for the candidate, the stages of a request at the window's load per replica
(arrival rate, prompt and output lengths, requests in flight, prefix-cache hits): the time per
output token (a decode step of the batch, stretched by the share of the engine's time that
prefills take), the prefill (its chunks' steps, the batch decoding alongside), and the engine
time a request takes from the whole (its share of batched decode steps plus its prefill work).

Calibration: the window's measured means (prefill time, inter-token latency) over the model's
give one factor per stage, and the rest of TTFT (HTTP, tokenising) is carried over as measured,
except what a lagging queue-time histogram left out (vLLM records queue time when a request
finishes, TTFT at its first token), up to the wait Little's law gives the requests waiting:
that is queue; the candidate's stages are the model's times the same factors, so the running
configuration forecasts exactly what was measured and a candidate differs only by what the
model knows of the change. The queue forms at the busier of the engine (one server: the engine
time a request takes, its decodes batched as fully as the slots allow, so a continuous batch
that keeps up is not read as a busy server) and its slots (max-num-seqs, or the requests the KV
cache holds: M/M/c, each slot a server holding a request for its prefill and decode, so
doubling a nearly full set of slots empties the queue, as Erlang's formula says and one fast
server does not), with the utilisation read from the measured queue time rather than from the
arrival rate (closed-loop clients keep a server "busy" without a queue); a candidate's
utilisation scales with its service time at the same arrivals, and at or beyond saturation the
queue grows over the window. On a saturated window (the waiting queue grew:
``core.saturation``) the server served all it could: its utilisation is at least its arrivals
over the requests it finished, and the queue the forecasts' changes are taken from is the wait
of that growing backlog (the finished requests' queue times only bound it from below), so twice
the slots of a server run 2.5 times past what it serves still fall behind, less far. A
candidate with fewer slots than the running configuration is also as busy as the requests the
window kept running make its slots (Little's law): a window with no queue says nothing of slots
it did not lack, and 60 requests in flight do not fit 32.

A queue of requests waiting for a slot that does not grow (the window is not saturated) is also
read as the requests the clients keep in flight: a closed loop holds its requests in the system
whatever the server does, so with more slots fewer of them wait, and each waits for the slots
to turn over (Little's law: waiting / throughput, the throughput being the slots over the time
a request holds one; the candidate's slots scaled by the requests the window ran over the
model's reading of them, whose KV estimate may be off, but never past its max-num-seqs). A
candidate's queue is the larger of the two readings, each scaled to what the window measured.
M/M/1 alone would forecast a server with twice the slots nearly queue-free when 64 clients wait
on 8 slots, where 16 still leave 48 waiting. Such clients also send the next request as one
returns, so a candidate that turns their requests over faster sees them arrive faster (the
requests in flight over the time each takes, at most what the engine serves), and the prefills
they bring stall more decode steps: the candidate's stages are timed at that rate.

Forecasts are relative changes of the means; the trial applies them to the objectives'
percentiles, except an ITL objective's, which the model reads as the window does (Prometheus'
interpolation in vLLM's histogram buckets) from its mixture of decode-only and prefilling
steps: the prefilling ones by kind, a prompt's full chunks apart from its shorter last one (the
tail sees the longer step, not their mean; with another prompt waiting that last chunk shares
its step with the next prompt's first), and, where the budget has room beside a whole prompt,
the steps that also prefill the prompts that arrived within a step's time (Poisson arrivals),
up to the budget (which the running decodes take their share of first; the prompt tokens
arriving fill as many prefilling steps as those steps hold, tokens counted by the step, not
by the prompt). The step times are known up to a common factor and the share of prefilling
steps up to another, so that quantile's change is the mean over ``EDGE_POINTS`` of the
candidate's reading over the running one's, each pair weighed by a prior around 1 and by how
well the running configuration's reading at it agrees with the window's: a step just over a
bucket edge does not flip the forecast, a window whose tail reads 43 ms is not forecast as if
its tail steps might sit under the 25 ms edge, and a p99 read at 107 ms where the model counts
just under 1% of prefilling tokens (it would read 25 ms) is read as that 1% and more. There is
no forecast (None) where the model does not describe the deployment: an unknown model or GPU,
a command line vLLM would refuse, a stage the window did not measure, a prefix cache whose hit
rate nobody has measured yet, or a calibration factor beyond ``TRUSTED_FACTOR`` (the model off
by more than that on this deployment: its knob effects are not to be trusted either). Pure: no
I/O, no clock.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace

from latency_tuner.core.config_view import parse_int
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.observation import Observation
from latency_tuner.core.prommath import ordered_histogram_quantile
from latency_tuner.core.saturation import queue_delay, saturated
from latency_tuner.core.score import ObjectiveName, ObjectiveScore
from latency_tuner.perf.config import EngineConfig, StartupError, build_engine_config
from latency_tuner.perf.cost import CostModel
from latency_tuner.vllm.args import VllmCommandLine
from latency_tuner.vllm.metrics import ITL_BUCKETS

__all__ = [
    "MAX_BATCH",
    "TRUSTED_FACTOR",
    "Calibration",
    "Forecast",
    "calibrate",
    "engine_config",
    "forecast",
    "forecast_change",
]

# Measured over modelled beyond this factor either way: the model does not describe this
# deployment (another model than its name says, another GPU, a foreign serving stack).
TRUSTED_FACTOR = 3.0
# Utilisation treated as saturated: M/M/1's wait grows without bound as it nears 1.
SATURATED = 0.98
# The share of the engine's time prefills may take in the ITL model: beyond it decoding would
# stop, which a window that measured an ITL did not see.
MAX_PREFILL_SHARE = 0.9
MAX_PREFILL_STEPS = 256  # prefill chunks timed one by one; longer prompts are scaled from them
# Steps prefilling several prompts at once: at most this many besides the first are timed, and
# none whose kind is less likely than CROWDED_TAIL (of the prefilling steps).
MAX_CROWDED_PROMPTS = 16
CROWDED_TAIL = 1e-4
# The model's step times are known up to a common factor (calibration pins the mean ITL, not
# where vLLM's bucket edges fall among the steps): a quantile's forecast is the mean of its
# ratios with every step time scaled by each of these, weighed by how likely each scale is
# (``_scale_weights``), so a step of 24.9 ms against 25.3 ms does not flip the reading from
# one bucket to the next, and the window's own reading says which side of an edge it is on.
EDGE_SCALES = tuple(math.exp(x / 20) for x in range(-10, 11))  # about 0.61 .. 1.65
# The prior on that factor (standard deviation of its log): the mean ITL pins the steps within
# about +-15%; a window whose tail reading no scale near 1 agrees with pulls it farther.
SCALE_SPREAD = 0.08
# The share of tokens that come from prefilling steps is known only as well as the model's
# count of those steps (arrivals, chunks, prompts sharing a step): a tail at the edge of that
# share (a p99 where 1% of the tokens prefill) reads 10 ms or 100 ms on a few tenths of a
# percent. The same factor applies to both configurations (what the model miscounts in one it
# miscounts in the other); its prior is wider than the step times' (the mean ITL barely pins it).
SHARE_SCALES = tuple(math.exp(x / 5) for x in range(-3, 4))  # about 0.55 .. 1.82
SHARE_SPREAD = 0.25
# Every (step time factor, prefill share factor) a quantile's forecast weighs.
EDGE_POINTS = tuple((u, v) for u in EDGE_SCALES for v in SHARE_SCALES)
# How far (log ratio, one standard deviation) the model's reading of the running
# configuration's ITL quantile may sit from the window's and still agree with it: about the
# sampling error of a tail quantile in one window.
READING_SPREAD = 0.1
# A refinement counts on the ITL change at least this share of the likely scales' weight
# reaches (``Forecast.cautious``): a 24.8 ms step is as likely 25.3 ms, on the other side of an
# edge, and halving a tail on one side is nothing on the other.
CAUTIOUS_SHARE = 0.75
MIN_WEIGHT = 1e-3  # scales weighing less (relative to the likeliest) are left out of a forecast
# Requests timed per decode step at most: a command line or a gauge can claim any number, and a
# forecast must stay cheap on the operator's loop whatever a tenant writes.
MAX_BATCH = 4096
# Requests waiting on average, per replica, before a steady queue is read as clients holding
# their requests in flight (fewer is a queue M/M/1 describes as well).
MIN_WAITING = 1.0


@dataclass(frozen=True)
class Forecast:
    """Expected relative changes of the mean TTFT, ITL and e2e (-0.3: 30% lower); None where
    the model cannot say. ``saturated``: the candidate is expected to fall behind its
    arrivals."""

    ttft: float | None
    itl: float | None
    e2e: float | None
    saturated: bool = False
    # The ITL change at the unlucky side of where vLLM's bucket edges may fall among the steps
    # (``CAUTIOUS_SHARE`` of the likely scales' weight forecasts no more); None: as ``itl``.
    itl_cautious: float | None = None

    def change(self, objective: ObjectiveName) -> float | None:
        value: float | None = getattr(self, objective)
        return value

    def cautious(self) -> Forecast:
        """This forecast with the ITL change most of the likely scales reach: a change worth
        a rollout only on the bucket edges falling the lucky way is not counted on."""
        if self.itl_cautious is None or self.itl is None:
            return self
        return replace(self, itl=max(self.itl, self.itl_cautious), itl_cautious=None)

    def ratio(self, objective: ObjectiveScore) -> float | None:
        """The objective's expected ratio to its threshold: its measured ratio times the
        forecast change of its latency; None where either is unknown."""
        change, ratio = self.change(objective.name), objective.ratio
        return None if ratio is None or change is None else ratio * (1.0 + change)


@dataclass(frozen=True)
class _Load:
    """One replica's share of the window's load."""

    rate: float  # requests arriving per second
    prompt: float  # mean prompt tokens
    output: float  # mean output tokens
    batch: float  # mean requests running
    demand: float  # mean requests running or waiting: what would run with slots enough
    hit: float  # prefix-cache hits over prompt tokens (0 with caching off)
    window: float  # seconds


@dataclass(frozen=True)
class _Stages:
    """The model's stage times for one configuration at one load (seconds)."""

    itl: float  # mean time per output token
    decode_itl: float  # ... in a step that decodes only
    mixed_itl: float  # ... in a step that also prefills a chunk
    mixed_share: float  # the share of steps that prefill a chunk
    prefill: float  # scheduled -> first token, with the batch's decodes in each step
    prefill_work: float  # the engine time of the prefill alone
    decode_share: float  # a request's share of its decode steps
    # ... with the batch as large as the slots allow: the engine's capacity per request
    full_decode_share: float
    slots: float  # requests that can run at once
    max_seqs: float  # ... at most, whatever the KV cache holds: max-num-seqs
    # The mixed steps' ITL by kind, with each kind's share of the mixed steps: a prompt's full
    # chunks, its last (shorter) chunk, and steps carrying several prompts' prefills at once.
    mixed_parts: tuple[tuple[float, float], ...] = ()

    def itl_at(self, percentile: int, scale: float = 1.0, share: float = 1.0) -> float:
        """The ITL quantile as a window reads it: ``histogram_quantile`` over vLLM's ITL buckets
        of the tokens of steps that only decode and of steps that also prefill, each at its
        step's time (times ``scale``), the prefilling ones ``share`` times as many as the model
        counts. Prometheus interpolates within a bucket, so while both configurations' tokens
        stay in the same buckets the reading follows their shares there, not their times: 16
        ms and 11 ms prefill steps read alike in the 10-25 ms bucket."""
        parts = self.mixed_parts or ((self.mixed_itl, 1.0),)
        prefilling = min(self.mixed_share * share, 1.0)
        mixed = [(t * scale, prefilling * w) for t, w in parts]
        tokens = [(self.decode_itl * scale, 1.0 - prefilling), *mixed]
        # Each bucket counts the tokens at or under its edge: summed once per first bucket a
        # token falls in (the operator's loop reads hundreds of these a decision), in the
        # tokens' order, as a bucket-by-bucket sum would.
        first = [(bisect.bisect_left(ITL_BUCKETS, t), n) for t, n in tokens]
        upto = {j: sum(n for k, n in first if k <= j) for j in {k for k, _ in first}}
        counts, seen = [], 0.0
        for b, le in enumerate(ITL_BUCKETS):
            seen = upto.get(b, seen)
            counts.append((le, seen))
        counts.append((math.inf, max(seen, 1.0)))  # the shares may sum a rounding over 1
        reading = ordered_histogram_quantile(percentile / 100.0, counts)
        return reading if reading is not None and math.isfinite(reading) else self.mixed_itl * scale

    def itl_readings(self, percentile: int) -> tuple[float, ...]:
        """``itl_at`` at each of ``EDGE_POINTS``."""
        return tuple(self.itl_at(percentile, u, v) for u, v in EDGE_POINTS)


@dataclass(frozen=True)
class Calibration:
    """The window's measured stage means over the running configuration's modelled ones."""

    load: _Load
    slots: float  # requests the running configuration can run at once
    itl_factor: float
    prefill_factor: float
    # Arrivals as the queue feels them over the arrival rate: the running configuration's
    # utilisation read from its measured queue (0: no queue) over the one its arrivals give.
    queue_load: float
    overhead: float  # TTFT outside the queue and the prefill, as measured
    queue: float  # measured mean queue time
    prefill: float  # measured mean prefill time
    itl: float  # measured mean time per output token
    # The ITL objective's percentile and the window's ITL there (None: no ITL objective, or
    # the window has no such quantile; forecasts then move the mean), the model's reading of
    # it on the running configuration at each of ``EDGE_POINTS`` (empty: no quantile), and
    # how likely each scale is given the window's reading (``_scale_weights``).
    itl_percentile: int | None = None
    itl_quantile: float | None = None
    itl_readings: tuple[float, ...] = ()
    itl_weights: tuple[float, ...] = ()
    # The window's requests waiting for a slot are held in flight (a queue that did not grow,
    # ``MIN_WAITING`` or more a replica), and the time a request holds a slot.
    held: bool = False
    slot_time: float = 0.0

    @property
    def itl_quantile_factor(self) -> float:
        """The window's ITL quantile over the model's reading of it at the likeliest of the
        plausible ``EDGE_POINTS`` (1 where either is unknown): those within two of their
        prior's standard deviations, so that a tail only step times half again as long as
        the mean ITL says, with twice the prefilling steps, would make is not called one the
        model describes."""
        if len(self.itl_weights) != len(EDGE_POINTS) or not self.itl_quantile:
            return 1.0
        plausible = [
            (w, r)
            for (u, v), w, r in zip(EDGE_POINTS, self.itl_weights, self.itl_readings, strict=True)
            if abs(math.log(u)) <= 2 * SCALE_SPREAD and abs(math.log(v)) <= 2 * SHARE_SPREAD
        ]
        best = max(plausible, default=(0.0, 0.0))[1]
        return self.itl_quantile / best if best else 1.0

    @property
    def trusted(self) -> bool:
        return all(
            1 / TRUSTED_FACTOR <= f <= TRUSTED_FACTOR
            for f in (self.itl_factor, self.prefill_factor)
        )

    @property
    def ttft(self) -> float:
        return self.overhead + self.queue + self.prefill

    @property
    def e2e(self) -> float:
        return self.ttft + max(self.load.output - 1.0, 0.0) * self.itl


def engine_config(
    cl: VllmCommandLine, gpus: int | None, hardware: HardwareInfo
) -> EngineConfig | None:
    """The engine ``cl`` starts on ``gpus`` GPUs of the deployment's kind, or None when the
    model, the GPU or the command line is one the performance model does not know or vLLM
    would refuse."""
    if hardware.gpu_product is None:
        return None
    tp, pp = (parse_int(cl.get(f"{kind}-parallel-size")) or 1 for kind in ("tensor", "pipeline"))
    try:
        return build_engine_config(cl, gpu=hardware.gpu_product, num_gpus=gpus or max(tp * pp, 1))
    except (StartupError, ValueError):  # unknown model or GPU (ValueErrors) or refused
        return None


def calibrate(
    observation: Observation, running: EngineConfig, itl_percentile: int | None = None
) -> Calibration | None:
    """The running configuration's model fitted to ``observation`` (and to its ITL at
    ``itl_percentile``, the objective's, when it has one); None when the window lacks a stage
    the fit needs."""
    o = observation
    itl = o.tpot_mean if o.itl_source != "inter_token_latency" else o.itl_mean
    if itl is None or itl <= 0:
        itl = o.tpot_mean if o.tpot_mean else o.itl_mean
    needed = (itl, o.ttft_mean, o.queue_time_mean, o.prefill_time_mean, o.prompt_tokens_mean)
    if any(v is None or not math.isfinite(v) for v in needed) or not itl or not o.prefill_time_mean:
        return None  # a stage not measured, or a tenant's series that is not a number
    others = (o.generation_tokens_mean, o.running_mean, o.waiting_mean, o.prefix_cache_hit_rate)
    if not all(v is None or math.isfinite(v) for v in (*others, o.arrival_rate)):
        return None
    assert o.ttft_mean is not None and o.queue_time_mean is not None
    pods = max(o.pods, 1)
    load = _Load(
        rate=o.arrival_rate / pods,
        prompt=max(o.prompt_tokens_mean or 1.0, 1.0),
        output=max(o.generation_tokens_mean or 1.0, 1.0),
        batch=max((o.running_mean or 1.0) / pods, 1.0),
        demand=max(((o.running_mean or 1.0) + (o.waiting_mean or 0.0)) / pods, 1.0),
        # Caching on but no hit rate: nothing was looked up in the cache, nothing was shared.
        hit=(o.prefix_cache_hit_rate or 0.0) if running.prefix_caching else 0.0,
        window=o.window_seconds,
    )
    model = _stages(CostModel(running), load, load.batch, load.hit)
    itl_factor = itl / model.itl
    prefill_factor = o.prefill_time_mean / model.prefill
    calibrated = _scaled(model, itl_factor, prefill_factor)
    queue, overhead = _queue_and_overhead(o)
    server = _bottleneck(calibrated, load)
    nominal = server.utilisation
    utilisation = _utilisation(queue, server)
    behind = saturated(o)
    if behind and o.requests > 0:
        # A server falling behind served all it could: its arrivals over the requests it
        # finished is how far past its capacity the load runs. The queue times of those that
        # finished only bound that from below (those still waiting will wait longer).
        utilisation = max(utilisation, o.arrivals / o.requests)
        # ... and the forecasts' changes are taken from the wait that backlog means, so that
        # the running configuration forecasts itself: a candidate still behind it waits as
        # much less as it serves more, one that keeps up waits as a steady queue does.
        queue = max(queue, _wait(utilisation, server, load.window))
        if not math.isfinite(queue):
            return None  # a backlog past any number: a gauge no server filled (hostile)
    quantile = o.itl.get(itl_percentile) if itl_percentile is not None else None
    readings = (
        calibrated.itl_readings(itl_percentile) if quantile and itl_percentile is not None else ()
    )
    weights = _scale_weights(readings, quantile) if quantile else ()
    waiting = load.demand - load.batch
    held = queue > 0 and waiting >= MIN_WAITING and not behind
    return Calibration(
        load=load,
        slots=calibrated.slots,
        itl_factor=itl_factor,
        prefill_factor=prefill_factor,
        queue_load=utilisation / nominal if nominal > 0 else 0.0,
        overhead=overhead,
        queue=queue,
        prefill=o.prefill_time_mean,
        itl=itl,
        itl_percentile=itl_percentile if quantile else None,
        itl_quantile=quantile or None,
        itl_readings=readings if weights else (),  # a reading no scale can weigh: none
        itl_weights=weights,
        held=held,
        slot_time=_slot_time(calibrated, load),
    )


def _scale_weights(readings: tuple[float, ...], quantile: float) -> tuple[float, ...]:
    """How likely each of ``EDGE_POINTS`` is, relative to the likeliest (1): its prior
    (``SCALE_SPREAD``, ``SHARE_SPREAD``) times how well the model's reading of the running
    configuration's ITL quantile at it agrees with the window's ``quantile``
    (``READING_SPREAD``). The window says on which side of a bucket edge its tail steps fall,
    which the mean ITL the step times are calibrated on does not: a reading of 43 ms all but
    rules out the scales that read 24 ms."""
    if not (quantile > 0 and math.isfinite(quantile)) or len(readings) != len(EDGE_POINTS):
        return ()
    logs = [
        -(math.log(u) ** 2) / (2 * SCALE_SPREAD**2)
        - (math.log(v) ** 2) / (2 * SHARE_SPREAD**2)
        - (math.log(r / quantile) ** 2 / (2 * READING_SPREAD**2) if r > 0 else math.inf)
        for (u, v), r in zip(EDGE_POINTS, readings, strict=True)
    ]
    best = max(logs)
    return tuple(math.exp(x - best) for x in logs) if math.isfinite(best) else ()


def _queue_and_overhead(o: Observation) -> tuple[float, float]:
    """The window's mean queue time and the rest of its TTFT beyond the queue and the prefill.

    vLLM records a request's queue and prefill times when it finishes, its TTFT at its first
    token: while a queue builds (a server just started, clients piling up on too few slots) the
    requests that finish in a window waited less than those that start, and the difference
    shows as TTFT outside the queue and the prefill. The requests waiting bound how much of it
    is queue (Little's law: waiting over the arrival rate); the rest is per-request overhead
    (HTTP, tokenising), which no engine setting changes."""
    assert o.ttft_mean is not None and o.queue_time_mean is not None
    assert o.prefill_time_mean is not None
    queue = max(o.queue_time_mean, 0.0)
    rest = max(o.ttft_mean - queue - o.prefill_time_mean, 0.0)
    delay, _ = queue_delay(o)  # the larger of the recorded mean and Little's law
    lagged = min(rest, max((delay or 0.0) - queue, 0.0))
    return queue + lagged, rest - lagged


def forecast(
    calibration: Calibration,
    running: EngineConfig,
    candidate: EngineConfig,
    *,
    queue: bool = True,
) -> Forecast | None:
    """What ``candidate`` is expected to do to the means ``calibration`` measured on
    ``running``; None when the calibration is not to be trusted. With ``queue`` False, TTFT
    and e2e leave out the candidate's queue and the rest of TTFT the window measured beyond
    its queue and prefill: the engine's own floor, free of the queueing model's error (its
    M/M/1 reading of one window) and of a queue-time histogram that lags a growing queue."""
    if not calibration.trusted:
        return None
    load = calibration.load
    hit: float | None
    if candidate.prefix_caching and not running.prefix_caching:
        hit = None  # how much of the prompts is shared shows only once caching is on
    elif candidate.prefix_caching:
        hit = load.hit
    else:
        hit = 0.0
    itl_factor, prefill_factor = calibration.itl_factor, calibration.prefill_factor
    cost = CostModel(candidate)
    # More slots than the running configuration's admit the requests that waited for one;
    # fewer hold the batch to them.
    wider = _slots(candidate, load) > calibration.slots
    batch = load.demand if wider else load.batch
    stages = _scaled(_stages(cost, load, batch, hit or 0.0), itl_factor, prefill_factor)
    turned = _closed_loop_rate(calibration, stages)
    if turned is not None:
        closed = replace(load, rate=turned)
        stages = _scaled(_stages(cost, closed, batch, hit or 0.0), itl_factor, prefill_factor)
    server = _bottleneck(stages, load)
    busy = calibration.queue_load * server.utilisation
    fewer = _fewer_slots(calibration, stages)
    if fewer is not None and fewer.utilisation > busy:
        server, busy = fewer, fewer.utilisation
    wait = max(_wait(busy, server, load.window), _held_wait(calibration, stages))
    percentile, readings = calibration.itl_percentile, calibration.itl_readings
    weights = calibration.itl_weights
    known = len(readings) == len(weights) == len(EDGE_POINTS) and all(r > 0 for r in readings)
    if percentile is not None and calibration.itl_quantile is not None and known:
        # The candidate's reading over the running one's, averaged over where the bucket
        # edges may fall among the steps and how many steps prefill (``EDGE_POINTS``), each
        # as likely as it is.
        ratios = [
            (stages.itl_at(percentile, u, v) / b, w)
            for (u, v), b, w in zip(EDGE_POINTS, readings, weights, strict=True)
            if w >= MIN_WEIGHT
        ]
        ratio = sum(r * w for r, w in ratios) / sum(w for _, w in ratios)
        itl: float | None = max(ratio - 1.0, -1.0)
        cautious: float | None = max(_weighted_quantile(ratios, CAUTIOUS_SHARE) - 1.0, -1.0)
    else:
        itl = cautious = _change(stages.itl, calibration.itl)
    if hit is None:
        return Forecast(ttft=None, itl=itl, e2e=None, saturated=busy >= 1.0, itl_cautious=cautious)
    ttft = stages.prefill + (calibration.overhead + wait if queue else 0.0)
    e2e = ttft + max(load.output - 1.0, 0.0) * stages.itl
    return Forecast(
        ttft=_change(ttft, calibration.ttft),
        itl=itl,
        e2e=_change(e2e, calibration.e2e),
        saturated=busy >= 1.0,
        itl_cautious=cautious,
    )


def _weighted_quantile(values: list[tuple[float, float]], share: float) -> float:
    """The least value that ``share`` of the (value, weight) pairs' weight is at or below."""
    total = sum(w for _, w in values)
    seen = 0.0
    for value, weight in sorted(values):
        seen += weight
        if seen >= share * total:
            return value
    return max(v for v, _ in values)


def forecast_change(
    observation: Observation,
    hardware: HardwareInfo,
    running: tuple[VllmCommandLine, int | None],
    candidate: tuple[VllmCommandLine, int | None],
    itl_percentile: int | None = None,
) -> Forecast | None:
    """The forecast for moving from the ``running`` (command line, GPUs) to the ``candidate``
    one, calibrated on ``observation`` of the running one; None where the model cannot say."""
    before = engine_config(*running, hardware)
    after = engine_config(*candidate, hardware)
    if before is None or after is None:
        return None
    calibration = calibrate(observation, before, itl_percentile)
    return None if calibration is None else forecast(calibration, before, after)


def _change(new: float, old: float) -> float | None:
    return None if old <= 0 else max(new / old - 1.0, -1.0)


def _stages(cost: CostModel, load: _Load, batch: float, hit: float) -> _Stages:
    config = cost.config
    slots = _slots(config, load)
    n = max(1, round(min(batch, slots, MAX_BATCH)))
    context = int(load.prompt + load.output / 2)
    draft = config.spec.num_speculative_tokens if config.spec is not None else 0
    step = cost.step_time(decode_contexts=[context] * n, prefill_chunks=[], spec_tokens=draft)
    full = max(1, round(min(slots, MAX_BATCH)))
    full_step = (
        step
        if full == n
        else cost.step_time(decode_contexts=[context] * full, prefill_chunks=[], spec_tokens=draft)
    )
    per_step = cost.tokens_per_decode_step_expected()
    cached = int(load.prompt * min(max(hit, 0.0), 1.0))
    uncached = max(int(load.prompt) - cached, 1)
    # vLLM schedules the running requests' decode tokens first: a prefill gets what they leave
    # of the budget.
    budget = max(config.max_num_batched_tokens - (n - 1) * (1 + draft), 1)
    chunk = min(budget, uncached) if config.chunked_prefill else uncached
    steps = math.ceil(uncached / max(chunk, 1))
    timed = min(steps, MAX_PREFILL_STEPS)
    prefill = work = 0.0
    past = cached
    others = [context] * (n - 1)  # the batch's other requests decode in each prefill step
    times: list[float] = []
    for _ in range(timed):
        size = min(chunk, uncached - (past - cached)) or chunk
        t = cost.step_time(decode_contexts=others, prefill_chunks=[(size, past)])
        times.append(t)
        prefill += t
        work += cost.step_time(decode_contexts=[], prefill_chunks=[(size, past)])
        past += size
    scale = steps / timed
    # Prefill chunks ride in the steps of the decoding requests: per second ``chunks`` steps
    # also prefill and the rest only decode. A token's time is that of the step it came in:
    # the mixture of the two. A crowded step prefills several prompts' tokens at once, so the
    # prompt tokens arriving per second fill fewer, longer steps than one per chunk: counted
    # by the tokens and the time of the mean prefilling step.
    # Kinds of a prompt's own prefilling steps, as (step time, steps a prompt): its full
    # chunks, and its last one when shorter (``_shared_last_chunk``: often beside the next
    # prompt's first chunk).
    uneven = 1 < steps == len(times)  # every chunk timed, so the last one is the prompt's last
    kinds = (
        _shared_last_chunk(cost, others, (uncached, cached, chunk), times, load.rate)
        if uneven
        else [(sum(times) / len(times), float(len(times)))]
    )
    own_steps = sum(w for _, w in kinds)  # the steps a prompt's own prefill takes (timed)
    solo_step = sum(t * w for t, w in kinds) / own_steps
    crowded = _crowded_steps(cost, others, budget, (uncached, cached), steps, load.rate * solo_step)
    # ``_crowded_steps`` counts as a prompt sees its step (the others beside it); the steps
    # themselves are fewer where several prompts share one: a step of k prompts is one step
    # for k of them. Tokens (ITL) are counted by the step.
    alone = 1.0 - sum(p for _, p, _ in crowded)
    shares = [(solo_step, alone), *((t, p * uncached / tokens) for t, p, tokens in crowded)]
    per_prompt = sum(w for _, w in shares)  # a prompt's share of a step, at most 1
    mixed_step = sum(t * w for t, w in shares) / per_prompt
    chunks = load.rate * own_steps * steps / timed * per_prompt
    pure = max(1.0 - chunks * mixed_step, 0.0) / step
    mixed_share = min(chunks / (chunks + pure), MAX_PREFILL_SHARE) if chunks + pure > 0 else 0.0
    decode_itl, mixed_itl = step / per_step, max(mixed_step, step) / per_step
    # Kinds of mixed steps for the ITL tail: the prompt's own (above) and, when the budget has
    # room beside a whole prompt, steps that also prefill the prompts that arrived within a
    # step's time (``_crowded_steps``).
    parts = [
        (max(t, step) / per_step, w / own_steps * alone / per_prompt) for t, w in kinds if w > 0
    ]
    parts += [(max(t, step) / per_step, w / per_prompt) for t, w in shares[1:] if w > 0]
    return _Stages(
        itl=(1.0 - mixed_share) * decode_itl + mixed_share * mixed_itl,
        decode_itl=decode_itl,
        mixed_itl=mixed_itl,
        mixed_share=mixed_share,
        mixed_parts=tuple(parts),
        prefill=prefill * scale,
        prefill_work=work * scale,
        decode_share=load.output / per_step * step / n,
        full_decode_share=load.output / per_step * full_step / full,
        slots=slots,
        max_seqs=float(config.max_num_seqs),
    )


def _crowded_steps(
    cost: CostModel,
    others: list[int],
    budget: int,
    prompt: tuple[int, int],
    steps: int,
    arrivals: float,
) -> list[tuple[float, float, int]]:
    """Steps that prefill more than one prompt, as (step time, chance that a prompt's one
    prefilling step is that one, prompt tokens the step prefills); the caller counts them per
    step, not per prompt.

    vLLM fills a step's token budget with the prompts waiting: beside a prompt that fits in one
    chunk, the ``k`` others that arrived within the step's time (Poisson, ``arrivals`` expected)
    are prefilled whole while they fit, and with chunked prefill the next one's first chunk takes
    what is left (at 2,048 beside 1,200 tokens, 848 less the decodes). The last kind the budget
    holds takes the rest of the tail; kinds less likely than ``CROWDED_TAIL`` are not timed."""
    config = cost.config
    uncached, cached = prompt  # tokens to prefill, tokens the prefix cache holds
    room = budget - uncached
    if steps != 1 or room <= 0:
        return []

    def fits(left: int) -> int:  # the next prompt's tokens in this step
        if config.chunked_prefill:
            return min(uncached, left)
        return uncached if uncached <= left else 0

    lam = max(arrivals, 0.0)  # a rate below zero (a hostile source's series): no second prompt
    chunks = [(uncached, cached)]
    found: list[tuple[float, float, int]] = []
    beyond = 1.0 - math.exp(-lam)  # P(at least k others), from k = 1
    pmf = math.exp(-lam)
    size = fits(room)
    for k in range(1, MAX_CROWDED_PROMPTS + 1):
        if size <= 0 or beyond < CROWDED_TAIL:
            break
        chunks.append((size, cached))
        room -= size
        size = fits(room)
        pmf *= lam / k  # P(exactly k others)
        last = size <= 0 or k == MAX_CROWDED_PROMPTS  # more wait for the next step
        t = cost.step_time(decode_contexts=others, prefill_chunks=chunks)
        found.append((t, beyond if last else pmf, sum(tokens for tokens, _ in chunks)))
        beyond -= pmf
    return found


def _shared_last_chunk(
    cost: CostModel,
    others: list[int],
    prompt: tuple[int, int, int],
    times: list[float],
    rate: float,
) -> list[tuple[float, float]]:
    """A prompt of several chunks as (step time, steps a prompt) kinds: its full chunks, and
    its shorter last chunk alone or beside the next prompt's first chunk.

    vLLM schedules the running requests first (the last chunk of a prompt being prefilled is
    one of them), then fills what is left of the budget from the waiting prompts: with another
    prompt waiting, the last chunk's step carries a full chunk's tokens, the next prompt's
    first ones among them. It waits when one arrived while this prompt prefilled (Poisson at
    ``rate``: the prompt's steps' time). The tokens the shared step takes from the next
    prompt are steps that prompt does not take: a stream of prompts always waiting is a
    stream of full steps (at 1,200-token prompts and a 1,024-token budget, not one full and
    one short step a prompt, which would read an ITL tail half as long)."""
    uncached, cached, chunk = prompt
    last = uncached - chunk * (len(times) - 1)  # the last chunk's tokens
    fill = min(chunk - last, uncached)  # the next prompt's tokens beside it
    full = sum(times[:-1]) / (len(times) - 1)
    if fill <= 0:  # the last chunk is a full one: no room beside it
        return [(full, len(times) - 1.0), (times[-1], 1.0)]
    waiting = 1.0 - math.exp(-max(rate, 0.0) * sum(times))  # a hostile rate below 0: none
    shared = cost.step_time(
        decode_contexts=others, prefill_chunks=[(last, cached + uncached - last), (fill, cached)]
    )
    absorbed = waiting * fill / chunk  # the next prompt's steps the shared ones take
    return [
        (full, len(times) - 1 - absorbed),
        (shared, waiting),
        (times[-1], 1.0 - waiting),
    ]


def _scaled(stages: _Stages, itl_factor: float, prefill_factor: float) -> _Stages:
    return _Stages(
        itl=stages.itl * itl_factor,
        decode_itl=stages.decode_itl * itl_factor,
        mixed_itl=stages.mixed_itl * itl_factor,
        mixed_share=stages.mixed_share,
        mixed_parts=tuple((t * itl_factor, w) for t, w in stages.mixed_parts),
        prefill=stages.prefill * prefill_factor,
        prefill_work=stages.prefill_work * prefill_factor,
        decode_share=stages.decode_share * itl_factor,
        full_decode_share=stages.full_decode_share * itl_factor,
        slots=stages.slots,
        max_seqs=stages.max_seqs,
    )


def _slots(config: EngineConfig, load: _Load) -> float:
    """Requests that can run at once: max-num-seqs, or the full-length requests the KV cache
    holds (vLLM admits a request only when its blocks fit)."""
    per_request = max(load.prompt + load.output, 1.0)
    return max(min(float(config.max_num_seqs), config.kv_cache_tokens / per_request), 1.0)


def _slot_time(stages: _Stages, load: _Load) -> float:
    """The time a request holds a slot: its prefill and its output tokens."""
    return stages.prefill + load.output * stages.itl


def _closed_loop_rate(calibration: Calibration, stages: _Stages) -> float | None:
    """The arrival rate the candidate would see from clients that hold their requests in
    flight (the window's queue read as ``held``), or None (an open load keeps its rate).
    Such clients send the next request as one returns, so the rate follows the requests in
    flight over the time each takes (Little's law), at most what the engine can serve: a
    server that turns requests over faster gets them back faster, and the prefills they bring
    stall more decode steps. Relative to the window's e2e (the model's error cancels), and
    with no think time between requests (the most the rate can change)."""
    c, load = calibration, calibration.load
    if not c.held or c.e2e <= 0:
        return None
    e2e = (
        c.overhead
        + _held_wait(c, stages)
        + stages.prefill
        + max(load.output - 1.0, 0.0) * stages.itl
    )
    if e2e <= 0:
        return None
    engine = stages.prefill_work + stages.full_decode_share
    ceiling = SATURATED / engine if engine > 0 else math.inf
    return min(load.rate * c.e2e / e2e, max(ceiling, load.rate))


def _held_wait(calibration: Calibration, stages: _Stages) -> float:
    """The queue time of the window's waiting requests on the candidate's slots (0 when the
    window had no steady queue for slots): the requests in flight stay, those beyond the
    candidate's slots wait, and a slot frees every slot time over the slots. Scaled to the
    measured queue, and the slots to the requests the running configuration measured
    running (the model's KV cache estimate may be off; the ratio of the slots is kept), never
    past the candidate's max-num-seqs."""
    c, load = calibration, calibration.load
    if not c.held or c.slot_time <= 0 or c.slots <= 0:
        return 0.0
    slots = min(stages.slots * load.batch / c.slots, stages.max_seqs)
    waiting = max(load.demand - slots, 0.0)
    turnover = _slot_time(stages, load) / slots
    return (
        c.queue * (waiting / (load.demand - load.batch)) * (turnover / (c.slot_time / load.batch))
    )


def _fewer_slots(calibration: Calibration, stages: _Stages) -> _Server | None:
    """The candidate's slots, busy with the requests the window kept running, where it has
    fewer slots than the running configuration (None otherwise, or where the window's queue
    was read as clients holding their requests: ``_held_wait`` times that). The requests in
    flight stay (Little's law: the arrivals times the time each holds a slot), so more of them
    than slots is a queue that grows, whatever the window's queue time: a window with no
    queue says nothing of slots it did not lack. (With as many slots or more the window's
    own queue reading stands: the running configuration forecasts what it measured.)"""
    c, load = calibration, calibration.load
    if c.held or c.slot_time <= 0 or stages.slots >= c.slots:
        return None
    return _slot_server(stages, load, load.batch / c.slot_time)


@dataclass(frozen=True)
class _Server:
    """Where requests queue: ``servers`` alike, each busy ``service`` seconds a request."""

    service: float
    servers: int
    utilisation: float  # at the load's arrival rate


def _bottleneck(stages: _Stages, load: _Load) -> _Server:
    """The busier of the engine (one server: the engine time a request takes, at the largest
    batch the slots allow) and its slots (each holds a request for its slot time)."""
    engine = stages.prefill_work + stages.full_decode_share
    return max(
        (_Server(engine, 1, load.rate * engine), _slot_server(stages, load, load.rate)),
        key=lambda server: server.utilisation,
    )


def _slot_server(stages: _Stages, load: _Load, rate: float) -> _Server:
    """The slots as servers, each holding a request for its slot time, busy with ``rate``
    requests a second (Little's law: the requests in flight over the slots)."""
    slot = _slot_time(stages, load)
    slots = max(1, round(min(stages.slots, MAX_BATCH)))
    return _Server(slot, slots, rate * slot / slots)


def _queued(busy: float, server: _Server) -> float:
    """Mean queue time of M/M/c at utilisation ``busy`` (< 1): Erlang C's chance of waiting
    times the time for one of the busy servers to free (M/M/1's ``s u / (1 - u)`` at c = 1)."""
    c, offered = server.servers, busy * server.servers
    blocked = 1.0  # Erlang B, by its recursion over the servers
    for k in range(1, c + 1):
        blocked = offered * blocked / (k + offered * blocked)
    waits = c * blocked / (c - offered * (1.0 - blocked))
    return waits * server.service / (c - offered)


def _wait(busy: float, server: _Server, window: float) -> float:
    """Mean queue time at utilisation ``busy``: M/M/c below saturation; at or beyond it, the
    mean wait of a queue that grows at the excess rate over the window."""
    if busy < SATURATED:
        return _queued(busy, server)
    growing = (busy - 1.0) * window / 2.0
    return max(_queued(SATURATED, server), growing)


def _utilisation(queue: float, server: _Server) -> float:
    """The utilisation at which ``server`` queues requests ``queue`` seconds on average (the
    inverse of ``_queued``): ``q / (q + s)`` for one server, by bisection for more."""
    if queue <= 0 or server.service <= 0:
        return 0.0
    if server.servers == 1:
        return queue / (queue + server.service)
    if queue >= _queued(SATURATED, server):
        return SATURATED  # a queue this long is read as saturation
    low, high = 0.0, SATURATED
    for _ in range(50):
        middle = (low + high) / 2.0
        low, high = (middle, high) if _queued(middle, server) < queue else (low, middle)
    return (low + high) / 2.0
