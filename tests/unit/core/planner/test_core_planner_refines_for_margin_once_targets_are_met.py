"""Once the targets are met, the planner still tries the change the calibrated model expects
to buy a clearly larger margin (safe, or lossy where a lossy change is already in effect;
``planner.refine``), and stops refining once one was not kept."""

from __future__ import annotations

from tests.unit.core.builders import (
    A100,
    H100,
    command_line,
    healthy,
    knobs,
    objectives,
    prefill_stalls,
    queueing,
    slow_decode,
    window_of,
    with_spread,
)

from latency_tuner.api.spec import Knobs, Objective, Objectives
from latency_tuner.api.status import Verdict
from latency_tuner.core import model
from latency_tuner.core.diagnosis import margins
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import TrialRecord, refine
from latency_tuner.core.score import score
from latency_tuner.core.verdict import chance_change, chance_noise
from latency_tuner.vllm.args import VllmCommandLine

NO_CHUNKS = command_line("--max-model-len", "8192", "--no-enable-chunked-prefill")


def refined(
    threshold: str = "150ms",
    history: list[TrialRecord] | None = None,
    spec: Knobs | None = None,
    window: Observation | None = None,
) -> Change | None:
    return refine(
        window or prefill_stalls(),
        objectives(itl=threshold, percentile=99),
        NO_CHUNKS,
        spec or knobs(),
        H100,
        history or [],
    )


def test_a_met_target_is_refined_when_the_model_expects_a_much_larger_margin() -> None:
    # ITL p99 136 ms meets 150 ms (0.91 of it); chunked prefill with a 2,048-token budget
    # is expected to take it to about half the target.
    change = refined()
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.CHUNKED_PREFILL, "true")
    assert change.reason.startswith("targets met; for margin, the calibrated model expects the")
    assert "0.91 -> 0.48" in change.reason


def test_refining_stops_for_good_once_a_refinement_was_not_kept() -> None:
    window = prefill_stalls()
    tried = TrialRecord(
        KnobName.MAX_NUM_SEQS.value, None, "512", Verdict.REVERT, window.load, refinement=True
    )
    assert refined(history=[tried]) is None
    kept = TrialRecord(
        KnobName.MAX_NUM_SEQS.value, None, "512", Verdict.KEEP, window.load, refinement=True
    )
    assert isinstance(refined(history=[kept]), Change)


def test_a_change_already_judged_under_this_load_is_not_tried_for_margin() -> None:
    window = prefill_stalls()
    judged = TrialRecord(
        KnobName.CHUNKED_PREFILL.value, "false", "true", Verdict.REVERT, window.load
    )
    change = refined(history=[judged])
    assert change is None or change.knob is not KnobName.CHUNKED_PREFILL


def test_a_missed_target_is_not_refined_but_planned() -> None:
    assert refined("100ms") is None


def test_no_lossy_or_costly_change_is_tried_for_margin_on_a_safe_deployment() -> None:
    # Decode-bound at two requests, ITL p90 8 ms against 10 ms: FP8 weights (lossy) are
    # expected to take it to about half the target, TP2 (costly) nearly as far; margin alone
    # is not worth their price, and no safe knob is allowed.
    spec = knobs(
        max_num_seqs=None,
        max_num_batched_tokens=None,
        gpu_memory_utilization=None,
        quantization={
            "variants": [{"name": "fp8", "model": "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8"}]
        },
        tensor_parallel={"maxSize": 4},
    )
    window = slow_decode(
        itl={50: 0.0075, 90: 0.008, 99: 0.009}, itl_mean=0.0075, decode_time_mean=1.5,
        prefill_time_mean=0.012, ttft_mean=0.032, queue_time_mean=0.0,
    )  # fmt: skip
    assert refine(window, objectives(itl="10ms"), command_line(), spec, H100) is None


FP8_WEIGHTS = {"variants": [{"name": "fp8", "model": "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8"}]}


def _interference_refined(history: list[TrialRecord], config: VllmCommandLine) -> Change | None:
    # The prefill-stall window (ITL p99 136 ms against 150 ms) with chunked prefill and the
    # batch budget not allowed: FP8 weights (lossy) are what the model expects to help, 0.91
    # -> 0.69 of the target.
    spec = knobs(
        quantization=FP8_WEIGHTS, kv_cache_dtype=["fp8"], tensor_parallel={"maxSize": 4},
        chunked_prefill=False, max_num_batched_tokens=None,
    )  # fmt: skip
    return refine(
        prefill_stalls(), objectives(itl="150ms", percentile=99), config, spec, H100, history
    )


