"""Every phase and outcome of ``core.rollout.decide``, walked with hand-built facts and statuses.

No I/O: a ``Run`` holds the spec, the status and a clock, and feeds ``decide`` the facts a round
would gather. Each step asserts that every phase change it took is in ``TRANSITIONS`` (or
``ALWAYS_ALLOWED``), and the tests assert what was written, applied and announced.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from latency_tuner.api.spec import LatencyTargetSpec, Mode
from latency_tuner.api.status import LatencyTargetStatus, Phase, Trial, Verdict
from latency_tuner.core.cluster import ContainerConfig, PodFacts, RolloutFacts
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.observation import NoData, Observation
from latency_tuner.core.rollout import (
    ALWAYS_ALLOWED,
    PHASES,
    TRANSITIONS,
    Blocked,
    Blocker,
    Decision,
    Facts,
    MetricsFailure,
    Ready,
    Reason,
    WindowResult,
    Windows,
    decide,
    windows_needed,
)
from latency_tuner.core.rollout.values import metric_snapshot
from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
IMAGE = "vllm/vllm-openai:v0.11.0"
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
H100 = HardwareInfo.from_labels("NVIDIA-H100-80GB-HBM3", interconnect="NVLink", gpus_per_node=8)
WINDOW, SETTLE, DEADLINE, COOLDOWN = 60.0, 30.0, 300.0, 1800.0


def config(seqs: int | None = 16, *extra: str) -> ContainerConfig:
    args = [MODEL, *(["--max-num-seqs", str(seqs)] if seqs is not None else []), *extra]
    return ContainerConfig(command=None, args=tuple(args), image=IMAGE, gpu_limit=1)


BEFORE, AFTER, THIRD = config(16), config(32), config(16, "--enable-prefix-caching")


def spec(**fields: Any) -> LatencyTargetSpec:
    body: dict[str, Any] = {
        "targetRef": {"name": "llama", "container": "vllm"},
        "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
        "evaluation": {
            "window": "60s",
            "settle": "30s",
            "minRequests": 100,
            "progressDeadline": "5m",
            "cooldown": "30m",
            "maxTrials": 5,
        },
    }
    body.update(fields)
    return LatencyTargetSpec.model_validate(body)


def window(cfg: ContainerConfig, **overrides: Any) -> Observation:
    """What ``cfg`` serves under a steady 20 req/s load: requests queue below 64 seqs."""
    cl = VllmCommandLine.parse(None, list(cfg.args or ()))
    seqs = int(cl.get("max-num-seqs") or 1024)
    ttft = 2.0 if seqs < 32 else 0.9 if seqs < 64 else 0.3
    waiting = 0.0 if seqs >= 64 else 12.0
    values: dict[str, Any] = {
        "window_seconds": WINDOW,
        "requests": 1200,
        "request_rate": 20.0,
        "prompt_tokens_mean": 512.0,
        "generation_tokens_mean": 128.0,
        "ttft": {50: ttft * 0.8, 90: ttft, 95: ttft * 1.05, 99: ttft * 1.2},
        "ttft_mean": ttft * 0.8,
        "queue_time_mean": 0.0 if seqs >= 64 else ttft * 0.7,
        "prefill_time_mean": 0.05,
        "itl": {50: 0.02, 90: 0.025, 95: 0.027, 99: 0.03},
        "running_mean": float(min(seqs, 40)),
        "running_max": float(min(seqs, 48)),
        "waiting_mean": waiting,
        "waiting_max": waiting * 2,
        "kv_cache_usage_mean": 0.3,
        "kv_cache_usage_max": 0.4,
        "preemptions": 0.0,
    }
    values.update(overrides)
    return Observation(**values)


def deployment(cfg: ContainerConfig, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "llama", "namespace": "ml", "resourceVersion": "7"}
    if owner:
        kind, name = owner.split("/")
        meta["ownerReferences"] = [{"kind": kind, "name": name, "controller": True}]
    container = {
        "name": "vllm",
        "image": cfg.image,
        "args": list(cfg.args or ()),
        "resources": {"limits": {"nvidia.com/gpu": str(cfg.gpu_limit)}},
    }
    return {"metadata": meta, "spec": {"template": {"spec": {"containers": [container]}}}}


def rollout(
    *, complete: bool = True, deadline: bool = False, pods: tuple[PodFacts, ...] = ()
) -> RolloutFacts:
    return RolloutFacts(
        generation=3,
        observed_generation=3,
        replicas=1,
        updated_replicas=1 if complete else 0,
        ready_replicas=1,
        available_replicas=1,
        progress_deadline_exceeded=deadline,
        pods=pods,
        total_replicas=1 if complete else 2,
    )


def facts(
    cfg: ContainerConfig = BEFORE,
    *,
    current: WindowResult | str | None = "serving",
    windows: Windows[WindowResult] | None = None,
    complete: bool = True,
    owner: str | None = None,
    **fields: Any,
) -> Ready:
    """The facts of a round: the Deployment runs ``cfg``; the current window is what it serves
    (``current="serving"``), another result, or absent (None), unless ``windows`` has one."""
    found: Windows[WindowResult] = windows or Windows()
    if found.current is None and current is not None:
        assert current == "serving" or not isinstance(current, str)
        served = window(cfg) if isinstance(current, str) else current
        found = replace(found, current=served)
    base = Ready(
        deployment=deployment(cfg, owner),
        container_index=0,
        container=cfg,
        command_line=VllmCommandLine.parse(None, list(cfg.args or ())),
        rollout=rollout(complete=complete),
        hardware=H100,
        controller_owner=owner,
        windows=found,
    )
    return replace(base, **fields)


def allowed(a: Phase, b: Phase) -> bool:
    return b in TRANSITIONS[a] or b in ALWAYS_ALLOWED


@dataclass
class Run:
    """One LatencyTarget's life: its spec, the status decide wrote last, and the clock."""

    spec: LatencyTargetSpec = field(default_factory=spec)
    status: LatencyTargetStatus = field(default_factory=LatencyTargetStatus)
    generation: int = 1
    now: datetime = T0
    taken: list[tuple[Phase, Phase]] = field(default_factory=list)

    def step(self, f: Facts) -> Decision:
        d = decide(self.spec, self.generation, self.status, f, self.now)
        for a, b in d.transitions:
            assert allowed(a, b), f"{a} -> {b} is not in TRANSITIONS ({d.reason})"
        if d.transitions:
            assert d.transitions[0][0] is self.status.phase
            assert d.transitions[-1][1] is d.status.phase
        else:
            assert d.status.phase is self.status.phase
        self.taken.extend(d.transitions)
        self.status = d.status
        return d

    def later(self, seconds: float) -> Run:
        self.now += timedelta(seconds=seconds)
        return self

    def change_spec(self, **fields: Any) -> None:
        body = self.spec.model_dump(mode="json", by_alias=True)
        body.update(fields)
        self.spec = LatencyTargetSpec.model_validate(body)
        self.generation += 1

    def phase(self) -> Phase:
        return self.status.phase

    def condition(self, type_: str) -> tuple[str, str, str]:
        c = next(c for c in self.status.conditions if c.type == type_)
        return c.status, c.reason, c.message


