"""The phases of a canary trial: the change runs on one extra pod beside the unchanged ones.

RollingOut creates the canary (the trial's container, one replica) beside the main Deployment's
pods and takes one replica off the main Deployment once the canary is ready -- or at once if the
canary waits for a node, to free its GPU -- so no pod serves more than its share while the canary
starts (a backlog built then would make the canary look better than it is); Settling warms it up
and, for a lossy change with ``spec.quality``, runs the quality gate on the canary and a baseline
pod; Measuring compares both arms over the same intervals of one window (``core.sidebyside``); a
kept change is Promoted (the main Deployment takes the trial's container and its replica back, the
canary goes), any other verdict is RolledBack (the replica comes back, the canary goes; the main
Deployment's container is never touched). Either way the canary serves until the replica given back
is ready. Every step asks for the world it wants (``CanaryAction``), so a restarted operator asks
for the same and nothing is made twice. Pure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from latency_tuner.api.conditions import ConditionType
from latency_tuner.api.durations import format_timestamp
from latency_tuner.api.spec import LatencyTargetSpec, QualityGate, QualityMetric, QualityMode
from latency_tuner.api.status import (
    CanaryState,
    LatencyTargetStatus,
    Phase,
    QualityScore,
    Trial,
    Verdict,
    with_trial,
)
from latency_tuner.core.knobs import KnobName
from latency_tuner.core.observation import Observation
from latency_tuner.core.quality import (
    Metric,
    judge_against_expected,
    judge_against_reference,
)
from latency_tuner.core.rollout.events import Reason
from latency_tuner.core.rollout.facts import (
    QualityAnswers,
    QualityFailure,
    Ready,
    WindowResult,
    is_canary,
)
from latency_tuner.core.rollout.state import CanaryAction, Decision, Round
from latency_tuner.core.rollout.trial import MAX_MEASUREMENTS, fail_trial, remeasure
from latency_tuner.core.rollout.values import arm_snapshot, config_of, scored
from latency_tuner.core.score import ObjectiveScore, Score, set_objectives
from latency_tuner.core.sidebyside import (
    ArmComparison,
    Outcome,
    compare_arms,
    load_balanced,
    steady_backlogs,
)

# Changes that may alter what the model answers: gated on quality when spec.quality is set.
LOSSY_KNOBS = frozenset(
    k.value for k in (KnobName.QUANTIZATION, KnobName.KV_CACHE_DTYPE, KnobName.SPECULATIVE_DECODING)
)
_METRIC = {
    QualityMetric.EXACT_MATCH: Metric.EXACT_MATCH,
    QualityMetric.SIMILARITY: Metric.SIMILARITY,
    QualityMetric.NUMERIC_ANSWER: Metric.ANSWER,
}


def _trial(r: Round) -> tuple[Trial, CanaryState]:
    trial = r.status.current_trial
    assert trial is not None and is_canary(trial) and trial.canary is not None
    assert trial.from_container is not None and trial.to_container is not None
    return trial, trial.canary


def _replicas(facts: Ready) -> int:
    return int((facts.deployment.get("spec") or {}).get("replicas", 1) or 0)


def _shrunk(facts: Ready, canary: CanaryState) -> int | None:
    """The main Deployment's replicas while the canary runs: one less than it had, asked only
    while it still has what it had (an HPA or a person that set another count wins)."""
    return canary.main_replicas - 1 if _replicas(facts) == canary.main_replicas else None


def _restored(facts: Ready, canary: CanaryState) -> int | None:
    """The replica given back, only if the count is still the one the canary left."""
    return canary.main_replicas if _replicas(facts) == canary.main_replicas - 1 else None


def quality_needed(spec: LatencyTargetSpec, status: LatencyTargetStatus) -> bool:
    """Whether this round's facts must hold the quality gate's answers: a lossy canary trial
    warming up with ``spec.quality`` set and no score yet (asked once the settle time is over;
    the caller checks the time, the answers take it anyway)."""
    trial = status.current_trial
    return (
        spec.quality is not None
        and status.phase is Phase.SETTLING
        and is_canary(trial)
        and trial is not None
        and trial.knob in LOSSY_KNOBS
        and trial.quality is None
    )


def judge_quality(gate: QualityGate, answers: QualityAnswers) -> QualityScore:
    metric = _METRIC[gate.metric]
    if gate.mode is QualityMode.EXPECTED:
        expected = [e or "" for e in answers.expected]
        verdict = judge_against_expected(
            metric, expected, answers.canary, answers.baseline, gate.tolerance
        )
    else:
        verdict = judge_against_reference(metric, answers.baseline, answers.canary, gate.tolerance)
    reason = verdict.reason
    if answers.errors:
        reason += f"; unanswered: {'; '.join(answers.errors[:3])}"
    return QualityScore(
        metric=gate.metric.value,
        mode=gate.mode.value,
        score=verdict.candidate_score,
        baseline_score=verdict.baseline_score,
        tolerance=gate.tolerance,
        samples=verdict.samples,
        passed=verdict.passed,
        reason=reason,
    )


def canary_rolling_out(r: Round, facts: Ready) -> Decision:
    trial, canary = _trial(r)
    assert trial.to_container is not None
    seen = facts.canary
    if seen is not None and seen.taken is not None:
        return fail_trial(r, trial, seen.taken, transient=True)
    target = trial.to_container.fingerprint
    shrink = _shrunk(facts, canary)
    if seen is None or not seen.exists or seen.fingerprint != target or seen.replicas != 1:
        r.canary = CanaryAction(ensure=config_of(trial.to_container))
        r.condition(
            ConditionType.PROGRESSING,
            True,
            "RollingOut",
            f"trial {trial.id}: starting canary {canary.name}",
        )
        return r.decision("starting the canary")
    assert seen.rollout is not None
    if shrink is not None and seen.rollout.unschedulable(target):
        # No node has room for the canary: the main Deployment gives up one pod for it now
        # (GPUs are never over-committed), and serves short-handed until the canary is ready.
        r.canary = CanaryAction(main_replicas=shrink)
        r.condition(
            ConditionType.PROGRESSING,
            True,
            "RollingOut",
            f"trial {trial.id}: canary {canary.name} waits for a node; Deployment "
            f"{r.spec.target_ref.name} gives up one replica for it",
        )
        return r.decision("freeing a node for the canary")
    failed = seen.rollout.failure(target)
    deadline = r.spec.evaluation.progress_deadline_seconds
    if failed is None and not seen.rollout.complete and r.since(r.status.phase_since) > deadline:
        failed = (
            f"not ready within evaluation.progressDeadline ({r.spec.evaluation.progress_deadline})"
        )
    if failed is not None:
        transient = seen.rollout.waiting_for_a_node(target)
        return fail_trial(r, trial, f"canary {canary.name}: {failed}", transient=transient)
    if not seen.rollout.complete or seen.rollout.ready_replicas < 1:
        return r.decision("waiting for the canary")
    if shrink is not None:
        # The canary serves: now the main Deployment gives up its replica, so each pod, the
        # canary included, takes the share one pod took before the trial.
        r.canary = CanaryAction(main_replicas=shrink)
    r.update(current_trial=trial.model_copy(update={"ready_at": r.stamp}))
    r.phase(Phase.SETTLING)
    r.condition(
        ConditionType.PROGRESSING,
        True,
        "Settling",
        f"trial {trial.id}: canary {canary.name} is ready; warming up for "
        f"{r.spec.evaluation.settle}",
    )
    r.again = True
    return r.decision("canary ready")


def _canary_failure(r: Round, facts: Ready, trial: Trial) -> Decision | None:
    seen = facts.canary
    assert trial.to_container is not None and trial.canary is not None
    if seen is None or not seen.exists or seen.rollout is None:
        return fail_trial(r, trial, f"canary {trial.canary.name} disappeared", transient=True)
    failed = seen.rollout.failure(trial.to_container.fingerprint)
    if failed is None:
        return None
    return fail_trial(r, trial, f"canary {trial.canary.name}: {failed}")


def canary_settling(r: Round, facts: Ready) -> Decision:
    trial, canary = _trial(r)
    failed = _canary_failure(r, facts, trial)
    if failed is not None:
        return failed
    if r.since(trial.ready_at) < r.spec.evaluation.settle_seconds:
        return r.decision("settling")
    if quality_needed(r.spec, r.status):
        gate = r.spec.quality
        assert gate is not None
        if facts.quality is None:
            return r.decision("waiting for the quality gate's answers")
        if isinstance(facts.quality, QualityFailure):
            return _refuse(r, trial, f"quality gate could not run: {facts.quality.message}")
        scored = judge_quality(gate, facts.quality)
        trial = trial.model_copy(update={"quality": scored})
        r.update(current_trial=trial)
        if not scored.passed:
            r.note(
                Reason.QUALITY_GATE_FAILED,
                f"trial {trial.id} ({trial.knob} -> {trial.to_value}): {scored.reason}",
            )
            return _refuse(r, trial, f"quality gate failed: {scored.reason}")
    r.update(current_trial=trial.model_copy(update={"measure_started_at": r.stamp}))
    r.phase(Phase.MEASURING)
    r.condition(
        ConditionType.PROGRESSING,
        True,
        "Measuring",
        f"trial {trial.id}: measuring canary {canary.name} beside the baseline for "
        f"{r.spec.evaluation.window}",
    )
    return r.decision("measuring side by side")


def _refuse(r: Round, trial: Trial, why: str, verdict: Verdict = Verdict.REVERT) -> Decision:
    refused = trial.model_copy(update={"verdict": verdict, "reason": why})
    r.update(current_trial=refused)
    r.phase(Phase.ROLLING_BACK)
    message = f"trial {trial.id} ({trial.knob} -> {trial.to_value}) {verdict.value.lower()}: {why}"
    r.condition(ConditionType.PROGRESSING, True, "RollingBack", f"{message}; removing the canary")
    r.note(Reason.REVERTING, f"{message}; removing the canary")
    r.again = True
    return r.decision("canary rejected")


def _samples(arm: Sequence[WindowResult], name: str, percentile: int) -> list[float]:
    values = []
    for obs in arm:
        if isinstance(obs, Observation):
            value = getattr(obs, name).get(percentile)
            if value is not None and math.isfinite(value):
                values.append(float(value))
    return values


def _served(arm: Sequence[WindowResult]) -> list[Observation]:
    return [o for o in arm if isinstance(o, Observation)]


def _growth(arm: Sequence[Observation]) -> float | None:
    """How much the arm's waiting queue grew over its intervals; None if a gauge is missing."""
    deltas = [o.waiting_delta for o in arm]
    return None if any(d is None for d in deltas) else float(sum(d or 0.0 for d in deltas))


