"""The tuning loop's phases and the one decision function that moves between them.

``decide(spec, generation, status, facts, now)`` reads the resource's spec and status, what the
operator saw this round (``Facts``: the Deployment, its container and rollout, the metrics
windows) and the time, and returns a ``Decision``: the new status, at most one container
change to apply, events to post, and whether to run again at once. It never talks to anything.

Everything needed to resume lives in ``.status``: the trial in flight carries the container it
came from and the one it rolls out, so a restarted operator recognises where the Deployment
stands by fingerprint. Acting is idempotent: a phase that wants the Deployment at a
configuration applies it only if the Deployment is not there yet, so a restart between the
patch and the status write never patches twice. A trial is recorded in the status (intent)
before its patch is applied.

Transitions (``TRANSITIONS`` below is the table; a test walks it)::

    Observing -> Converged | Exhausted | RollingOut | Observing (Off / Recommend: advice only)
    RollingOut -> Settling | RollingBack (failed to start)
    Settling -> Measuring | RollingBack (crashed while warming up)
    Measuring -> Observing (Keep) | RollingBack (Revert, Inconclusive twice, crash)
    RollingBack -> Observing
    Converged | Exhausted -> Observing (after the cooldown, or a new spec)
    any -> Paused (spec.paused, or someone else changed the container mid-trial)
    any -> Failed (no Deployment, no such container, not vLLM, another LatencyTarget owns it)
    Paused | Failed -> Observing, or back into the trial in flight (RollingOut | RollingBack)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from latency_tuner.api.conditions import ConditionType, set_condition
from latency_tuner.api.durations import format_duration, format_timestamp, parse_timestamp
from latency_tuner.api.spec import LatencyTargetSpec, Mode
from latency_tuner.api.status import (
    Baseline,
    ContainerSnapshot,
    Evidence,
    IncompatibleValue,
    JsonPatchOperation,
    LatencyTargetStatus,
    MetricSnapshot,
    Phase,
    Recommendation,
    Trial,
    Verdict,
    with_trial,
)
from latency_tuner.api.status import Diagnosis as DiagnosisStatus
from latency_tuner.core import knobs as knob_catalog
from latency_tuner.core.cluster import ContainerConfig, RolloutFacts, container_patch
from latency_tuner.core.diagnosis import Diagnosis, NotVllm, diagnose
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.observation import NoData, Observation, ObservationResult
from latency_tuner.core.planner import Exhausted, TrialRecord, plan
from latency_tuner.core.score import score
from latency_tuner.core.verdict import Outcome, judge_trial
from latency_tuner.vllm.args import VllmCommandLine
from latency_tuner.vllm.defaults import config_hash

NEAR_MISS = 0.1  # violation score of a miss small enough to measure again before giving up
MAX_MEASUREMENTS = 2  # an inconclusive trial window is measured once more, then rolled back
BASELINE_SUBWINDOWS = 3  # sub-windows of the baseline window, to estimate its noise
DEFAULT_PERCENTILE = 95  # shown in status.observed for a latency no objective names

TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    Phase.OBSERVING: frozenset(
        {Phase.OBSERVING, Phase.CONVERGED, Phase.EXHAUSTED, Phase.ROLLING_OUT}
    ),
    Phase.ROLLING_OUT: frozenset({Phase.ROLLING_OUT, Phase.SETTLING, Phase.ROLLING_BACK}),
    Phase.SETTLING: frozenset({Phase.SETTLING, Phase.MEASURING, Phase.ROLLING_BACK}),
    Phase.MEASURING: frozenset({Phase.MEASURING, Phase.OBSERVING, Phase.ROLLING_BACK}),
    Phase.ROLLING_BACK: frozenset({Phase.ROLLING_BACK, Phase.OBSERVING}),
    Phase.CONVERGED: frozenset({Phase.CONVERGED, Phase.OBSERVING}),
    Phase.EXHAUSTED: frozenset({Phase.EXHAUSTED, Phase.OBSERVING}),
    Phase.PAUSED: frozenset({Phase.PAUSED, Phase.OBSERVING, Phase.ROLLING_OUT, Phase.ROLLING_BACK}),
    Phase.FAILED: frozenset({Phase.FAILED, Phase.OBSERVING, Phase.ROLLING_OUT, Phase.ROLLING_BACK}),
}
# Any phase may also go to Paused or Failed (see the module docstring).
ALWAYS_ALLOWED: frozenset[Phase] = frozenset({Phase.PAUSED, Phase.FAILED})


@dataclass(frozen=True)
class MetricsFailure:
    """The metrics source could not answer (unreachable, query error): unknown, not empty."""

    message: str


WindowResult = ObservationResult | MetricsFailure


@dataclass(frozen=True)
class Window:
    """A measurement window ``[end - seconds, end]``, times in unix seconds."""

    end: float
    seconds: float


@dataclass(frozen=True)
class Facts:
    """What the operator saw of the world this round."""

    deployment: Mapping[str, Any] | None  # the Deployment object, None if not found
    container_index: int | None = None  # None: no container of the spec's name
    container_problem: str | None = None  # why container_index is None
    container: ContainerConfig | None = None
    command_line: VllmCommandLine | NotVllm | None = None
    rollout: RolloutFacts | None = None
    hardware: HardwareInfo = field(default_factory=HardwareInfo)
    controller_owner: str | None = None  # "InferenceService/llama" when another controller owns it
    conflict_with: str | None = None  # an older LatencyTarget for the same Deployment
    gpu_resource: str = "nvidia.com/gpu"
    windows: Mapping[str, WindowResult] = field(default_factory=dict)


@dataclass(frozen=True)
class Note:
    """An event to post on the LatencyTarget."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    status: LatencyTargetStatus
    apply: ContainerConfig | None = None  # move the container to this configuration
    notes: tuple[Note, ...] = ()
    again: bool = False  # decide again at once (the status now allows the next step)
    reason: str = ""
    transitions: tuple[tuple[Phase, Phase], ...] = ()  # every phase change taken, in order