def reasons(d: Decision) -> list[Reason]:
    return [n.reason for n in d.notes]


# ---- scenario builders: bring a run to a phase ------------------------------------------------


def observed_long_enough(run: Run, cfg: ContainerConfig = BEFORE) -> Decision:
    """First round sets the clean-window start; the next, a window later, acts."""
    first = run.step(facts(cfg))
    assert first.reason == "waiting for a window of the current configuration"
    return run.later(SETTLE + WINDOW).step(facts(cfg))


def trial_started(run: Run) -> Decision:
    d = observed_long_enough(run)
    assert run.phase() is Phase.ROLLING_OUT
    return d


def rolled_out(run: Run) -> None:
    trial_started(run)
    assert run.step(facts(BEFORE)).apply == AFTER
    run.later(5).step(facts(AFTER, complete=False))
    d = run.later(5).step(facts(AFTER))
    assert run.phase() is Phase.SETTLING
    assert d.again


def measuring(run: Run) -> None:
    rolled_out(run)
    run.later(SETTLE).step(facts(AFTER))
    assert run.phase() is Phase.MEASURING


def judged(before: WindowResult, after: WindowResult) -> Windows[WindowResult]:
    return Windows(current=after, trial=after, baseline=before, baseline_parts=(before,) * 3)


def reverting(run: Run) -> None:
    measuring(run)
    run.later(WINDOW).step(facts(AFTER, windows=judged(window(AFTER), window(BEFORE))))
    assert run.phase() is Phase.ROLLING_BACK


# ---- Observing ---------------------------------------------------------------------------------


def test_observing_without_a_window_yet_says_metrics_are_unknown_and_waits() -> None:
    run = Run()
    d = run.step(facts(current=None))
    assert d.apply is None
    assert run.phase() is Phase.OBSERVING
    assert run.condition("MetricsAvailable")[:2] == ("Unknown", "NotMeasured")
    assert run.status.stable_since is not None  # the clean window starts after the settle time


@pytest.mark.parametrize(
    ("case", "round_facts", "condition", "expected"),
    [
        (
            "rollout in progress",
            facts(complete=False),
            "Progressing",
            ("False", "WaitingForRollout"),
        ),
        (
            "too few requests",
            facts(current=window(BEFORE, requests=40, running_mean=0.5, waiting_mean=0.0)),
            "MetricsAvailable",
            ("False", "TooFewRequests"),
        ),
        (
            "metrics source failing",
            facts(current=MetricsFailure("Prometheus is unreachable")),
            "MetricsAvailable",
            ("False", "MetricsSourceError"),
        ),
        (
            "no data",
            facts(current=NoData(reason="no requests", window_seconds=WINDOW)),
            "MetricsAvailable",
            ("False", "NoData"),
        ),
    ],
)
def test_observing_does_nothing_without_a_usable_window(
    case: str, round_facts: Facts, condition: str, expected: tuple[str, str]
) -> None:
    run = Run()
    run.step(facts())
    d = run.later(SETTLE + WINDOW).step(round_facts)
    assert d.apply is None, case
    assert not d.again
    assert run.phase() is Phase.OBSERVING
    assert run.status.current_trial is None
    assert run.status.baseline is None
    assert run.condition(condition)[:2] == expected


def test_observing_a_configuration_that_meets_the_targets_converges() -> None:
    run = Run()
    d = observed_long_enough(run, config(64))
    assert run.phase() is Phase.CONVERGED
    assert d.apply is None
    assert run.condition("TargetsMet")[:2] == ("True", "TargetsMet")
    assert reasons(d) == [Reason.TARGETS_MET]
    assert run.status.observed is not None
    assert run.status.observed.ttft_seconds == 0.3


