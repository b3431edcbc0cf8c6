"""What the calibrated model expects the whole allowed space to reach, and whether any
configuration in it can meet the targets at all.

Every configuration the spec allows from the running one (``core.space``) is forecast by the
model calibrated on the window (``core.model``); each objective's expected ratio to its target
is its measured ratio times the forecast change. TTFT and e2e are forecast as the engine's
floor: the prefill and the decode, without the queue and without the rest of TTFT the window
measured beside them. The queue is what the model reads least well (one window's M/M/1,
bursts, closed loops; a queue-time histogram lags a growing queue, so that "rest" can hold
queueing too), and replicas, not knobs, are its usual fix: targets missed only by queueing are
never called unreachable. Nor is anything on a saturated window, whose latencies are only
lower bounds of a growing backlog.

The targets are *unreachable* when every configuration is expected to miss some target by
``UNREACHABLE_FACTOR`` or more: a margin no forecast error the planner still trusts
(``planner.MODEL_DISTRUST``) could close. A configuration the model cannot forecast might meet,
so any such configuration keeps the targets "within reach as far as the model knows": one it
cannot build (an unknown checkpoint or speculative method, or one its copy of vLLM's checks
refuses, which a newer vLLM might not), and one that turns a prefix cache on (the share of the
prompts it finds is unknown until it is on, and with it the prefills that stall decodes as
much as TTFT). Nothing is judged where the model does not describe the window: on a saturated
window, where the window's ITL tail is not what the model's steps make of it (its quantile
factor beyond ``model.TRUSTED_FACTOR``), and for unreachability under KV-cache pressure (the
model has no preemption in it, so it understates what more KV room saves).

The caller asks only once the model has a record on the target within the error it trusts
(a trial measured what it forecast): a first window says nothing of how far this server's knob
effects stray from the published ranges the model is built on.

The best reachable configuration is the one with the lowest expected violation (fewer
unknowns, then fewer GPUs, among equals). For unreachable targets the same space is forecast
on the known GPUs with at least 1.5x the memory bandwidth, slowest first, and the first on
which the model expects every target met with a margin (``ADVICE_CEILING``) is named as
advice.

The same forecasts, queue included, say which kind of change the targets are met with at
the least cost (``cheapest_way``): when no configuration reached by safe changes alone is
expected within ``NEAR_MISS`` of every target, a lossy change on the running GPUs that is
expected to meet them all, else, when nothing on the running GPUs comes near either, the fewest
more GPUs on which some configuration is; the planner moves that way first.

The work is bounded: a space larger than ``MAX_FORECASTS`` is not judged at all, other GPUs
share what is left of that budget, and forecasting stops at the first configuration within
reach. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from latency_tuner.api.spec import Knobs
from latency_tuner.core import model, saturation
from latency_tuner.core import space as allowed
from latency_tuner.core.config_view import view
from latency_tuner.core.evidence import Bottleneck, Cause
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import KnobClass, costliest_class
from latency_tuner.core.observation import Observation
from latency_tuner.core.score import ObjectiveScore, Score, format_seconds
from latency_tuner.perf.config import EngineConfig
from latency_tuner.vllm.args import VllmCommandLine

# Every configuration must be expected this far over some target (twice it) before the targets
# are called unreachable: a forecast off by up to 50% -- the error past which the planner
# stops trusting the model at all -- still leaves each one missing.
UNREACHABLE_FACTOR = 2.0
# Forecasts per call at most: each takes up to half a millisecond (long prompts in small
# chunks), and the decision runs on the operator's loop; a spec with many wide knobs is not
# judged rather than slowing every other target's decision (about 60 ms at most).
MAX_FORECASTS = 128
# Another GPU is advised only where the model expects every objective at most this share of its
# target: a bare "meets" would be a coin toss at the model's typical error.
ADVICE_CEILING = 0.8
# A configuration on the running GPUs forecast within this factor of every target may still
# meet them (a forecast off by a third, the model's typical error on foreign servers, or
# a queue it reads high): more GPUs are not the planner's first move while one is.
NEAR_MISS = 1.5


@dataclass(frozen=True)
class Expected:
    """One configuration's forecast: each objective with its expected ratio to the target
    (None where the model cannot say)."""

    values: tuple[tuple[str, str], ...]  # (knob, value) where it differs from the running one
    gpus: int
    ratios: tuple[tuple[ObjectiveScore, float | None], ...]

    @property
    def violation(self) -> float:
        """The expected violation over the objectives the model can forecast."""
        return sum(max(r - 1.0, 0.0) for _, r in self.ratios if r is not None)

    @property
    def misses(self) -> bool:
        """Some target is expected missed by ``UNREACHABLE_FACTOR`` or more."""
        return any(r is not None and r >= UNREACHABLE_FACTOR for _, r in self.ratios)

    @property
    def meets(self) -> bool:
        """Every target is expected met with a margin the model's error will not eat
        (``ADVICE_CEILING``; every objective forecast)."""
        return all(r is not None and r <= ADVICE_CEILING for _, r in self.ratios)

    def describe(self) -> str:
        """ "TTFT p90 ~1.2s (target 500ms), ITL p95 ~48ms (target 35ms) with max-num-seqs=64"."""
        parts = [
            f"{o.label} ~{format_seconds(_approx(r * o.threshold))} "
            f"(target {format_seconds(o.threshold)})"
            if r is not None
            else f"{o.label} unknown (target {format_seconds(o.threshold)})"
            for o, r in self.ratios
        ]
        where = ", ".join(f"{k}={v}" for k, v in self.values) or "the running configuration"
        return f"{', '.join(parts)} with {where}"


@dataclass(frozen=True)
class Unreachable:
    """The model's case that no allowed configuration meets the targets."""

    configurations: int  # forecast
    best: Expected  # the lowest expected violation
    elsewhere: tuple[str, ...] = ()  # "on H200 GPUs the model expects ...": advice

    def describe(self) -> str:
        return (
            f"the calibrated model expects none of the {self.configurations} configurations the "
            f"spec allows to meet the targets, even on the engine's time alone (no queue); at "
            f"best {self.best.describe()}"
        )


