"""With the targets met, a window in which the calibrated model expects a safe change to buy a
much larger margin starts a trial marked as a refinement (issue 12, item 3) instead of
converging; Recommend mode, an exhausted trial budget or a refinement already not kept
converge as before."""

from __future__ import annotations

from datetime import timedelta
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
from latency_tuner.core.rollout import Decision, Reason, WindowResult, Windows, windows_needed

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


def test_the_window_due_to_be_judged_is_also_read_in_thirds_for_its_noise() -> None:
    run = Run(spec=itl_target())
    run.step(facts(UNCHUNKED, current=prefill_stalls(window_seconds=WINDOW, requests=180)))
    assert run.phase() is Phase.OBSERVING
    due = run.now + timedelta(seconds=SETTLE + WINDOW)
    early = windows_needed(run.spec, run.status, due - timedelta(seconds=1))
    assert early.baseline_parts == ()
    wanted = windows_needed(run.spec, run.status, due)
    end = due.timestamp()
    assert [(w.end, w.seconds) for w in wanted.baseline_parts] == [
        (end - 40, 20), (end - 20, 20), (end, 20),
    ]  # fmt: skip


def test_a_window_whose_thirds_differ_by_more_than_the_expected_gain_converges() -> None:
    # The thirds read ITL p99 30, 136 and 240 ms: two such windows differ by the most the
    # verdict's bar asks (a halved sum), more than the -49% chunked prefill is expected to buy.
    run = Run(spec=itl_target())
    current = prefill_stalls(window_seconds=WINDOW, requests=180)
    thirds = tuple(
        current.model_copy(
            update={"itl": {**current.itl, 99: p99}, "window_seconds": WINDOW / 3, "requests": 60}
        )
        for p99 in (0.03, 0.136, 0.24)
    )
    run.step(facts(UNCHUNKED, current=current))
    windows = Windows[WindowResult](current=current, baseline_parts=thirds)
    run.later(SETTLE + WINDOW).step(facts(UNCHUNKED, windows=windows))
    assert run.phase() is Phase.CONVERGED
    assert run.status.current_trial is None


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
