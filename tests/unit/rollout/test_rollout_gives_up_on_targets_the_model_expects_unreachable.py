"""Once the calibrated model has a record on the target, a window whose targets it expects no
allowed configuration to meet ends in phase Exhausted at once, without another trial: the
Progressing condition says TargetsUnreachable, with the best reachable figures and the advice
(issue 12, item 6). Recommend mode publishes no recommendation and keeps observing."""

from __future__ import annotations

from typing import Any

from tests.unit.rollout.test_rollout_phases import Run, reasons, spec
from tests.unit.rollout.test_rollout_refines_for_margin_once_targets_are_met import (
    after_a_reverted_trial,
    observed,  # two rounds a window apart, ITL p99 at 136 ms (prefills stall decodes)
)

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import Phase, Prediction
from latency_tuner.core.rollout import Reason

ONLY_SEQS = {
    "maxNumSeqs": {"min": 8, "max": 256},
    "maxNumBatchedTokens": None,
    "prefixCaching": False,
    "chunkedPrefill": False,
    "gpuMemoryUtilization": None,
}


def itl_target(threshold: str, **fields: Any) -> LatencyTargetSpec:
    return spec(
        objectives={"itl": {"percentile": 99, "threshold": threshold}}, knobs=ONLY_SEQS, **fields
    )


def with_a_record(run: Run) -> Run:
    """An earlier trial (another knob, reverted) whose two forecasts missed by 10 points."""
    forecasts = [
        Prediction(objective=o, basis="model", expected_change=-0.3, measured_change=-0.2,
                   error=0.1)
        for o in ("itl", "ttft")
    ]  # fmt: skip
    return after_a_reverted_trial(run, predictions=forecasts)


def test_targets_the_model_expects_unreachable_end_exhausted_without_a_trial() -> None:
    run = with_a_record(Run(spec=itl_target("30ms")))
    d = observed(run)
    assert run.phase() is Phase.EXHAUSTED
    assert run.status.current_trial is None
    assert run.status.trial_count == 1
    status, reason, message = run.condition("Progressing")[:3]
    assert (status, reason) == ("False", "TargetsUnreachable")
    assert message.startswith("the calibrated model expects none of the 7 configurations")
    assert "Advice: serve long-prompt traffic from a separate deployment" in message
    assert Reason.EXHAUSTED in reasons(d)


def test_targets_within_twice_the_measured_latency_are_given_up_on_only_the_old_way() -> None:
    # 136 ms against 100 ms: within the model's error of every configuration. The planner
    # gives up the old way, having no candidate for the stall (PrefillInterference).
    run = with_a_record(Run(spec=itl_target("100ms")))
    observed(run)
    assert run.phase() is Phase.EXHAUSTED
    status, reason, message = run.condition("Progressing")[:3]
    assert (status, reason) == ("False", "Exhausted")
    assert message.startswith("no knob the spec allows can help with PrefillInterference")


def test_without_a_record_the_same_window_is_not_called_unreachable() -> None:
    # No knob here acts on the stall, so the planner gives up all the same, the old way.
    run = Run(spec=itl_target("30ms"))
    observed(run)
    assert run.phase() is Phase.EXHAUSTED
    assert run.condition("Progressing")[:2] == ("False", "Exhausted")


def test_recommend_mode_says_so_and_keeps_observing() -> None:
    run = with_a_record(Run(spec=itl_target("30ms", mode="Recommend")))
    observed(run)
    assert run.phase() is Phase.OBSERVING
    assert run.status.recommendation is None
    assert run.condition("Progressing")[1] == "TargetsUnreachable"