def _arrivals(arm: Sequence[Observation]) -> float:
    """Requests the arm received: those it finished plus the growth of those it holds (running
    and waiting); a pod that falls behind finishes fewer than it is sent. Unlike
    ``saturation.flow``'s arrivals, never raised to the finished count: a pod draining a
    backlog received fewer than it finished, and the balance check must see that."""
    held = sum((o.running_delta or 0.0) + (o.waiting_delta or 0.0) for o in arm)
    return max(0.0, float(sum(o.requests for o in arm)) + held)


@dataclass(frozen=True)
class _Judged:
    """One objective compared across the arms, each arm scored at its median interval."""

    comparison: ArmComparison
    canary: ObjectiveScore
    baseline: ObjectiveScore

    @property
    def breaks(self) -> bool:
        """The canary is worse on it and, at its median, misses the target."""
        return self.comparison.outcome is Outcome.WORSE and self.canary.met is False


def _median(samples: Sequence[float]) -> float | None:
    return statistics.median(samples) if samples else None


def _standing(score: Score) -> tuple[float, float] | None:
    """(violation, sum of ratios): the rollout verdict's order of two windows' scores."""
    value, ratios = score.value, score.tie_break
    return None if value is None or ratios is None else (value, ratios)


def side_by_side(
    spec: LatencyTargetSpec, canary: Sequence[WindowResult], baseline: Sequence[WindowResult]
) -> tuple[Outcome, str]:
    """The verdict over both arms, by the rules of the rollout verdict's score: Worse when an
    objective is significantly worse and the canary is over its target there; Better when one is
    significantly better by at least ``evaluation.minImprovement`` and what got worse within
    its target does not cost more than that gained (violation first, then the sum of
    observed/threshold ratios, at each arm's medians); Inconclusive when the arms saw different
    load, from different queue states, or too few intervals; else NoDifference."""
    served, base = _served(canary), _served(baseline)
    if served and base:
        pods = max(1, max(o.pods for o in base))
        arrived, base_arrived = _arrivals(served), _arrivals(base)
        balance = load_balanced(arrived, base_arrived, pods)
        if not balance.balanced:
            return Outcome.INCONCLUSIVE, f"the arms saw different load: {balance.reason}"
        growth, base_growth = _growth(served), _growth(base)
        if growth is not None and base_growth is not None:
            backlogs = steady_backlogs(growth, arrived, base_growth, base_arrived, pods)
            if not backlogs.steady:
                return Outcome.INCONCLUSIVE, backlogs.reason
    judged = []
    for name, objective in set_objectives(spec.objectives):
        percentile = int(objective.percentile)
        ours, theirs = _samples(canary, name, percentile), _samples(baseline, name, percentile)
        threshold = objective.threshold_seconds
        judged.append(
            _Judged(
                compare_arms(ours, theirs, what=f"{name} p{percentile}"),
                ObjectiveScore(name, percentile, threshold, _median(ours)),
                ObjectiveScore(name, percentile, threshold, _median(theirs)),
            )
        )
    reasons = "; ".join(j.comparison.reason for j in judged)
    broken = [j for j in judged if j.breaks]
    if broken:
        over = ", ".join(j.canary.describe() for j in broken)
        return Outcome.WORSE, f"{reasons}; canary at its medians: {over}"
    better = [
        j
        for j in judged
        if j.comparison.outcome is Outcome.BETTER
        and (
            j.comparison.relative_shift is None
            or -j.comparison.relative_shift >= spec.evaluation.min_improvement
        )
    ]
    traded = [j for j in judged if j.comparison.outcome is Outcome.WORSE]
    if better and traded:
        ours_now = _standing(Score(tuple(j.canary for j in judged)))
        theirs_now = _standing(Score(tuple(j.baseline for j in judged)))
        if ours_now is None or theirs_now is None or ours_now >= theirs_now:
            return Outcome.NO_DIFFERENCE, (
                f"{reasons}; what got worse within its target costs as much as the gain "
                f"(violation, sum of ratios at the medians: canary {_pair(ours_now)}, baseline "
                f"{_pair(theirs_now)})"
            )
        return Outcome.BETTER, (
            f"{reasons}; the worse objective stays within its target and the gain outweighs it "
            f"(canary {_pair(ours_now)}, baseline {_pair(theirs_now)})"
        )
    if better:
        return Outcome.BETTER, reasons
    if any(j.comparison.outcome is Outcome.INCONCLUSIVE for j in judged):
        return Outcome.INCONCLUSIVE, reasons
    return Outcome.NO_DIFFERENCE, reasons


