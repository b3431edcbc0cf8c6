"""A trial whose pods only waited for GPUs failed transiently: the value is not recorded
incompatible, and the planner tries it again later; a crash on start stays permanent (issue 12
item 5)."""

from __future__ import annotations

from dataclasses import replace

from tests.unit.rollout.test_rollout_phases import (
    AFTER,
    BEFORE,
    DEADLINE,
    Run,
    crashing,
    facts,
    rollout,
    trial_started,
)

from latency_tuner.api.status import Verdict
from latency_tuner.core.cluster import PodFacts
from latency_tuner.core.planner import TRANSIENT_FAILURE, TrialRecord


def unschedulable() -> PodFacts:
    """The new pod, Pending with no node: the cluster has no free GPU for it."""
    return PodFacts(
        name="llama-new", node=None, ready=False, restarts=0, config_fingerprint=AFTER.fingerprint()
    )


def test_a_rollout_whose_pod_waits_for_gpus_past_the_deadline_fails_transiently() -> None:
    run = Run()
    trial_started(run)
    run.step(facts(BEFORE))
    pending = replace(rollout(complete=False), pods=(unschedulable(),))
    run.later(DEADLINE + 1).step(facts(AFTER, rollout=pending))
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.FAILED
    assert (trial.reason or "").startswith(TRANSIENT_FAILURE)
    assert run.status.incompatible == []
    assert TrialRecord.from_trial(trial).transient


def test_a_pod_that_crashes_on_start_is_a_permanent_failure() -> None:
    run = Run()
    trial_started(run)
    run.step(facts(BEFORE))
    run.step(facts(AFTER, rollout=crashing(AFTER)))
    trial = run.status.current_trial
    assert trial is not None
    assert not TrialRecord.from_trial(trial).transient
    assert [(i.knob, i.value) for i in run.status.incompatible] == [("maxNumSeqs", "32")]