def test_a_lossy_change_is_weighed_for_margin_while_a_kept_lossy_change_is_in_effect() -> None:
    # The user's quality gate already judges lossy changes on this deployment: another is a
    # margin of the same kind of cost. Never TP (more GPUs), though the model rates it too.
    load = prefill_stalls().load
    kept = TrialRecord(KnobName.KV_CACHE_DTYPE.value, None, "fp8", Verdict.KEEP, load)
    fp8_kv = command_line("--max-model-len", "8192", "--no-enable-chunked-prefill",
                          "--kv-cache-dtype", "fp8")  # fmt: skip
    change = _interference_refined([kept], fp8_kv)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.QUANTIZATION, "fp8")
    assert "0.91 -> 0.67" in change.reason
    # Not without one, nor once the kept one was moved back.
    assert _interference_refined([], NO_CHUNKS) is None
    back = TrialRecord(KnobName.KV_CACHE_DTYPE.value, "fp8", None, Verdict.KEEP, load)
    assert _interference_refined([kept, back], NO_CHUNKS) is None
    # A hostile status naming a knob that does not exist is no evidence of one.
    forged = TrialRecord("kvCacheDtypes", None, "fp8", Verdict.KEEP, load)
    assert _interference_refined([forged], NO_CHUNKS) is None


def test_for_margin_every_stage_bounding_the_objective_is_weighed_not_only_the_diagnosed_one() -> (
    None
):
    # FP8 weights running, 12,000-token contexts, 24 requests decoding, ITL p90 twice its mean,
    # 3,000 requests (a window that tells a 3% change from chance): the window reads as
    # prefill interference, whose knobs are not allowed. FP8 KV halves the decode steps' KV
    # reads (a decode-bandwidth knob): the model expects ITL p90 0.71 -> 0.66 of the target
    # even where vLLM's bucket edges fall the unlucky way among the steps (0.59 on average).
    cl = command_line("--max-model-len", "16384", "--max-num-batched-tokens", "2048",
                      "--quantization", "fp8")  # fmt: skip
    running = model.engine_config(cl, None, H100)
    assert running is not None
    mean = window_of(running, prompt=12000, running=24)
    assert mean.itl_mean is not None
    window = with_spread(
        mean, itl={50: mean.itl_mean, 90: mean.itl_mean * 2, 99: mean.itl_mean * 2.6}
    ).model_copy(update={"requests": 3000})
    goal = objectives(itl=f"{mean.itl_mean * 2.8 * 1000:.1f}ms", percentile=90)
    [cause] = margins(window, goal, cl, H100)
    assert cause.bottleneck is Bottleneck.PREFILL_INTERFERENCE
    kept = TrialRecord(KnobName.QUANTIZATION.value, None, "fp8", Verdict.KEEP, window.load)
    spec = knobs(kv_cache_dtype=["fp8"], chunked_prefill=False, max_num_batched_tokens=None)
    change = refine(window, goal, cl, spec, H100, [kept])
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.KV_CACHE_DTYPE, "fp8")
    assert "0.71 -> 0.66" in change.reason


def _a_short_queue_on_a_busy_engine(requests: int) -> Observation:
    # 0.08 s of a 0.16 s mean TTFT spent queueing (1.6 waiting at 20 a second, as Little's law
    # has it), on an engine near its capacity: more max-num-seqs (larger batches) is expected
    # to take the sum of ratios from 0.85 to 0.78 (-8%).
    return queueing(
        prefill_time_mean=0.05, itl_mean=0.045, itl={50: 0.044, 90: 0.05, 99: 0.06},
        ttft_mean=0.16, queue_time_mean=0.08, waiting_mean=1.6, requests=requests,
    )  # fmt: skip


def _refined_queue(requests: int, min_improvement: float = 0.0) -> Change | None:
    return refine(
        _a_short_queue_on_a_busy_engine(requests), objectives(ttft="1s"),
        command_line("--max-num-seqs", "256"), knobs(), A100, min_improvement=min_improvement,
    )  # fmt: skip


def test_a_small_expected_gain_is_tried_when_a_window_can_tell_it_from_chance() -> None:
    # 6,000 requests: two such windows differ by about 1% by sampling alone.
    change = _refined_queue(6000)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "512")
    assert "0.85 -> 0.78, beyond the -1% a trial needs to tell it from chance" in change.reason


