"""The phases of a trial: RollingOut, Settling, Measuring, RollingBack; and the resting ones
(Converged, Exhausted) that wait for the cooldown. Pure."""

from __future__ import annotations

from datetime import timedelta

from latency_tuner.api.conditions import ConditionType, get_condition
from latency_tuner.api.durations import format_duration, format_timestamp, parse_timestamp
from latency_tuner.api.status import IncompatibleValue, Phase, Trial, Verdict, with_trial
from latency_tuner.core.knobs import KnobClass, class_of
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import LOAD_TOLERANCE, TRANSIENT_FAILURE, load_of
from latency_tuner.core.rollout.events import Reason
from latency_tuner.core.rollout.facts import MetricsFailure, Ready, cooldown_over
from latency_tuner.core.rollout.state import Decision, Round
from latency_tuner.core.rollout.values import config_of, metric_snapshot, scored
from latency_tuner.core.saturation import usable
from latency_tuner.core.score import score
from latency_tuner.core.verdict import LONGER_LOOK, Outcome, judge_trial

MAX_MEASUREMENTS = 2  # an inconclusive trial window is measured once more, then rolled back
# Converged, the targets missed in every window for this many evaluation windows: tune again
# without waiting for the cooldown. Two, as the benchmark's confirmation of a success: one
# window's miss can be noise (a burst, a few long prompts); two in a row, a load that moved.
SUSTAINED_MISS_WINDOWS = 2


def _trial(r: Round) -> Trial:
    trial = r.status.current_trial
    assert trial is not None, f"phase {r.status.phase.value} without a trial in the status"
    assert trial.from_container is not None and trial.to_container is not None
    return trial


def rolling_out(r: Round, facts: Ready) -> Decision:
    trial = _trial(r)
    assert trial.to_container is not None
    if facts.container.fingerprint() != trial.to_container.fingerprint:
        r.apply = config_of(trial.to_container)
        r.condition(
            ConditionType.PROGRESSING, True, "RollingOut", f"trial {trial.id}: applying the change"
        )
        return r.decision("applying the trial's change")
    # The deadline runs from entering RollingOut: after a resume, not from the trial's start.
    failed = rollout_failure(r, facts, trial.to_container.fingerprint, r.status.phase_since)
    if failed is not None:
        transient = facts.rollout.waiting_for_a_node(trial.to_container.fingerprint)
        return fail_trial(r, trial, failed, transient=transient)
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


def rollout_failure(r: Round, facts: Ready, fingerprint: str, since: str | None) -> str | None:
    failure = facts.rollout.failure(fingerprint)
    if failure is not None:
        return failure
    deadline = r.spec.evaluation.progress_deadline_seconds
    if not facts.rollout.complete and r.since(since) > deadline:
        return (
            f"not ready within evaluation.progressDeadline ({r.spec.evaluation.progress_deadline})"
        )
    return None


def fail_trial(r: Round, trial: Trial, why: str, *, transient: bool = False) -> Decision:
    """Roll the trial back as Failed. A permanent failure (the value crashed, was refused, its
    image missing) records the value incompatible for good; a transient one (its pods waited
    for GPUs) does not, and the planner retries it later (``core.planner``)."""
    lead = TRANSIENT_FAILURE if transient else "rollout failed:"
    failed = trial.model_copy(
        update={"verdict": Verdict.FAILED, "reason": f"{lead} {why}", "finished_at": None}
    )
    incompatible = [
        i for i in r.status.incompatible if (i.knob, i.value) != (trial.knob, trial.to_value)
    ]
    if not transient:
        incompatible.append(IncompatibleValue(knob=trial.knob, value=trial.to_value, reason=why))
    r.update(current_trial=failed, incompatible=incompatible)
    r.phase(Phase.ROLLING_BACK)
    message = f"trial {trial.id} ({trial.knob} -> {trial.to_value}) failed: {why}; rolling back"
    r.condition(ConditionType.DEGRADED, True, "TrialFailed", message)
    r.condition(ConditionType.PROGRESSING, True, "RollingBack", message)
    r.note(Reason.TRIAL_FAILED, message)
    r.again = True
    return r.decision("trial failed")


def _running_trial(r: Round, facts: Ready) -> tuple[Trial, Decision | None]:
    """The trial being warmed up or measured, and its failure decision if its pods broke."""
    trial = _trial(r)
    assert trial.to_container is not None
    failed = rollout_failure(r, facts, trial.to_container.fingerprint, None)
    return trial, None if failed is None else fail_trial(r, trial, failed)


def settling(r: Round, facts: Ready) -> Decision:
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


