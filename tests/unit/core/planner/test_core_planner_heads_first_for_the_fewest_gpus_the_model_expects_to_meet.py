"""When the calibrated model expects no configuration on the running GPUs to come near the
targets but some on more GPUs to meet them, the planner's first move is towards the fewest
such GPUs, ahead of the cheaper kinds it would otherwise try first (issue 12, item 2: "the
change the calibrated model expects to reach the targets at the fewest GPUs"). Where the
running GPUs may do, the cheaper kinds keep going first."""

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

from latency_tuner.core import model
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.knobs import Change, KnobClass, KnobName
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import Exhausted, plan

QWEN_32B = "Qwen/Qwen2.5-32B-Instruct"
RUNNING = command_line("--max-model-len", "8192", "--max-num-seqs", "8", model=QWEN_32B)
SPEC = knobs(
    max_num_seqs={"min": 4, "max": 64},
    tensor_parallel={"maxSize": 4},
    max_num_batched_tokens=None,
    prefix_caching=False,
    chunked_prefill=False,
    gpu_memory_utilization=None,
)


def _queued_decode_bound_window() -> Observation:
    """A 32B on one H100 as the roofline times it: 8 slots full, 8 requests waiting 2 s for
    one, each token ~27 ms (a decode step reads the whole 65 GB of weights)."""
    engine = model.engine_config(RUNNING, 1, H100)
    assert engine is not None
    window = window_of(engine, running=8, queue=2.0, waiting_mean=8.0, request_rate=2.0)
    return with_spread(window, running_max=8.0, waiting_max=12.0)


def _first_move(itl_target: str) -> Change | Exhausted:
    window = _queued_decode_bound_window()
    goal = objectives(ttft="1s", itl=itl_target, percentile=90)
    return plan(diagnose(window, goal, RUNNING, H100, SPEC), window, RUNNING, SPEC, H100)


def test_an_itl_no_one_gpu_configuration_comes_near_goes_to_more_gpus_before_more_slots() -> None:
    # 16 ms: one GPU's weight reads alone take longer; more slots would fix the queue and
    # leave ITL as far off, to be judged again once the GPUs change.
    move = _first_move("16ms")
    assert isinstance(move, Change)
    assert move.knob is KnobName.TENSOR_PARALLEL
    assert move.to_value in ("2", "4")


def test_an_itl_one_gpu_can_meet_keeps_the_safe_knob_first() -> None:
    # 30 ms: the queue is the only miss and more slots on the one GPU may fix it.
    move = _first_move("30ms")
    assert isinstance(move, Change)
    assert move.knob is KnobName.MAX_NUM_SEQS


def test_the_fewest_gpus_are_those_the_model_expects_to_meet_the_targets() -> None:
    window = _queued_decode_bound_window()

    def fewest(itl_target: str) -> int | None:
        goal = objectives(ttft="1s", itl=itl_target, percentile=90)
        way = cheapest_way(window, goal, RUNNING, SPEC)
        if way is None:
            return None
        assert way.knob_class is KnobClass.COSTLY  # nothing lossy is allowed
        return way.gpus

    assert fewest("30ms") is None  # the running GPU may do
    assert fewest("16ms") in (2, 4)
    assert fewest("2ms") is None  # nothing allowed is expected to meet
