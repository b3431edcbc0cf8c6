"""With the targets met, a window in which the calibrated model expects a safe change to buy a
much larger margin starts a trial marked as a refinement (issue 12, item 3) instead of
converging; Recommend mode, an exhausted trial budget or a refinement already not kept
converge as before."""

from __future__ import annotations

from typing import Any

from tests.unit.core.builders import prefill_stalls
from tests.unit.rollout.test_rollout_phases import (
    MODEL,
    SETTLE,
    WINDOW,
    Run,
    facts,
    reasons,
    spec,
)

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import Phase, Trial, Verdict
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.rollout import Decision, Reason

UNCHUNKED = ContainerConfig(
    command=None,
    args=(MODEL, "--max-model-len", "8192", "--no-enable-chunked-prefill"),
    image="vllm/vllm-openai:v0.11.0",
    gpu_limit=1,
)


def itl_target(**fields: Any) -> LatencyTargetSpec:
    return spec(objectives={"itl": {"percentile": 99, "threshold": "150ms"}}, **fields)


def observed(run: Run) -> Decision:
    """Two rounds a window apart on the same window: ITL p99 136 ms, prefills stalling the
    decodes (``builders.prefill_stalls``)."""
    current = prefill_stalls(window_seconds=WINDOW, requests=180)
    run.step(facts(UNCHUNKED, current=current))
    return run.later(SETTLE + WINDOW).step(facts(UNCHUNKED, current=current))


def test_a_met_target_starts_a_refinement_when_the_model_expects_a_much_larger_margin() -> None:
    run = Run(spec=itl_target())
    d = observed(run)
    assert run.phase() is Phase.ROLLING_OUT
    assert run.condition("TargetsMet")[:2] == ("True", "TargetsMet")
    assert run.condition("Progressing")[1] == "TrialStarted"
    assert reasons(d) == [Reason.TARGETS_MET, Reason.TRIAL_STARTED]
    trial = run.status.current_trial
    assert trial is not None
    assert trial.refinement
    assert (trial.knob, trial.to_value) == ("chunkedPrefill", "true")
    assert "targets met; for margin" in run.condition("Progressing")[2]


def test_recommend_mode_converges_without_refining() -> None:
    run = Run(spec=itl_target(mode="Recommend"))
    observed(run)
    assert run.phase() is Phase.CONVERGED
    assert run.status.current_trial is None


def after_a_reverted_trial(run: Run, **fields: Any) -> Run:
    """``run`` with one earlier trial of max-num-seqs -> 512, reverted (``fields`` added)."""
    reverted = Trial(
        id=1,
        knob="maxNumSeqs",
        from_value=None,
        to_value="512",
        started_at="2026-12-02T09:00:00Z",
        finished_at="2026-12-02T09:05:00Z",
        verdict=Verdict.REVERT,
        **fields,
    )
    run.status = run.status.model_copy(update={"trials": [reverted], "trial_count": 1})
    return run


def test_a_refinement_that_was_not_kept_ends_refining() -> None:
    run = after_a_reverted_trial(Run(spec=itl_target()), refinement=True)
    observed(run)
    assert run.phase() is Phase.CONVERGED


def test_no_refinement_once_the_trial_budget_is_spent() -> None:
    run = Run(spec=itl_target())
    run.status = run.status.model_copy(update={"trial_count": 5, "observed_generation": 1})
    observed(run)
    assert run.phase() is Phase.CONVERGED
