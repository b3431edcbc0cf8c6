"""Observing: wait for a clean window of the configuration, then converge, recommend, give up
or start a trial (to meet the targets, or, once they are met, for a margin the calibrated model
expects to be clearly larger). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from latency_tuner.api.conditions import ConditionType, is_condition_true
from latency_tuner.api.durations import format_duration, format_timestamp
from latency_tuner.api.spec import Mode, Strategy
from latency_tuner.api.status import (
    Baseline,
    CanaryState,
    JsonPatchOperation,
    Phase,
    Recommendation,
    Trial,
)
from latency_tuner.core import knobs as knob_catalog
from latency_tuner.core import model
from latency_tuner.core.cluster import ContainerConfig, container_patch
from latency_tuner.core.gitops import strategic_merge_patch
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import Exhausted, measured_meeting
from latency_tuner.core.rollout.analysis import Analysis, analyse, propose, propose_margin
from latency_tuner.core.rollout.canary import LOSSY_KNOBS
from latency_tuner.core.rollout.events import Reason
from latency_tuner.core.rollout.facts import Ready, window_left
from latency_tuner.core.rollout.state import Decision, Round
from latency_tuner.core.rollout.values import (
    changed_arguments,
    container_snapshot,
    diagnosis_status,
    forecast_note,
    history,
    metric_snapshot,
    predictions,
    target_container,
)
from latency_tuner.core.score import Score, score
from latency_tuner.core.verdict import chance_miss
from latency_tuner.vllm.defaults import config_hash

# A miss small enough to measure again before giving up: a violation score at most this, or
# at most what the window's sampling alone would show (``verdict.chance_miss``). (Any miss is
# measured again once where the configuration met the targets in its last trial's window:
# ``planner.measured_meeting``.)
NEAR_MISS = 0.1


def observing(r: Round, facts: Ready) -> Decision:
    if not facts.rollout.complete:
        r.update(stable_since=None)
        r.condition(
            ConditionType.PROGRESSING, False, "WaitingForRollout", "the Deployment is rolling out"
        )
        return r.decision("waiting for the Deployment's own rollout")
    if r.status.stable_since is None:
        settle = timedelta(seconds=r.spec.evaluation.settle_seconds)
        r.update(stable_since=format_timestamp(r.now + settle))
    wait = window_left(r.spec, r.status, r.now)
    if wait > 0:
        r.condition(
            ConditionType.PROGRESSING,
            False,
            "Measuring",
            f"measuring the current configuration: a clean window in {format_duration(wait)}",
        )
        return r.decision("waiting for a window of the current configuration")
    analysis = analyse(
        r.spec,
        facts.windows.current,
        facts.command_line,
        facts.hardware,
        image=facts.container.image,
    )
    obs, pooled = analysis.usable, False
    if obs is None:
        # Too few requests in one window (a server so slow that one or two finish in it, or
        # light traffic): the running configuration's longer window may hold enough.
        longer = _settled_analysis(r, facts)
        if longer is None:
            r.update(diagnosis=diagnosis_status(analysis.diagnosis))
            return r.decision("no usable window: nothing to act on")
        (obs, analysis), pooled = longer, True
    r.update(diagnosis=diagnosis_status(analysis.diagnosis))
    if pooled:
        _pooled(r, facts, obs)
    r.update(observed=metric_snapshot(r.spec, obs, r.stamp))
    result = score(obs, r.spec.objectives)
    if result.met:
        _targets_met(r, result.describe() + (_over(obs) if pooled else ""))
        margin = _for_margin(r, facts, obs)
        if margin is not None:
            change, target = margin
            return _start_trial(r, change, obs, target, facts, refinement=True)
        return _converge(r, "targets met")
    words = result.describe() + (_over(obs) if pooled else "")
    r.condition(ConditionType.TARGETS_MET, False, "TargetsMissed", words)
    return _next_change(r, facts, analysis, obs, result)


def _pooled(r: Round, facts: Ready, obs: Observation) -> None:
    """Say that the decision rests on the configuration's longer window, and why."""
    current = facts.windows.current
    held = f"{current.requests} requests" if isinstance(current, Observation) else "none"
    r.condition(
        ConditionType.METRICS_AVAILABLE,
        True,
        "Pooled",
        f"{obs.requests} requests over the configuration's last "
        f"{format_duration(obs.window_seconds)} (one window of {r.spec.evaluation.window} held "
        f"{held}; evaluation.minRequests is {r.spec.evaluation.min_requests})",
    )


def _over(obs: Observation) -> str:
    return f" over the last {format_duration(obs.window_seconds)} ({obs.requests} requests)"


def _targets_met(r: Round, words: str) -> None:
    """TargetsMet True; an Event only for targets met that were not (or not known to be)
    before (a re-check after the cooldown that finds them met again is not news)."""
    was_met = is_condition_true(r.status.conditions, ConditionType.TARGETS_MET)
    r.condition(ConditionType.TARGETS_MET, True, "TargetsMet", words)
    if r.status.phase is not Phase.CONVERGED and not was_met:
        r.note(Reason.TARGETS_MET, words)


