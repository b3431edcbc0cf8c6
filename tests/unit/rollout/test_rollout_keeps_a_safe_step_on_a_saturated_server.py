"""A safe change that two saturated windows cannot judge, and that served no fewer of the same
arrivals, is kept as a step: a server held by two limits at once stays saturated after either
change alone, and reverting each would never reach the pair that clears its queue. A lossy or
costly change must still show what it buys (issue 12)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.rollout.test_rollout_phases import AFTER, BEFORE, WINDOW, Run, facts, judged, window
from tests.unit.rollout.test_rollout_phases import measuring as measuring_a_trial

from latency_tuner.api.status import Phase, Verdict
from latency_tuner.core.observation import Observation
from latency_tuner.core.verdict import STEP_ON_SATURATED


def saturated(finished: int, **overrides: Any) -> Observation:
    """A minute in which ``finished`` requests finished and the waiting queue grew by 300."""
    return window(
        BEFORE,
        requests=finished,
        request_rate=finished / WINDOW,
        ttft={50: 8.0, 90: 19.0, 95: 20.0, 99: 22.0},
        running_delta=0.0,
        waiting_mean=150.0,
        waiting_max=300.0,
        waiting_delta=300.0,
        **overrides,
    )


def measuring(knob: str = "maxNumSeqs", ttft_expected: float = -0.3) -> Run:
    """A trial of max-num-seqs 16 -> 32 being measured, told as ``knob``'s (only the class of
    the knob is read here) with TTFT expected to change by ``ttft_expected``."""
    run = Run()
    measuring_a_trial(run)
    trial = run.status.current_trial
    assert trial is not None
    assert trial.knob == "maxNumSeqs"
    (prediction,) = trial.predictions
    assert prediction.objective == "ttft"
    expected = prediction.model_copy(update={"expected_change": ttft_expected})
    told = trial.model_copy(update={"knob": knob, "predictions": [expected]})
    run.status = run.status.model_copy(update={"current_trial": told})
    return run


def test_a_safe_change_serving_as_many_on_a_saturated_server_is_kept_as_a_step() -> None:
    run = measuring()
    run.later(WINDOW).step(facts(AFTER, windows=judged(saturated(300), saturated(310))))
    assert run.phase() is Phase.OBSERVING
    (kept,) = run.status.trials
    assert kept.verdict is Verdict.KEEP
    assert kept.reason is not None
    assert STEP_ON_SATURATED in kept.reason
    assert run.status.expected_container == AFTER.fingerprint()


@pytest.mark.parametrize("knob", ["quantization", "tensorParallel", "no-such-knob"])
def test_a_lossy_costly_or_unknown_change_on_a_saturated_server_is_not_kept_as_a_step(
    knob: str,
) -> None:
    run = measuring(knob)
    run.later(WINDOW).step(facts(AFTER, windows=judged(saturated(300), saturated(310))))
    assert run.phase() is Phase.MEASURING  # Inconclusive: measured once more
    run.later(WINDOW).step(facts(AFTER, windows=judged(saturated(300), saturated(310))))
    assert run.phase() is Phase.ROLLING_BACK
    trial = run.status.current_trial
    assert trial is not None
    assert trial.verdict is Verdict.INCONCLUSIVE


def test_a_safe_change_expected_to_lengthen_the_queue_is_not_kept_as_a_step() -> None:
    # Fewer slots for ITL, say: it adds nothing a later change could unlock.
    run = measuring(ttft_expected=0.5)
    run.later(WINDOW).step(facts(AFTER, windows=judged(saturated(300), saturated(310))))
    assert run.phase() is Phase.MEASURING
    assert run.status.trials == []


def test_a_safe_change_that_serves_clearly_fewer_on_a_saturated_server_is_not_kept() -> None:
    run = measuring()
    run.later(WINDOW).step(facts(AFTER, windows=judged(saturated(300), saturated(200))))
    assert run.phase() is Phase.MEASURING
    assert run.status.trials == []