def test_no_refinement_when_the_expected_gain_is_within_the_windows_noise() -> None:
    # 60 requests: the TTFT p90 of two such windows differs by about 13% by chance, so the
    # verdict would revert the change even if the model were right.
    window = _a_short_queue_on_a_busy_engine(60)
    assert chance_change(score(window, objectives(ttft="1s")), window) > 0.1
    assert _refined_queue(60) is None


def _parts(*ttft_p90: float) -> list[Observation]:
    """Thirds of a 6,000-request window, each with its own TTFT p90."""
    window = _a_short_queue_on_a_busy_engine(2000)
    return [window.model_copy(update={"ttft": {**window.ttft, 90: p90}}) for p90 in ttft_p90]


def test_no_refinement_when_the_windows_own_parts_differ_by_more_than_the_expected_gain() -> None:
    # The -8% the model expects clears the -1% that 6,000 requests differ by when drawn from
    # one load; but the window's thirds read TTFT p90 0.6 .. 1.0 s (a bursty load: what the
    # verdict's A/A comparison would read too), so two such windows differ by about 20%.
    noisy = _parts(0.6, 0.85, 1.0)
    assert chance_noise(noisy, objectives(ttft="1s")) > 0.15
    window = _a_short_queue_on_a_busy_engine(6000)
    cl, spec = command_line("--max-num-seqs", "256"), knobs()
    assert refine(window, objectives(ttft="1s"), cl, spec, A100, subwindows=noisy) is None
    steady = _parts(0.84, 0.85, 0.86)
    change = refine(window, objectives(ttft="1s"), cl, spec, A100, subwindows=steady)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "512")


def test_no_refinement_below_the_specs_min_improvement() -> None:
    assert _refined_queue(6000, min_improvement=0.1) is None


def test_no_refinement_when_the_model_does_not_fit_the_window() -> None:
    # Prefill measured ten times slower than the model can explain: no forecast to act on.
    assert refined(window=prefill_stalls(prefill_time_mean=3.4, ttft_mean=3.45)) is None


def _forecasts_missed_by(*errors: float) -> list[TrialRecord]:
    load = prefill_stalls().load
    return [
        TrialRecord(KnobName.MAX_NUM_SEQS.value, None, str(64 * (i + 1)), Verdict.KEEP, load,
                    model_errors=(e,))
        for i, e in enumerate(errors)
    ]  # fmt: skip


def test_no_refining_on_the_word_of_a_model_that_erred_on_this_target() -> None:
    # ITL p99 188 ms against 250 ms, expected -61% with chunked prefill: more than the
    # 57.5-point median miss of the model's last forecasts here would ask, so refused because
    # that record is beyond MODEL_DISTRUST, not for the gain (20-point misses do not refuse).
    window = prefill_stalls(itl={50: 0.008, 90: 0.012, 99: 0.188})
    assert refined("250ms", history=_forecasts_missed_by(0.55, 0.6), window=window) is None
    trusted = refined("250ms", history=_forecasts_missed_by(0.2, 0.2), window=window)
    assert isinstance(trusted, Change)
    assert "0.75 -> 0.29" in trusted.reason


def test_a_refinement_must_be_expected_to_gain_more_than_the_models_recorded_error() -> None:
    # With TTFT p99 (0.6 s) also a target at 0.8 s, the sum of ratios is 1.66 and chunked
    # prefill is expected to bring it to 1.25 (-25%): enough after 20-point misses (the bar
    # is 20%), not after 45-point ones (the bar rises to 45%).
    both = Objectives(
        itl=Objective.model_validate({"percentile": 99, "threshold": "150ms"}),
        ttft=Objective.model_validate({"percentile": 99, "threshold": "0.8s"}),
    )
    window = prefill_stalls()
    close = refine(window, both, NO_CHUNKS, knobs(), H100, _forecasts_missed_by(0.2, 0.2))
    assert isinstance(close, Change)
    assert "1.66 -> 1.27" in close.reason
    assert refine(window, both, NO_CHUNKS, knobs(), H100, _forecasts_missed_by(0.45, 0.45)) is None


