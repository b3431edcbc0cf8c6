"""Which knobs the planner may try: opt-in lists, bounds, the GPU, the interconnect, the load;
and in which order: safe before lossy before costly."""

from __future__ import annotations

from typing import Any

from tests.unit.core.builders import (
    A100,
    H100,
    L40S,
    command_line,
    interference,
    knobs,
    kv_pressure,
    long_prefill,
    objectives,
    queueing,
    slow_decode,
)

from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import Change, KnobClass, KnobName, apply
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import Exhausted, TrialRecord, plan
from latency_tuner.vllm.args import VllmCommandLine

ITL = objectives(itl="40ms")
TTFT = objectives(ttft="500ms")
EAGLE = {"configs": [{"method": "eagle3", "model": "org/eagle", "num_speculative_tokens": 3}]}
AWQ = {"variants": [{"name": "awq", "model": "org/model-AWQ"}]}
FP8_VARIANT = {"variants": [{"name": "fp8", "model": "org/model-FP8-dynamic"}]}
TP4 = {"maxSize": 4}


def candidates_for(
    window: Observation,
    hardware: HardwareInfo,
    cl: VllmCommandLine | None = None,
    goal: Any = ITL,
    **knob_fields: object,
) -> tuple[tuple[KnobName, ...], tuple[str, ...], Change | Exhausted]:
    cl = cl or command_line()
    spec = knobs(**knob_fields)
    d = diagnose(window, goal, cl, hardware, spec)
    return d.knobs, d.blocked, plan(d, window, cl, spec, hardware)


def test_opt_in_knobs_are_not_tried_unless_listed_and_the_advice_says_how() -> None:
    listed, blocked, result = candidates_for(slow_decode(), H100)
    assert listed == ()
    assert isinstance(result, Exhausted)
    assert result.reason == "no knob the spec allows can help with DecodeBandwidth"
    assert any("spec.knobs.quantization" in b for b in blocked)
    assert any("spec.knobs.speculativeDecoding" in b for b in blocked)
    assert any("spec.knobs.tensorParallel" in b for b in blocked)
    assert any(a.startswith("a higher-bandwidth GPU") for a in result.advice)


def test_a_safe_knob_set_to_false_or_null_is_left_alone() -> None:
    cl = command_line("--no-enable-prefix-caching")
    listed, blocked, _ = candidates_for(
        long_prefill(), H100, cl, TTFT, prefixCaching=False, maxNumBatchedTokens=None
    )
    assert KnobName.PREFIX_CACHING not in listed
    assert KnobName.MAX_NUM_BATCHED_TOKENS not in listed
    assert any("spec.knobs.prefixCaching forbids" in b for b in blocked)
    assert "maxNumBatchedTokens is off-limits (spec.knobs.maxNumBatchedTokens is null)" in blocked


def test_bounds_cap_the_ladder() -> None:
    cl = command_line("--max-num-batched-tokens", "8192")
    listed, blocked, _ = candidates_for(
        long_prefill(), H100, cl, TTFT, maxNumBatchedTokens={"min": 512, "max": 8192}
    )
    assert KnobName.MAX_NUM_BATCHED_TOKENS not in listed
    assert "maxNumBatchedTokens is at its upper bound (8192; bounds 512-8192)" in blocked


def test_fp8_kv_cache_is_never_proposed_on_an_a100() -> None:
    listed, blocked, _ = candidates_for(kv_pressure(), A100, goal=TTFT, kvCacheDtype=["fp8"])
    assert KnobName.KV_CACHE_DTYPE not in listed
    assert any(b.startswith("FP8 KV cache needs an Ada, Hopper or newer GPU") for b in blocked)


def test_fp8_kv_cache_is_proposed_on_an_h100_after_the_safe_knobs() -> None:
    listed, _, _ = candidates_for(kv_pressure(), H100, goal=TTFT, kvCacheDtype=["fp8"])
    assert listed == (
        KnobName.GPU_MEMORY_UTILIZATION,
        KnobName.MAX_NUM_SEQS,
        KnobName.KV_CACHE_DTYPE,
    )