def test_a_missed_target_starts_a_trial_recording_baseline_and_intent_before_any_patch() -> None:
    run = Run()
    d = trial_started(run)
    assert d.apply is None  # the intent is written first ...
    assert d.again  # ... and the patch comes on the next step
    trial = run.status.current_trial
    assert trial is not None
    assert (trial.knob, trial.from_value, trial.to_value) == ("maxNumSeqs", "16", "32")
    assert trial.from_container is not None
    assert trial.to_container is not None
    assert trial.from_container.fingerprint == BEFORE.fingerprint()
    assert trial.to_container.fingerprint == AFTER.fingerprint()
    assert trial.before is not None
    assert trial.before.ttft_seconds == 2.0
    assert run.status.baseline is not None
    assert run.status.baseline.args == list(BEFORE.args or ())
    assert run.status.trial_count == 1
    assert run.condition("TargetsMet")[:2] == ("False", "TargetsMissed")
    assert Reason.TRIAL_STARTED in reasons(d)
    assert run.step(facts(BEFORE)).apply == AFTER


def test_the_baseline_is_the_first_configuration_and_survives_later_trials() -> None:
    run = Run()
    measuring(run)
    d = run.later(WINDOW).step(facts(AFTER, windows=judged(window(BEFORE), window(AFTER))))
    assert d.again  # kept: the trial window is a clean window of the new configuration
    run.step(facts(AFTER))
    assert run.phase() is Phase.ROLLING_OUT  # the next rung at once
    assert run.status.current_trial is not None
    assert run.status.current_trial.to_value == "64"
    assert run.status.baseline is not None
    assert run.status.baseline.args == list(BEFORE.args or ())


def test_max_trials_reached_exhausts_the_target() -> None:
    run = Run()
    run.status = run.status.model_copy(update={"trial_count": 5, "observed_generation": 1})
    d = observed_long_enough(run)
    assert run.phase() is Phase.EXHAUSTED
    assert d.apply is None
    assert run.status.current_trial is None
    status, reason, message = run.condition("Progressing")
    assert (status, reason) == ("False", "Exhausted")
    assert "maxTrials (5)" in message
    assert reasons(d) == [Reason.EXHAUSTED]


def _nothing_left() -> Run:
    """A run whose spec leaves no knob to try."""
    off = {"maxNumSeqs": None, "maxNumBatchedTokens": None, "gpuMemoryUtilization": None}
    return Run(spec=spec(knobs={**off, "prefixCaching": False, "chunkedPrefill": False}))


def test_a_planner_with_nothing_left_exhausts_the_target_with_advice() -> None:
    run = _nothing_left()
    d = observed_long_enough(run)
    assert run.phase() is Phase.EXHAUSTED
    assert d.apply is None
    assert run.status.diagnosis is not None
    assert run.status.diagnosis.advice
    message = run.condition("Progressing")[2]
    assert "Advice: " in message
    assert run.status.diagnosis.advice[0] in message


def test_a_near_miss_with_nothing_left_is_measured_once_more_before_giving_up() -> None:
    run = _nothing_left()
    # TTFT p90 0.52 s against 0.5 s: 4% over, within what one window's noise can do.
    near = window(BEFORE, ttft={50: 0.4, 90: 0.52, 95: 0.55, 99: 0.6})
    run.step(facts(BEFORE, windows=Windows(current=near)))
    d = run.later(SETTLE + WINDOW).step(facts(BEFORE, windows=Windows(current=near)))
    assert run.phase() is Phase.OBSERVING
    assert d.apply is None
    assert run.condition("Progressing")[:2] == ("False", "NearMiss")
    assert run.status.near_miss_at is not None
    # The next window must be a whole new one; still a near miss: now it gives up.
    d = run.later(1).step(facts(BEFORE, windows=Windows(current=near)))
    assert run.phase() is Phase.OBSERVING
    d = run.later(WINDOW).step(facts(BEFORE, windows=Windows(current=near)))
    assert run.phase() is Phase.EXHAUSTED
    assert reasons(d) == [Reason.EXHAUSTED]
    assert run.status.near_miss_at is None


def _nothing_left_on(near: Observation) -> Run:
    """A run with no knob left to try, past its first whole window of ``near``."""
    run = _nothing_left()
    run.step(facts(BEFORE, windows=Windows(current=near)))
    run.later(SETTLE + WINDOW).step(facts(BEFORE, windows=Windows(current=near)))
    return run


def test_a_miss_within_what_a_small_windows_sampling_shows_is_measured_once_more() -> None:
    # TTFT p90 0.65 s against 0.5 s (30% over) on 110 requests spread wide (p50 0.2 s, p95
    # 2 s): two standard errors of that p90 are 46% of the target.
    spread = {50: 0.2, 90: 0.65, 95: 2.0, 99: 3.0}
    run = _nothing_left_on(window(BEFORE, ttft=spread, requests=110))
    assert run.phase() is Phase.OBSERVING
    assert run.condition("Progressing")[:2] == ("False", "NearMiss")
    # The same miss on 12,000 requests is no accident of sampling.
    run = _nothing_left_on(window(BEFORE, ttft=spread, requests=12000))
    assert run.phase() is Phase.EXHAUSTED


def _last_trial_judged_this_configuration_on(run: Run, before: Observation) -> Run:
    """``run`` whose last trial (a refinement for margin, reverted) was judged against
    ``before``, a window of the configuration now running."""
    reverted = Trial(
        id=1,
        knob="maxNumSeqs",
        from_value="16",
        to_value="8",
        started_at="2026-12-02T09:00:00Z",
        finished_at="2026-12-02T09:05:00Z",
        verdict=Verdict.REVERT,
        refinement=True,
        before=metric_snapshot(run.spec, before, "2026-12-02T09:00:00Z"),
    )
    run.status = run.status.model_copy(update={"trials": [reverted], "trial_count": 1})
    return run


