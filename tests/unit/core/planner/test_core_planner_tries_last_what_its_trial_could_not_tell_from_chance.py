"""A change the calibrated model expects to gain less than its trial's verdict could tell from
chance is tried after those it expects to gain beyond that, whatever their kinds: the verdict
would revert it even if the model were right, so its rollout buys nothing. Where the model
expects a cheap change to gain beyond chance, the cheapest kind still goes first."""

from __future__ import annotations

from tests.unit.core.builders import H100, command_line, knobs, objectives, window_of, with_spread

from latency_tuner.api.spec import Knobs
from latency_tuner.api.status import Verdict
from latency_tuner.core import model
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.knobs import Change
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import TrialRecord, plan
from latency_tuner.core.verdict import chance_gain
from latency_tuner.vllm.args import VllmCommandLine

QWEN_32B = "Qwen/Qwen2.5-32B-Instruct"
RUNNING = command_line("--max-model-len", "8192", "--max-num-seqs", "8", model=QWEN_32B)
SPEC = knobs(
    max_num_seqs={"min": 4, "max": 64},
    gpu_memory_utilization={"max": 0.95},
    tensor_parallel={"maxSize": 4},
    max_num_batched_tokens=None,
    prefix_caching=False,
    chunked_prefill=False,
)
GOAL = objectives(ttft="1s", itl="30ms", percentile=90)


def _queued_on_eight_slots(running: VllmCommandLine = RUNNING) -> Observation:
    """A 32B on one H100 as the roofline times it: 8 slots full, 8 requests waiting 2 s for
    one (TTFT p90 2.5 times its target); more KV room does not add slots max-num-seqs caps."""
    engine = model.engine_config(running, 1, H100)
    assert engine is not None
    window = window_of(engine, running=8, queue=2.0, waiting_mean=8.0, request_rate=2.0)
    return with_spread(window, running_max=8.0, waiting_max=12.0)


def _first_move(spec: Knobs, history: tuple[TrialRecord, ...] = ()) -> Change:
    window = _queued_on_eight_slots()
    d = diagnose(window, GOAL, RUNNING, H100, spec)
    assert d.score is not None
    assert chance_gain(d.score, window) > 0
    move = plan(d, window, RUNNING, spec, H100, history)
    assert isinstance(move, Change), move
    return move


def test_a_safe_move_expected_to_gain_beyond_chance_goes_before_more_gpus() -> None:
    move = _first_move(SPEC)
    assert (move.knob.value, move.to_value) == ("maxNumSeqs", "16")


def test_a_safe_move_expected_to_gain_nothing_a_trial_could_see_waits_behind_more_gpus() -> None:
    # More slots were tried and reverted under this load; what is left of the safe kind is
    # a larger memory share, which adds no slot here: the model expects the same TTFT.
    window = _queued_on_eight_slots()
    tried = TrialRecord("maxNumSeqs", "8", "16", Verdict.REVERT, load=window.load)
    move = _first_move(SPEC, (tried,))
    assert (move.knob.value, move.to_value) == ("tensorParallel", "2")


def test_without_a_move_expected_beyond_chance_the_cheapest_kind_stays_first() -> None:
    # Tensor parallelism not allowed: the memory share is all there is, and it is tried.
    spec = SPEC.model_copy(update={"tensor_parallel": None})
    window = _queued_on_eight_slots()
    tried = TrialRecord("maxNumSeqs", "8", "16", Verdict.REVERT, load=window.load)
    move = _first_move(spec, (tried,))
    assert move.knob.value == "gpuMemoryUtilization"


def test_a_kept_move_is_not_continued_where_its_next_rung_gains_nothing_a_trial_could_see() -> None:
    # A larger memory share was kept (0.85 -> 0.90) and more slots reverted: the next rung of
    # the memory share adds no slot, so TP 2 goes before continuing it.
    running = command_line(
        "--max-model-len", "8192", "--max-num-seqs", "8", "--gpu-memory-utilization", "0.9",
        model=QWEN_32B,
    )  # fmt: skip
    window = _queued_on_eight_slots(running)
    history = (
        TrialRecord("gpuMemoryUtilization", "0.85", "0.9", Verdict.KEEP, load=window.load),
        TrialRecord("maxNumSeqs", "8", "16", Verdict.REVERT, load=window.load),
    )
    move = plan(diagnose(window, GOAL, running, H100, SPEC), window, running, SPEC, H100, history)
    assert isinstance(move, Change), move
    assert (move.knob.value, move.to_value) == ("tensorParallel", "2")
