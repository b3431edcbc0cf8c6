"""What every round checks before its phase acts: a new spec, a target the operator cannot
work on, the metrics condition, a pause to resume, a container changed by someone else. Pure.
"""

from __future__ import annotations

import math

from latency_tuner.api.conditions import ConditionType
from latency_tuner.api.durations import format_duration
from latency_tuner.api.status import Phase, Trial, Verdict, with_trial
from latency_tuner.core.diagnosis import NotVllm, diagnose
from latency_tuner.core.observation import NoData, Observation
from latency_tuner.core.rollout.events import Reason
from latency_tuner.core.rollout.facts import (
    Blocked,
    Blocker,
    MetricsFailure,
    Ready,
    WindowResult,
    is_canary,
)
from latency_tuner.core.rollout.state import Decision, Round
from latency_tuner.core.rollout.strategy import choose_strategy
from latency_tuner.core.rollout.values import diagnosis_status
from latency_tuner.core.saturation import busy, flow, saturated
from latency_tuner.core.signals import lowest_bucket_warning

_NOTE = {
    Blocker.DEPLOYMENT_NOT_FOUND: Reason.DEPLOYMENT_NOT_FOUND,
    Blocker.CONTAINER_NOT_FOUND: Reason.CONTAINER_NOT_FOUND,
    Blocker.CONFLICT: Reason.CONFLICT,
    Blocker.NOT_VLLM: Reason.NOT_VLLM,
}


def new_spec(r: Round) -> None:
    """A changed spec restarts the count of trials and the re-check of a resting target."""
    if r.status.observed_generation == r.generation:
        return
    first = r.status.observed_generation is None
    r.update(observed_generation=r.generation, trial_count=r.status.trial_count if first else 0)
    if r.status.drift_generation is not None and r.generation > r.status.drift_generation:
        r.update(drift_generation=None)
        r.condition(ConditionType.DEGRADED, False, "SpecChanged", "tuning resumed: new spec")
        # A canary still being removed after the drift is removed first.
        canary_left = is_canary(r.status.current_trial)
        r.phase(Phase.ROLLING_BACK if canary_left else Phase.OBSERVING)
    if r.status.phase in (Phase.CONVERGED, Phase.EXHAUSTED):
        r.phase(Phase.OBSERVING)


def blocked(r: Round, facts: Blocked) -> Decision:
    """Ready=False and phase Failed: the operator cannot work on the target."""
    ref = r.spec.target_ref
    match facts.blocker:
        case Blocker.DEPLOYMENT_NOT_FOUND:
            message = f"Deployment {ref.name} not found in this namespace"
        case Blocker.CONTAINER_NOT_FOUND:
            message = facts.detail or "no container to tune"
        case Blocker.CONFLICT:
            message = (
                f"LatencyTarget {facts.detail} already targets Deployment {ref.name}; "
                "this one does nothing (delete one of them)"
            )
        case Blocker.NOT_VLLM:
            message = facts.detail
            diagnosis = diagnose(
                NoData(reason="not vLLM", window_seconds=0.0),
                r.spec.objectives,
                NotVllm(message),
                facts.hardware,
                r.spec.knobs,
            )
            r.update(diagnosis=diagnosis_status(diagnosis))
    r.condition(ConditionType.READY, False, facts.blocker.value, message)
    r.condition(ConditionType.PROGRESSING, False, facts.blocker.value, message)
    if r.status.phase is not Phase.FAILED:
        r.note(_NOTE[facts.blocker], message)
    r.phase(Phase.FAILED)
    return r.decision(message)


def ready(r: Round, facts: Ready) -> None:
    message = f"tuning Deployment {r.spec.target_ref.name}"
    if facts.controller_owner:
        message += (
            f"; it is managed by {facts.controller_owner}, which would revert changed "
            "arguments: recommendations only"
        )
    r.condition(ConditionType.READY, True, "Ready", message)


def strategy(r: Round, facts: Ready) -> None:
    """Between trials, the strategy the next one will use and why (status.strategy); a trial
    in flight keeps the one it started with (its canary shrinks the Deployment meanwhile)."""
    if r.status.current_trial is not None:
        return
    chosen = choose_strategy(
        r.spec, facts.deployment, canary_supported=facts.canary_name is not None
    )
    if r.status.strategy != chosen:
        r.update(strategy=chosen)