def test_the_prior_stands_in_for_the_ttft_a_prefix_cache_would_find() -> None:
    # Caching off, 6,000-token prompts, TTFT p90 450 ms against 600 ms: the model cannot know
    # what share a cache would find, so the knob's prior (-40% for long prompts) stands in
    # for TTFT, and says 0.75 -> 0.45 of the target.
    cl = command_line("--no-enable-prefix-caching", "--max-num-batched-tokens", "8192")
    change = refine(prefill_stalls(prefix_cache_hit_rate=None), objectives(ttft="600ms"), cl,
                    knobs(), H100)  # fmt: skip
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.PREFIX_CACHING, "true")
    assert "the knob's prior for TTFT p90" in change.reason
    assert "0.75 -> 0.45" in change.reason


def _chunked_mistral_at_2048() -> Observation:
    """A window measured by the harder suite's benchmark (Mistral 7B on an H100, chunked
    prefill with a 2,048-token budget): 2,680-token prompts at 6.4 a second, ITL p99 48 ms."""
    return healthy(
        window_seconds=15.0, requests=96, request_rate=6.4, prompt_tokens_mean=2679.0,
        generation_tokens_mean=158.0, running_mean=10.0, running_max=14.0, waiting_mean=0.25,
        ttft={50: 0.095, 90: 0.216, 99: 0.247}, ttft_mean=0.0986, queue_time_mean=0.0147,
        prefill_time_mean=0.0708, itl={50: 0.0057, 90: 0.0262, 99: 0.0476}, itl_mean=0.0121,
        e2e={50: 1.93, 90: 3.86, 99: 4.89}, decode_time_mean=1.843, prefix_cache_hit_rate=0.0,
        kv_capacity_tokens=477024, kv_cache_usage_mean=0.06,
    )  # fmt: skip


# That benchmark's objectives and command line.
MISTRAL_GOAL = Objectives(
    ttft=Objective.model_validate({"percentile": 90, "threshold": "800ms"}),
    itl=Objective.model_validate({"percentile": 99, "threshold": "75ms"}),
)
MISTRAL_AT_2048 = command_line(
    "--max-num-batched-tokens", "2048", model="mistralai/Mistral-7B-Instruct-v0.3"
)


def test_for_margin_a_farther_rung_is_weighed_when_the_next_one_would_barely_help() -> None:
    # That window with 1,500-token prompts, ITL p99 48 ms against 75 ms. At 1024 a prompt
    # still takes a step of about 1,000 tokens, in the same ITL bucket as its one step at
    # 2048: the model expects too little from it. At 512 it expects ITL p99 to fall by about
    # 40%: the refinement goes there in one move.

    def refined_within(low: int) -> Change | None:
        spec = knobs(max_num_batched_tokens={"min": low, "max": 16384})
        window = _chunked_mistral_at_2048().model_copy(update={"prompt_tokens_mean": 1500.0})
        return refine(window, MISTRAL_GOAL, MISTRAL_AT_2048, spec, H100)

    change = refined_within(512)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "512")
    assert "0.90 -> 0.67" in change.reason
    assert "past 1024: the calibrated model expects 512 to do better" in change.reason
    # With 1024 the lowest rung allowed, nothing is worth a rollout.
    assert refined_within(1024) is None


def test_a_refinement_does_not_count_on_the_bucket_edges_falling_the_lucky_way() -> None:
    # The benchmark's window itself (2,680-token prompts, ITL p99 48 ms against 75 ms). At
    # 1024 a prompt's full chunks take about 25 ms, on vLLM's 25 ms bucket edge: a little
    # under it the p99 would halve, a little over it stay where it is. The average of the two
    # clears the trial's bar; the unlucky side, which the simulator measured (+1%), does not.
    # 512 halves the tail on either side, and stays a refinement.
    window, cl = _chunked_mistral_at_2048(), MISTRAL_AT_2048
    running = model.engine_config(cl, None, H100)
    candidate = model.engine_config(cl.with_value("max-num-batched-tokens", "1024"), None, H100)
    assert running is not None
    assert candidate is not None
    calibration = model.calibrate(window, running, itl_percentile=99)
    assert calibration is not None
    forecast = model.forecast(calibration, running, candidate)
    assert forecast is not None
    assert forecast.itl is not None
    assert forecast.itl < -0.15  # on average

    def refined_within(low: int) -> Change | None:
        spec = knobs(max_num_batched_tokens={"min": low, "max": 16384})
        return refine(window, MISTRAL_GOAL, cl, spec, H100)

    assert refined_within(1024) is None
    change = refined_within(512)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "512")