def test_fp8_kv_cache_already_on_is_not_proposed_again() -> None:
    cl = command_line("--kv-cache-dtype", "fp8")
    listed, _, _ = candidates_for(kv_pressure(), H100, cl, TTFT, kvCacheDtype=["fp8"])
    assert KnobName.KV_CACHE_DTYPE not in listed


def test_fp8_kv_cache_helps_decode_only_with_long_contexts() -> None:
    short, _, _ = candidates_for(slow_decode(), H100, kvCacheDtype=["fp8"])
    assert KnobName.KV_CACHE_DTYPE not in short
    long, _, result = candidates_for(
        slow_decode(prompt_tokens_mean=12000.0), H100, kvCacheDtype=["fp8"]
    )
    assert long == (KnobName.KV_CACHE_DTYPE,)
    assert isinstance(result, Change)
    assert result.expected_gain == 0.27 / 2  # two requests running: half the batch-32 effect
    _busy, _, result = candidates_for(
        slow_decode(prompt_tokens_mean=40000.0, running_mean=6.0), H100, kvCacheDtype=["fp8"]
    )
    assert isinstance(result, Change)
    assert result.expected_gain == 0.4


def test_fp8_weight_variants_are_skipped_on_an_a100_but_int4_is_not() -> None:
    variants = {"variants": [*FP8_VARIANT["variants"], *AWQ["variants"]]}
    _, _, result = candidates_for(slow_decode(), A100, quantization=variants)
    assert isinstance(result, Change)
    assert result.to_value == "awq"
    _, blocked, result = candidates_for(slow_decode(), A100, quantization=FP8_VARIANT)
    assert isinstance(result, Exhausted)
    assert any("variant 'fp8' needs FP8" in b for b in blocked)


def test_quantization_ranks_variants_by_expected_gain_for_the_load() -> None:
    variants = {
        "variants": [
            *FP8_VARIANT["variants"],
            *AWQ["variants"],
            {"name": "w8", "model": "org/model-w8a16"},
            {"name": "mystery", "model": "org/other"},
        ]
    }
    _, _, result = candidates_for(slow_decode(), H100, quantization=variants)
    assert isinstance(result, Change)
    assert (result.to_value, result.expected_gain) == ("awq", 0.5)
    # At batch 100 INT4's edge is gone: it ties with INT8 and the user's order decides.
    _, _, busy = candidates_for(slow_decode(running_mean=100.0), H100, quantization=variants)
    assert isinstance(busy, Change)
    assert (busy.to_value, busy.expected_gain) == ("awq", 0.2)
    reordered = {"variants": variants["variants"][2:] + variants["variants"][:2]}
    _, _, busy = candidates_for(slow_decode(running_mean=100.0), H100, quantization=reordered)
    assert isinstance(busy, Change)
    assert (busy.to_value, busy.expected_gain) == ("w8", 0.2)


def test_fp8_weights_help_a_long_prefill_int4_does_not() -> None:
    listed, _, _ = candidates_for(long_prefill(), H100, goal=TTFT, quantization=AWQ)
    assert KnobName.QUANTIZATION not in listed
    listed, _, _ = candidates_for(long_prefill(), H100, goal=TTFT, quantization=FP8_VARIANT)
    assert KnobName.QUANTIZATION in listed


def test_a_variant_already_served_is_not_proposed_again() -> None:
    cl = command_line(model="org/model-AWQ")
    listed, _, _ = candidates_for(slow_decode(), H100, cl, quantization=AWQ)
    assert KnobName.QUANTIZATION not in listed
    args_variant = {
        "variants": [{"name": "online", "args": ["--quantization", "fp8", "--dtype", "half"]}]
    }
    cl = command_line("--quantization", "fp8", "--dtype", "half")
    listed, _, _ = candidates_for(slow_decode(), H100, cl, quantization=args_variant)
    assert KnobName.QUANTIZATION not in listed


def test_speculative_decoding_only_at_low_concurrency() -> None:
    listed, _, result = candidates_for(slow_decode(), H100, speculativeDecoding=EAGLE)
    assert listed == (KnobName.SPECULATIVE_DECODING,)
    assert isinstance(result, Change)
    assert round(result.expected_gain, 2) == 0.47  # ~1.87x at two running requests
    busy = slow_decode(running_mean=12.0, running_max=20.0)
    listed, blocked, _ = candidates_for(busy, H100, speculativeDecoding=EAGLE)
    assert listed == ()
    assert (
        "speculative decoding is tried only at <= 4 running requests per pod; observed 12.0"
        in blocked
    )