@dataclass(frozen=True)
class Fitted:
    """A window with the model calibrated on it, and what the space around it is judged by:
    the running configuration, the spec's knobs and the hardware."""

    observation: Observation
    causes: Sequence[Cause]  # the window's diagnosed causes
    score: Score
    calibration: model.Calibration
    running: EngineConfig
    config: VllmCommandLine
    knobs: Knobs
    hardware: HardwareInfo


def unreachable(fit: Fitted) -> Unreachable | None:
    """The case that no configuration allowed around ``config`` can meet the targets, as the
    model calibrated on the window forecasts them; None when one may (as far as the model
    knows) or the space cannot be judged (larger than ``MAX_FORECASTS``, or not one the
    operator can describe). Call it only where the model has a record on this target within
    the error the planner trusts (``planner.model_error``)."""
    if not _described(fit):
        return None
    if not any(o.ratio is not None and o.ratio >= UNREACHABLE_FACTOR for o in fit.score.objectives):
        return None  # the running configuration is one of them, forecast at most as measured
    space = _space(fit)
    if space is None:
        return None
    _, points, running_values = space
    forecasts: list[Expected] = []
    for expected in _forecast_all(fit, points, running_values, fit.hardware):
        if not expected.misses:
            return None  # within reach: stop forecasting
        forecasts.append(expected)
    elsewhere: list[str] = []
    budget = MAX_FORECASTS - len(points)
    # The smallest step up first: the advice names the least GPU the model expects to do.
    hardware = fit.hardware
    for gpu in sorted(hardware.higher_bandwidth_gpus(), key=lambda g: g.bandwidth_tbs):
        if budget < len(points):
            break
        budget -= len(points)
        other = HardwareInfo(gpu.name, hardware.interconnect, hardware.gpus_per_node)
        there = _forecast_all(fit, points, running_values, other)
        meeting = [e for e in there if e.meets]
        if meeting:
            elsewhere.append(f"on {gpu.name} GPUs the model expects {_best(meeting).describe()}")
            break
    return Unreachable(len(points), _best(forecasts), tuple(elsewhere))


@dataclass(frozen=True)
class Way:
    """The cheapest kind of change that the model expects to meet the targets, where the
    cheaper kinds are not expected to come near them: a lossy change on the running GPUs, or
    the fewest more GPUs."""

    knob_class: KnobClass  # LOSSY or COSTLY
    gpus: int  # the GPUs it runs on (the running ones for LOSSY)


