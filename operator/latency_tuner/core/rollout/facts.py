"""What the operator saw this round (``Facts``) and which metrics windows it measures.

``Facts`` is either ``Blocked`` (the operator cannot work on the target, and why) or ``Ready``
(everything a phase reads is known). ``Windows`` names the windows of one round by field, the
same shape for what to measure (``windows_needed``: ``Windows[Window]``) and what was measured
(``Windows[WindowResult]``). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, TypeVar

from latency_tuner.api.durations import parse_duration, parse_timestamp
from latency_tuner.api.spec import LatencyTargetSpec, Strategy
from latency_tuner.api.status import LatencyTargetStatus, Phase, Trial
from latency_tuner.core.cluster import ContainerConfig, RolloutFacts
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.verdict import LONGER_LOOK
from latency_tuner.vllm.args import VllmCommandLine

RESTING = frozenset({Phase.CONVERGED, Phase.EXHAUSTED})
BASELINE_SUBWINDOWS = 3  # sub-windows of the baseline window, to estimate its noise
# Intervals of a canary's window, one sample per arm each (Mann-Whitney: 6 against 6 can reach
# p = 0.002; 5 against 5 is the least ``core.sidebyside`` judges on).
CANARY_INTERVALS = 6
# The longest look back, in evaluation windows, at the running configuration before giving up on
# it (``Windows.settled``): four times the requests of one window halve its sampling error.
SETTLED_WINDOWS = 4
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"  # the operator-wide default; the spec's TP may name another

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class MetricsFailure:
    """The metrics source could not answer (unreachable, query error): unknown, not empty."""

    message: str


WindowResult = ObservationResult | MetricsFailure


@dataclass(frozen=True)
class Window:
    """A measurement window ``[end - seconds, end]``, times in unix seconds, of the main
    Deployment's pods (``arm`` "main"), or, in a canary trial, of the canary's pods
    ("canary") or the main Deployment's without the canary ("baseline")."""

    end: float
    seconds: float
    arm: str = "main"


@dataclass(frozen=True)
class Windows(Generic[T]):
    """The windows of one round. ``current``: the last window, always wanted. While a trial is
    judged: ``trial`` (its window), ``baseline`` (the window before it started) and
    ``baseline_parts`` (that window cut in ``BASELINE_SUBWINDOWS``, for its noise); while a
    window of the running configuration is due to be judged, ``baseline_parts`` cut the
    current window so (its noise bars a change for margin as it would bar the trial's
    verdict), and ``settled`` is the running configuration since it settled, up to
    ``SETTLED_WINDOWS`` windows, when that is longer than the current window (the operator
    gives up on a configuration only on all of that, and acts on it when the current window
    holds too few requests to act on)."""

    current: T | None = None
    trial: T | None = None
    baseline: T | None = None
    settled: T | None = None
    baseline_parts: tuple[T, ...] = ()
    canary_arm: tuple[T, ...] = ()  # a canary trial's window, interval by interval
    baseline_arm: tuple[T, ...] = ()  # the same intervals of the baseline pods

    def all(self) -> list[T]:
        """Every window, in a fixed order (``map`` rebuilds from it)."""
        named = [
            w for w in (self.current, self.trial, self.baseline, self.settled) if w is not None
        ]
        return [*named, *self.baseline_parts, *self.canary_arm, *self.baseline_arm]

    def fill(self, results: Sequence[U]) -> Windows[U]:
        """The same windows, each replaced by its result; ``results`` in ``all``'s order."""
        it = iter(results)
        return Windows(
            current=None if self.current is None else next(it),
            trial=None if self.trial is None else next(it),
            baseline=None if self.baseline is None else next(it),
            settled=None if self.settled is None else next(it),
            baseline_parts=tuple(next(it) for _ in self.baseline_parts),
            canary_arm=tuple(next(it) for _ in self.canary_arm),
            baseline_arm=tuple(next(it) for _ in self.baseline_arm),
        )


def is_canary(trial: Trial | None) -> bool:
    """Whether ``trial`` runs as a canary (its state recorded: a restart finds the canary)."""
    return trial is not None and trial.strategy is Strategy.CANARY and trial.canary is not None


def windows_needed(
    spec: LatencyTargetSpec, status: LatencyTargetStatus, now: datetime
) -> Windows[Window]:
    """The metrics windows ``decide`` will want this round."""
    length = spec.evaluation.window_seconds
    trial = status.current_trial
    # While a canary runs, the Deployment's own window leaves the canary's pods out.
    current = Window(now.timestamp(), length, "baseline" if is_canary(trial) else "main")
    if _judges_a_window(spec, status, now):
        return Windows(
            current=current,
            baseline_parts=_parts(current),
            settled=_settled(status, now, current),
        )
    if status.phase is Phase.MEASURING and trial is not None and trial.measure_started_at:
        start = parse_timestamp(trial.measure_started_at).timestamp()
        if now.timestamp() >= start + length and is_canary(trial):
            # Side by side: both arms over the same intervals of the trial's window.
            step = length / CANARY_INTERVALS
            ends = [start + (i + 1) * step for i in range(CANARY_INTERVALS)]
            return Windows(
                current=Window(now.timestamp(), length, "baseline"),
                canary_arm=tuple(Window(end, step, "canary") for end in ends),
                baseline_arm=tuple(Window(end, step, "baseline") for end in ends),
            )
        # The trial is judged against the window it was chosen on, and measured at least as
        # long; a gain just short of the noise bar is looked at over a window twice as long.
        before = _chosen_on(trial, length)
        span = max(length * (LONGER_LOOK if trial.longer else 1), before)
        if now.timestamp() >= start + span:
            baseline = Window(parse_timestamp(trial.started_at).timestamp(), before)
            return Windows(
                current=current,
                trial=Window(start + span, span),
                baseline=baseline,
                baseline_parts=_parts(baseline),
            )
    return Windows(current=current)


