"""Each trial records what the planner expected it to do to the objectives it aims at, and what
its windows then showed (issue 12: trial status shows predicted and measured effects)."""

from __future__ import annotations

import pytest
from tests.unit.rollout.test_rollout_phases import (
    AFTER,
    BEFORE,
    WINDOW,
    Run,
    facts,
    judged,
    measuring,
    reverting,
    trial_started,
    window,
)

from latency_tuner.api.status import MetricSnapshot, Phase, Prediction, Trial
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.knobs import Change, KnobClass, KnobName
from latency_tuner.core.model import Forecast
from latency_tuner.core.rollout.values import forecast_note, predictions, scored

STAMP = "2026-12-02T10:00:00Z"


def test_a_started_trial_records_the_expected_change_of_the_objective_it_aims_at() -> None:
    run = Run()
    trial_started(run)
    trial = run.status.current_trial
    assert trial is not None
    (prediction,) = trial.predictions
    assert prediction.objective == "ttft"
    assert -1.0 < prediction.expected_change < 0.0  # queueing: more seqs, lower TTFT
    # The window before the trial served TTFT p90 2 s.
    assert prediction.expected_seconds == pytest.approx(2.0 * (1 + prediction.expected_change))
    assert prediction.measured_change is None
    assert prediction.error is None


def test_a_kept_trial_records_the_measured_change_and_the_error_of_the_expectation() -> None:
    run = Run()
    measuring(run)
    run.later(WINDOW).step(facts(AFTER, windows=judged(window(BEFORE), window(AFTER))))
    assert run.phase() is Phase.OBSERVING
    (kept,) = run.status.trials
    (prediction,) = kept.predictions
    measured = prediction.measured_change
    assert measured == pytest.approx(0.9 / 2.0 - 1, abs=1e-3)
    assert measured is not None
    assert prediction.error == pytest.approx(measured - prediction.expected_change, abs=2e-3)


def test_a_reverted_trial_records_that_the_objective_did_not_move_as_expected() -> None:
    run = Run()
    reverting(run)  # the trial's window served what the one before it did: TTFT p90 2 s
    trial = run.status.current_trial
    assert trial is not None
    (prediction,) = trial.predictions
    assert prediction.measured_change == 0.0
    assert prediction.error == -prediction.expected_change  # all of the expected gain missing


def test_an_objective_a_window_has_no_value_for_stays_unmeasured() -> None:
    trial = Trial(
        id=1,
        knob="maxNumSeqs",
        started_at=STAMP,
        before=MetricSnapshot(ttft_seconds=1.0, itl_seconds=0.05),
        after=MetricSnapshot(ttft_seconds=0.5),
        predictions=[
            Prediction(objective="ttft", expected_change=-0.3),
            Prediction(objective="itl", expected_change=-0.1),
        ],
    )
    ttft, itl = scored(trial).predictions
    assert (ttft.measured_change, ttft.error) == (-0.5, -0.2)
    assert (itl.measured_change, itl.error) == (None, None)


def test_a_trial_without_predictions_is_left_as_it_is() -> None:
    trial = Trial(id=1, knob="maxNumSeqs", started_at=STAMP, after=MetricSnapshot(ttft_seconds=1))
    assert scored(trial) is trial


def _change(**expected: float) -> Change:
    return Change(
        knob=KnobName.TENSOR_PARALLEL,
        from_value=None,
        to_value="2",
        knob_class=KnobClass.COSTLY,
        expected_gain=0.3,
        expected_score_gain=0.3,
        bottleneck=Bottleneck.DECODE_BANDWIDTH,
        reason="test",
        expected=tuple(expected.items()),  # type: ignore[arg-type]
    )


def test_the_calibrated_models_forecast_replaces_the_prior_and_adds_the_other_latencies() -> None:
    before = MetricSnapshot(ttft_seconds=0.4, itl_seconds=0.05, e2e_seconds=10.0)
    forecast = Forecast(ttft=0.1, itl=-0.45, e2e=-0.4)
    itl, ttft, e2e = predictions(_change(itl=0.35), before, forecast)
    assert (itl.objective, itl.basis, itl.aimed, itl.expected_change) == (
        "itl",
        "model",
        True,
        -0.45,
    )
    assert itl.expected_seconds == pytest.approx(0.05 * 0.55)
    assert (ttft.objective, ttft.basis, ttft.aimed, ttft.expected_change) == (
        "ttft", "model", False, 0.1,
    )  # fmt: skip
    assert (e2e.objective, e2e.aimed, e2e.expected_change) == ("e2e", False, -0.4)


def test_an_objective_the_model_cannot_forecast_keeps_the_prior() -> None:
    before = MetricSnapshot(ttft_seconds=0.4, itl_seconds=0.05)
    forecast = Forecast(ttft=None, itl=-0.2, e2e=None)  # e.g. prefix caching turned on
    ttft, itl = predictions(_change(ttft=0.4), before, forecast)
    assert (ttft.basis, ttft.aimed, ttft.expected_change) == ("prior", True, -0.4)
    assert (itl.basis, itl.aimed, itl.expected_change) == ("model", False, -0.2)


def test_scoring_keeps_where_a_prediction_came_from() -> None:
    trial = Trial(
        id=1,
        knob="tensorParallel",
        started_at=STAMP,
        before=MetricSnapshot(itl_seconds=0.05),
        after=MetricSnapshot(itl_seconds=0.03),
        predictions=[Prediction(objective="itl", basis="model", aimed=False, expected_change=-0.3)],
    )
    (itl,) = scored(trial).predictions
    assert (itl.basis, itl.aimed, itl.measured_change, itl.error) == ("model", False, -0.4, -0.1)


def test_a_prior_beyond_the_whole_latency_expects_at_most_all_of_it() -> None:
    change = _change(ttft=1.4, itl=-0.2)
    ttft, itl = predictions(change, MetricSnapshot(ttft_seconds=2.0, itl_seconds=0.02))
    assert (ttft.expected_change, ttft.expected_seconds) == (-1.0, 0.0)
    assert (itl.expected_change, itl.expected_seconds) == (0.0, 0.02)


def test_the_message_that_starts_a_trial_quotes_the_models_forecast_only() -> None:
    found = [
        Prediction(objective="itl", basis="model", expected_change=-0.45),
        Prediction(objective="ttft", basis="prior", expected_change=-0.3),
        Prediction(objective="e2e", basis="model", aimed=False, expected_change=0.031),
    ]
    assert forecast_note(found) == "the calibrated model forecasts ITL -45%, E2E +3%"
    assert forecast_note(found[1:2]) == ""