def measuring(r: Round, facts: Ready) -> Decision:
    trial, failed = _running_trial(r, facts)
    if failed is not None:
        return failed
    windows = facts.windows
    if windows.trial is None:
        return r.decision("measuring the trial")
    after, before = windows.trial, windows.baseline
    if isinstance(after, MetricsFailure) or before is None or isinstance(before, MetricsFailure):
        unread = [w for w in (after, before) if isinstance(w, MetricsFailure)]
        return _unreadable(r, trial, unread[0] if unread else None)
    judgement = judge_trial(
        before,
        after,
        r.spec.objectives,
        min_requests=r.spec.evaluation.min_requests,
        min_improvement=r.spec.evaluation.min_improvement,
        baseline_subwindows=[w for w in windows.baseline_parts if isinstance(w, Observation)],
        may_look_longer=not trial.longer and trial.measurements == 0,
        may_step=_may_step(trial),
        settled_for=_settled_for(trial),
    )
    measured = scored(
        trial.model_copy(
            update={
                "after": metric_snapshot(r.spec, after, r.stamp)
                if isinstance(after, Observation)
                else None,
                "measurements": trial.measurements + 1,
            }
        )
    )
    if judgement.outcome is Outcome.KEEP:
        return _keep(r, measured, judgement.reason)
    if judgement.outcome is Outcome.REVERT or measured.measurements >= MAX_MEASUREMENTS:
        verdict = Verdict.REVERT if judgement.outcome is Outcome.REVERT else Verdict.INCONCLUSIVE
        return _roll_back(r, measured, verdict, judgement.reason, "reverting")
    if judgement.longer:
        # Just short of the bar: the same trial window, twice as long (``verdict._near``).
        why = f"trial {trial.id}: {judgement.reason}"
        longer = measured.model_copy(update={"longer": True})
        return remeasure(r, longer, why, why, "looking longer")
    # Inconclusive or no data: measure once more over a fresh window (after the restart's
    # wave of requests has passed, when the verdict saw one). The wait is the pods' own
    # figures (their gauges): never longer than evaluation.progressDeadline.
    start = r.stamp
    if judgement.settle_until is not None and trial.ready_at is not None:
        wait = min(judgement.settle_until, r.spec.evaluation.progress_deadline_seconds)
        ready = parse_timestamp(trial.ready_at)
        start = format_timestamp(max(r.now, ready + timedelta(seconds=wait)))
    return remeasure(
        r,
        measured.model_copy(update={"measure_started_at": start}),
        f"trial {trial.id} inconclusive ({judgement.reason}); measuring again",
        f"trial {trial.id}: {judgement.reason}; measuring again",
        "remeasuring",
    )


def _settled_for(trial: Trial) -> float | None:
    """How long the trial's pods had served when its window began (seconds); None if unknown."""
    if trial.ready_at is None or trial.measure_started_at is None:
        return None
    began = parse_timestamp(trial.measure_started_at) - parse_timestamp(trial.ready_at)
    return began.total_seconds()


def _unreadable(r: Round, trial: Trial, failure: MetricsFailure | None) -> Decision:
    """The trial's windows could not be read this round. They are judged later (their ends
    are fixed: the same windows, once the source answers); but not for ever: a trial whose
    windows stay unreadable for ``evaluation.progressDeadline`` after its window ended is
    rolled back Inconclusive (its change stays unjudged, the configuration before it is
    known), rather than left applied on the Deployment while nothing can tell what it did."""
    why = failure.message if failure is not None else "the baseline window is missing"
    assert trial.measure_started_at is not None
    span = r.spec.evaluation.window_seconds * (LONGER_LOOK if trial.longer else 1)
    late = r.since(trial.measure_started_at) - span
    if late <= r.spec.evaluation.progress_deadline_seconds:
        r.condition(
            ConditionType.PROGRESSING,
            True,
            "WaitingForMetrics",
            f"trial {trial.id}: its windows cannot be read yet ({why}); judging them later",
        )
        return r.decision("metrics unavailable: judging later")
    reason = (
        f"its windows could not be read for {format_duration(late)} after the trial window "
        f"ended (evaluation.progressDeadline is {r.spec.evaluation.progress_deadline}): {why}"
    )
    return _roll_back(
        r, trial, Verdict.INCONCLUSIVE, reason, "metrics unavailable too long: reverting"
    )


def _roll_back(r: Round, trial: Trial, verdict: Verdict, reason: str, decision: str) -> Decision:
    """End the measuring of ``trial`` with ``verdict`` (Revert or Inconclusive): roll back."""
    r.update(current_trial=trial.model_copy(update={"verdict": verdict, "reason": reason}))
    r.phase(Phase.ROLLING_BACK)
    what = f"trial {trial.id} ({trial.knob} -> {trial.to_value}) {verdict.value.lower()}"
    message = f"{what}: {reason}; rolling back"
    r.condition(ConditionType.PROGRESSING, True, "RollingBack", message)
    r.note(Reason.REVERTING, message)
    r.again = True
    return r.decision(decision)


def _may_step(trial: Trial) -> bool:
    """May two saturated windows that cannot judge ``trial`` keep it as a step
    (``verdict.STEP_ON_SATURATED``)? A safe change that was expected to shorten the queue (its
    TTFT forecast, else its E2E one, lower): one chosen for ITL at the queue's expense (fewer
    slots) adds nothing a later change could unlock. A lossy or costly change must show what
    it buys."""
    if class_of(trial.knob) is not KnobClass.SAFE:
        return False
    for name in ("ttft", "e2e"):
        expected = [p.expected_change for p in trial.predictions if p.objective == name]
        if expected:
            return expected[0] < 0
    return False


