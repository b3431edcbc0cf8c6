"""Candidates the planner used to leave out (issue 19): a 4-bit checkpoint against KV-cache
pressure, FP8 weights or more GPUs for a queue that waits on slow prefills, and more KV blocks
(FP8 KV, a smaller checkpoint) for a queue that waits on a full KV cache."""

from __future__ import annotations

from tests.unit.core.builders import H100, command_line, knobs, kv_pressure, objectives, queueing

from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import plan

TTFT = objectives(ttft="500ms")
CL = command_line("--gpu-memory-utilization", "0.95", "--enable-prefix-caching")
INT4 = {"variants": [{"name": "awq", "model": "org/model-AWQ-INT4"}]}
FP8 = {"variants": [{"name": "fp8", "model": "org/model-FP8"}]}
# The safe knobs are spent or off-limits: what is left is what the table offers beyond them.
NO_SAFE = {"max_num_seqs": None, "max_num_batched_tokens": None, "gpu_memory_utilization": None}


def test_kv_pressure_offers_a_4bit_checkpoint_when_the_spec_lists_one() -> None:
    window = kv_pressure()
    spec = knobs(quantization=INT4, **NO_SAFE)
    d = diagnose(window, TTFT, CL, H100, spec)
    assert d.bottleneck is Bottleneck.KV_CACHE_PRESSURE
    change = plan(d, window, CL, spec, H100)
    assert isinstance(change, Change), change
    assert (change.knob, change.to_value) == (KnobName.QUANTIZATION, "awq")
    assert "more memory for KV blocks" in change.reason


def test_a_queue_behind_slow_prefills_offers_fp8_weights() -> None:
    window = queueing(
        prompt_tokens_mean=6000.0,
        prefill_time_mean=2.5,
        decode_time_mean=1.0,
        running_mean=20.0,
        running_max=24.0,
    )
    spec = knobs(quantization=FP8, tensor_parallel={"maxSize": 4}, **NO_SAFE)
    d = diagnose(window, TTFT, CL, H100, spec)
    assert d.bottleneck is Bottleneck.QUEUEING
    change = plan(d, window, CL, spec, H100)
    assert isinstance(change, Change), change
    assert (change.knob, change.to_value) == (KnobName.QUANTIZATION, "fp8")
    assert KnobName.TENSOR_PARALLEL in d.knobs  # costly: after the lossy one


def test_a_queue_behind_slow_prefills_offers_more_gpus_when_tp_is_allowed() -> None:
    window = queueing(
        prompt_tokens_mean=6000.0,
        prefill_time_mean=2.5,
        decode_time_mean=1.0,
        running_mean=20.0,
        running_max=24.0,
    )
    spec = knobs(tensor_parallel={"maxSize": 4}, **NO_SAFE)
    d = diagnose(window, TTFT, CL, H100, spec)
    change = plan(d, window, CL, spec, H100)
    assert isinstance(change, Change), change
    assert (change.knob, change.to_value) == (KnobName.TENSOR_PARALLEL, "2")


def test_a_queue_behind_long_decodes_is_offered_more_gpus_but_not_faster_prefills() -> None:
    # Prefill 0.1 s of 4 s per request: the queue does not wait on prefills (FP8 weights are
    # offered for those), but on the decodes holding the slots, which TP shortens too.
    window = queueing(prefill_time_mean=0.1, decode_time_mean=4.0)
    spec = knobs(quantization=FP8, tensor_parallel={"maxSize": 4}, **NO_SAFE)
    d = diagnose(window, TTFT, CL, H100, spec)
    assert KnobName.QUANTIZATION not in d.knobs
    assert d.knobs[-1] is KnobName.TENSOR_PARALLEL
    change = plan(d, window, CL, spec, H100)
    assert isinstance(change, Change), change
    assert (change.knob, change.to_value) == (KnobName.TENSOR_PARALLEL, "2")
    assert "the steps the queue waits on split across GPUs" in change.reason


def _queue_behind_a_full_kv_cache() -> Observation:
    # The window a CI run showed (simulated A100-class pods at --gpu-memory-utilization 0.25,
    # under CPU load): 11 requests/s of 2,000-token prompts, 22 running of the default 1,024
    # slots, 9 waiting, KV cache peaking at 92%, TTFT p95 2.4 s of which 95% queue.
    return queueing(
        request_rate=11.0,
        prompt_tokens_mean=2000.0,
        generation_tokens_mean=131.0,
        ttft={50: 1.6, 90: 2.2, 95: 2.41, 99: 2.9},
        ttft_mean=1.7,
        queue_time_mean=1.62,
        prefill_time_mean=0.06,
        decode_time_mean=2.4,
        running_mean=22.0,
        running_max=26.0,
        waiting_mean=9.1,
        waiting_max=14.0,
        kv_cache_usage_mean=0.85,
        kv_cache_usage_max=0.92,
    )


def test_a_queue_behind_a_full_kv_cache_offers_fp8_kv_when_the_spec_lists_it() -> None:
    window = _queue_behind_a_full_kv_cache()
    spec = knobs(kv_cache_dtype=["fp8"], prefix_caching=False, chunked_prefill=False, **NO_SAFE)
    d = diagnose(window, objectives(ttft="1.5s", percentile=95), CL, H100, spec)
    assert d.bottleneck is Bottleneck.QUEUEING
    change = plan(d, window, CL, spec, H100)
    assert isinstance(change, Change), change
    assert (change.knob, change.to_value) == (KnobName.KV_CACHE_DTYPE, "fp8")
    assert "KV blocks that admit the queue" in change.reason


def test_a_queue_behind_a_full_kv_cache_offers_a_checkpoint_for_its_memory() -> None:
    window = _queue_behind_a_full_kv_cache()
    spec = knobs(quantization=INT4, **NO_SAFE)
    d = diagnose(window, objectives(ttft="1.5s", percentile=95), CL, H100, spec)
    change = plan(d, window, CL, spec, H100)
    assert isinstance(change, Change), change
    assert (change.knob, change.to_value) == (KnobName.QUANTIZATION, "awq")
    assert "more memory for the KV blocks" in change.reason


def test_a_queue_with_kv_cache_to_spare_is_not_offered_kv_capacity() -> None:
    window = _queue_behind_a_full_kv_cache().model_copy(update={"kv_cache_usage_max": 0.6})
    spec = knobs(kv_cache_dtype=["fp8"], **NO_SAFE)
    d = diagnose(window, objectives(ttft="1.5s", percentile=95), CL, H100, spec)
    assert KnobName.KV_CACHE_DTYPE not in d.knobs