def test_a_clear_miss_on_a_configuration_its_last_trial_measured_meeting_is_measured_again() -> (
    None
):
    # Its last trial's window read TTFT p90 0.3 s (target 0.5 s) on this configuration at this
    # load; now, with nothing left to try, a window reads 2 s. One window, after a rollback
    # say, does not make the configuration unable to meet its targets: one more is measured.
    met = {50: 0.24, 90: 0.3, 95: 0.32, 99: 0.36}
    run = _last_trial_judged_this_configuration_on(_nothing_left(), window(BEFORE, ttft=met))
    observed_long_enough(run)
    assert run.phase() is Phase.OBSERVING
    status, reason, message = run.condition("Progressing")
    assert (status, reason) == ("False", "NearMiss")
    assert "this configuration met them in its last trial's window" in message
    # Still missed a whole window later: now it gives up.
    run.later(1).step(facts(BEFORE))
    run.later(WINDOW).step(facts(BEFORE))
    assert run.phase() is Phase.EXHAUSTED


def test_a_clear_miss_gives_up_at_once_where_the_last_trial_saw_a_miss_or_other_requests() -> None:
    missed = window(BEFORE, ttft={50: 0.56, 90: 0.7, 95: 0.74, 99: 0.84})
    met = {50: 0.24, 90: 0.3, 95: 0.32, 99: 0.36}
    longer = window(BEFORE, ttft=met, prompt_tokens_mean=1536.0)  # requests of another shape
    for before in (missed, longer):
        run = _last_trial_judged_this_configuration_on(_nothing_left(), before)
        observed_long_enough(run)
        assert run.phase() is Phase.EXHAUSTED


def test_a_clear_miss_with_nothing_left_gives_up_at_once() -> None:
    run = _nothing_left()
    observed_long_enough(run)
    assert run.phase() is Phase.EXHAUSTED
    assert run.status.near_miss_at is None


# ---- RollingOut --------------------------------------------------------------------------------


def test_rolling_out_applies_the_trial_only_while_the_deployment_has_the_old_container() -> None:
    run = Run()
    trial_started(run)
    assert run.step(facts(BEFORE)).apply == AFTER
    # A restart between patch and status write reads RollingOut again: no second patch.
    again = run.step(facts(AFTER, complete=False))
    assert again.apply is None
    assert again.reason == "waiting for the rollout"
    assert run.phase() is Phase.ROLLING_OUT


def test_a_ready_rollout_settles_and_a_settled_one_is_measured() -> None:
    run = Run()
    rolled_out(run)
    trial = run.status.current_trial
    assert trial is not None
    assert trial.ready_at is not None
    run.later(SETTLE - 1).step(facts(AFTER))
    assert run.phase() is Phase.SETTLING
    d = run.later(1).step(facts(AFTER))
    assert run.phase() is Phase.MEASURING
    assert d.apply is None
    assert run.status.current_trial is not None
    assert run.status.current_trial.measure_started_at is not None


def crashing(cfg: ContainerConfig) -> RolloutFacts:
    pod = PodFacts(
        name="llama-new",
        node="gpu-node-1",
        ready=False,
        restarts=4,
        problem="CrashLoopBackOff (last exit: Error, code 1)",
        config_fingerprint=cfg.fingerprint(),
    )
    return replace(rollout(complete=False), pods=(pod,))


@pytest.mark.parametrize(
    ("case", "round_rollout", "wait", "why"),
    [
        ("crash loop", crashing(AFTER), 0.0, "CrashLoopBackOff"),
        ("progress deadline", rollout(complete=False, deadline=True), 0.0, "ProgressDeadline"),
        ("our deadline", rollout(complete=False), DEADLINE + 1, "progressDeadline (5m)"),
    ],
)
def test_a_rollout_that_fails_is_failed_marked_incompatible_and_rolled_back(
    case: str, round_rollout: RolloutFacts, wait: float, why: str
) -> None:
    run = Run()
    trial_started(run)
    run.step(facts(BEFORE))
    d = run.later(wait).step(facts(AFTER, rollout=round_rollout))
    assert run.phase() is Phase.ROLLING_BACK, case
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.FAILED
    assert why in (trial.reason or "")
    assert [(i.knob, i.value) for i in run.status.incompatible] == [("maxNumSeqs", "32")]
    assert run.condition("Degraded")[:2] == ("True", "TrialFailed")
    assert Reason.TRIAL_FAILED in reasons(d)
    assert d.again
    assert run.step(facts(AFTER, rollout=round_rollout)).apply == BEFORE


def test_trouble_that_is_not_this_rollouts_does_not_fail_it() -> None:
    run = Run()
    trial_started(run)
    run.step(facts(BEFORE))
    old_pod_crashing = crashing(BEFORE)  # a pod of the previous template
    stale = replace(rollout(complete=False, deadline=True), observed_generation=2)
    for r in (old_pod_crashing, stale):
        d = run.step(facts(AFTER, rollout=r))
        assert run.phase() is Phase.ROLLING_OUT
        assert d.reason == "waiting for the rollout"


def test_a_trial_that_crashes_while_settling_is_rolled_back() -> None:
    run = Run()
    rolled_out(run)
    run.later(5).step(facts(AFTER, rollout=crashing(AFTER)))
    assert run.phase() is Phase.ROLLING_BACK
    assert run.status.current_trial is not None
    assert run.status.current_trial.verdict is Verdict.FAILED