def remeasure(r: Round, trial: Trial, condition: str, note: str, decision: str) -> Decision:
    """Go on measuring ``trial`` (its window as the caller set it), and say so."""
    r.update(current_trial=trial)
    r.condition(ConditionType.PROGRESSING, True, "Remeasuring", condition)
    r.note(Reason.INCONCLUSIVE, note)
    return r.decision(decision)


def _keep(r: Round, measured: Trial, why: str) -> Decision:
    assert measured.to_container is not None
    kept = measured.model_copy(
        update={"verdict": Verdict.KEEP, "reason": why, "finished_at": r.stamp}
    )
    r.update(
        current_trial=None,
        trials=with_trial(r.status.trials, kept),
        expected_container=measured.to_container.fingerprint,
        stable_since=measured.measure_started_at,  # the trial window is a clean window
    )
    r.phase(Phase.OBSERVING)
    change = f"{measured.knob} {measured.from_value} -> {measured.to_value}"
    message = f"trial {measured.id} kept: {change}: {why}"
    r.condition(ConditionType.PROGRESSING, True, "Kept", message)
    r.condition(ConditionType.DEGRADED, False, "Healthy", "no failed rollout")
    r.note(Reason.KEPT, message)
    r.again = True
    return r.decision("kept")


def rolling_back(r: Round, facts: Ready) -> Decision:
    trial = _trial(r)
    assert trial.from_container is not None
    if facts.container.fingerprint() != trial.from_container.fingerprint:
        r.apply = config_of(trial.from_container)
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
    r.note(Reason.ROLLED_BACK, message)
    return r.decision("rolled back")


def resting(r: Round, facts: Ready) -> Decision:
    """Converged or Exhausted: keep watching; plan again after the cooldown, or sooner when the
    targets are missed and something changed (``_reopening``). The cooldown is there against
    flapping, not to leave a deployment outside its targets for half an hour while its load
    moves."""
    current = facts.windows.current
    obs = (
        current
        if isinstance(current, Observation) and usable(current, r.spec.evaluation.min_requests)
        else None
    )
    clean = r.status.stable_since is None or (
        r.since(r.status.stable_since) >= r.spec.evaluation.window_seconds
    )
    missing = None
    if obs is not None and clean:
        r.update(observed=metric_snapshot(r.spec, obs, r.stamp))
        result = score(obs, r.spec.objectives)
        if result.met is not None:
            r.condition(
                ConditionType.TARGETS_MET,
                bool(result.met),
                "TargetsMet" if result.met else "TargetsMissed",
                result.describe(),
            )
        if result.met is False:
            missing = obs
    reopening = _reopening(r, missing)
    if reopening is not None:
        reason, why = reopening
        r.phase(Phase.OBSERVING)
        r.condition(ConditionType.PROGRESSING, True, reason, f"{why}; tuning again")
        r.note(Reason.TARGETS_MISSED, why)
        r.again = True
        return r.decision(f"{reason}: tuning again")
    if cooldown_over(r.spec, r.status, r.now):
        r.phase(Phase.OBSERVING)
        r.again = True
        return r.decision("cooldown over: checking again")
    return r.decision(f"{r.status.phase.value.lower()}: waiting for the cooldown")


def _reopening(r: Round, missing: Observation | None) -> tuple[str, str] | None:
    """Why to tune again before the cooldown (a condition reason and words), or None.

    - Converged, the targets missed in every window for ``SUSTAINED_MISS_WINDOWS`` evaluation
      windows: TargetsMet has been False since its lastTransitionTime (a window that met would
      have flipped it back), so the condition is the state and a restart resumes the count.
    - Exhausted with trials left, a clean window (``missing``) missing the targets under a load
      no longer comparable to the window the operator gave up on (``planner.LOAD_TOLERANCE``,
      widened by counting noise as for trials): what nothing could help with under one load
      says nothing of another (a queue that grew may now fill the slots more max-num-seqs adds).
    """
    if r.status.phase is Phase.CONVERGED:
        met = get_condition(r.status.conditions, ConditionType.TARGETS_MET)
        if met is None or met.status != "False" or met.last_transition_time is None:
            return None
        missed = r.since(met.last_transition_time)
        if missed < SUSTAINED_MISS_WINDOWS * r.spec.evaluation.window_seconds:
            return None
        return "TargetsMissedAgain", (
            f"targets missed in every window for {format_duration(missed)}: {met.message}"
        )
    gave_up_on = r.status.gave_up_on
    if missing is None or gave_up_on is None:
        return None
    if r.status.trial_count >= r.spec.evaluation.max_trials:
        return None
    before, now = load_of(gave_up_on), missing.load
    if before is None or before.comparable_to(now, LOAD_TOLERANCE):
        return None
    return "LoadMoved", (
        f"the load moved since giving up ({before.request_rate:.3g} -> {now.request_rate:.3g} "
        f"requests/s, {before.concurrency_mean:.3g} -> {now.concurrency_mean:.3g} in flight) "
        "and the targets are missed"
    )