def _pair(standing: tuple[float, float] | None) -> str:
    return "unmeasured" if standing is None else f"{standing[0]:.3g}, {standing[1]:.3g}"


def _acceptance_refusal(r: Round, trial: Trial, canary: Sequence[WindowResult]) -> str | None:
    gate = r.spec.quality
    floor = gate.min_draft_acceptance if gate is not None else None
    if floor is None or trial.knob != KnobName.SPECULATIVE_DECODING.value:
        return None
    rates = [
        o.spec_acceptance_rate
        for o in canary
        if isinstance(o, Observation) and o.spec_acceptance_rate is not None
    ]
    if not rates:
        return None  # nothing drafted: nothing to judge
    rate = statistics.fmean(rates)
    if rate >= floor:
        return None
    return f"draft acceptance {rate:.1%} is below quality.minDraftAcceptance ({floor:.0%})"


def canary_measuring(r: Round, facts: Ready) -> Decision:
    trial, _ = _trial(r)
    failed = _canary_failure(r, facts, trial)
    if failed is not None:
        return failed
    windows = facts.windows
    if not windows.canary_arm:
        return r.decision("measuring the canary")
    refusal = _acceptance_refusal(r, trial, windows.canary_arm)
    if refusal is not None:
        return _refuse(r, trial, refusal)
    outcome, reason = side_by_side(r.spec, windows.canary_arm, windows.baseline_arm)
    base, served = _served(windows.baseline_arm), _served(windows.canary_arm)
    pods = max((o.pods for o in base), default=0) + max((o.pods for o in served), default=1)
    measured = scored(
        trial.model_copy(
            update={
                "measurements": trial.measurements + 1,
                # Both arms over the same intervals: what the verdict compared.
                "before": arm_snapshot(r.spec, base, r.stamp, pods_serving=pods) or trial.before,
                "after": arm_snapshot(r.spec, served, r.stamp, pods_serving=pods),
            }
        )
    )
    if outcome is Outcome.BETTER:
        kept = measured.model_copy(update={"verdict": Verdict.KEEP, "reason": reason})
        r.update(current_trial=kept)
        r.phase(Phase.PROMOTING)
        message = (
            f"trial {trial.id} kept: {trial.knob} {trial.from_value} -> {trial.to_value}: "
            f"{reason}; promoting it to Deployment {r.spec.target_ref.name}"
        )
        r.condition(ConditionType.PROGRESSING, True, "Promoting", message)
        r.note(Reason.KEPT, message)
        r.again = True
        return r.decision("canary kept")
    if outcome is Outcome.WORSE:
        return _refuse(r, measured, reason)
    if outcome is Outcome.NO_DIFFERENCE:
        return _refuse(r, measured, f"no significant improvement: {reason}")
    if measured.measurements >= MAX_MEASUREMENTS:
        return _refuse(r, measured, reason, Verdict.INCONCLUSIVE)
    return remeasure(
        r,
        measured.model_copy(update={"measure_started_at": r.stamp}),
        f"trial {trial.id} inconclusive ({reason}); measuring again",
        f"trial {trial.id}: {reason}; measuring again",
        "remeasuring the canary",
    )