# ---- Measuring ---------------------------------------------------------------------------------


def test_measuring_waits_for_a_whole_trial_window() -> None:
    run = Run()
    measuring(run)
    assert windows_needed(run.spec, run.status, run.now + timedelta(seconds=59)).trial is None
    wanted = windows_needed(run.spec, run.status, run.now + timedelta(seconds=60))
    assert wanted.trial is not None
    assert wanted.baseline is not None
    trial = run.status.current_trial
    assert trial is not None
    start = run.now.timestamp()
    began = datetime.fromisoformat(trial.started_at.replace("Z", "+00:00")).timestamp()
    assert (wanted.trial.end, wanted.trial.seconds) == (start + WINDOW, WINDOW)
    assert (wanted.baseline.end, wanted.baseline.seconds) == (began, WINDOW)
    assert [w.end for w in wanted.baseline_parts] == [began - 40, began - 20, began]
    d = run.later(30).step(facts(AFTER))
    assert d.reason == "measuring the trial"


def test_a_trial_that_helps_is_kept() -> None:
    run = Run()
    measuring(run)
    d = run.later(WINDOW).step(facts(AFTER, windows=judged(window(BEFORE), window(AFTER))))
    assert run.phase() is Phase.OBSERVING
    assert d.apply is None
    assert d.again
    (kept,) = run.status.trials
    assert kept.verdict is Verdict.KEEP
    assert kept.before is not None
    assert kept.after is not None
    assert (kept.before.ttft_seconds, kept.after.ttft_seconds) == (2.0, 0.9)
    assert run.status.current_trial is None
    assert run.status.expected_container == AFTER.fingerprint()
    assert Reason.KEPT in reasons(d)


def test_a_trial_that_hurts_is_reverted_and_rolled_back_to_where_it_came_from() -> None:
    run = Run()
    reverting(run)
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.REVERT
    assert trial.after is not None
    assert trial.after.ttft_seconds == 2.0
    assert run.status.incompatible == []  # a worse value is not an incompatible one
    d = run.step(facts(AFTER))
    assert d.apply == BEFORE
    d = run.later(5).step(facts(BEFORE, complete=False))
    assert d.apply is None
    assert d.reason == "waiting for the rollback"
    d = run.later(5).step(facts(BEFORE))
    assert run.phase() is Phase.OBSERVING
    assert run.status.current_trial is None
    assert [(t.to_value, t.verdict) for t in run.status.trials] == [("32", Verdict.REVERT)]
    assert run.status.expected_container == BEFORE.fingerprint()
    assert Reason.ROLLED_BACK in reasons(d)
    assert run.status.stable_since is not None  # the next window starts after the settle time


def test_a_rollback_whose_old_configuration_does_not_come_up_says_so_and_keeps_waiting() -> None:
    run = Run()
    reverting(run)
    run.step(facts(AFTER))
    d = run.step(facts(BEFORE, rollout=crashing(BEFORE)))
    assert d.apply is None
    assert run.phase() is Phase.ROLLING_BACK
    assert run.condition("Degraded")[:2] == ("True", "RollbackFailing")


@pytest.mark.parametrize(
    ("case", "after"),
    [
        ("load changed", window(AFTER, request_rate=40.0, prompt_tokens_mean=50.0)),
        ("too few requests", window(AFTER, requests=20, running_mean=0.5, waiting_mean=0.0)),
        ("no data", NoData(reason="no requests finished", window_seconds=WINDOW)),
    ],
)
def test_an_inconclusive_trial_is_measured_once_more_then_rolled_back(
    case: str, after: WindowResult
) -> None:
    run = Run()
    measuring(run)
    d = run.later(WINDOW).step(facts(AFTER, windows=judged(window(BEFORE), after)))
    assert run.phase() is Phase.MEASURING, case
    trial = run.status.current_trial
    assert trial is not None
    assert trial.measurements == 1
    assert trial.measure_started_at is not None
    assert run.now == datetime.fromisoformat(trial.measure_started_at.replace("Z", "+00:00"))
    assert Reason.INCONCLUSIVE in reasons(d)
    run.later(WINDOW).step(facts(AFTER, windows=judged(window(BEFORE), after)))
    assert run.phase() is Phase.ROLLING_BACK
    assert run.status.current_trial is not None
    assert run.status.current_trial.verdict is Verdict.INCONCLUSIVE
    assert run.status.incompatible == []


def _spread(ttft_p90: float, requests: int, **overrides: Any) -> Observation:
    return window(BEFORE, requests=requests, ttft={50: 0.8, 90: ttft_p90, 95: ttft_p90 + 1.5,
                                                   99: ttft_p90 + 4}, **overrides)  # fmt: skip