def _converge(r: Round, why: str) -> Decision:
    r.condition(ConditionType.PROGRESSING, False, "Converged", why)
    r.update(recommendation=None, near_miss_at=None)
    r.phase(Phase.CONVERGED)
    return r.decision(why)


def _settled_analysis(r: Round, facts: Ready) -> tuple[Observation, Analysis] | None:
    """The running configuration's longer window (``Windows.settled``) and its analysis, when
    it was measured and may be judged."""
    if facts.windows.settled is None:
        return None
    longer = analyse(
        r.spec, facts.windows.settled, facts.command_line, facts.hardware,
        image=facts.container.image,
    )  # fmt: skip
    return (longer.usable, longer) if longer.usable is not None else None


def _longer_window(r: Round, facts: Ready) -> tuple[Observation, Score, Analysis] | None:
    """The running configuration's longer window, its score and its analysis, when it was
    measured and may be judged."""
    longer = _settled_analysis(r, facts)
    if longer is None:
        return None
    obs, analysed = longer
    result = score(obs, r.spec.objectives)
    return (obs, result, analysed) if result.value is not None else None


def _for_margin(
    r: Round, facts: Ready, obs: Observation
) -> tuple[knob_catalog.Change, ContainerConfig] | None:
    """Targets met: the change worth a trial for margin (``planner.refine``) and the container
    it makes, in mode Auto with trials left; else None (converge)."""
    if _recommend_only(r, facts):
        return None
    if r.status.trial_count >= r.spec.evaluation.max_trials:
        return None
    change = propose_margin(
        r.spec,
        obs,
        facts.command_line,
        facts.hardware,
        r.status.trials,
        {(i.knob, i.value) for i in r.status.incompatible},
        [w for w in facts.windows.baseline_parts if isinstance(w, Observation)],
    )
    if change is None or _ungated(r, change):  # a lossy one only where the gate can judge it
        return None
    target = target_container(change, facts.command_line, facts.container)
    if target.fingerprint() == facts.container.fingerprint():
        return None
    return change, target


def _next_change(
    r: Round, facts: Ready, analysis: Analysis, obs: Observation, result: Score
) -> Decision:
    """Targets missed: plan the next change and start it, recommend it, or give up."""
    recommend_only = _recommend_only(r, facts)
    excluded = {(i.knob, i.value) for i in r.status.incompatible}
    skipped: list[str] = []
    while True:
        proposal = propose(
            r.spec,
            analysis.diagnosis,
            obs,
            facts.command_line,
            facts.hardware,
            r.status.trials,
            excluded,
        )
        if isinstance(proposal, Exhausted) or recommend_only or not _ungated(r, proposal):
            break
        # spec.quality gates lossy changes on a canary: without one, never try them.
        skipped.append(proposal.describe())
        excluded.add((proposal.knob.value, proposal.to_value))
    if skipped and isinstance(proposal, Exhausted):
        proposal = Exhausted(
            f"{proposal.reason}; not tried, as spec.quality gates lossy changes on canary "
            f"trials only (status.strategy is Rollout): {', '.join(skipped)}",
            proposal.advice,
        )
    if isinstance(proposal, Exhausted):
        # Nothing left to try: give up only on all the running configuration has shown since it
        # settled, not on its last window alone (a latency near its target's percentile, a
        # bimodal one, swings from window to window).
        longer = _longer_window(r, facts)
        if longer is not None:
            last = result
            obs, result, analysed = longer
            if result.met:
                r.update(
                    observed=metric_snapshot(r.spec, obs, r.stamp),
                    diagnosis=diagnosis_status(analysed.diagnosis),
                )
                words = (
                    f"{result.describe()}{_over(obs)}, though not over the last window alone "
                    f"({last.describe()})"
                )
                _targets_met(r, words)
                return _converge(r, "targets met over the configuration's longer window")
        near = result.value is not None and result.value <= max(NEAR_MISS, chance_miss(result, obs))
        # The configuration running met the targets in its last trial's window: this one
        # window (after a rollback, say) is not enough to give up on it either.
        met_before = measured_meeting(history(r.status.trials), result, obs.load)
        if (near or met_before) and not recommend_only and r.status.near_miss_at is None:
            # Within the measurement noise of the targets: one window is not enough to give up.
            # One more window after this one (``facts.window_left``), and the configuration's
            # longer window grows by it.
            r.update(near_miss_at=r.stamp)
            met = "this configuration met them in its last trial's window, " if not near else ""
            r.condition(
                ConditionType.PROGRESSING,
                False,
                "NearMiss",
                f"{result.describe()}; nothing left to try, {met}measuring one more window",
            )
            return r.decision("near miss: measuring again before giving up")
        return exhausted(
            r,
            proposal.reason,
            recommend_only,
            advice=proposal.advice,
            condition_reason="TargetsUnreachable" if proposal.unreachable else "Exhausted",
        )
    target = target_container(proposal, facts.command_line, facts.container)
    if recommend_only or r.spec.mode is Mode.OFF:
        return _recommend(r, proposal, target, facts)
    if r.status.trial_count >= r.spec.evaluation.max_trials:
        return exhausted(r, f"evaluation.maxTrials ({r.spec.evaluation.max_trials}) reached", False)
    if target.fingerprint() == facts.container.fingerprint():
        return exhausted(r, f"{proposal.describe()} would not change the container", False)
    return _start_trial(r, proposal, obs, target, facts)