def _chosen_on(trial: Trial, length: float) -> float:
    """The length of the window ``trial`` was chosen on (its ``before`` snapshot): one
    evaluation window, or the configuration's longer one (``settled``) when one window held too
    few requests to act on. Bounded to what the operator can have used, as anyone allowed to
    patch the status can write it."""
    text = trial.before.window if trial.before is not None else None
    try:
        seconds = parse_duration(text) if text else length
    except ValueError:
        seconds = length
    return min(max(seconds, length), SETTLED_WINDOWS * length)


def _judges_a_window(spec: LatencyTargetSpec, status: LatencyTargetStatus, now: datetime) -> bool:
    """Whether this round judges a whole window of the running configuration: observing one
    that has passed, or resting past the cooldown (the re-check observes at once, on the
    facts already gathered)."""
    if status.phase is Phase.OBSERVING:
        return status.stable_since is not None and window_left(spec, status, now) <= 0
    return status.phase in RESTING and cooldown_over(spec, status, now)


def _settled(status: LatencyTargetStatus, now: datetime, current: Window) -> Window | None:
    """The running configuration's window since ``status.stable_since``, in whole seconds and
    at most ``SETTLED_WINDOWS`` times ``current``; None when it is no longer than ``current``."""
    seconds = math.floor(
        min(seconds_since(status.stable_since, now), SETTLED_WINDOWS * current.seconds)
    )
    return Window(current.end, seconds, current.arm) if seconds > current.seconds else None


def window_left(spec: LatencyTargetSpec, status: LatencyTargetStatus, now: datetime) -> float:
    """Seconds until a whole window of the running configuration has passed since
    ``status.stable_since`` (a whole window when it is unset) and, after a near miss, since
    ``status.near_miss_at`` (the one more window it measures)."""
    since = seconds_since(status.stable_since, now)
    if status.near_miss_at is not None:
        since = min(since, seconds_since(status.near_miss_at, now))
    return spec.evaluation.window_seconds - since


def cooldown_over(spec: LatencyTargetSpec, status: LatencyTargetStatus, now: datetime) -> bool:
    """A resting target's cooldown has passed: it checks its targets again."""
    return seconds_since(status.phase_since, now) >= spec.evaluation.cooldown_seconds


def seconds_since(stamp: str | None, now: datetime) -> float:
    """Seconds from ``stamp`` to ``now`` (0 when unset)."""
    return 0.0 if stamp is None else (now - parse_timestamp(stamp)).total_seconds()


def _parts(window: Window) -> tuple[Window, ...]:
    """``window`` cut in ``BASELINE_SUBWINDOWS`` consecutive parts."""
    part = window.seconds / BASELINE_SUBWINDOWS
    start = window.end - window.seconds
    return tuple(
        Window(start + (i + 1) * part, part, window.arm) for i in range(BASELINE_SUBWINDOWS)
    )


class Blocker(StrEnum):
    """Why the operator cannot work on a target (the Ready condition's reason)."""

    DEPLOYMENT_NOT_FOUND = "DeploymentNotFound"
    CONTAINER_NOT_FOUND = "ContainerNotFound"
    CONFLICT = "Conflict"
    NOT_VLLM = "NotVllm"


@dataclass(frozen=True)
class Blocked:
    """The operator cannot work on the target this round. ``detail``: the container problem,
    the LatencyTarget that owns the Deployment, or why the container is not vLLM."""

    blocker: Blocker
    detail: str = ""
    hardware: HardwareInfo = field(default_factory=HardwareInfo)  # a not-vLLM diagnosis uses it


@dataclass(frozen=True)
class CanaryFacts:
    """The trial's canary Deployment as read this round."""

    exists: bool
    fingerprint: str | None = None  # its vLLM container's configuration
    replicas: int = 0  # its spec.replicas
    rollout: RolloutFacts | None = None  # with its pods
    taken: str | None = None  # a Deployment not ours holds the canary's name: why


@dataclass(frozen=True)
class QualityAnswers:
    """The quality gate's prompts answered by the canary and by a baseline pod."""

    expected: tuple[str | None, ...]
    canary: tuple[str | None, ...]
    baseline: tuple[str | None, ...]
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class QualityFailure:
    """The gate could not run: no usable samples, no ready pod to ask."""

    message: str


QualityFacts = QualityAnswers | QualityFailure


@dataclass(frozen=True)
class Ready:
    """Everything a phase reads: the Deployment, its vLLM container and rollout, the GPUs and
    the measured windows."""

    deployment: Mapping[str, Any]  # the Deployment object as read
    container_index: int
    container: ContainerConfig
    command_line: VllmCommandLine
    rollout: RolloutFacts
    hardware: HardwareInfo = field(default_factory=HardwareInfo)
    controller_owner: str | None = None  # "InferenceService/llama" when another controller owns it
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    windows: Windows[WindowResult] = field(default_factory=Windows)
    canary_name: str | None = None  # the canary this target would run; None: no canaries here
    canary: CanaryFacts | None = None  # the canary as it stands, during a canary trial
    quality: QualityFacts | None = None  # the quality gate's answers, when a phase asked


Facts = Blocked | Ready
