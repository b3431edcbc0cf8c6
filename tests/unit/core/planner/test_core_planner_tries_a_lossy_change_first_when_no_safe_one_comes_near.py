"""When the calibrated model expects no configuration reached by safe changes alone to come
near the targets but a lossy one on the same GPUs to meet them, the planner's first move is
the lossy one (issue 12, item 2: "the cheapest first among near-equals": a safe change the
model expects to leave TTFT several times its target is no near-equal). Where a safe change may
do, safe changes keep going first."""

from __future__ import annotations

from tests.unit.core.builders import (
    H100,
    cheapest_way,
    command_line,
    knobs,
    objectives,
    window_of,
    with_spread,
)

from latency_tuner.core import model, reach
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.knobs import Change, KnobClass, KnobName
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import Exhausted, plan

QWEN_32B = "Qwen/Qwen2.5-32B-Instruct"
RUNNING = command_line(
    "--max-model-len", "16384", "--gpu-memory-utilization", "0.9", model=QWEN_32B
)
SPEC = knobs(
    max_num_seqs={"min": 16, "max": 32},
    max_num_batched_tokens=None,
    gpu_memory_utilization={"max": 0.95},
    prefix_caching=False,
    chunked_prefill=False,
    kv_cache_dtype=["fp8"],
    quantization={"variants": [{"name": "fp8", "model": "Qwen/Qwen2.5-32B-Instruct-FP8"}]},
)


def _long_prompts_on_little_kv(queue: float) -> Observation:
    """A 32B in BF16 on one H100 leaves KV room for about four 6,000-token requests: four run,
    ``queue`` seconds' worth wait (0.3 a second, as Little's law has it)."""
    engine = model.engine_config(RUNNING, 1, H100)
    assert engine is not None
    window = window_of(
        engine, prompt=6000, running=4, queue=queue, waiting_mean=queue, request_rate=0.3
    )
    return with_spread(
        window,
        running_max=4.0,
        waiting_max=queue * 1.5,
        kv_cache_usage_mean=0.9,
        kv_cache_usage_max=1.0,
    )


def _first_move(queue: float, ttft_target: str) -> Change | Exhausted:
    window = _long_prompts_on_little_kv(queue)
    goal = objectives(ttft=ttft_target, itl="60ms", percentile=90)
    return plan(diagnose(window, goal, RUNNING, H100, SPEC), window, RUNNING, SPEC, H100)


def test_a_queue_only_more_kv_than_safe_knobs_give_can_clear_goes_lossy_first() -> None:
    # 20 s of queue against a 3 s TTFT: 0.95 of the GPU's memory holds 7 such requests, not
    # the 24 in flight; FP8 weights free 32 GB, room for about 23.
    move = _first_move(20.0, "3s")
    assert isinstance(move, Change)
    assert move.knob_class is KnobClass.LOSSY
    assert move.knob is KnobName.QUANTIZATION


def test_a_target_safe_knobs_may_reach_keeps_them_first() -> None:
    for queue, target in ((20.0, "15s"), (2.0, "3s")):
        move = _first_move(queue, target)
        assert isinstance(move, Change)
        assert move.knob_class is KnobClass.SAFE, (queue, target)


def test_the_cheapest_way_names_the_lossy_kind_on_the_running_gpu() -> None:
    window = _long_prompts_on_little_kv(20.0)
    goal = objectives(ttft="3s", itl="60ms", percentile=90)
    assert cheapest_way(window, goal, RUNNING, SPEC) == reach.Way(KnobClass.LOSSY, 1)
    # A target nothing allowed comes near: no way to head for.
    tight = objectives(ttft="100ms", itl="60ms", percentile=90)
    assert cheapest_way(window, tight, RUNNING, SPEC) is None