def test_a_gain_just_short_of_the_bar_is_judged_again_over_a_window_twice_as_long() -> None:
    run = Run()
    measuring(run)
    trial = run.status.current_trial
    assert trial is not None
    started = trial.measure_started_at
    # 200 requests a window: TTFT p90 2.0 -> 1.68 s is a score -21% against a bar of -23%,
    # which a window of twice the requests would lower to -20%.
    baseline = _spread(2.0, 200)
    d = run.later(WINDOW).step(facts(AFTER, windows=judged(baseline, _spread(1.68, 200))))
    assert run.phase() is Phase.MEASURING
    assert d.reason == "looking longer"
    trial = run.status.current_trial
    assert trial is not None
    assert (trial.longer, trial.measurements, trial.measure_started_at) == (True, 1, started)
    assert run.condition("Progressing")[2].startswith(f"trial {trial.id}: near the bar")
    # The trial window now spans twice evaluation.window from the same start.
    start = datetime.fromisoformat(started.replace("Z", "+00:00")) if started else run.now
    assert (
        windows_needed(run.spec, run.status, start + timedelta(seconds=2 * WINDOW - 1)).trial
        is None
    )
    wanted = windows_needed(run.spec, run.status, start + timedelta(seconds=2 * WINDOW))
    assert wanted.trial is not None
    assert (wanted.trial.end, wanted.trial.seconds) == (start.timestamp() + 2 * WINDOW, 2 * WINDOW)
    # Over it the same gain, on twice the requests, clears the bar.
    longer = _spread(1.68, 400, window_seconds=2 * WINDOW)
    d = run.later(WINDOW).step(facts(AFTER, windows=judged(baseline, longer)))
    assert run.phase() is Phase.OBSERVING, (d.reason, run.status.current_trial)
    (kept,) = run.status.trials
    assert kept.verdict is Verdict.KEEP


def test_a_gain_short_of_the_bar_over_the_longer_window_too_is_reverted() -> None:
    run = Run()
    measuring(run)
    baseline = _spread(2.0, 200)
    run.later(WINDOW).step(facts(AFTER, windows=judged(baseline, _spread(1.68, 200))))
    flat = _spread(1.9, 400, window_seconds=2 * WINDOW)
    run.later(WINDOW).step(facts(AFTER, windows=judged(baseline, flat)))
    assert run.phase() is Phase.ROLLING_BACK
    assert run.status.current_trial is not None
    assert run.status.current_trial.verdict is Verdict.REVERT


def test_a_metrics_failure_while_judging_waits_without_counting_a_measurement() -> None:
    run = Run()
    measuring(run)
    failing = MetricsFailure("Prometheus is unreachable")
    d = run.later(WINDOW).step(facts(AFTER, windows=judged(failing, failing)))
    assert d.reason == "metrics unavailable: judging later"
    assert run.phase() is Phase.MEASURING
    assert run.status.current_trial is not None
    assert run.status.current_trial.measurements == 0
    assert run.condition("MetricsAvailable")[:2] == ("False", "MetricsSourceError")
    assert run.condition("Progressing")[:2] == ("True", "WaitingForMetrics")


def test_a_trial_whose_windows_stay_unreadable_past_the_progress_deadline_is_rolled_back() -> None:
    run = Run()
    measuring(run)
    trial_window = judged(window(BEFORE), MetricsFailure("Prometheus is unreachable"))
    run.later(WINDOW + DEADLINE).step(facts(AFTER, windows=trial_window))
    assert run.phase() is Phase.MEASURING  # at the deadline: still judged later
    d = run.later(1).step(facts(AFTER, windows=trial_window))
    assert run.phase() is Phase.ROLLING_BACK
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.INCONCLUSIVE
    assert trial.reason is not None
    assert "could not be read for 5m1s after the trial window ended" in trial.reason
    assert "Prometheus is unreachable" in trial.reason
    assert Reason.REVERTING in reasons(d)
    assert d.again


# ---- Converged and Exhausted -------------------------------------------------------------------


def test_a_converged_target_is_checked_again_after_the_cooldown() -> None:
    run = Run()
    observed_long_enough(run, config(64))
    d = run.later(COOLDOWN - 1).step(facts(config(64)))
    assert run.phase() is Phase.CONVERGED
    assert not d.again
    d = run.later(1).step(facts(config(64)))
    assert run.phase() is Phase.OBSERVING
    assert d.again
    run.step(facts(config(64)))
    assert run.phase() is Phase.CONVERGED


def slower(cfg: ContainerConfig) -> Observation:
    """What ``cfg`` serves once the load has grown past it: TTFT p90 1.2 s (target 500 ms)."""
    return window(cfg, ttft={50: 1.0, 90: 1.2, 95: 1.3, 99: 1.5}, ttft_mean=1.0)


def test_a_converged_target_missed_for_two_windows_is_tuned_again_before_the_cooldown() -> None:
    run = Run()
    observed_long_enough(run, config(64))
    assert run.phase() is Phase.CONVERGED
    run.later(10).step(facts(config(64), current=slower(config(64))))
    assert run.condition("TargetsMet")[:2] == ("False", "TargetsMissed")
    d = run.later(2 * WINDOW - 1).step(facts(config(64), current=slower(config(64))))
    assert run.phase() is Phase.CONVERGED  # one window and a bit: could be noise
    assert not d.again
    d = run.later(1).step(facts(config(64), current=slower(config(64))))
    assert run.phase() is Phase.OBSERVING
    assert d.again
    assert Reason.TARGETS_MISSED in reasons(d)
    assert run.condition("Progressing")[1] == "TargetsMissedAgain"
    assert "missed in every window for 2m" in run.condition("Progressing")[2]


def test_a_window_that_meets_the_targets_restarts_the_count_of_misses() -> None:
    run = Run()
    observed_long_enough(run, config(64))
    run.later(10).step(facts(config(64), current=slower(config(64))))
    run.later(WINDOW).step(facts(config(64)))  # met again
    run.later(10).step(facts(config(64), current=slower(config(64))))
    d = run.later(2 * WINDOW - 1).step(facts(config(64), current=slower(config(64))))
    assert run.phase() is Phase.CONVERGED
    assert Reason.TARGETS_MISSED not in reasons(d)