def metrics_condition(r: Round, current: WindowResult | None) -> None:
    minimum = r.spec.evaluation.min_requests
    if current is None:
        r.condition(ConditionType.METRICS_AVAILABLE, "Unknown", "NotMeasured", "no window yet")
    elif isinstance(current, MetricsFailure):
        r.condition(ConditionType.METRICS_AVAILABLE, False, "MetricsSourceError", current.message)
        # Ready means the operator can work on the target: without its metrics it cannot.
        r.condition(ConditionType.READY, False, "MetricsSourceError", current.message)
    elif isinstance(current, NoData):
        r.condition(ConditionType.METRICS_AVAILABLE, False, "NoData", current.reason)
    elif current.requests < minimum and saturated(current):
        r.condition(
            ConditionType.METRICS_AVAILABLE,
            True,
            "Saturated",
            f"{current.requests} requests in the window (evaluation.minRequests is {minimum}), "
            f"but the server falls behind: {flow(current).describe()}",
        )
    elif current.requests < minimum and busy(current):
        r.condition(
            ConditionType.METRICS_AVAILABLE,
            True,
            "Busy",
            f"{current.requests} requests in the window (evaluation.minRequests is {minimum}), "
            f"but requests were in flight all the time: the server is slow, not idle; "
            f"{_window_for(r, current)}",
        )
    elif current.requests < minimum:
        r.condition(
            ConditionType.METRICS_AVAILABLE,
            False,
            "TooFewRequests",
            f"{current.requests} requests in the window, evaluation.minRequests is {minimum}",
        )
    else:
        message = (
            f"{current.requests} requests in the last {format_duration(current.window_seconds)}"
        )
        coarse = lowest_bucket_warning(current, r.spec.objectives)
        if coarse is not None:  # a target judged on an interpolated quantile
            message += f"; warning: {coarse}"
        r.condition(ConditionType.METRICS_AVAILABLE, True, "Measured", message)


def _window_for(r: Round, busy_window: Observation) -> str:
    """How long a window of this busy server would take to finish ``minRequests`` at the pace
    it finished them (``busy`` windows finish at least a few), in words: every verdict on
    fewer rests on a handful of requests, and only the user can lengthen the window."""
    minimum = r.spec.evaluation.min_requests
    needed = math.ceil(busy_window.window_seconds * minimum / max(busy_window.requests, 1))
    return (
        f"at this pace a window of {format_duration(needed)} would hold {minimum} "
        f"(evaluation.window is {r.spec.evaluation.window})"
    )


def fingerprints(trial: Trial) -> tuple[str, ...]:
    return tuple(c.fingerprint for c in (trial.from_container, trial.to_container) if c)


def resume(r: Round) -> None:
    """A trial interrupted by a pause or a blocked round (Deployment briefly gone, ...) is
    taken up where it stood, never dropped with its change still applied."""
    trial = r.status.current_trial
    was_paused = r.status.phase is Phase.PAUSED
    if trial is None:
        r.phase(Phase.OBSERVING)
    elif trial.verdict is Verdict.KEEP and is_canary(trial):
        r.phase(Phase.PROMOTING)  # a kept canary is promoted, never dropped
    elif trial.verdict is not None:
        r.phase(Phase.ROLLING_BACK)
    else:
        # The trial's windows are stale after a pause: roll it out (a no-op if it is there)
        # and measure it afresh.
        r.update(current_trial=trial.model_copy(update={"measure_started_at": None}))
        r.phase(Phase.ROLLING_OUT)
    if was_paused or trial is not None:
        r.note(Reason.RESUMED, "tuning resumed")


def adopt_outside_changes(r: Round, fingerprint: str) -> None:
    """Between trials, a container changed by someone else is the new starting point."""
    expected = r.status.expected_container
    if expected is None:
        r.update(expected_container=fingerprint)
        return
    if expected == fingerprint:
        return
    r.update(expected_container=fingerprint, stable_since=None, baseline=None)
    r.note(
        Reason.CONFIGURATION_CHANGED,
        "the vLLM container was changed outside the operator; measuring it afresh",
    )
    if r.status.phase not in (Phase.OBSERVING, Phase.FAILED):
        r.phase(Phase.OBSERVING)


def drift(r: Round, trial: Trial, facts: Ready) -> Decision:
    """Someone else changed the container mid-trial: stop, never fight over it. A canary
    trial's canary is removed first (its replica given back): phase RollingBack, then Paused."""
    message = (
        f"the vLLM container changed outside the operator during trial {trial.id} "
        f"({trial.knob}); tuning paused until the LatencyTarget's spec changes"
    )
    if is_canary(trial):
        abandoned = trial.model_copy(
            update={
                "verdict": Verdict.INCONCLUSIVE,
                "reason": "abandoned: the Deployment was changed by someone else",
            }
        )
        r.update(current_trial=abandoned, drift_generation=r.generation, baseline=None)
        r.phase(Phase.ROLLING_BACK)
        r.condition(ConditionType.PROGRESSING, False, "Drift", f"{message}; removing the canary")
        r.condition(ConditionType.DEGRADED, True, "Drift", message)
        r.note(Reason.DRIFT, message)
        r.again = True
        return r.decision("drift: removing the canary")
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
    r.note(Reason.DRIFT, message)
    return r.decision("drift")
