"""When the calibrated model expects every configuration the spec allows to miss some target by
twice or more, the planner gives up at once, saying so with the best reachable figures and,
where the model expects one to do, a faster GPU (issue 12, item 6); anything the model cannot
rule out keeps the targets within reach and the planner trialling."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from tests.unit.core.builders import (
    H100,
    command_line,
    knobs,
    objectives,
    prefill_stalls,
    slow_decode,
)

from latency_tuner.api.spec import Knobs, Objectives
from latency_tuner.api.status import Verdict
from latency_tuner.core import reach
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import Change
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import Exhausted, TrialRecord, plan
from latency_tuner.vllm.args import VllmCommandLine

UNCHUNKED = command_line("--no-enable-chunked-prefill")
ONLY_SEQS = knobs(
    max_num_seqs={"min": 8, "max": 256},
    max_num_batched_tokens=None,
    prefix_caching=False,
    chunked_prefill=False,
    gpu_memory_utilization=None,
)
# Earlier trials whose forecasts the windows bore out (10-20 points off): a record.
PROVEN = [
    TrialRecord("maxNumSeqs", None, str(64 * (i + 1)), Verdict.REVERT, model_errors=(e,))
    for i, e in enumerate((0.1, 0.2))
]

STALLS = prefill_stalls()  # ITL p99 136 ms: each token behind a whole 6,000-token prefill


def _plan(
    goal: Objectives,
    spec: Knobs = ONLY_SEQS,
    window: Observation = STALLS,
    cl: VllmCommandLine = UNCHUNKED,
    hardware: HardwareInfo = H100,
    history: Sequence[TrialRecord] = PROVEN,
) -> Change | Exhausted:
    """The plan for ``window``; by default with a record of the model on the target."""
    d = diagnose(window, goal, cl, hardware, spec)
    return plan(d, window, cl, spec, hardware, history)


def test_a_stall_no_allowed_knob_can_shorten_is_unreachable_at_the_best_reachable_figures() -> None:
    # More sequences or fewer, a token still waits on a whole prefill: ~140 ms against 30 ms.
    outcome = _plan(objectives(itl="30ms", percentile=99))
    assert isinstance(outcome, Exhausted)
    assert outcome.unreachable
    assert outcome.reason.startswith(
        "the calibrated model expects none of the 7 configurations the spec allows"
    )
    assert "at best ITL p99 ~" in outcome.reason
    assert "(target 30ms)" in outcome.reason
    assert any("separate deployment" in a for a in outcome.advice)


def test_the_same_stall_is_within_reach_once_chunked_prefill_is_allowed() -> None:
    spec = knobs(
        max_num_seqs={"min": 8, "max": 256},
        max_num_batched_tokens={"min": 256, "max": 8192},
        prefix_caching=False,
        chunked_prefill=True,
        gpu_memory_utilization=None,
    )
    outcome = _plan(objectives(itl="30ms", percentile=99), spec)
    assert isinstance(outcome, Change)


def test_a_configuration_the_model_cannot_build_keeps_the_targets_within_reach() -> None:
    # A speculative method the performance model does not know: a newer vLLM may serve it,
    # and what it would do to the stall nobody here can say.
    spec = ONLY_SEQS.model_copy(update={"speculative_decoding": knobs(
        speculative_decoding={"configs": [{"method": "brand-new", "num_speculative_tokens": 3}]}
    ).speculative_decoding})  # fmt: skip
    without = _plan(objectives(itl="30ms", percentile=99))
    assert isinstance(without, Exhausted)
    assert without.unreachable
    outcome = _plan(objectives(itl="30ms", percentile=99), spec)
    assert not (isinstance(outcome, Exhausted) and outcome.unreachable)


def test_a_miss_of_less_than_twice_the_target_is_never_called_unreachable() -> None:
    # 136 ms against 80 ms: a model off by 50% could be wrong about every configuration.
    outcome = _plan(objectives(itl="80ms", percentile=99))
    assert not (isinstance(outcome, Exhausted) and outcome.unreachable)


def test_a_model_that_erred_on_this_target_calls_nothing_unreachable() -> None:
    erred = [
        TrialRecord("maxNumSeqs", None, str(64 * (i + 1)), Verdict.REVERT, model_errors=(e,))
        for i, e in enumerate((0.6, 0.7))
    ]
    outcome = _plan(objectives(itl="30ms", percentile=99), history=erred)
    assert not (isinstance(outcome, Exhausted) and outcome.unreachable)


def test_a_configuration_the_model_cannot_forecast_keeps_the_targets_within_reach() -> None:
    # TTFT 4.5 times its target with no prefix cache. Which share of the prompts one would
    # find is unknown until it is on: the model cannot rule that configuration out.
    goal = objectives(ttft="100ms", percentile=90)
    uncached = command_line("--no-enable-chunked-prefill", "--no-enable-prefix-caching")
    without = _plan(goal, cl=uncached)
    assert isinstance(without, Exhausted)
    assert without.unreachable
    outcome = _plan(goal, ONLY_SEQS.model_copy(update={"prefix_caching": True}), cl=uncached)
    assert not (isinstance(outcome, Exhausted) and outcome.unreachable)


L40S = HardwareInfo.from_labels("NVIDIA-L40S")
# Llama 3.1 8B decoding at ~22 ms a token on an L40S, as the model expects of it.
DECODE = slow_decode(
    itl={50: 0.022, 90: 0.024, 99: 0.026},
    itl_mean=0.022,
    ttft={50: 0.1, 90: 0.15, 99: 0.2},
    ttft_mean=0.1,
    queue_time_mean=0.005,
    prefill_time_mean=0.08,
    generation_tokens_mean=200.0,
    prompt_tokens_mean=1000.0,
)


def test_the_least_faster_gpu_the_model_expects_to_meet_the_targets_is_advised() -> None:
    # An H100 decodes in ~6 ms, which vLLM's ITL histogram (first bucket 0-10 ms) reads as a
    # p90 of ~9.2 ms: within the advice's margin of 12 ms (0.77), not of 11 ms (0.83).
    outcome = _plan(objectives(itl="12ms", percentile=90), window=DECODE, cl=command_line(),
                    hardware=L40S)  # fmt: skip
    assert isinstance(outcome, Exhausted)
    assert outcome.unreachable
    assert outcome.advice[0].startswith("on H100-SXM GPUs the model expects ITL p90 ~")
    assert "(target 12ms)" in outcome.advice[0]


def test_before_the_model_has_a_record_on_the_target_nothing_is_unreachable() -> None:
    # A first window says nothing of how far this server's knob effects stray from the
    # published ranges the model is built on: the planner trials first.
    outcome = _plan(objectives(itl="30ms", percentile=99), history=())
    assert not (isinstance(outcome, Exhausted) and outcome.unreachable)


def test_a_tail_the_models_steps_do_not_make_is_never_called_unreachable() -> None:
    # ITL p99 at 1.5 s where the model's longest steps are under 0.9 s (without chunking the
    # budget is max-model-len, and up to five 6,000-token prompts that arrive together share a
    # step, the longest in 0.07% of prefilling steps): something it does not describe
    # (preemptions, a noisy neighbour) sets the tail.
    odd = prefill_stalls(itl={50: 0.008, 90: 0.012, 99: 1.5})
    outcome = _plan(objectives(itl="30ms", percentile=99), window=odd)
    assert not (isinstance(outcome, Exhausted) and outcome.unreachable)


def test_kv_cache_pressure_is_never_called_unreachable() -> None:
    # Preemptions recompute prefills and stall decodes; the model has none of that in it, so
    # what a configuration with more KV room would save is beyond what it can rule out.
    pressured = prefill_stalls(preemptions=60.0, kv_cache_usage_mean=0.97, kv_cache_usage_max=1.0)
    outcome = _plan(objectives(itl="30ms", percentile=99), window=pressured)
    assert not (isinstance(outcome, Exhausted) and outcome.unreachable)


def test_a_prefix_cache_turned_on_may_shorten_the_stalls_as_well() -> None:
    # With the prefix cache allowed (and off), how much of each 6,000-token prefill it would
    # skip is unknown: ITL p99 may drop with it, so the stall is not called unreachable.
    uncached = command_line("--no-enable-chunked-prefill", "--no-enable-prefix-caching")
    goal = objectives(itl="30ms", percentile=99)
    without = _plan(goal, cl=uncached)
    assert isinstance(without, Exhausted)
    assert without.unreachable
    outcome = _plan(goal, ONLY_SEQS.model_copy(update={"prefix_caching": True}), cl=uncached)
    assert not (isinstance(outcome, Exhausted) and outcome.unreachable)


def test_no_gpu_is_advised_where_the_model_expects_none_to_meet_with_a_margin() -> None:
    # 2 ms a token is beyond even a B200 for an 8B model's weights.
    outcome = _plan(objectives(itl="2ms", percentile=90), window=DECODE, cl=command_line(),
                    hardware=L40S)  # fmt: skip
    assert isinstance(outcome, Exhausted)
    assert outcome.unreachable
    assert not any(a.startswith("on ") for a in outcome.advice)


def test_a_space_beyond_the_forecast_budget_is_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    # The decision runs on the operator's loop: past MAX_FORECASTS configurations the model
    # calls nothing unreachable, and the planner trials as it would without it.
    monkeypatch.setattr(reach, "MAX_FORECASTS", 6)  # the space has 7
    outcome = _plan(objectives(itl="30ms", percentile=99))
    assert not (isinstance(outcome, Exhausted) and outcome.unreachable)


def test_time_to_first_token_beyond_the_queue_and_prefill_is_never_a_floor() -> None:
    # TTFT p90 3 s of which the queue-time histogram shows 20 ms and the prefill 340 ms: the
    # rest is a queue the histogram lags behind, or serving overhead; either way not the
    # engine's, so the model does not rule out a configuration by it.
    lagging = prefill_stalls(ttft={50: 2.5, 90: 3.0, 99: 3.5}, ttft_mean=2.9)
    outcome = _plan(objectives(ttft="400ms", percentile=90), window=lagging)
    assert not (isinstance(outcome, Exhausted) and outcome.unreachable)
