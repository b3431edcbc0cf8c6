"""Within one kind of change (safe, lossy, costly) the planner tries first the candidate the
calibrated performance model expects to lower the violation score most, whatever order the
priors would give."""

from __future__ import annotations

import math

import pytest
from tests.unit.core.builders import H100, command_line, interference, knobs, objectives

from latency_tuner.api.status import Prediction, Trial, Verdict
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import TrialRecord, _tiers, model_error, plan

CL = command_line("--max-num-batched-tokens", "2048")
SPEC = knobs(
    max_num_batched_tokens={"min": 512, "max": 16384},
    prefix_caching=False,
    max_num_seqs=None,
    gpu_memory_utilization=None,
)
GOAL = objectives(itl="30ms", percentile=90)


def _window(rate: float) -> Observation:
    # 6,000-token prompts, half of them cached: 3,000 tokens to prefill, in two 2,048-token
    # steps; the p90 token waits on a step that also prefills.
    return interference(
        prompt_tokens_mean=6000.0,
        request_rate=rate,
        ttft_mean=0.25,
        prefill_time_mean=0.12,
        queue_time_mean=0.05,
        itl={50: 0.012, 90: 0.05, 99: 0.08},
        itl_mean=0.02,
        running_mean=16.0,
    )


def test_a_budget_that_prefills_a_prompt_in_one_step_goes_first_when_that_clears_the_p90() -> None:
    """Priors rank smaller chunks first against prefill interference. At four prompts a
    second the model sees it the other way: a budget that prefills each prompt in one step
    leaves so few steps with a prefill that the p90 token comes from a decode-only step, while
    smaller chunks only shorten the steps that stay in the p90."""
    window = _window(4.0)
    d = diagnose(window, GOAL, CL, H100, SPEC)
    assert d.bottleneck is Bottleneck.PREFILL_INTERFERENCE
    assert d.ranking is not None
    assert [c.direction for c in d.ranking.candidates][:2] == [-1, 1]  # the priors' order
    change = plan(d, window, CL, SPEC, H100)
    assert isinstance(change, Change)
    assert change.knob is KnobName.MAX_NUM_BATCHED_TOKENS
    assert int(change.to_value or 0) > 2048


def test_without_a_model_of_the_gpu_the_priors_order_stands() -> None:
    window = _window(4.0)
    unknown = HardwareInfo()
    d = diagnose(window, GOAL, CL, unknown, SPEC)
    change = plan(d, window, CL, SPEC, unknown)
    assert isinstance(change, Change)
    assert int(change.to_value or 0) < 2048


def test_forecasts_closer_than_a_quantiles_interpolation_leave_the_priors_order() -> None:
    """At two 4,000-token prompts a second the model puts the ITL p90 token among the steps
    that only decode for every budget: 2,048 and 16,384 move its reading by a tenth of a
    percent of the violation, from interpolating within one bucket. That says nothing, so
    the priors' smaller chunks go first."""
    window = interference()
    spec = knobs(max_num_batched_tokens={"min": 512, "max": 16384})
    d = diagnose(window, objectives(itl="50ms"), command_line(), H100, spec)
    change = plan(d, window, command_line(), spec, H100)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "2048")


def test_forecast_violations_rank_in_tiers_as_wide_as_the_tolerance() -> None:
    values = [0.8009, 0.8, math.inf, 0.5, 0.85, math.inf, 0.82]
    # 0.5 alone; 0.8-0.82 within 0.02 of 0.8; 0.85 beyond it; the infinite ones last.
    assert _tiers(values, 0.02) == [1, 1, 3, 0, 2, 3, 1]
    assert _tiers(values, 0.0) == [2, 1, 5, 0, 4, 5, 3]


def _erred(*errors: float) -> list[TrialRecord]:
    """Earlier trials of another knob whose model forecasts missed by ``errors``."""
    return [
        TrialRecord("maxNumSeqs", None, str(64 * (i + 1)), Verdict.REVERT, None,
                    model_errors=(e,))
        for i, e in enumerate(errors)
    ]  # fmt: skip


def test_a_model_that_erred_on_this_target_orders_nothing_any_more() -> None:
    # Its last forecasts here missed by 60-90 points: the priors' order is back.
    window = _window(4.0)
    d = diagnose(window, GOAL, CL, H100, SPEC)
    change = plan(d, window, CL, SPEC, H100, _erred(0.2, 0.6, 0.7, 0.9))
    assert isinstance(change, Change)
    assert int(change.to_value or 0) < 2048


def test_a_model_whose_recent_forecasts_held_still_orders() -> None:
    # One bad miss long ago, then four close ones: the latest four decide.
    window = _window(4.0)
    d = diagnose(window, GOAL, CL, H100, SPEC)
    change = plan(d, window, CL, SPEC, H100, _erred(0.9, 0.1, 0.2, 0.1, 0.3))
    assert isinstance(change, Change)
    assert int(change.to_value or 0) > 2048


def test_the_model_error_is_the_median_of_its_latest_four_forecasts() -> None:
    assert model_error(_erred(0.9)) is None  # one forecast is no record
    assert model_error(_erred(0.9, 0.1, 0.2, 0.1, 0.3)) == pytest.approx(0.15)
    assert model_error(_erred(0.2, 0.6)) == pytest.approx(0.4)


def test_a_recorded_error_that_is_not_a_number_says_nothing_of_the_model() -> None:
    # The status is writable by whoever can edit the LatencyTarget: non-finite errors are
    # dropped, finite ones kept.
    trial = Trial(
        id=1,
        knob="maxNumSeqs",
        started_at="2026-12-02T10:00:00Z",
        predictions=[
            Prediction(objective="ttft", basis="model", expected_change=-0.5, error=math.nan),
            Prediction(objective="itl", basis="model", expected_change=-0.2, error=-math.inf),
            Prediction(objective="e2e", basis="model", expected_change=-0.1, error=-0.3),
        ],
    )
    assert TrialRecord.from_trial(trial).model_errors == (0.3,)