def test_speculative_concurrency_is_per_pod() -> None:
    # 12 running over 4 pods is 3 per pod: low enough.
    window = slow_decode(running_mean=12.0, running_max=16.0, pods=4)
    listed, _, _ = candidates_for(window, H100, speculativeDecoding=EAGLE)
    assert listed == (KnobName.SPECULATIVE_DECODING,)


def test_speculative_gains_shrink_with_concurrency_and_for_ngram() -> None:
    spec = {
        "configs": [{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}],
        "maxConcurrency": 32,
    }
    gains = []
    for running in (0.5, 3.0, 10.0, 30.0):
        _, _, result = candidates_for(
            slow_decode(running_mean=running), H100, speculativeDecoding=spec
        )
        assert isinstance(result, Change)
        gains.append(result.expected_gain)
    assert gains == sorted(gains, reverse=True)
    assert gains[0] < 0.5 * 1.1  # half the EAGLE speedup for prompt lookup


def test_speculative_decoding_needs_the_running_gauge_and_is_not_stacked() -> None:
    _, blocked, _ = candidates_for(slow_decode(running_mean=None), H100, speculativeDecoding=EAGLE)
    assert "speculative decoding needs the running-requests metric to check concurrency" in blocked
    cl = command_line("--speculative-config", '{"method":"ngram"}')
    listed, _, _ = candidates_for(slow_decode(), H100, cl, speculativeDecoding=EAGLE)
    assert listed == ()


def test_tensor_parallelism_needs_nvlink_unless_forced() -> None:
    listed, blocked, _ = candidates_for(slow_decode(), L40S, tensorParallel=TP4)
    assert KnobName.TENSOR_PARALLEL not in listed
    assert blocked[-1].startswith("tensor parallelism needs NVLink (interconnect: PCIe)")
    unknown = HardwareInfo()
    _, blocked, _ = candidates_for(slow_decode(), unknown, tensorParallel=TP4)
    assert any("interconnect: unknown" in b for b in blocked)
    _, _, forced = candidates_for(slow_decode(), L40S, tensorParallel={**TP4, "force": True})
    assert isinstance(forced, Change)
    assert (forced.knob, forced.to_value, forced.knob_class) == (
        KnobName.TENSOR_PARALLEL,
        "2",
        KnobClass.COSTLY,
    )
    assert forced.expected_gain < 0.35 * 0.5  # PCIe keeps a fraction of the NVLink gain


def test_tensor_parallelism_on_nvlink_steps_up_to_max_size_and_the_node() -> None:
    _, _, change = candidates_for(slow_decode(), H100, tensorParallel=TP4)
    assert isinstance(change, Change)
    assert (change.from_value, change.to_value, change.from_effective) == (None, "2", "1")
    cl = command_line("-tp", "4")
    _, blocked, _ = candidates_for(slow_decode(), H100, cl, tensorParallel=TP4)
    assert "tensor parallelism is at its limit (4 GPUs)" in blocked
    two_gpu_node = HardwareInfo("H100-SXM", "NVLink", 2)
    cl = command_line("-tp", "2")
    _, blocked, _ = candidates_for(slow_decode(), two_gpu_node, cl, tensorParallel={"maxSize": 8})
    assert "tensor parallelism is at its limit (2 GPUs)" in blocked


def test_safe_before_lossy_before_costly() -> None:
    listed, _, _ = candidates_for(
        kv_pressure(), H100, goal=TTFT, kvCacheDtype=["fp8"], tensorParallel=TP4
    )
    assert listed == (
        KnobName.GPU_MEMORY_UTILIZATION,
        KnobName.MAX_NUM_SEQS,
        KnobName.KV_CACHE_DTYPE,
        KnobName.TENSOR_PARALLEL,
    )


