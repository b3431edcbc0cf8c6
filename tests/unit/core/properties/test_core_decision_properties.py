"""Properties over many generated windows and specs: the score is a proper distance to the
targets, and the planner never proposes a value out of bounds or one that failed before."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.core.builders import command_line, healthy, knobs, objectives

from latency_tuner.api.spec import Knobs
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import BATCHED_TOKENS_LADDER, MAX_NUM_SEQS_LADDER, Change, KnobName
from latency_tuner.core.planner import Exhausted, plan
from latency_tuner.core.score import score

seconds = st.floats(min_value=0.001, max_value=20.0, allow_nan=False)
thresholds_ms = st.integers(min_value=1, max_value=10_000)


@given(ttft=seconds, itl=seconds, ttft_ms=thresholds_ms, itl_ms=thresholds_ms)
def test_the_score_is_never_negative_and_zero_exactly_when_every_target_is_met(
    ttft: float, itl: float, ttft_ms: int, itl_ms: int
) -> None:
    window = healthy(ttft={90: ttft}, itl={90: itl})
    s = score(window, objectives(ttft=f"{ttft_ms}ms", itl=f"{itl_ms}ms"))
    assert s.value is not None
    assert s.value >= 0
    met = ttft <= ttft_ms / 1000 and itl <= itl_ms / 1000
    assert (s.value == 0) == met
    assert s.met is met


HARDWARE = [
    HardwareInfo("H100-SXM", None, 8),
    HardwareInfo("A100-80G", None, 8),
    HardwareInfo("L40S", None, 4),
    HardwareInfo(),
]


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    window = healthy(
        ttft={50: draw(seconds), 90: draw(seconds), 99: draw(seconds)},
        itl={50: draw(seconds) / 10, 90: draw(seconds) / 10, 99: draw(seconds) / 5},
        ttft_mean=draw(st.none() | seconds),
        queue_time_mean=draw(st.none() | seconds),
        prefill_time_mean=draw(st.none() | seconds),
        prompt_tokens_mean=draw(st.floats(10, 50_000)),
        running_mean=draw(st.floats(0, 2000)),
        running_max=draw(st.floats(0, 2000)),
        waiting_mean=draw(st.floats(0, 50)),
        kv_cache_usage_mean=draw(st.floats(0, 1)),
        kv_cache_usage_max=draw(st.floats(0, 1)),
        preemptions=draw(st.floats(0, 100)),
    )
    low_b = draw(st.sampled_from([256, 512, 1024, 2048]))
    high_b = draw(st.sampled_from([low_b, 4096, 8192, 16384, 32768]))
    low_s = draw(st.sampled_from([1, 16, 64, 128]))
    high_s = draw(st.sampled_from([low_s, 256, 512, 1024, 4096]))
    spec = knobs(
        maxNumBatchedTokens={"min": low_b, "max": max(low_b, high_b)},
        maxNumSeqs={"min": low_s, "max": max(low_s, high_s)},
        gpuMemoryUtilization={"max": draw(st.sampled_from([0.85, 0.9, 0.95]))},
        kvCacheDtype=draw(st.sampled_from([[], ["fp8"]])),
        tensorParallel=draw(st.none() | st.just({"maxSize": 4})),
    )
    flags: list[str] = []
    if draw(st.booleans()):
        flags += ["--max-num-batched-tokens", str(draw(st.sampled_from(BATCHED_TOKENS_LADDER)))]
    if draw(st.booleans()):
        flags += ["--max-num-seqs", str(draw(st.sampled_from(MAX_NUM_SEQS_LADDER)))]
    if draw(st.booleans()):
        flags += ["--gpu-memory-utilization", str(draw(st.sampled_from([0.8, 0.9, 0.97])))]
    if draw(st.booleans()):
        flags += ["--no-enable-chunked-prefill"]
    ladder_values = [str(v) for v in (*BATCHED_TOKENS_LADDER, *MAX_NUM_SEQS_LADDER)]
    incompatible = draw(
        st.sets(
            st.tuples(
                st.sampled_from(
                    [KnobName.MAX_NUM_BATCHED_TOKENS.value, KnobName.MAX_NUM_SEQS.value]
                ),
                st.sampled_from(ladder_values),
            ),
            max_size=6,
        )
    )
    return {
        "window": window,
        "spec": spec,
        "cl": command_line(*flags),
        "hardware": draw(st.sampled_from(HARDWARE)),
        "incompatible": incompatible,
        "goal": objectives(ttft="300ms", itl="40ms"),
    }


def within_bounds(change: Change, spec: Knobs) -> bool:
    value = change.to_value
    if change.knob is KnobName.MAX_NUM_BATCHED_TOKENS and spec.max_num_batched_tokens:
        return spec.max_num_batched_tokens.min <= int(value or 0) <= spec.max_num_batched_tokens.max
    if change.knob is KnobName.MAX_NUM_SEQS and spec.max_num_seqs:
        return spec.max_num_seqs.min <= int(value or 0) <= spec.max_num_seqs.max
    if change.knob is KnobName.GPU_MEMORY_UTILIZATION and spec.gpu_memory_utilization:
        return float(value or 0) <= spec.gpu_memory_utilization.max
    if change.knob is KnobName.TENSOR_PARALLEL and spec.tensor_parallel:
        return int(value or 0) <= spec.tensor_parallel.max_size
    return change.knob in (
        KnobName.PREFIX_CACHING,
        KnobName.CHUNKED_PREFILL,
        KnobName.KV_CACHE_DTYPE,
    )


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_plans_stay_in_bounds_and_never_retry_a_value_that_failed(case: dict[str, Any]) -> None:
    d = diagnose(case["window"], case["goal"], case["cl"], case["hardware"], case["spec"])
    result = plan(
        d, case["window"], case["cl"], case["spec"], case["hardware"], [], case["incompatible"]
    )
    if isinstance(result, Exhausted):
        return
    assert within_bounds(result, case["spec"]), result
    assert (result.knob.value, result.to_value) not in case["incompatible"]
    assert result.to_value != result.from_value
    if result.knob is KnobName.KV_CACHE_DTYPE:
        assert case["hardware"].supports_fp8 is not False