def _recommend_only(r: Round, facts: Ready) -> bool:
    """Changes are published, not applied: mode Recommend or Off, or a Deployment another
    controller owns."""
    return r.spec.mode is not Mode.AUTO or facts.controller_owner is not None


def _ungated(r: Round, change: knob_catalog.Change) -> bool:
    """A lossy change the quality gate asked for cannot check: the trial would not be a
    canary."""
    chosen = r.status.strategy
    canary = chosen is not None and chosen.name is Strategy.CANARY
    return r.spec.quality is not None and change.knob.value in LOSSY_KNOBS and not canary


def exhausted(
    r: Round,
    why: str,
    recommend_only: bool,
    *,
    advice: Sequence[str] = (),
    condition_reason: str = "Exhausted",
) -> Decision:
    """Give up (or, recommending only, say there is nothing to recommend): the Progressing
    condition says why, with the planner's ``advice`` and the diagnosis's."""
    known = r.status.diagnosis.advice if r.status.diagnosis else []
    advice = list(dict.fromkeys((*advice, *known)))
    message = why + (f". Advice: {'; '.join(advice)}" if advice else "")
    r.update(recommendation=None, near_miss_at=None, gave_up_on=r.status.observed)
    r.condition(ConditionType.PROGRESSING, False, condition_reason, message)
    if recommend_only:
        r.phase(Phase.OBSERVING)
        return r.decision("nothing to recommend")
    if r.status.phase is not Phase.EXHAUSTED:
        r.note(Reason.EXHAUSTED, message)
    r.phase(Phase.EXHAUSTED)
    return r.decision("exhausted")


def _recommend(
    r: Round, change: knob_catalog.Change, target: ContainerConfig, facts: Ready
) -> Decision:
    ops = container_patch(facts.deployment, facts.container_index, target, facts.gpu_resource)
    containers = facts.deployment["spec"]["template"]["spec"]["containers"]
    recommendation = Recommendation(
        knob=change.knob.value,
        from_value=change.from_value,
        to_value=change.to_value,
        patch=[JsonPatchOperation.model_validate(op) for op in ops],
        container=containers[facts.container_index].get("name"),
        args=list(target.args) if target.args is not None else None,
        command=list(target.command) if target.command is not None else None,
        kustomize_patch=strategic_merge_patch(
            facts.deployment, facts.container_index, target, facts.gpu_resource
        ),
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
        r.note(Reason.RECOMMENDATION, f"{change.describe()}: {change.reason}")
    r.phase(Phase.OBSERVING)
    return r.decision("recommendation published")


def _start_trial(
    r: Round,
    change: knob_catalog.Change,
    obs: Observation,
    target: ContainerConfig,
    facts: Ready,
    *,
    refinement: bool = False,
) -> Decision:
    container, cl = facts.container, facts.command_line
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
    before = metric_snapshot(r.spec, obs, r.stamp)
    trial = Trial(
        id=next_id,
        knob=change.knob.value,
        from_value=change.from_value,
        to_value=change.to_value,
        started_at=r.stamp,
        before=before,
        predictions=predictions(
            change,
            before,
            model.forecast_change(
                obs,
                facts.hardware,
                (cl, container.gpu_limit),
                (applied.command_line, target.gpu_limit),
                r.spec.objectives.itl.percentile if r.spec.objectives.itl else None,
            ),
        ),
        config_hash=config_hash(applied.command_line),
        previous_config_hash=config_hash(cl),
        from_container=container_snapshot(container),
        to_container=container_snapshot(target),
        changes=changed_arguments(container, target),
        reason=change.reason,
        refinement=refinement,
    )
    chosen = r.status.strategy
    if chosen is not None and chosen.name is Strategy.CANARY and facts.canary_name is not None:
        replicas = int((facts.deployment.get("spec") or {}).get("replicas", 1) or 0)
        trial = trial.model_copy(
            update={
                "strategy": Strategy.CANARY,
                "canary": CanaryState(name=facts.canary_name, main_replicas=replicas),
            }
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
    if note := forecast_note(trial.predictions):
        message += f"; {note}"
    if trial.canary is not None:
        message += f"; as canary {trial.canary.name} beside the baseline pods"
    r.condition(ConditionType.PROGRESSING, True, "TrialStarted", message)
    r.note(Reason.TRIAL_STARTED, message)
    r.again = True  # the intent is recorded first; the patch comes on the next step
    return r.decision("trial started")