def test_the_trial_budget_of_a_long_prefill_ends_in_advice() -> None:
    cl = command_line("--max-num-batched-tokens", "16384")
    window = long_prefill()
    spec = knobs(tensorParallel=TP4)
    d = diagnose(window, TTFT, cl, L40S, spec)
    result = plan(d, window, cl, spec, L40S, [TrialRecord("x", None, None, None)])
    assert isinstance(result, Exhausted)
    assert "trim prompts: mean prompt 6100 tokens, and prefill time grows with input length" in (
        result.advice
    )
    assert any(a.startswith("enable NVLink") for a in result.advice)
    assert any(a.startswith("tensor parallelism needs NVLink") for a in result.advice)


def test_the_served_variant_is_recognised_among_several() -> None:
    variants = {"variants": [*FP8_VARIANT["variants"], *AWQ["variants"]]}
    cl = command_line(model="org/model-AWQ")
    listed, _, _ = candidates_for(slow_decode(), H100, cl, quantization=variants)
    assert KnobName.QUANTIZATION not in listed


def test_a_cause_without_a_bottleneck_pulls_no_knob() -> None:
    from latency_tuner.core import candidates
    from latency_tuner.core.config_view import view
    from latency_tuner.core.evidence import Bottleneck, Cause

    cl = command_line()
    ranking = candidates.rank(
        (Cause("ttft", Bottleneck.NONE, 1.5, 90),),
        (),
        cl=cl,
        view=view(cl, H100),
        knobs=knobs(),
        hardware=H100,
        observation=slow_decode(),
    )
    assert ranking == candidates.Ranking((), ())


def test_an_args_only_variant_not_yet_served_is_proposed() -> None:
    online = {"variants": [{"name": "online-fp8", "args": ["--quantization", "fp8"]}]}
    _, _, change = candidates_for(slow_decode(), H100, quantization=online)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.QUANTIZATION, "online-fp8")


def test_max_num_seqs_never_rises_above_the_step_budget() -> None:

    cl = command_line("--max-num-batched-tokens", "512", "--max-num-seqs", "512")
    window = queueing(running_mean=500.0, running_max=512.0)
    listed, blocked, _ = candidates_for(window, H100, cl, TTFT)
    assert KnobName.MAX_NUM_SEQS not in listed
    assert "maxNumSeqs 1024 would exceed max-num-batched-tokens (512)" in blocked


def test_the_step_budget_never_falls_below_a_written_max_num_seqs() -> None:

    written = command_line("--max-num-seqs", "8192")
    _, blocked, change = candidates_for(interference(), H100, written, objectives(itl="50ms"))
    assert "maxNumBatchedTokens 4096 would fall below max-num-seqs (8192)" in blocked
    # Only the other way is left (fewer, larger chunks).
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "16384")
    # An unwritten max-num-seqs follows the budget down on its own.
    listed, _, _ = candidates_for(interference(), H100, command_line(), objectives(itl="50ms"))
    assert KnobName.MAX_NUM_BATCHED_TOKENS in listed


def test_chunked_prefill_against_interference_comes_with_a_small_chunk_budget() -> None:
    cl = command_line("--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192")
    _, _, change = candidates_for(interference(), H100, cl)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.CHUNKED_PREFILL, "true")
    assert change.companions == (("max-num-batched-tokens", "2048"),)
    assert change.describe().endswith("-> true with --max-num-batched-tokens=2048")
    applied = apply(change, cl)
    assert applied.command_line.flag_enabled("enable-chunked-prefill") is True
    assert applied.command_line.get("max-num-batched-tokens") == "2048"


def test_the_chunk_budget_stays_within_the_allowed_bounds() -> None:
    cl = command_line("--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192")
    _, _, change = candidates_for(
        interference(), H100, cl, maxNumBatchedTokens={"min": 4096, "max": 16384}
    )
    assert isinstance(change, Change)
    assert change.companions == (("max-num-batched-tokens", "4096"),)


def test_no_chunk_budget_is_set_when_the_batched_tokens_knob_is_off_limits() -> None:
    cl = command_line("--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192")
    _, _, change = candidates_for(interference(), H100, cl, maxNumBatchedTokens=None)
    assert isinstance(change, Change)
    assert change.knob is KnobName.CHUNKED_PREFILL
    assert change.companions == ()
