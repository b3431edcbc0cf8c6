"""Candidates the planner used to leave out (issue 19): a 4-bit checkpoint against KV-cache
pressure, and FP8 weights or more GPUs for a queue that waits on slow prefills."""

from __future__ import annotations

from tests.unit.core.builders import H100, command_line, knobs, kv_pressure, objectives, queueing

from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.knobs import Change, KnobName
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


def test_a_queue_behind_long_decodes_is_not_offered_prefill_remedies() -> None:
    # Prefill 0.1 s of 4 s per request: the queue does not wait on prefills.
    window = queueing(prefill_time_mean=0.1, decode_time_mean=4.0)
    spec = knobs(quantization=FP8, tensor_parallel={"maxSize": 4}, **NO_SAFE)
    d = diagnose(window, TTFT, CL, H100, spec)
    assert KnobName.QUANTIZATION not in d.knobs
    assert KnobName.TENSOR_PARALLEL not in d.knobs