def gave_up(run: Run, on: Observation) -> None:
    """The run is Exhausted with trials left, having given up on window ``on``."""
    run.status = run.status.model_copy(
        update={
            "phase": Phase.EXHAUSTED,
            "phase_since": "2026-12-02T10:00:00Z",
            "observed_generation": 1,
            "gave_up_on": metric_snapshot(run.spec, on, "2026-12-02T10:00:00Z"),
        }
    )


def test_an_exhausted_target_plans_again_once_the_load_it_gave_up_on_has_moved() -> None:
    run = Run()
    gave_up(run, window(BEFORE))
    run.later(WINDOW).step(facts(BEFORE))  # the same load: nothing new to try
    assert run.phase() is Phase.EXHAUSTED
    grown = window(BEFORE, request_rate=40.0, requests=2400, running_mean=16.0, waiting_mean=30.0)
    d = run.later(WINDOW).step(facts(BEFORE, current=grown))
    assert Reason.TARGETS_MISSED in reasons(d)
    assert (Phase.EXHAUSTED, Phase.OBSERVING) in d.transitions
    assert "the load moved since giving up (20 -> 40 requests/s" in d.notes[0].message


def test_an_exhausted_target_whose_load_moved_but_meets_its_targets_rests() -> None:
    run = Run()
    gave_up(run, window(BEFORE))
    lighter = window(
        BEFORE,
        request_rate=5.0,
        requests=300,
        running_mean=4.0,
        waiting_mean=0.0,
        ttft={50: 0.1, 90: 0.2, 99: 0.3},
    )
    run.later(WINDOW).step(facts(BEFORE, current=lighter))
    assert run.phase() is Phase.EXHAUSTED


def test_an_exhausted_target_without_trials_left_waits_for_the_cooldown() -> None:
    run = Run()
    gave_up(run, window(BEFORE))
    run.status = run.status.model_copy(update={"trial_count": 5})
    grown = window(BEFORE, request_rate=40.0, requests=2400, running_mean=16.0, waiting_mean=30.0)
    run.later(10 * WINDOW).step(facts(BEFORE, current=grown))
    assert run.phase() is Phase.EXHAUSTED  # maxTrials spent: no reason to hurry


def test_an_exhausted_target_plans_again_after_the_cooldown() -> None:
    run = Run()
    run.status = run.status.model_copy(update={"trial_count": 5, "observed_generation": 1})
    observed_long_enough(run)
    run.later(COOLDOWN).step(facts())
    assert run.phase() is Phase.OBSERVING


def test_a_new_spec_wakes_a_resting_target_and_restarts_the_trial_count() -> None:
    run = Run()
    run.status = run.status.model_copy(update={"trial_count": 5, "observed_generation": 1})
    observed_long_enough(run)
    assert run.phase() is Phase.EXHAUSTED
    run.change_spec(evaluation={**run.spec.evaluation.model_dump(by_alias=True), "maxTrials": 6})
    d = run.step(facts())
    # Exhausted -> Observing -> RollingOut in one round, each step allowed.
    assert d.transitions == (
        (Phase.EXHAUSTED, Phase.OBSERVING),
        (Phase.OBSERVING, Phase.ROLLING_OUT),
    )
    assert run.status.trial_count == 1


# ---- Paused, drift and outside changes ---------------------------------------------------------


def test_a_paused_target_applies_nothing_and_resumes_its_trial_when_unpaused() -> None:
    run = Run()
    measuring(run)
    run.change_spec(paused=True)
    d = run.step(facts(AFTER))
    assert run.phase() is Phase.PAUSED
    assert d.apply is None
    assert run.condition("Progressing")[:2] == ("False", "Paused")
    assert run.status.current_trial is not None  # the trial waits, its change in place
    d = run.later(600).step(facts(AFTER))
    assert d.apply is None
    run.change_spec(paused=False)
    d = run.step(facts(AFTER))
    assert Reason.RESUMED in reasons(d)
    assert d.apply is None  # the trial's container is already there
    assert run.phase() is Phase.SETTLING  # measured afresh after a pause
    assert (Phase.PAUSED, Phase.ROLLING_OUT) in d.transitions


def test_pausing_before_the_patch_then_resuming_applies_the_trial_then() -> None:
    run = Run()
    trial_started(run)
    run.change_spec(paused=True)
    assert run.step(facts(BEFORE)).apply is None
    run.change_spec(paused=False)
    d = run.later(600).step(facts(BEFORE))
    assert d.apply == AFTER
    assert run.phase() is Phase.ROLLING_OUT
    # The progress deadline counts from the resume, not from the trial's start.
    run.later(60).step(facts(AFTER, complete=False))
    assert run.phase() is Phase.ROLLING_OUT


def test_an_outside_change_mid_trial_pauses_tuning_and_is_never_fought() -> None:
    run = Run()
    measuring(run)
    d = run.step(facts(THIRD))
    assert run.phase() is Phase.PAUSED
    assert d.apply is None
    assert run.condition("Degraded")[:2] == ("True", "Drift")
    assert run.condition("Progressing")[:2] == ("False", "Drift")
    assert Reason.DRIFT in reasons(d)
    assert run.status.current_trial is None
    assert run.status.trials[-1].verdict is Verdict.INCONCLUSIVE
    assert run.status.baseline is None
    for _ in range(3):
        d = run.later(COOLDOWN).step(facts(THIRD))
        assert d.apply is None
        assert run.phase() is Phase.PAUSED
    run.change_spec(mode="Auto", paused=False, onDelete="Restore")
    d = run.step(facts(THIRD))
    assert run.phase() is Phase.OBSERVING
    assert run.condition("Degraded")[:2] == ("False", "SpecChanged")
    assert run.status.drift_generation is None


