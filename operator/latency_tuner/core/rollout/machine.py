"""``decide``: the checks every round makes, then the phase's own step from ``PHASES``. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from latency_tuner.api.conditions import ConditionType
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus, Phase, Trial, Verdict
from latency_tuner.core.rollout import canary, guards
from latency_tuner.core.rollout.facts import Blocked, Facts, Ready, is_canary
from latency_tuner.core.rollout.observing import observing
from latency_tuner.core.rollout.state import Decision, Round
from latency_tuner.core.rollout.trial import (
    measuring,
    resting,
    rolling_back,
    rolling_out,
    settling,
)

TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    Phase.OBSERVING: frozenset(
        {Phase.OBSERVING, Phase.CONVERGED, Phase.EXHAUSTED, Phase.ROLLING_OUT}
    ),
    Phase.ROLLING_OUT: frozenset({Phase.ROLLING_OUT, Phase.SETTLING, Phase.ROLLING_BACK}),
    Phase.SETTLING: frozenset({Phase.SETTLING, Phase.MEASURING, Phase.ROLLING_BACK}),
    Phase.MEASURING: frozenset(
        {Phase.MEASURING, Phase.OBSERVING, Phase.ROLLING_BACK, Phase.PROMOTING}
    ),
    Phase.ROLLING_BACK: frozenset({Phase.ROLLING_BACK, Phase.OBSERVING}),
    Phase.PROMOTING: frozenset({Phase.PROMOTING, Phase.OBSERVING, Phase.ROLLING_BACK}),
    Phase.CONVERGED: frozenset({Phase.CONVERGED, Phase.OBSERVING}),
    Phase.EXHAUSTED: frozenset({Phase.EXHAUSTED, Phase.OBSERVING}),
    Phase.PAUSED: frozenset(
        {Phase.PAUSED, Phase.OBSERVING, Phase.ROLLING_OUT, Phase.ROLLING_BACK, Phase.PROMOTING}
    ),
    Phase.FAILED: frozenset(
        {Phase.FAILED, Phase.OBSERVING, Phase.ROLLING_OUT, Phase.ROLLING_BACK, Phase.PROMOTING}
    ),
}
# Any phase may also go to Paused or Failed (see the package docstring).
ALWAYS_ALLOWED: frozenset[Phase] = frozenset({Phase.PAUSED, Phase.FAILED})

Step = Callable[[Round, Ready], Decision]
# The step of each phase a round can be in once the checks pass (Paused and Failed are resumed
# into one of these first).
PHASES: Mapping[Phase, Step] = {
    Phase.OBSERVING: observing,
    Phase.ROLLING_OUT: rolling_out,
    Phase.SETTLING: settling,
    Phase.MEASURING: measuring,
    Phase.ROLLING_BACK: rolling_back,
    Phase.CONVERGED: resting,
    Phase.EXHAUSTED: resting,
    Phase.PROMOTING: canary.promoting,  # canary trials only
}
# A canary trial's own step for the phases where it differs from a rollout's.
CANARY_PHASES: Mapping[Phase, Step] = {
    Phase.ROLLING_OUT: canary.canary_rolling_out,
    Phase.SETTLING: canary.canary_settling,
    Phase.MEASURING: canary.canary_measuring,
    Phase.ROLLING_BACK: canary.canary_rolling_back,
}


def _removing_canary(trial: Trial) -> bool:
    # A refused canary is only being removed: the main container is not the trial's concern.
    return is_canary(trial) and trial.verdict not in (None, Verdict.KEEP)


def decide(
    spec: LatencyTargetSpec,
    generation: int,
    status: LatencyTargetStatus,
    facts: Facts,
    now: datetime,
) -> Decision:
    """One step of the loop: the new status, at most one change to apply, and the events."""
    r = Round(spec, generation, status, now)
    guards.new_spec(r)
    if isinstance(facts, Blocked):
        return guards.blocked(r, facts)
    guards.ready(r, facts)
    guards.strategy(r, facts)
    guards.metrics_condition(r, facts.windows.current)
    if spec.paused:
        r.phase(Phase.PAUSED)
        r.condition(ConditionType.PROGRESSING, False, "Paused", "spec.paused is true")
        return r.decision("paused")
    trial = r.status.current_trial
    if r.status.drift_generation is not None and is_canary(trial):
        # Drift mid-canary: the canary is removed before tuning pauses.
        return canary.canary_rolling_back(r, facts)
    if r.status.drift_generation is not None:
        return r.decision("paused for an outside change until the spec changes")
    if r.status.phase in (Phase.PAUSED, Phase.FAILED):
        guards.resume(r)
    trial = r.status.current_trial
    fingerprint = facts.container.fingerprint()
    if trial is None:
        guards.adopt_outside_changes(r, fingerprint)
    elif fingerprint not in guards.fingerprints(trial) and not _removing_canary(trial):
        return guards.drift(r, trial, facts)
    trial = r.status.current_trial
    if is_canary(trial) and r.status.phase in CANARY_PHASES:
        return CANARY_PHASES[r.status.phase](r, facts)
    return PHASES[r.status.phase](r, facts)