def cheapest_way(fit: Fitted) -> Way | None:
    """Where the model calibrated on the window expects the targets met at the least cost when
    no configuration reached by safe changes alone is expected within ``NEAR_MISS`` of every
    target: a lossy change on the running GPUs if some such configuration is expected to meet
    them all, else, when no configuration on the running GPUs is expected within
    ``NEAR_MISS`` either, the fewest more GPUs on which some is. None otherwise, or where the
    model does not describe the window or the space is not judged (as ``unreachable``).

    Queue included (this is where the targets are met, not a floor). A configuration the model
    cannot forecast (a prefix cache turned on) might meet: on the running GPUs it counts as
    near, elsewhere it does not count as meeting. Under KV-cache pressure the forecasts leave
    out preemptions and understate what more KV room saves, on every kind of change alike; the
    move they point to is measured like any other (``unreachable`` would end the tuning on
    them, so it does not judge such a window)."""
    if not _described(fit, preemptions=True):
        return None
    space = _space(fit)
    if space is None:
        return None
    gpus, points, running_values = space
    lossy_near = lossy_meets = False
    more: list[int] = []
    for expected in _forecast_all(fit, points, running_values, fit.hardware, queue=True):
        known = [r for _, r in expected.ratios if r is not None]
        near = len(known) < len(expected.ratios) or max(known, default=0.0) <= NEAR_MISS
        meets = len(known) == len(expected.ratios) and max(known, default=0.0) <= 1.0
        if expected.gpus > gpus:
            if meets:
                more.append(expected.gpus)
        elif costliest_class(knob for knob, _ in expected.values) is KnobClass.SAFE:
            if near:
                return None  # safe changes may do
        else:
            lossy_near, lossy_meets = lossy_near or near, lossy_meets or meets
    if lossy_meets:
        return Way(KnobClass.LOSSY, gpus)
    if lossy_near or not more:
        return None  # the running GPUs may do, or nothing is expected to meet
    return Way(KnobClass.COSTLY, min(more))


Points = list[tuple[tuple[tuple[str, str], ...], allowed.Setting]]


def _space(fit: Fitted) -> tuple[int, Points, dict[str, str]] | None:
    """The running GPUs, the allowed points around the running configuration and the running
    value of each dimension; None when the space is not one the operator can describe or is
    larger than ``MAX_FORECASTS``."""
    gpus = view(fit.config, fit.hardware).tensor_parallel_size
    try:
        dims = allowed.dimensions(fit.knobs, fit.config, fit.hardware, gpus)
    except ValueError:  # SpaceError among them
        return None
    if allowed.size(dims) > MAX_FORECASTS:
        return None
    points = list(allowed.settings(dims, allowed.Setting(fit.config, None, gpus)))
    return gpus, points, {d.knob: d.start for d in dims}


def _described(fit: Fitted, *, preemptions: bool = False) -> bool:
    """Whether the model describes the window well enough to judge the space on it (with
    ``preemptions``, also a window under KV-cache pressure: what more KV room saves is then
    understated)."""
    if saturation.saturated(fit.observation):
        return False  # its latencies are lower bounds of a growing backlog
    pressure = any(c.bottleneck is Bottleneck.KV_CACHE_PRESSURE for c in fit.causes)
    if pressure and not preemptions:
        return False  # preemptions: what more KV room would save is beyond the model
    # The window's ITL tail must be what the model's steps make of it: otherwise something the
    # model does not describe sets it, and what that is, no forecast can rule out.
    tail = fit.calibration.itl_quantile_factor
    return 1 / model.TRUSTED_FACTOR <= tail <= model.TRUSTED_FACTOR


def _forecast_all(
    fit: Fitted,
    points: Points,
    running_values: dict[str, str],
    hardware: HardwareInfo,
    *,
    queue: bool = False,
) -> Iterator[Expected]:
    """Each point's forecast on ``hardware``, one at a time (every ratio None where the model
    cannot say); the engine's floor unless ``queue``."""
    for values, setting in points:
        engine = model.engine_config(setting.cl, None, hardware)
        forecast = (
            None
            if engine is None
            else model.forecast(fit.calibration, fit.running, engine, queue=queue)
        )
        if forecast is not None and forecast.ttft is None:
            forecast = None  # a prefix cache turned on: its hits shorten the stalls too
        ratios = tuple(
            (o, forecast.ratio(o) if forecast is not None else None) for o in fit.score.objectives
        )
        changed = tuple((k, v) for k, v in values if running_values.get(k) != v)
        yield Expected(changed, setting.gpus, ratios)


def _approx(seconds: float) -> float:
    """Two significant figures: a forecast is no more precise than that."""
    return float(f"{seconds:.2g}")


def _best(forecasts: Iterable[Expected]) -> Expected:
    """The lowest expected violation; fewer unknowns, then fewer GPUs, among equals (the space
    is never empty: the running configuration is in it)."""
    return min(forecasts, key=lambda e: (e.violation, sum(r is None for _, r in e.ratios), e.gpus))
