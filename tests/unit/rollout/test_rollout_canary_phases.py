"""A canary trial through ``decide``: started beside the baseline pods, judged side by side,
promoted or removed, gated on quality for a lossy change; every step idempotent. Pure: the
facts are hand-built as in ``test_rollout_phases``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.unit.core.builders import kv_pressure, prefill_stalls
from tests.unit.rollout.test_rollout_phases import (
    AFTER,
    BEFORE,
    SETTLE,
    THIRD,
    WINDOW,
    Run,
    facts,
    rollout,
    spec,
    window,
)

from latency_tuner.api.spec import Strategy
from latency_tuner.api.status import LatencyTargetStatus, Phase, Trial, Verdict
from latency_tuner.core.cluster import ContainerConfig, PodFacts, RolloutFacts
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import TrialRecord
from latency_tuner.core.rollout import Blocked, Blocker, Ready, Reason, Windows, windows_needed
from latency_tuner.core.rollout.canary import side_by_side as judge_arms
from latency_tuner.core.rollout.facts import CanaryFacts, QualityAnswers, QualityFailure
from latency_tuner.core.rollout.state import CanaryAction
from latency_tuner.core.sidebyside import Outcome

CANARY = "llama-canary-0a1b2c3d"
THEIRS = THIRD  # a container someone else set


def main(cfg: ContainerConfig = BEFORE, replicas: int = 3, **fields: Any) -> Ready:
    """The main Deployment at ``cfg`` with ``replicas``, in an operator that runs canaries."""
    base = facts(cfg, **fields)
    deployment = dict(base.deployment)
    deployment["spec"] = {
        **deployment["spec"],
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "llama"}},
    }
    return replace(base, deployment=deployment, canary_name=CANARY)


def canary(cfg: ContainerConfig = AFTER, *, ready: bool = True) -> CanaryFacts:
    return CanaryFacts(
        exists=True, fingerprint=cfg.fingerprint(), replicas=1, rollout=rollout(complete=ready)
    )


def arm(ttft: float, requests: int, pods: int = 1) -> tuple[Observation, ...]:
    # Six intervals, a little noise so no two samples tie.
    return tuple(
        window(BEFORE, ttft={90: ttft * (1 + i / 100)}, requests=requests, pods=pods)
        for i in range(6)
    )


def side_by_side(canary_ttft: float, baseline_ttft: float) -> Windows[Any]:
    return Windows(
        current=window(BEFORE),
        canary_arm=arm(canary_ttft, 100),
        baseline_arm=arm(baseline_ttft, 200, pods=2),
    )


def started(run: Run) -> None:
    run.step(main())
    run.later(SETTLE + WINDOW).step(main())
    assert run.phase() is Phase.ROLLING_OUT
    trial = run.status.current_trial
    assert trial is not None
    assert trial.strategy is Strategy.CANARY
    assert trial.canary is not None
    assert (trial.canary.name, trial.canary.main_replicas) == (CANARY, 3)


def settled(run: Run) -> None:
    started(run)
    d = run.step(main())
    assert d.apply is None  # the main Deployment's container is never the trial's way in
    assert d.canary == CanaryAction(ensure=AFTER)  # beside every baseline pod, none taken yet
    d = run.later(5).step(main(replicas=3, canary=canary(ready=False)))
    assert run.phase() is Phase.ROLLING_OUT
    assert d.canary is None  # the baseline keeps all its pods while the canary starts
    d = run.later(5).step(main(replicas=3, canary=canary()))
    assert run.phase() is Phase.SETTLING
    assert d.canary == CanaryAction(main_replicas=2)  # the canary serves: one pod goes


def measuring(run: Run) -> None:
    settled(run)
    run.later(SETTLE).step(main(replicas=2, canary=canary()))
    assert run.phase() is Phase.MEASURING


def test_the_strategy_and_its_reason_are_on_the_status_before_any_trial() -> None:
    run = Run()
    run.step(main(replicas=1))
    assert run.status.strategy is not None
    assert run.status.strategy.name is Strategy.ROLLOUT
    assert "1 replica" in run.status.strategy.reason
    run.step(main(replicas=3))
    assert str(run.status.strategy.name) == "Canary"  # re-chosen between trials


def test_a_better_canary_is_kept_then_promoted_and_the_canary_removed() -> None:
    run = Run()
    measuring(run)
    wanted = windows_needed(run.spec, run.status, run.later(WINDOW).now)
    assert [w.arm for w in wanted.canary_arm] == ["canary"] * 6
    assert [w.arm for w in wanted.baseline_arm] == ["baseline"] * 6
    assert wanted.canary_arm[-1].end == wanted.baseline_arm[-1].end  # the same window
    d = run.step(main(replicas=2, canary=canary(), windows=side_by_side(0.3, 0.9)))
    assert run.phase() is Phase.PROMOTING
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.KEEP
    assert trial.reason is not None
    assert "Mann-Whitney U" in trial.reason
    assert "p=" in trial.reason
    assert "ttft p90 shifted -" in trial.reason
    assert Reason.KEPT in [n.reason for n in d.notes]
    # Both arms over the judged window, per pod: the medians of the six intervals' TTFT p90.
    assert trial.before is not None
    assert trial.after is not None
    assert (trial.before.ttft_seconds, trial.after.ttft_seconds) == (0.9225, 0.3075)
    assert (trial.before.requests, trial.after.requests) == (1200, 600)
    assert trial.before.window == trial.after.window  # the same intervals
    d = run.step(main(replicas=2, canary=canary()))
    assert d.apply == AFTER  # the promotion: the main Deployment takes the change
    d = run.step(main(AFTER, replicas=2, canary=canary()))
    assert d.canary == CanaryAction(main_replicas=3)  # its replica back, the canary still serving
    d = run.step(main(AFTER, replicas=3, canary=canary()))
    assert d.canary == CanaryAction(remove=True)
    d = run.step(main(AFTER, replicas=3, canary=CanaryFacts(exists=False)))
    assert run.phase() is Phase.OBSERVING
    assert [(t.verdict, t.strategy) for t in run.status.trials] == [(Verdict.KEEP, Strategy.CANARY)]
    assert run.status.expected_container == AFTER.fingerprint()
    assert Reason.PROMOTED in [n.reason for n in d.notes]


def test_a_worse_canary_is_removed_and_the_main_deployment_never_patched() -> None:
    run = Run()
    measuring(run)
    applied = []
    d = run.later(WINDOW).step(main(replicas=2, canary=canary(), windows=side_by_side(0.9, 0.3)))
    applied.append(d.apply)
    assert run.phase() is Phase.ROLLING_BACK
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.REVERT
    d = run.step(main(replicas=2, canary=canary()))
    applied.append(d.apply)
    assert d.canary == CanaryAction(main_replicas=3)
    d = run.step(main(replicas=3, canary=canary()))
    applied.append(d.apply)
    assert d.canary == CanaryAction(remove=True)
    d = run.step(main(replicas=3, canary=CanaryFacts(exists=False)))
    applied.append(d.apply)
    assert run.phase() is Phase.OBSERVING
    assert applied == [None, None, None, None]
    assert run.status.expected_container == BEFORE.fingerprint()


def test_no_significant_difference_is_not_kept() -> None:
    run = Run()
    measuring(run)
    run.later(WINDOW).step(main(replicas=2, canary=canary(), windows=side_by_side(0.5, 0.5)))
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.REVERT
    assert trial.reason is not None
    assert trial.reason.startswith("no significant improvement")


def test_arms_that_saw_different_load_are_measured_again_not_judged() -> None:
    run = Run()
    measuring(run)
    skewed = Windows(
        current=window(BEFORE), canary_arm=arm(0.3, 10), baseline_arm=arm(0.9, 400, pods=2)
    )
    run.later(WINDOW).step(main(replicas=2, canary=canary(), windows=skewed))
    assert run.phase() is Phase.MEASURING
    assert run.condition("Progressing")[1] == "Remeasuring"
    assert "different load" in run.condition("Progressing")[2]


def test_a_restarted_operator_finds_its_canary_and_asks_for_nothing_again() -> None:
    run = Run()
    settled(run)
    # The same round twice, as after a restart: the canary is there, the replica given up.
    for _ in range(2):
        d = run.step(main(replicas=2, canary=canary()))
        assert d.canary is None
        assert d.apply is None


def test_a_replica_count_set_by_someone_else_mid_trial_is_left_as_they_set_it() -> None:
    run = Run()
    measuring(run)
    run.later(WINDOW).step(main(replicas=2, canary=canary(), windows=side_by_side(0.9, 0.3)))
    d = run.step(main(replicas=5, canary=canary()))  # an HPA scaled it up meanwhile
    assert d.canary == CanaryAction(remove=True)


def test_a_crashing_canary_fails_the_trial_and_is_removed() -> None:
    run = Run()
    started(run)
    run.step(main())
    crashed = replace(
        canary(ready=False),
        rollout=replace(rollout(complete=False), progress_deadline_exceeded=True),
    )
    run.later(5).step(main(replicas=2, canary=crashed))
    assert run.phase() is Phase.ROLLING_BACK
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.FAILED
    assert trial.reason is not None
    assert CANARY in trial.reason


def lossy(run: Run) -> None:
    """A canary trial of a lossy knob, warmed up, with a quality gate in the spec."""
    run.spec = spec(quality={"configMap": "qa", "mode": "Reference", "tolerance": 0.01})
    settled(run)
    trial = run.status.current_trial
    assert trial is not None
    run.status = run.status.model_copy(
        update={"current_trial": trial.model_copy(update={"knob": "kvCacheDtype"})}
    )
    run.later(SETTLE)


def test_a_lossy_canary_waits_for_the_quality_answers_before_measuring() -> None:
    run = Run()
    lossy(run)
    d = run.step(main(replicas=2, canary=canary()))
    assert run.phase() is Phase.SETTLING
    assert d.reason == "waiting for the quality gate's answers"


def test_a_lossy_canary_that_answers_worse_is_refused_with_its_score_on_the_trial() -> None:
    run = Run()
    lossy(run)
    answers = QualityAnswers(
        expected=(None, None),
        canary=("the cat sat on a hat", "two plus two is five"),
        baseline=("the cat sat on the mat", "two plus two is four"),
    )
    d = run.step(main(replicas=2, canary=canary(), quality=answers))
    assert run.phase() is Phase.ROLLING_BACK
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.REVERT
    assert trial.quality is not None
    assert not trial.quality.passed
    assert (trial.quality.metric, trial.quality.mode, trial.quality.samples) == (
        "Similarity",
        "Reference",
        2,
    )
    assert 0.5 < trial.quality.score < 1.0
    assert trial.reason is not None
    assert trial.reason.startswith("quality gate failed")
    assert Reason.QUALITY_GATE_FAILED in [n.reason for n in d.notes]


def test_a_lossy_canary_that_answers_alike_goes_on_to_be_measured() -> None:
    run = Run()
    lossy(run)
    same = ("the cat sat on the mat",)
    run.step(main(replicas=2, canary=canary(), quality=QualityAnswers((None,), same, same)))
    assert run.phase() is Phase.MEASURING
    trial = run.status.current_trial
    assert trial is not None
    assert trial.quality is not None
    assert trial.quality.passed
    assert trial.quality.score == 1.0


def test_a_quality_gate_that_cannot_run_never_lets_the_lossy_change_through() -> None:
    run = Run()
    lossy(run)
    run.step(main(replicas=2, canary=canary(), quality=QualityFailure("ConfigMap qa not found")))
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.REVERT
    assert "ConfigMap qa not found" in (trial.reason or "")


def test_a_kept_canary_interrupted_by_a_blocked_round_is_promoted_not_dropped() -> None:
    run = Run()
    measuring(run)
    run.later(WINDOW).step(main(replicas=2, canary=canary(), windows=side_by_side(0.3, 0.9)))
    assert run.phase() is Phase.PROMOTING
    run.step(Blocked(Blocker.DEPLOYMENT_NOT_FOUND))
    d = run.later(5).step(main(replicas=2, canary=canary()))
    assert run.phase() is Phase.PROMOTING
    assert d.apply == AFTER


def test_a_container_changed_by_someone_else_mid_canary_removes_the_canary_then_pauses() -> None:
    run = Run()
    measuring(run)
    d = run.step(main(THEIRS, replicas=2, canary=canary()))
    assert run.phase() is Phase.ROLLING_BACK
    assert Reason.DRIFT in [n.reason for n in d.notes]
    d = run.step(main(THEIRS, replicas=2, canary=canary()))
    assert d.apply is None  # never fights over their container
    assert d.canary == CanaryAction(main_replicas=3)
    d = run.step(main(THEIRS, replicas=3, canary=canary()))
    assert d.canary == CanaryAction(remove=True)
    d = run.step(main(THEIRS, replicas=3, canary=CanaryFacts(exists=False)))
    assert d.apply is None
    assert run.phase() is Phase.PAUSED
    assert run.status.current_trial is None
    assert run.status.trials[-1].reason == "abandoned: the Deployment was changed by someone else"
    assert run.status.expected_container == THEIRS.fingerprint()
    d = run.step(main(THEIRS, replicas=3, canary=CanaryFacts(exists=False)))
    assert d.reason == "paused for an outside change until the spec changes"


def fp8_only(replicas: int) -> tuple[Run, Ready]:
    """A target allowed only the FP8 KV cache (lossy), with a quality gate, under KV pressure."""
    off = {"prefixCaching": False, "chunkedPrefill": False, "maxNumBatchedTokens": None}
    knobs = {**off, "maxNumSeqs": None, "gpuMemoryUtilization": None, "kvCacheDtype": ["fp8"]}
    run = Run(spec=spec(knobs=knobs, quality={"configMap": "qa"}))
    return run, main(replicas=replicas, current=kv_pressure())


def test_a_lossy_change_is_not_tried_without_a_canary_for_its_quality_gate() -> None:
    run, seen = fp8_only(replicas=1)
    run.step(seen)
    run.later(SETTLE + WINDOW).step(seen)
    assert run.phase() is Phase.EXHAUSTED
    message = run.condition("Progressing")[2]
    assert "spec.quality gates lossy changes on canary trials only" in message
    assert "kvCacheDtype" in message


def test_the_same_lossy_change_runs_as_a_canary_from_two_replicas() -> None:
    run, seen = fp8_only(replicas=2)
    run.step(seen)
    run.later(SETTLE + WINDOW).step(seen)
    trial = run.status.current_trial
    assert trial is not None
    assert (trial.knob, trial.to_value, trial.strategy) == ("kvCacheDtype", "fp8", Strategy.CANARY)


def test_a_new_spec_while_a_drifted_canary_is_removed_still_removes_it_first() -> None:
    run = Run()
    measuring(run)
    run.step(main(THIRD, replicas=2, canary=canary()))
    assert run.phase() is Phase.ROLLING_BACK
    run.change_spec(paused=False)
    d = run.step(main(THIRD, replicas=2, canary=canary()))
    assert run.phase() is Phase.ROLLING_BACK
    assert d.canary == CanaryAction(main_replicas=3)
    assert d.apply is None
    d = run.step(main(THIRD, replicas=3, canary=canary()))
    assert d.canary == CanaryAction(remove=True)
    run.step(main(THIRD, replicas=3, canary=CanaryFacts(exists=False)))
    assert run.phase() is Phase.OBSERVING
    assert run.status.current_trial is None


def pending(cfg: ContainerConfig) -> RolloutFacts:
    """A rollout whose new pod (at ``cfg``) no node has room for."""
    pod = PodFacts("p-0", node=None, ready=False, restarts=0, unschedulable=True)
    return replace(
        rollout(complete=False), pods=(replace(pod, config_fingerprint=cfg.fingerprint()),)
    )


def test_a_canary_no_node_has_room_for_takes_a_replica_off_the_main_deployment_at_once() -> None:
    run = Run()
    started(run)
    run.step(main())
    waiting = replace(canary(ready=False), rollout=pending(AFTER))
    d = run.later(5).step(main(replicas=3, canary=waiting))
    assert d.canary == CanaryAction(main_replicas=2)  # frees the GPU the canary waits for
    assert run.phase() is Phase.ROLLING_OUT
    assert "waits for a node" in run.condition("Progressing")[2]
    d = run.later(5).step(main(replicas=2, canary=waiting))
    assert d.canary is None  # given up once, not twice
    d = run.later(5).step(main(replicas=2, canary=canary()))
    assert d.canary is None
    assert run.phase() is Phase.SETTLING


def test_the_canary_serves_until_the_replica_given_back_is_ready() -> None:
    run = Run()
    measuring(run)
    run.later(WINDOW).step(main(replicas=2, canary=canary(), windows=side_by_side(0.9, 0.3)))
    assert run.step(main(replicas=2, canary=canary())).canary == CanaryAction(main_replicas=3)
    d = run.later(5).step(main(replicas=3, canary=canary(), complete=False))
    assert d.canary is None
    assert d.reason == "waiting for the replica given back before removing the canary"
    d = run.later(5).step(main(replicas=3, canary=canary()))
    assert d.canary == CanaryAction(remove=True)


def test_the_canary_goes_when_the_replica_given_back_waits_for_its_gpu() -> None:
    run = Run()
    measuring(run)
    run.later(WINDOW).step(main(replicas=2, canary=canary(), windows=side_by_side(0.9, 0.3)))
    run.step(main(replicas=2, canary=canary()))
    short = replace(main(replicas=3, canary=canary()), rollout=pending(BEFORE))
    d = run.later(5).step(short)
    assert d.canary == CanaryAction(remove=True)


def test_a_baseline_draining_a_backlog_is_not_compared_with_a_fresh_canary() -> None:
    run = Run()
    measuring(run)
    fresh = tuple(replace_obs(o, waiting_delta=0.0) for o in arm(0.3, 100))
    draining = tuple(replace_obs(o, waiting_delta=-40.0) for o in arm(0.9, 240, pods=2))
    windows = Windows(current=window(BEFORE), canary_arm=fresh, baseline_arm=draining)
    run.later(WINDOW).step(main(replicas=2, canary=canary(), windows=windows))
    assert run.phase() is Phase.MEASURING
    assert run.condition("Progressing")[1] == "Remeasuring"
    assert "drained" in run.condition("Progressing")[2]


def test_a_saturated_baseline_that_finishes_less_than_it_receives_is_still_balanced() -> None:
    run = Run()
    measuring(run)
    # Each baseline pod receives 100 requests an interval, finishes 60 and queues the rest;
    # the canary, with the fix, finishes all 100 it receives and keeps no queue.
    fixed = tuple(replace_obs(o, running_delta=0.0, waiting_delta=0.0) for o in arm(0.3, 100))
    behind = tuple(
        replace_obs(o, running_delta=0.0, waiting_delta=80.0) for o in arm(0.9, 120, pods=2)
    )
    windows = Windows(current=window(BEFORE), canary_arm=fixed, baseline_arm=behind)
    run.later(WINDOW).step(main(replicas=2, canary=canary(), windows=windows))
    assert run.phase() is Phase.PROMOTING


def replace_obs(obs: Observation, **fields: Any) -> Observation:
    return obs.model_copy(update=fields)


TWO_TARGETS = spec(
    objectives={
        "ttft": {"percentile": 90, "threshold": "500ms"},
        "itl": {"percentile": 90, "threshold": "30ms"},
    }
)


def arm_of(ttft: float, itl: float, requests: int, pods: int = 1) -> tuple[Observation, ...]:
    return tuple(
        window(BEFORE, ttft={90: ttft * (1 + i / 100)}, itl={90: itl * (1 + i / 100)},
               requests=requests, pods=pods)
        for i in range(6)
    )  # fmt: skip


def test_a_canary_that_fixes_ttft_and_costs_itl_within_its_target_is_better() -> None:
    # The queue behind max-num-seqs clears (TTFT 20 s -> 0.2 s) and a larger batch adds 12% to
    # ITL, still under its 30 ms: the rollout verdict's score would keep it, so does this one.
    outcome, reason = judge_arms(
        TWO_TARGETS, arm_of(0.2, 0.0228, 100), arm_of(20.0, 0.0204, 200, pods=2)
    )
    assert outcome is Outcome.BETTER, reason
    assert "stays within its target" in reason


def test_a_canary_that_fixes_ttft_but_breaks_the_itl_target_is_worse() -> None:
    outcome, reason = judge_arms(
        TWO_TARGETS, arm_of(0.2, 0.045, 100), arm_of(20.0, 0.0204, 200, pods=2)
    )
    assert outcome is Outcome.WORSE
    assert "canary at its medians: ITL p90 46.125ms (target 30ms, +54%)" in reason


def test_a_trade_between_met_targets_that_gains_nothing_overall_is_not_kept() -> None:
    # TTFT 0.30 -> 0.25 s of 0.5 s (-0.1 in ratio), ITL 15 -> 27 ms of 30 ms (+0.4): a net loss.
    outcome, reason = judge_arms(
        TWO_TARGETS, arm_of(0.25, 0.027, 100), arm_of(0.30, 0.015, 200, pods=2)
    )
    assert outcome is Outcome.NO_DIFFERENCE
    assert "costs as much as the gain" in reason


def test_a_reverted_canary_trial_is_not_tried_again_under_the_same_load() -> None:
    # 3 pods at 30 req/s, 12 in flight in all: each arm's pods take 10 req/s and hold 4.
    def share(ttft: float, pods: int) -> tuple[Observation, ...]:
        return tuple(
            window(BEFORE, ttft={90: ttft * (1 + i / 100)}, requests=100 * pods, pods=pods,
                   request_rate=10.0 * pods, running_mean=4.0 * pods, waiting_mean=0.0)
            for i in range(6)
        )  # fmt: skip

    run = Run()
    measuring(run)
    arms = Windows(current=window(BEFORE), canary_arm=share(0.9, 1), baseline_arm=share(0.3, 2))
    run.later(WINDOW).step(main(replicas=2, canary=canary(), windows=arms))
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.REVERT
    assert trial.before is not None
    assert trial.after is not None
    # Both arms read as the whole Deployment's load, like the windows the planner compares.
    assert (trial.before.request_rate, trial.before.concurrency) == (30.0, 12.0)
    assert (trial.after.request_rate, trial.after.concurrency) == (30.0, 12.0)
    whole = window(BEFORE, request_rate=30.0, running_mean=12.0, waiting_mean=0.0)
    record = TrialRecord.from_trial(trial)
    assert record.load is not None
    assert record.load.comparable_to(whole.load, 0.25)


def test_a_lossy_change_for_margin_waits_for_a_canary_its_quality_gate_can_judge() -> None:
    # FP8 KV kept earlier; the prefill-stall window meets ITL p99 150 ms, and FP8 weights are
    # the margin the model expects. With a quality gate and no canary, converge instead.
    fp8_kv = ContainerConfig(
        command=None,
        args=("meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192",
              "--no-enable-chunked-prefill", "--kv-cache-dtype", "fp8"),
        image=BEFORE.image,
        gpu_limit=1,
    )  # fmt: skip
    off = {"prefixCaching": False, "chunkedPrefill": False, "maxNumBatchedTokens": None}
    weights = {"variants": [{"name": "fp8", "model": "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8"}]}
    knobs = {**off, "maxNumSeqs": None, "gpuMemoryUtilization": None, "kvCacheDtype": ["fp8"],
             "quantization": weights}  # fmt: skip
    kept = Trial.model_validate(
        {"id": 1, "knob": "kvCacheDtype", "from": None, "to": "fp8", "verdict": "Keep",
         "startedAt": "2026-12-02T09:00:00Z", "finishedAt": "2026-12-02T09:10:00Z"}
    )  # fmt: skip
    goal = {"itl": {"percentile": 99, "threshold": "150ms"}}
    phases = {}
    for quality in (None, {"configMap": "qa"}):
        fields = {"knobs": knobs, "objectives": goal, **({"quality": quality} if quality else {})}
        run = Run(spec=spec(**fields), status=LatencyTargetStatus(trials=[kept]))
        seen = facts(fp8_kv, current=prefill_stalls())
        run.step(seen)
        d = run.later(SETTLE + WINDOW).step(seen)
        phases[quality is not None] = (run.phase(), d.reason)
    assert phases[False][0] is Phase.ROLLING_OUT, phases
    assert run.status.trials[-1].knob == "kvCacheDtype"  # nothing started with the gate
    assert phases[True] == (Phase.CONVERGED, "targets met"), phases