# ---- which windows to measure ----------------------------------------------------------------


def windows_needed(
    spec: LatencyTargetSpec, status: LatencyTargetStatus, now: datetime
) -> dict[str, Window]:
    """The metrics windows ``decide`` will want this round, by name."""
    length = spec.evaluation.window_seconds
    out = {"current": Window(now.timestamp(), length)}
    trial = status.current_trial
    if status.phase is Phase.MEASURING and trial is not None and trial.measure_started_at:
        start = parse_timestamp(trial.measure_started_at).timestamp()
        if now.timestamp() >= start + length:
            began = parse_timestamp(trial.started_at).timestamp()
            out["trial"] = Window(start + length, length)
            out["baseline"] = Window(began, length)
            part = length / BASELINE_SUBWINDOWS
            for i in range(BASELINE_SUBWINDOWS):
                out[f"baseline_{i}"] = Window(began - length + (i + 1) * part, part)
    return out


# ---- the decision ----------------------------------------------------------------------------


class _Round:
    """The status being rewritten this round, with the notes it produces."""

    def __init__(
        self, spec: LatencyTargetSpec, generation: int, status: LatencyTargetStatus, now: datetime
    ) -> None:
        self.spec = spec
        self.generation = generation
        self.status = status
        self.now = now
        self.notes: list[Note] = []
        self.apply: ContainerConfig | None = None
        self.again = False
        self.transitions: list[tuple[Phase, Phase]] = []

    @property
    def stamp(self) -> str:
        return format_timestamp(self.now)

    def update(self, **changes: Any) -> None:
        self.status = self.status.model_copy(update=changes)

    def phase(self, phase: Phase) -> None:
        if phase is not self.status.phase:
            self.transitions.append((self.status.phase, phase))
            self.update(phase=phase, phase_since=self.stamp)

    def condition(self, type_: ConditionType, ok: bool | str, reason: str, message: str) -> None:
        status: bool | Literal["True", "False", "Unknown"] = ok  # type: ignore[assignment]
        self.update(
            conditions=set_condition(
                self.status.conditions, type_, status, reason, message, self.now, self.generation
            )
        )

    def note(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.notes.append(Note(type_, reason, message))

    def since(self, stamp: str | None) -> float:
        """Seconds from ``stamp`` to now (0 when unset)."""
        return 0.0 if stamp is None else (self.now - parse_timestamp(stamp)).total_seconds()

    def decision(self, reason: str) -> Decision:
        return Decision(
            self.status, self.apply, tuple(self.notes), self.again, reason, tuple(self.transitions)
        )


def decide(
    spec: LatencyTargetSpec,
    generation: int,
    status: LatencyTargetStatus,
    facts: Facts,
    now: datetime,
) -> Decision:
    """One step of the loop: the new status, at most one change to apply, and the events."""
    r = _Round(spec, generation, status, now)
    _new_spec(r)
    blocked = _preconditions(r, facts)
    if blocked is not None:
        return r.decision(blocked)
    assert facts.container is not None
    assert isinstance(facts.command_line, VllmCommandLine)
    current = facts.windows.get("current")
    _metrics_condition(r, current)
    if spec.paused:
        r.phase(Phase.PAUSED)
        r.condition(ConditionType.PROGRESSING, False, "Paused", "spec.paused is true")
        return r.decision("paused")
    if r.status.drift_generation is not None:
        return r.decision("paused for an outside change until the spec changes")
    if r.status.phase in (Phase.PAUSED, Phase.FAILED):
        # A trial interrupted by a pause or a blocked round (Deployment briefly gone, ...) is
        # taken up where it stood, never dropped with its change still applied.
        _resume(r)
    trial = r.status.current_trial
    fingerprint = facts.container.fingerprint()
    if trial is None:
        _adopt_outside_changes(r, fingerprint, facts)
    elif fingerprint not in _fingerprints(trial):
        return _drift(r, trial, facts)
    phase = r.status.phase
    if phase is Phase.OBSERVING:
        return _observing(r, facts, current)
    if phase is Phase.ROLLING_OUT:
        return _rolling_out(r, facts)
    if phase is Phase.SETTLING:
        return _settling(r, facts)
    if phase is Phase.MEASURING:
        return _measuring(r, facts)
    if phase is Phase.ROLLING_BACK:
        return _rolling_back(r, facts)
    return _resting(r, facts, current)


def _new_spec(r: _Round) -> None:
    """A changed spec restarts the count of trials and the re-check of a resting target."""
    if r.status.observed_generation == r.generation:
        return
    first = r.status.observed_generation is None
    r.update(observed_generation=r.generation, trial_count=r.status.trial_count if first else 0)
    if r.status.drift_generation is not None and r.generation > r.status.drift_generation:
        r.update(drift_generation=None)
        r.condition(ConditionType.DEGRADED, False, "SpecChanged", "tuning resumed: new spec")
        r.phase(Phase.OBSERVING)
    if r.status.phase in (Phase.CONVERGED, Phase.EXHAUSTED):
        r.phase(Phase.OBSERVING)


def _preconditions(r: _Round, facts: Facts) -> str | None:
    """Ready=False (and phase Failed) when the operator cannot work on the target."""
    ref = r.spec.target_ref
    problem: tuple[str, str] | None = None
    if facts.deployment is None:
        problem = ("DeploymentNotFound", f"Deployment {ref.name} not found in this namespace")
    elif facts.container_index is None or facts.container is None:
        problem = ("ContainerNotFound", facts.container_problem or "no container to tune")
    elif facts.conflict_with is not None:
        problem = (
            "Conflict",
            f"LatencyTarget {facts.conflict_with} already targets Deployment {ref.name}; "
            "this one does nothing (delete one of them)",
        )
    elif isinstance(facts.command_line, NotVllm) or facts.command_line is None:
        why = facts.command_line.reason if facts.command_line else "no command line"
        problem = ("NotVllm", why)
        diagnosis = diagnose(
            NoData(reason="not vLLM", window_seconds=0.0),
            r.spec.objectives,
            NotVllm(why),
            facts.hardware,
            r.spec.knobs,
        )
        r.update(diagnosis=diagnosis_status(diagnosis))
    if problem is None:
        message = f"tuning Deployment {ref.name}"
        if facts.controller_owner:
            message += (
                f"; it is managed by {facts.controller_owner}, which would revert changed "
                "arguments: recommendations only"
            )
        r.condition(ConditionType.READY, True, "Ready", message)
        return None
    reason, message = problem
    r.condition(ConditionType.READY, False, reason, message)
    r.condition(ConditionType.PROGRESSING, False, reason, message)
    if r.status.phase is not Phase.FAILED:
        r.note("Warning", reason, message)
    r.phase(Phase.FAILED)
    return message


def _metrics_condition(r: _Round, current: WindowResult | None) -> None:
    minimum = r.spec.evaluation.min_requests
    if current is None:
        r.condition(ConditionType.METRICS_AVAILABLE, "Unknown", "NotMeasured", "no window yet")
    elif isinstance(current, MetricsFailure):
        r.condition(ConditionType.METRICS_AVAILABLE, False, "MetricsSourceError", current.message)
    elif isinstance(current, NoData):
        r.condition(ConditionType.METRICS_AVAILABLE, False, "NoData", current.reason)
    elif current.requests < minimum:
        r.condition(
            ConditionType.METRICS_AVAILABLE,
            False,
            "TooFewRequests",
            f"{current.requests} requests in the window, evaluation.minRequests is {minimum}",
        )
    else:
        r.condition(
            ConditionType.METRICS_AVAILABLE,
            True,
            "Measured",
            f"{current.requests} requests in the last {format_duration(current.window_seconds)}",
        )


def _usable(r: _Round, window: WindowResult | None) -> Observation | None:
    if isinstance(window, Observation) and window.requests >= r.spec.evaluation.min_requests:
        return window
    return None


def _fingerprints(trial: Trial) -> tuple[str, ...]:
    return tuple(c.fingerprint for c in (trial.from_container, trial.to_container) if c)


def _resume(r: _Round) -> None:
    trial = r.status.current_trial
    was_paused = r.status.phase is Phase.PAUSED
    if trial is None:
        r.phase(Phase.OBSERVING)
    elif trial.verdict is not None:
        r.phase(Phase.ROLLING_BACK)
    else:
        # The trial's windows are stale after a pause: roll it out (a no-op if it is there)
        # and measure it afresh.
        r.update(current_trial=trial.model_copy(update={"measure_started_at": None}))
        r.phase(Phase.ROLLING_OUT)
    if was_paused or trial is not None:
        r.note("Normal", "Resumed", "tuning resumed")


def _adopt_outside_changes(r: _Round, fingerprint: str, facts: Facts) -> None:
    """Between trials, a container changed by someone else is the new starting point."""
    expected = r.status.expected_container
    if expected is None:
        r.update(expected_container=fingerprint)
        return
    if expected == fingerprint:
        return
    r.update(expected_container=fingerprint, stable_since=None, baseline=None)
    r.note(
        "Normal",
        "ConfigurationChanged",
        "the vLLM container was changed outside the operator; measuring it afresh",
    )
    if r.status.phase not in (Phase.OBSERVING, Phase.FAILED):
        r.phase(Phase.OBSERVING)


def _drift(r: _Round, trial: Trial, facts: Facts) -> Decision:
    """Someone else changed the container mid-trial: stop, never fight over it."""
    assert facts.container is not None
    message = (
        f"the vLLM container changed outside the operator during trial {trial.id} "
        f"({trial.knob}); tuning paused until the LatencyTarget's spec changes"
    )
    abandoned = trial.model_copy(
        update={
            "verdict": Verdict.INCONCLUSIVE,
            "finished_at": r.stamp,
            "reason": "abandoned: the Deployment was changed by someone else",
        }
    )
    r.update(
        current_trial=None,
        trials=with_trial(r.status.trials, abandoned),
        drift_generation=r.generation,
        expected_container=facts.container.fingerprint(),
        baseline=None,
        stable_since=None,
    )
    r.phase(Phase.PAUSED)
    r.condition(ConditionType.PROGRESSING, False, "Drift", message)
    r.condition(ConditionType.DEGRADED, True, "Drift", message)
    r.note("Warning", "Drift", message)
    return r.decision("drift")


# ---- phases ----------------------------------------------------------------------------------


def _observing(r: _Round, facts: Facts, current: WindowResult | None) -> Decision:
    assert facts.rollout is not None and facts.container is not None
    cl = facts.command_line
    assert isinstance(cl, VllmCommandLine)
    if not facts.rollout.complete:
        r.update(stable_since=None)
        r.condition(
            ConditionType.PROGRESSING, False, "WaitingForRollout", "the Deployment is rolling out"
        )
        return r.decision("waiting for the Deployment's own rollout")
    if r.status.stable_since is None:
        settle = timedelta(seconds=r.spec.evaluation.settle_seconds)
        r.update(stable_since=format_timestamp(r.now + settle))
    wait = r.spec.evaluation.window_seconds - r.since(r.status.stable_since)
    if wait > 0:
        r.condition(
            ConditionType.PROGRESSING,
            False,
            "Measuring",
            f"measuring the current configuration: a clean window in {format_duration(wait)}",
        )
        return r.decision("waiting for a window of the current configuration")
    obs = _usable(r, current)
    if obs is None:
        diagnosis = diagnose(
            current if isinstance(current, (Observation, NoData)) else _no_data(r),
            r.spec.objectives,
            cl,
            facts.hardware,
            r.spec.knobs,
            min_requests=r.spec.evaluation.min_requests,
        )
        r.update(diagnosis=diagnosis_status(diagnosis))
        return r.decision("no usable window: nothing to act on")
    r.update(observed=_snapshot(r, obs))
    diagnosis = diagnose(
        obs,
        r.spec.objectives,
        cl,
        facts.hardware,
        r.spec.knobs,
        min_requests=r.spec.evaluation.min_requests,
    )
    r.update(diagnosis=diagnosis_status(diagnosis))
    result = score(obs, r.spec.objectives)
    if result.met:
        r.condition(ConditionType.TARGETS_MET, True, "TargetsMet", result.describe())
        r.condition(ConditionType.PROGRESSING, False, "Converged", "targets met")
        r.update(recommendation=None, near_miss_at=None)
        if r.status.phase is not Phase.CONVERGED:
            r.note("Normal", "TargetsMet", result.describe())
        r.phase(Phase.CONVERGED)
        return r.decision("targets met")
    r.condition(ConditionType.TARGETS_MET, False, "TargetsMissed", result.describe())
    proposal = plan(
        diagnosis,
        obs,
        cl,
        r.spec.knobs,
        facts.hardware,
        _history(r.status.trials),
        {(i.knob, i.value) for i in r.status.incompatible},
    )
    recommend_only = r.spec.mode is not Mode.AUTO or facts.controller_owner is not None
    if isinstance(proposal, Exhausted):
        near = result.value is not None and result.value <= NEAR_MISS
        if near and not recommend_only and r.status.near_miss_at is None:
            # Within the measurement noise of the targets: one window is not enough to give up.
            r.update(near_miss_at=r.stamp, stable_since=r.stamp)
            r.condition(
                ConditionType.PROGRESSING,
                False,
                "NearMiss",
                f"{result.describe()}; nothing left to try, measuring one more window",
            )
            return r.decision("near miss: measuring again before giving up")
        return _exhausted(r, proposal.reason, recommend_only)
    target = target_container(proposal, cl, facts.container)
    if recommend_only or r.spec.mode is Mode.OFF:
        return _recommend(r, proposal, target, facts)
    if r.status.trial_count >= r.spec.evaluation.max_trials:
        return _exhausted(
            r, f"evaluation.maxTrials ({r.spec.evaluation.max_trials}) reached", False
        )
    if target.fingerprint() == facts.container.fingerprint():
        return _exhausted(r, f"{proposal.describe()} would not change the container", False)
    return _start_trial(r, proposal, obs, cl, target, facts)


def _no_data(r: _Round) -> NoData:
    return NoData(reason="the metrics source did not answer", window_seconds=0.0)


def _exhausted(r: _Round, why: str, recommend_only: bool) -> Decision:
    advice = r.status.diagnosis.advice if r.status.diagnosis else []
    message = why + (f". Advice: {'; '.join(advice)}" if advice else "")
    r.update(recommendation=None, near_miss_at=None)
    r.condition(ConditionType.PROGRESSING, False, "Exhausted", message)
    if recommend_only:
        r.phase(Phase.OBSERVING)
        return r.decision("nothing to recommend")
    if r.status.phase is not Phase.EXHAUSTED:
        r.note("Warning", "Exhausted", message)
    r.phase(Phase.EXHAUSTED)
    return r.decision("exhausted")


def target_container(
    change: knob_catalog.Change, cl: VllmCommandLine, current: ContainerConfig
) -> ContainerConfig:
    """The container ``current`` becomes with ``change`` applied to its command line ``cl``."""
    applied = knob_catalog.apply(change, cl)
    command, args = applied.command_line.render()
    return ContainerConfig(
        command=tuple(command) if command is not None else None,
        args=tuple(args) if args is not None else None,
        image=applied.image or current.image,
        gpu_limit=applied.gpu_limit if applied.gpu_limit is not None else current.gpu_limit,
    )


def _recommend(
    r: _Round, change: knob_catalog.Change, target: ContainerConfig, facts: Facts
) -> Decision:
    assert facts.deployment is not None and facts.container_index is not None
    ops = container_patch(facts.deployment, facts.container_index, target, facts.gpu_resource)
    recommendation = Recommendation(
        knob=change.knob.value,
        from_value=change.from_value,
        to_value=change.to_value,
        patch=[JsonPatchOperation.model_validate(op) for op in ops],
        reason=change.reason,
    )
    changed = r.status.recommendation != recommendation
    r.update(recommendation=recommendation)
    mode = "Recommend" if r.spec.mode is Mode.RECOMMEND else "Off"
    if facts.controller_owner is not None and r.spec.mode is Mode.AUTO:
        mode = "ManagedByController"
    if r.spec.mode is Mode.OFF:
        r.update(recommendation=None)
        changed = False
    r.condition(
        ConditionType.PROGRESSING,
        False,
        f"Mode{mode}" if mode != "ManagedByController" else mode,
        f"next change: {change.describe()} ({change.reason}); not applied (mode {mode})",
    )
    if changed:
        r.note("Normal", "Recommendation", f"{change.describe()}: {change.reason}")
    r.phase(Phase.OBSERVING)
    return r.decision("recommendation published")


def _start_trial(
    r: _Round,
    change: knob_catalog.Change,
    obs: Observation,
    cl: VllmCommandLine,
    target: ContainerConfig,
    facts: Facts,
) -> Decision:
    assert facts.container is not None
    container = facts.container
    baseline = r.status.baseline or Baseline(
        container=r.spec.target_ref.container,
        command=list(container.command) if container.command is not None else None,
        args=list(container.args) if container.args is not None else None,
        image=container.image,
        gpu_limit=str(container.gpu_limit) if container.gpu_limit is not None else None,
        config_hash=config_hash(cl),
        captured_at=r.stamp,
    )
    applied = knob_catalog.apply(change, cl)
    next_id = max([t.id for t in r.status.trials] + [r.status.trial_count, 0]) + 1
    trial = Trial(
        id=next_id,
        knob=change.knob.value,
        from_value=change.from_value,
        to_value=change.to_value,
        started_at=r.stamp,
        before=_snapshot(r, obs),
        config_hash=config_hash(applied.command_line),
        previous_config_hash=config_hash(cl),
        from_container=_container_snapshot(container),
        to_container=_container_snapshot(target),
        reason=change.reason,
    )
    r.update(
        baseline=baseline,
        current_trial=trial,
        trial_count=r.status.trial_count + 1,
        recommendation=None,
        stable_since=None,
        near_miss_at=None,
    )
    r.phase(Phase.ROLLING_OUT)
    message = f"trial {trial.id}: {change.describe()} ({change.reason})"
    r.condition(ConditionType.PROGRESSING, True, "TrialStarted", message)
    r.note("Normal", "TrialStarted", message)
    r.again = True  # the intent is recorded first; the patch comes on the next step
    return r.decision("trial started")


def _rolling_out(r: _Round, facts: Facts) -> Decision:
    trial = r.status.current_trial
    assert trial is not None and trial.to_container is not None and facts.container is not None
    if facts.container.fingerprint() != trial.to_container.fingerprint:
        r.apply = _config(trial.to_container)
        r.condition(
            ConditionType.PROGRESSING, True, "RollingOut", f"trial {trial.id}: applying the change"
        )
        return r.decision("applying the trial's change")
    # The deadline runs from entering RollingOut: after a resume, not from the trial's start.
    failed = _rollout_failure(r, facts, trial.to_container.fingerprint, r.status.phase_since)
    if failed is not None:
        return _fail_trial(r, trial, failed)
    assert facts.rollout is not None
    if not facts.rollout.complete:
        r.condition(
            ConditionType.PROGRESSING, True, "RollingOut", f"trial {trial.id}: rollout in progress"
        )
        return r.decision("waiting for the rollout")
    r.update(current_trial=trial.model_copy(update={"ready_at": r.stamp}))
    r.phase(Phase.SETTLING)
    r.condition(
        ConditionType.PROGRESSING,
        True,
        "Settling",
        f"trial {trial.id} is ready; warming up for {r.spec.evaluation.settle}",
    )
    r.again = True
    return r.decision("rollout ready")


def _rollout_failure(r: _Round, facts: Facts, fingerprint: str, since: str | None) -> str | None:
    assert facts.rollout is not None
    failure = facts.rollout.failure(fingerprint)
    if failure is not None:
        return failure
    deadline = r.spec.evaluation.progress_deadline_seconds
    if not facts.rollout.complete and r.since(since) > deadline:
        return (
            f"not ready within evaluation.progressDeadline ({r.spec.evaluation.progress_deadline})"
        )
    return None


def _fail_trial(r: _Round, trial: Trial, why: str) -> Decision:
    failed = trial.model_copy(
        update={"verdict": Verdict.FAILED, "reason": f"rollout failed: {why}", "finished_at": None}
    )
    incompatible = [
        i for i in r.status.incompatible if (i.knob, i.value) != (trial.knob, trial.to_value)
    ]
    incompatible.append(IncompatibleValue(knob=trial.knob, value=trial.to_value, reason=why))
    r.update(current_trial=failed, incompatible=incompatible)
    r.phase(Phase.ROLLING_BACK)
    message = f"trial {trial.id} ({trial.knob} -> {trial.to_value}) failed: {why}; rolling back"
    r.condition(ConditionType.DEGRADED, True, "TrialFailed", message)
    r.condition(ConditionType.PROGRESSING, True, "RollingBack", message)
    r.note("Warning", "TrialFailed", message)
    r.again = True
    return r.decision("trial failed")


def _running_trial(r: _Round, facts: Facts) -> tuple[Trial, Decision | None]:
    """The trial being warmed up or measured, and its failure decision if its pods broke."""
    trial = r.status.current_trial
    assert trial is not None and trial.to_container is not None
    failed = _rollout_failure(r, facts, trial.to_container.fingerprint, None)
    return trial, None if failed is None else _fail_trial(r, trial, failed)


def _settling(r: _Round, facts: Facts) -> Decision:
    trial, failed = _running_trial(r, facts)
    if failed is not None:
        return failed
    if r.since(trial.ready_at) < r.spec.evaluation.settle_seconds:
        return r.decision("settling")
    r.update(current_trial=trial.model_copy(update={"measure_started_at": r.stamp}))
    r.phase(Phase.MEASURING)
    r.condition(
        ConditionType.PROGRESSING,
        True,
        "Measuring",
        f"trial {trial.id}: measuring for {r.spec.evaluation.window}",
    )
    return r.decision("measuring")


def _measuring(r: _Round, facts: Facts) -> Decision:
    trial, failed = _running_trial(r, facts)
    if failed is not None:
        return failed
    assert trial.to_container is not None
    windows = facts.windows
    if "trial" not in windows:
        return r.decision("measuring the trial")
    parts = [windows.get("trial"), windows.get("baseline")]
    subs = [windows.get(f"baseline_{i}") for i in range(BASELINE_SUBWINDOWS)]
    if any(isinstance(w, MetricsFailure) or w is None for w in parts):
        return r.decision("metrics unavailable: judging later")
    after, before = parts
    assert not isinstance(after, MetricsFailure) and after is not None
    assert not isinstance(before, MetricsFailure) and before is not None
    judgement = judge_trial(
        before,
        after,
        r.spec.objectives,
        min_requests=r.spec.evaluation.min_requests,
        min_improvement=r.spec.evaluation.min_improvement,
        baseline_subwindows=[w for w in subs if isinstance(w, Observation)],
    )
    measured = trial.model_copy(
        update={
            "after": _snapshot(r, after) if isinstance(after, Observation) else None,
            "measurements": trial.measurements + 1,
        }
    )
    if judgement.outcome is Outcome.KEEP:
        kept = measured.model_copy(
            update={"verdict": Verdict.KEEP, "reason": judgement.reason, "finished_at": r.stamp}
        )
        r.update(
            current_trial=None,
            trials=with_trial(r.status.trials, kept),
            expected_container=trial.to_container.fingerprint,
            stable_since=trial.measure_started_at,  # the trial window is a clean window
        )
        r.phase(Phase.OBSERVING)
        change = f"{trial.knob} {trial.from_value} -> {trial.to_value}"
        message = f"trial {trial.id} kept: {change}: {judgement.reason}"
        r.condition(ConditionType.PROGRESSING, True, "Kept", message)
        r.condition(ConditionType.DEGRADED, False, "Healthy", "no failed rollout")
        r.note("Normal", "Kept", message)
        r.again = True
        return r.decision("kept")
    if judgement.outcome is Outcome.REVERT or measured.measurements >= MAX_MEASUREMENTS:
        verdict = Verdict.REVERT if judgement.outcome is Outcome.REVERT else Verdict.INCONCLUSIVE
        reverted = measured.model_copy(update={"verdict": verdict, "reason": judgement.reason})
        r.update(current_trial=reverted)
        r.phase(Phase.ROLLING_BACK)
        what = f"trial {trial.id} ({trial.knob} -> {trial.to_value}) {verdict.value.lower()}"
        message = f"{what}: {judgement.reason}; rolling back"
        r.condition(ConditionType.PROGRESSING, True, "RollingBack", message)
        r.note("Normal", "Reverting", message)
        r.again = True
        return r.decision("reverting")
    # Inconclusive or no data: measure once more over a fresh window.
    r.update(current_trial=measured.model_copy(update={"measure_started_at": r.stamp}))
    r.condition(
        ConditionType.PROGRESSING,
        True,
        "Remeasuring",
        f"trial {trial.id} inconclusive ({judgement.reason}); measuring again",
    )
    r.note("Normal", "Inconclusive", f"trial {trial.id}: {judgement.reason}; measuring again")
    return r.decision("remeasuring")


def _rolling_back(r: _Round, facts: Facts) -> Decision:
    trial = r.status.current_trial
    assert trial is not None and trial.from_container is not None and facts.container is not None
    assert facts.rollout is not None
    if facts.container.fingerprint() != trial.from_container.fingerprint:
        r.apply = _config(trial.from_container)
        return r.decision("restoring the configuration before the trial")
    failure = facts.rollout.failure(trial.from_container.fingerprint)
    if failure is not None:
        message = (
            f"rolling back trial {trial.id}, the previous configuration does not come up: {failure}"
        )
        r.condition(ConditionType.DEGRADED, True, "RollbackFailing", message)
        return r.decision("rollback failing")
    if not facts.rollout.complete:
        return r.decision("waiting for the rollback")
    done = trial.model_copy(update={"finished_at": r.stamp})
    settle = timedelta(seconds=r.spec.evaluation.settle_seconds)
    r.update(
        current_trial=None,
        trials=with_trial(r.status.trials, done),
        expected_container=trial.from_container.fingerprint,
        stable_since=format_timestamp(r.now + settle),
    )
    r.phase(Phase.OBSERVING)
    message = f"trial {trial.id} rolled back ({trial.verdict.value if trial.verdict else 'done'})"
    r.condition(ConditionType.PROGRESSING, False, "RolledBack", message)
    if trial.verdict is not Verdict.FAILED:
        r.condition(ConditionType.DEGRADED, False, "Healthy", "no failed rollout")
    r.note("Normal", "RolledBack", message)
    return r.decision("rolled back")


def _resting(r: _Round, facts: Facts, current: WindowResult | None) -> Decision:
    """Converged or Exhausted: keep watching; plan again after the cooldown."""
    obs = _usable(r, current)
    clean = r.status.stable_since is None or (
        r.since(r.status.stable_since) >= r.spec.evaluation.window_seconds
    )
    if obs is not None and clean:
        r.update(observed=_snapshot(r, obs))
        result = score(obs, r.spec.objectives)
        if result.met is not None:
            r.condition(
                ConditionType.TARGETS_MET,
                bool(result.met),
                "TargetsMet" if result.met else "TargetsMissed",
                result.describe(),
            )
    if r.since(r.status.phase_since) >= r.spec.evaluation.cooldown_seconds:
        r.phase(Phase.OBSERVING)
        r.again = True
        return r.decision("cooldown over: checking again")
    return r.decision(f"{r.status.phase.value.lower()}: waiting for the cooldown")


# ---- status values ---------------------------------------------------------------------------


def _container_snapshot(c: ContainerConfig) -> ContainerSnapshot:
    return ContainerSnapshot(
        command=list(c.command) if c.command is not None else None,
        args=list(c.args) if c.args is not None else None,
        image=c.image,
        gpu_limit=c.gpu_limit,
        fingerprint=c.fingerprint(),
    )


def _config(s: ContainerSnapshot) -> ContainerConfig:
    return ContainerConfig(
        command=tuple(s.command) if s.command is not None else None,
        args=tuple(s.args) if s.args is not None else None,
        image=s.image,
        gpu_limit=s.gpu_limit,
    )


def baseline_container(baseline: Baseline) -> ContainerConfig:
    """The container a Restore on deletion puts back."""
    return ContainerConfig(
        command=tuple(baseline.command) if baseline.command is not None else None,
        args=tuple(baseline.args) if baseline.args is not None else None,
        image=baseline.image,
        gpu_limit=int(baseline.gpu_limit) if baseline.gpu_limit is not None else None,
    )


def _percentile(r: _Round, name: str) -> int:
    objective = getattr(r.spec.objectives, name)
    return int(objective.percentile) if objective is not None else DEFAULT_PERCENTILE


def _snapshot(r: _Round, obs: Observation) -> MetricSnapshot:
    def at(name: str) -> float | None:
        quantiles: dict[int, float] = getattr(obs, name)
        return quantiles.get(_percentile(r, name))

    return MetricSnapshot(
        ttft_seconds=at("ttft"),
        itl_seconds=at("itl"),
        e2e_seconds=at("e2e"),
        request_rate=obs.request_rate,
        prompt_tokens_mean=obs.prompt_tokens_mean,
        generation_tokens_mean=obs.generation_tokens_mean,
        concurrency=obs.load.concurrency_mean if obs.running_mean is not None else None,
        window=format_duration(obs.window_seconds),
        requests=obs.requests,
        observed_at=r.stamp,
    )


def diagnosis_status(d: Diagnosis) -> DiagnosisStatus:
    return DiagnosisStatus(
        bottleneck=d.bottleneck.value,
        findings=[*(f.value for f in d.findings), *d.conclusions],
        evidence=[
            Evidence(signal=e.signal, value=e.value, unit=e.unit, text=e.text) for e in d.evidence
        ],
        knobs=[k.value for k in d.knobs],
        advice=list(d.advice),
    )


def _history(trials: Sequence[Trial]) -> list[TrialRecord]:
    return [TrialRecord.from_trial(t) for t in trials]


__all__ = [
    "ALWAYS_ALLOWED",
    "TRANSITIONS",
    "Decision",
    "Facts",
    "MetricsFailure",
    "Note",
    "Window",
    "baseline_container",
    "decide",
    "diagnosis_status",
    "target_container",
    "windows_needed",
]
