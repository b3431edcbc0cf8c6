"""Each bottleneck of DESIGN section 4, from hand-built windows, with its evidence, advice and
the first knob the planner would try."""

from __future__ import annotations

from tests.unit.core.builders import (
    A100,
    H100,
    L40S,
    command_line,
    healthy,
    interference,
    knobs,
    kv_pressure,
    long_prefill,
    objectives,
    queueing,
    slow_decode,
)

from latency_tuner.core.diagnosis import Diagnosis, diagnose
from latency_tuner.core.evidence import Bottleneck, Evidence
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import plan
from latency_tuner.vllm.args import VllmCommandLine

CL = command_line()


def first_change(
    window: Observation,
    d: Diagnosis,
    cl: VllmCommandLine = CL,
    hardware: HardwareInfo = H100,
    **knob_fields: object,
) -> Change:
    change = plan(d, window, cl, knobs(**knob_fields), hardware)
    assert isinstance(change, Change), change
    return change


def texts(evidence: tuple[Evidence, ...]) -> list[str]:
    return [e.text for e in evidence]


def test_targets_met_has_no_bottleneck_and_recommends_nothing() -> None:
    d = diagnose(healthy(), objectives(ttft="500ms", itl="50ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.NONE
    assert d.knobs == ()
    assert d.causes == ()
    assert d.advice == ()
    assert d.conclusions == ("targets met",)
    assert texts(d.evidence) == [
        "TTFT p90 200ms is within the target 500ms",
        "ITL p90 25ms is within the target 50ms",
    ]


def test_queue_time_dominating_ttft_at_max_num_seqs_is_queueing() -> None:
    window = queueing()
    d = diagnose(window, objectives(ttft="500ms"), CL, A100, knobs())
    assert d.bottleneck is Bottleneck.QUEUEING
    assert "queue time is 72% of TTFT (610ms of 850ms mean)" in texts(d.evidence)
    assert "running requests reach 256 per pod, at max-num-seqs 256" in texts(d.evidence)
    assert (
        d.advice[0] == "add replicas: the server is saturated at max-num-seqs (256 running per pod)"
    )
    assert d.knobs[0] is KnobName.MAX_NUM_SEQS
    change = first_change(window, d, hardware=A100)
    assert (change.knob, change.from_value, change.to_value) == (KnobName.MAX_NUM_SEQS, None, "512")
    assert change.from_effective == "256"
    assert "256 (vLLM default) -> 512" in change.reason


def test_queueing_below_max_num_seqs_raises_the_step_budget_and_advises_replicas() -> None:
    window = queueing(running_mean=40.0, running_max=60.0, kv_cache_usage_max=0.95)
    d = diagnose(window, objectives(ttft="500ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.QUEUEING
    assert KnobName.MAX_NUM_SEQS not in d.knobs
    assert "KV cache peaks at 95%" in texts(d.evidence)
    assert d.advice == ("add replicas: 12.0 requests wait per pod on average",)
    change = first_change(window, d)
    assert change.knob in (KnobName.MAX_NUM_BATCHED_TOKENS, KnobName.GPU_MEMORY_UTILIZATION)


def test_without_a_queue_time_metric_waiting_requests_mean_queueing() -> None:
    window = queueing(queue_time_mean=None, prefill_time_mean=None, ttft_mean=None)
    d = diagnose(window, objectives(ttft="500ms"), CL, A100, knobs())
    assert d.bottleneck is Bottleneck.QUEUEING


def test_queueing_with_no_waiting_gauge_still_advises_replicas() -> None:
    window = queueing(waiting_mean=None, running_max=None)
    d = diagnose(window, objectives(ttft="500ms"), CL, A100, knobs())
    assert d.bottleneck is Bottleneck.QUEUEING
    assert d.advice == ("add replicas: requests spend most of their TTFT in the queue",)


def test_prefill_dominating_ttft_with_long_prompts_is_long_prefill() -> None:
    window = long_prefill()
    cl = command_line("--no-enable-prefix-caching")
    d = diagnose(window, objectives(ttft="500ms"), cl, H100, knobs())
    assert d.bottleneck is Bottleneck.LONG_PREFILL
    assert "prefill is 92% of TTFT (780ms of 850ms mean)" in texts(d.evidence)
    assert "mean prompt 6100 tokens (long)" in texts(d.evidence)
    assert (
        "trim prompts: mean prompt 6100 tokens, and prefill time grows with input length"
        in d.advice
    )
    change = first_change(window, d, cl)
    assert (change.knob, change.from_value, change.to_value) == (
        KnobName.PREFIX_CACHING,
        "false",
        "true",
    )


def test_long_prefill_with_prefix_caching_on_grows_the_step_budget() -> None:
    window = long_prefill(prefix_cache_hit_rate=0.05)
    d = diagnose(window, objectives(ttft="500ms"), CL, H100, knobs())
    assert "put the shared part of prompts first: prefix-cache hit rate is 5%" in d.advice
    change = first_change(window, d)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "16384")


def test_long_prefill_on_an_older_gpu_advises_more_compute() -> None:
    d = diagnose(long_prefill(), objectives(ttft="500ms"), CL, A100, knobs())
    assert "a GPU with more compute: prefill is compute-bound (A100-80G)" in d.advice


def test_short_prompts_without_queueing_are_still_prefill_but_not_long() -> None:
    window = long_prefill(prompt_tokens_mean=300.0)
    d = diagnose(window, objectives(ttft="500ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.LONG_PREFILL
    assert "mean prompt 300 tokens" in texts(d.evidence)
    assert not any(a.startswith("trim prompts") for a in d.advice)


def test_high_itl_at_low_concurrency_is_decode_bandwidth() -> None:
    window = slow_decode()
    spec = {"configs": [{"method": "eagle3", "model": "org/eagle", "num_speculative_tokens": 3}]}
    variants = {"variants": [{"name": "awq", "model": "org/model-AWQ"}]}
    d = diagnose(
        window,
        objectives(itl="40ms"),
        CL,
        L40S,
        knobs(quantization=variants, speculativeDecoding=spec),
    )
    assert d.bottleneck is Bottleneck.DECODE_BANDWIDTH
    assert texts(d.evidence)[1:] == [
        "ITL p50 60ms on L40S (0.864 TB/s)",
        "2.0 running requests per pod: decode is slow even at low concurrency, "
        "memory-bandwidth bound",
    ]
    low = d.evidence[-1]
    assert (low.value, low.threshold, low.comparison, low.unit) == (2.0, 8.0, "<=", "requests")
    assert d.advice[0].startswith("a higher-bandwidth GPU: B200 (8 TB/s), H200 (4.8 TB/s)")
    assert d.knobs == (KnobName.SPECULATIVE_DECODING, KnobName.QUANTIZATION)
    change = first_change(window, d, hardware=L40S, quantization=variants, speculativeDecoding=spec)
    assert change.knob is KnobName.SPECULATIVE_DECODING
    assert change.to_value == '{"method":"eagle3","model":"org/eagle","num_speculative_tokens":3}'


def test_decode_bandwidth_with_only_lossy_knobs_tries_the_quantized_variant() -> None:
    window = slow_decode()
    variants = {"variants": [{"name": "awq", "model": "org/model-AWQ"}]}
    d = diagnose(window, objectives(itl="40ms"), CL, H100, knobs(quantization=variants))
    change = first_change(window, d, quantization=variants)
    assert (change.knob, change.to_value, change.knob_class.value) == (
        KnobName.QUANTIZATION,
        "awq",
        "lossy",
    )
    assert change.from_value is None
    assert change.from_effective == "meta-llama/Llama-3.1-8B-Instruct"


def test_decode_bandwidth_on_an_unknown_gpu_advises_hbm() -> None:
    d = diagnose(slow_decode(), objectives(itl="40ms"), CL, HardwareInfo(), knobs())
    assert d.advice[0].startswith("a higher-bandwidth GPU (HBM3 or newer")


def test_decode_bandwidth_at_high_concurrency_says_so_without_blaming_low_concurrency() -> None:
    window = slow_decode(running_mean=64.0, running_max=80.0)
    d = diagnose(window, objectives(itl="40ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.DECODE_BANDWIDTH
    assert texts(d.evidence)[-1] == (
        "64.0 running requests per pod: large decode batches read weights and much KV cache "
        "every step"
    )
    assert d.evidence[-1].comparison == ">"


def test_decode_bandwidth_from_the_mean_when_the_median_is_missing() -> None:
    window = slow_decode(itl={90: 0.065})
    d = diagnose(window, objectives(itl="40ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.DECODE_BANDWIDTH
    assert any(e.signal == "itl_mean" for e in d.evidence)


def test_an_itl_tail_with_long_prompts_under_concurrency_is_prefill_interference() -> None:
    window = interference()
    d = diagnose(window, objectives(itl="50ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.PREFILL_INTERFERENCE
    assert "ITL p99 is 6.0x p50 (150ms vs 25ms): decode steps stall" in texts(d.evidence)
    change = first_change(window, d)
    # Sized in one move: 4000-token prompts, ITL p90 1.8x over -> chunks of <= 2222 tokens.
    assert (change.knob, change.from_value, change.to_value) == (
        KnobName.MAX_NUM_BATCHED_TOKENS,
        None,
        "2048",
    )
    assert "a budget sized from the prompt length and the ITL target" in change.reason


def test_prefill_interference_with_chunking_off_enables_chunked_prefill_first() -> None:
    window = interference()
    cl = command_line("--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192")
    d = diagnose(window, objectives(itl="50ms"), cl, H100, knobs())
    assert d.bottleneck is Bottleneck.PREFILL_INTERFERENCE
    # Without chunking vLLM needs the budget >= max-model-len: it is not lowered.
    assert d.knobs == (KnobName.CHUNKED_PREFILL,)
    change = first_change(window, d, cl)
    assert (change.knob, change.to_value) == (KnobName.CHUNKED_PREFILL, "true")


def test_a_high_itl_median_is_decode_bandwidth_even_with_a_tail_and_long_prompts() -> None:
    window = interference(itl={50: 0.06, 90: 0.2, 99: 0.4})
    d = diagnose(window, objectives(itl="50ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.DECODE_BANDWIDTH


def test_preemptions_are_kv_cache_pressure_for_ttft_and_itl() -> None:
    window = kv_pressure(itl={50: 0.02, 90: 0.08, 99: 0.3})
    d = diagnose(window, objectives(ttft="500ms", itl="50ms"), CL, H100, knobs())
    assert [c.bottleneck for c in d.causes] == [Bottleneck.KV_CACHE_PRESSURE] * 2
    assert "30 preemptions in 600 requests (5.0%): each one recomputes a prefill" in texts(
        d.evidence
    )
    assert d.advice == ("add replicas or use GPUs with more memory: the KV cache runs out",)
    change = first_change(window, d)
    assert (change.knob, change.to_value) == (KnobName.GPU_MEMORY_UTILIZATION, "0.95")


def test_a_saturated_kv_cache_with_requests_waiting_is_kv_pressure_without_preemptions() -> None:
    window = kv_pressure(preemptions=0.0, kv_cache_usage_mean=0.97, waiting_mean=5.0)
    d = diagnose(window, objectives(ttft="500ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.KV_CACHE_PRESSURE
    assert any(e.signal == "kv_cache_usage" for e in d.evidence)


def test_kv_pressure_at_the_memory_ceiling_lowers_max_num_seqs() -> None:
    window = kv_pressure()
    cl = command_line("--gpu-memory-utilization", "0.95")
    d = diagnose(window, objectives(ttft="500ms"), cl, H100, knobs())
    assert "gpuMemoryUtilization is at its ceiling (0.95)" in d.blocked
    change = first_change(window, d, cl)
    assert (change.knob, change.from_value, change.to_value) == (KnobName.MAX_NUM_SEQS, None, "512")


def test_e2e_dominated_by_decode_is_diagnosed_as_an_itl_problem() -> None:
    window = slow_decode(e2e={90: 14.0})
    d = diagnose(window, objectives(e2e="10s"), CL, H100, knobs())
    assert d.causes[0].objective == "e2e"
    assert d.bottleneck is Bottleneck.DECODE_BANDWIDTH
    assert any(e.signal == "decode_share_of_e2e" for e in d.evidence)


def test_e2e_dominated_by_ttft_is_diagnosed_as_a_ttft_problem() -> None:
    window = queueing(e2e={90: 14.0}, decode_time_mean=None, itl_mean=0.001)
    d = diagnose(window, objectives(e2e="10s"), CL, A100, knobs())
    assert d.bottleneck is Bottleneck.QUEUEING


def test_e2e_without_a_breakdown_falls_back_to_the_decode_side() -> None:
    window = slow_decode(e2e={90: 14.0}, ttft_mean=None)
    d = diagnose(window, objectives(e2e="10s"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.DECODE_BANDWIDTH


def test_the_most_violated_objective_names_the_bottleneck() -> None:
    window = interference(ttft={90: 0.55}, queue_time_mean=0.01, prefill_time_mean=0.5)
    d = diagnose(window, objectives(ttft="500ms", itl="50ms"), CL, H100, knobs())
    assert [c.bottleneck for c in d.causes] == [
        Bottleneck.PREFILL_INTERFERENCE,
        Bottleneck.LONG_PREFILL,
    ]
    assert d.bottleneck is Bottleneck.PREFILL_INTERFERENCE
    assert d.conclusions[0] == "ITL p90 is 80% over target: PrefillInterference"


def test_conflicting_pulls_on_batched_tokens_follow_the_more_violated_objective() -> None:
    # TTFT (prefill) wants a larger budget, ITL (interference) a smaller one.
    itl_worse = interference(ttft={90: 0.55}, queue_time_mean=0.01, prefill_time_mean=0.5)
    d = diagnose(itl_worse, objectives(ttft="500ms", itl="50ms"), CL, H100, knobs())
    change = first_change(itl_worse, d)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "2048")

    ttft_worse = interference(
        ttft={90: 1.5},
        itl={50: 0.025, 90: 0.055, 99: 0.15},
        queue_time_mean=0.01,
        prefill_time_mean=1.2,
    )
    d = diagnose(ttft_worse, objectives(ttft="500ms", itl="50ms"), CL, H100, knobs())
    change = first_change(ttft_worse, d)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "16384")


def test_long_prefill_without_a_prompt_length_metric_has_no_prompt_evidence() -> None:
    d = diagnose(long_prefill(prompt_tokens_mean=None), objectives(ttft="500ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.LONG_PREFILL
    assert not any(e.signal == "prompt_tokens_mean" for e in d.evidence)


def test_decode_bandwidth_without_any_itl_average_still_names_the_bottleneck() -> None:
    window = slow_decode(itl={90: 0.065}, itl_mean=None)
    d = diagnose(window, objectives(itl="40ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.DECODE_BANDWIDTH
    assert not any(e.signal.startswith("itl_") and e.signal != "itl_p90" for e in d.evidence)


def test_the_fastest_gpu_gets_no_faster_gpu_advice() -> None:
    b200 = HardwareInfo.from_labels("NVIDIA-B200")
    d = diagnose(slow_decode(), objectives(itl="40ms"), CL, b200, knobs())
    assert not any("higher-bandwidth" in a for a in d.advice)


def test_fp8_kv_needs_a_prompt_length_to_judge_the_context() -> None:
    window = slow_decode(prompt_tokens_mean=None)
    d = diagnose(window, objectives(itl="40ms"), CL, H100, knobs(kvCacheDtype=["fp8"]))
    assert KnobName.KV_CACHE_DTYPE not in d.knobs


def test_kv_pressure_with_gpu_memory_off_limits_says_so() -> None:
    d = diagnose(
        kv_pressure(), objectives(ttft="500ms"), CL, H100, knobs(gpuMemoryUtilization=None)
    )
    assert "gpuMemoryUtilization is off-limits (spec.knobs.gpuMemoryUtilization is null)" in (
        d.blocked
    )
    assert d.knobs == (KnobName.MAX_NUM_SEQS,)