def _hand_back(r: Round, facts: Ready, canary: CanaryState, serving: str) -> Decision | None:
    """The end of a canary: the main Deployment gets its replica back first and the canary
    goes once that replica is ready (``serving``: the main container's fingerprint), so the
    pods never serve short-handed. The canary goes anyway when the replica cannot come (no
    node has room while the canary holds its GPU, a failing pod, the progress deadline);
    None once both are done."""
    restore = _restored(facts, canary)
    if restore is not None:
        r.canary = CanaryAction(main_replicas=restore)
        return r.decision("giving the main Deployment its replica back")
    seen = facts.canary
    if seen is None or not seen.exists or seen.taken is not None:
        return None
    main = facts.rollout
    stuck = (
        main.unschedulable(serving)
        or main.failure(serving) is not None
        or r.since(r.status.phase_since) > r.spec.evaluation.progress_deadline_seconds
    )
    if not main.complete and not stuck:
        return r.decision("waiting for the replica given back before removing the canary")
    r.canary = CanaryAction(remove=True)
    return r.decision("removing the canary")


def promoting(r: Round, facts: Ready) -> Decision:
    """A kept canary: the main Deployment takes the trial's container and its replica back,
    then the canary goes; the trial is finished once the Deployment has rolled out."""
    trial, canary = _trial(r)
    assert trial.to_container is not None
    target = trial.to_container.fingerprint
    if facts.container.fingerprint() != target:
        r.apply = config_of(trial.to_container)
        r.condition(
            ConditionType.PROGRESSING, True, "Promoting", f"trial {trial.id}: applying the change"
        )
        return r.decision("promoting the canary's change")
    handing_back = _hand_back(r, facts, canary, target)
    if handing_back is not None:
        return handing_back
    failure = facts.rollout.failure(target)
    if failure is not None:
        return fail_trial(r, trial, f"promotion: {failure}")
    if not facts.rollout.complete:
        return r.decision("waiting for the promotion's rollout")
    done = trial.model_copy(update={"finished_at": r.stamp})
    r.update(
        current_trial=None,
        trials=with_trial(r.status.trials, done),
        expected_container=target,
        stable_since=format_timestamp(r.now + timedelta(seconds=r.spec.evaluation.settle_seconds)),
    )
    r.phase(Phase.OBSERVING)
    message = f"trial {trial.id} promoted: Deployment {r.spec.target_ref.name} runs its change"
    r.condition(ConditionType.PROGRESSING, True, "Promoted", message)
    r.condition(ConditionType.DEGRADED, False, "Healthy", "no failed rollout")
    r.note(Reason.PROMOTED, message)
    return r.decision("promoted")