def test_an_outside_change_between_trials_is_adopted_as_the_new_starting_point() -> None:
    run = Run()
    observed_long_enough(run, config(64))
    assert run.phase() is Phase.CONVERGED
    d = run.step(facts(THIRD))
    assert Reason.CONFIGURATION_CHANGED in reasons(d)
    assert run.phase() is Phase.OBSERVING
    assert run.status.expected_container == THIRD.fingerprint()
    assert run.status.stable_since is not None  # measured afresh: a new clean window
    assert d.apply is None


# ---- Failed preconditions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "round_facts", "reason"),
    [
        ("no Deployment", Blocked(Blocker.DEPLOYMENT_NOT_FOUND), Reason.DEPLOYMENT_NOT_FOUND),
        (
            "no container",
            Blocked(Blocker.CONTAINER_NOT_FOUND, "no container 'vllm'"),
            "ContainerNotFound",
        ),
        (
            "not vLLM",
            Blocked(Blocker.NOT_VLLM, "nginx is not a vLLM server", H100),
            Reason.NOT_VLLM,
        ),
        ("another LatencyTarget", Blocked(Blocker.CONFLICT, "llama-older"), Reason.CONFLICT),
    ],
)
def test_a_target_the_operator_cannot_work_on_fails_once_and_does_nothing(
    case: str, round_facts: Facts, reason: str
) -> None:
    run = Run()
    d = run.step(round_facts)
    assert run.phase() is Phase.FAILED, case
    assert d.apply is None
    assert run.condition("Ready")[:2] == ("False", reason)
    assert reasons(d) == [reason]
    again = run.later(60).step(round_facts)
    assert again.notes == ()  # announced once, not every round
    assert again.apply is None
    d = run.later(60).step(facts())
    assert run.phase() is Phase.OBSERVING
    assert run.condition("Ready")[:2] == ("True", "Ready")


def test_a_not_vllm_container_still_gets_a_diagnosis() -> None:
    run = Run()
    run.step(Blocked(Blocker.NOT_VLLM, "nginx is not a vLLM server", H100))
    assert run.status.diagnosis is not None
    assert run.status.diagnosis.findings


def test_a_trial_interrupted_by_a_failed_round_is_taken_up_not_dropped() -> None:
    run = Run()
    measuring(run)
    run.step(Blocked(Blocker.DEPLOYMENT_NOT_FOUND))
    assert run.phase() is Phase.FAILED
    d = run.later(10).step(facts(AFTER))
    assert run.status.current_trial is not None
    assert run.status.current_trial.to_value == "32"
    assert d.apply is None
    assert run.phase() is Phase.SETTLING  # re-rolled (a no-op) and measured afresh


# ---- Recommend, Off, and Deployments another controller owns -----------------------------------


def test_recommend_mode_publishes_the_next_patch_and_applies_nothing() -> None:
    run = Run(spec=spec(mode="Recommend"))
    d = observed_long_enough(run)
    assert d.apply is None
    assert run.phase() is Phase.OBSERVING
    assert run.status.current_trial is None
    assert run.status.baseline is None
    rec = run.status.recommendation
    assert rec is not None
    assert (rec.knob, rec.from_value, rec.to_value) == ("maxNumSeqs", "16", "32")
    ops = [op.model_dump(by_alias=True, exclude_none=True) for op in rec.patch]
    assert {"op": "add", "path": "/spec/template/spec/containers/0/args",
            "value": list(AFTER.args or ())} in ops  # fmt: skip
    assert run.condition("Progressing")[:2] == ("False", "ModeRecommend")
    assert reasons(d) == [Reason.RECOMMENDATION]
    d = run.later(60).step(facts())
    assert d.notes == ()  # the same recommendation is not announced twice
    assert d.apply is None


def test_off_mode_diagnoses_and_neither_recommends_nor_applies() -> None:
    run = Run(spec=spec(mode="Off"))
    d = observed_long_enough(run)
    assert run.spec.mode is Mode.OFF
    assert d.apply is None
    assert run.status.recommendation is None
    assert run.status.current_trial is None
    assert run.status.diagnosis is not None
    assert run.status.diagnosis.bottleneck == "Queueing"
    assert run.condition("Progressing")[:2] == ("False", "ModeOff")
    assert d.notes == ()


def test_a_deployment_another_controller_owns_gets_recommendations_only() -> None:
    run = Run()
    owner = "InferenceService/llama"
    run.step(facts(owner=owner))
    d = run.later(SETTLE + WINDOW).step(facts(owner=owner))
    assert d.apply is None
    assert run.status.current_trial is None
    assert run.status.recommendation is not None
    assert run.condition("Progressing")[:2] == ("False", "ManagedByController")
    assert "Ready" in [c.type for c in run.status.conditions]
    assert "InferenceService/llama" in run.condition("Ready")[2]


# ---- the table itself --------------------------------------------------------------------------


def test_every_phase_but_paused_and_failed_has_a_step_and_those_two_are_resumed_first() -> None:
    assert set(PHASES) == set(Phase) - ALWAYS_ALLOWED
    run = Run()
    measuring(run)
    run.step(Blocked(Blocker.DEPLOYMENT_NOT_FOUND))
    d = run.later(10).step(facts(AFTER))
    assert [b for _, b in d.transitions][:1] == [Phase.ROLLING_OUT]  # resumed, then stepped


def test_every_phase_has_a_row_and_staying_put_is_always_allowed() -> None:
    assert set(TRANSITIONS) == set(Phase)
    for source, targets in TRANSITIONS.items():
        assert source in targets