def canary_rolling_back(r: Round, facts: Ready) -> Decision:
    """Remove the canary and give the replica back; the main container is put back only if
    something (a promotion cut short by a failure) moved it."""
    trial, canary = _trial(r)
    assert trial.from_container is not None and trial.to_container is not None
    drifted = r.status.drift_generation is not None
    current = facts.container.fingerprint()
    if current == trial.to_container.fingerprint and not drifted:
        r.apply = config_of(trial.from_container)  # a promotion cut short: put it back
        return r.decision("restoring the configuration before the trial")
    handing_back = _hand_back(r, facts, canary, current)
    if handing_back is not None:
        return handing_back
    if not facts.rollout.complete:
        return r.decision("waiting for the Deployment's replicas")
    done = trial.model_copy(update={"finished_at": r.stamp})
    r.update(
        current_trial=None,
        trials=with_trial(r.status.trials, done),
        # Paused for drift: the container as they left it. Otherwise the trial's start, so a
        # change made meanwhile by someone else is noticed (and measured afresh) next round.
        expected_container=current if drifted else trial.from_container.fingerprint,
        # The baseline pods never changed: the next window may start now.
        stable_since=None if drifted else r.stamp,
    )
    r.phase(Phase.PAUSED if drifted else Phase.OBSERVING)
    message = (
        f"trial {trial.id} rolled back ({trial.verdict.value if trial.verdict else 'done'}): "
        f"canary {canary.name} removed, Deployment {r.spec.target_ref.name} untouched"
    )
    r.condition(ConditionType.PROGRESSING, False, "RolledBack", message)
    if trial.verdict is not Verdict.FAILED:
        r.condition(ConditionType.DEGRADED, False, "Healthy", "no failed rollout")
    r.note(Reason.ROLLED_BACK, message)
    return r.decision("canary rolled back")
