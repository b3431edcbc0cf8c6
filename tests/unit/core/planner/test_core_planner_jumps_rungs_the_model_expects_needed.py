"""A numeric move may go several rungs in one trial: when the calibrated model expects the
first rung to leave the targets missed, the planner tries the nearest rung it expects to meet
them instead (64 clients queueing on 8 slots need 64 slots, not 16), or a farther one where
it expects that one to buy the margin a refinement would go on for, never past a rung history
rules out, and one rung at a time without the model."""

from __future__ import annotations

from typing import Any

from tests.unit.core.builders import H100, command_line, interference, knobs, objectives

from latency_tuner.api.status import Verdict
from latency_tuner.core import model
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import TrialRecord, plan
from latency_tuner.perf.cost import CostModel
from latency_tuner.vllm.args import VllmCommandLine

CL = command_line("--max-num-seqs", "8")
SPEC = knobs(
    max_num_seqs={"min": 8, "max": 256},
    max_num_batched_tokens=None,
    gpu_memory_utilization=None,
    prefix_caching=False,
    chunked_prefill=False,
)
GOAL = objectives(ttft="1s", percentile=90)


def _clients(users: int, **overrides: Any) -> Observation:
    """``users`` closed-loop clients on the 8 slots: 8 running, the rest waiting in a queue
    that does not grow; stage times 20% over the roofline's."""
    running = model.engine_config(CL, 1, H100)
    assert running is not None
    cost = CostModel(running)
    prompt, output = 1000, 200
    itl = 1.2 * cost.step_time(decode_contexts=[prompt + output // 2] * 8, prefill_chunks=[])
    prefill = 1.2 * cost.step_time(decode_contexts=[prompt] * 7, prefill_chunks=[(prompt, 0)])
    slot_time = prefill + output * itl
    throughput = 8 / slot_time
    waiting = users - 8
    queue = waiting / throughput  # Little's law
    ttft = 0.01 + queue + prefill
    fields: dict[str, Any] = {
        "window_seconds": 120.0,
        "requests": int(throughput * 120),
        "pods": 1,
        "ttft": {50: ttft * 0.9, 90: ttft * 1.2, 99: ttft * 1.4},
        "itl": {50: itl, 90: itl * 1.1, 99: itl * 1.3},
        "e2e": {50: ttft + output * itl, 90: 1.2 * (ttft + output * itl)},
        "ttft_mean": ttft,
        "itl_mean": itl,
        "queue_time_mean": queue,
        "prefill_time_mean": prefill,
        "request_rate": throughput,
        "prompt_tokens_mean": float(prompt),
        "generation_tokens_mean": float(output),
        "running_mean": 8.0,
        "running_max": 8.0,
        "waiting_mean": float(waiting),
        "waiting_max": float(waiting + 4),
        "running_delta": 0.0,
        "waiting_delta": 0.0,
        "kv_cache_usage_mean": 0.2,
        "kv_cache_usage_max": 0.25,
        "preemptions": 0.0,
    }
    fields.update(overrides)
    return Observation(**fields)


def _plan(window: Observation, *history: TrialRecord, hardware: HardwareInfo = H100) -> Change:
    d = diagnose(window, GOAL, CL, hardware, SPEC)
    change = plan(d, window, CL, SPEC, hardware, history)
    assert isinstance(change, Change), change
    assert change.knob is KnobName.MAX_NUM_SEQS
    return change


def test_sixty_four_clients_on_eight_slots_go_straight_to_sixty_four() -> None:
    change = _plan(_clients(64))
    assert change.to_value == "64"
    assert "past 16" in change.reason


def test_a_queue_the_first_rung_clears_goes_farther_for_the_margin_a_refinement_would_buy() -> None:
    """12 clients on 8 slots: the model expects 16 slots to meet TTFT at 0.18 of its target
    and 32 at 0.09, 64 at 0.06 (it reads the arrivals as an open loop, which queues now and
    then on 16): the refinement ``refine`` would try once 16 were kept, so the move goes past
    16 at once; not to 128 (0.056: within the model's spread of 64's)."""
    change = _plan(_clients(12))
    assert change.to_value == "64"
    assert "past 16" in change.reason
    assert "clearly larger margin" in change.reason


def test_a_queue_the_first_rung_clears_takes_one_rung_when_farther_ones_gain_too_little() -> None:
    """With minImprovement 60%, what a refinement must be expected to gain, 32 slots' margin
    (half of 16's violation-free sum) is not worth it: the nearest rung that meets."""
    window = _clients(12)
    d = diagnose(window, GOAL, CL, H100, SPEC)
    change = plan(d, window, CL, SPEC, H100, min_improvement=0.6)
    assert isinstance(change, Change)
    assert change.to_value == "16"


def test_without_a_model_of_the_gpu_the_move_is_one_rung() -> None:
    assert _plan(_clients(64), hardware=HardwareInfo()).to_value == "16"


def test_a_jump_stops_before_a_rung_tried_under_this_load() -> None:
    """32 was tried from 8 under this load and reverted: the planner does not jump past it,
    and 16 (strictly between) is open again."""
    window = _clients(64)
    tried = TrialRecord("maxNumSeqs", "8", "32", Verdict.REVERT, window.load)
    assert _plan(window, tried).to_value == "16"


def test_the_rungs_beyond_stay_within_the_step_budget() -> None:
    """vLLM refuses max-num-seqs above max-num-batched-tokens: no jump lands there."""
    cl = command_line("--max-num-seqs", "8", "--max-num-batched-tokens", "32")
    d = diagnose(_clients(64), GOAL, cl, H100, SPEC)
    assert d.ranking is not None
    seqs = [c for c in d.ranking.candidates if c.knob is KnobName.MAX_NUM_SEQS]
    assert [(c.to_value, c.farther) for c in seqs] == [("16", ("32",))]


def test_the_batch_budget_offers_its_rungs_beyond_but_none_below_a_written_max_num_seqs() -> None:
    """Down from 4096 against prefill interference (ITL p99 15% over its target, 4,000-token
    prompts): 2048 first, then 1024 and 512 for a jump; with max-num-seqs 1024 written, vLLM
    would refuse 512, so it is not offered."""
    spec = knobs(max_num_batched_tokens={"min": 512, "max": 16384})
    goal = objectives(itl="130ms", percentile=99)
    window = interference()

    def budgets(cl: VllmCommandLine) -> list[tuple[str | None, tuple[str, ...]]]:
        d = diagnose(window, goal, cl, H100, spec)
        assert d.ranking is not None
        return [
            (c.to_value, c.farther)
            for c in d.ranking.candidates
            if c.knob is KnobName.MAX_NUM_BATCHED_TOKENS and c.direction < 0
        ]

    assert budgets(command_line("--max-num-batched-tokens", "4096")) == [("2048", ("1024", "512"))]
    written = command_line("--max-num-batched-tokens", "4096", "--max-num-seqs", "1024")
    assert budgets(written) == [("2048", ("1024",))]


def test_a_server_falling_behind_its_arrivals_goes_past_the_rung_that_only_halves_its_excess() -> (
    None
):
    """Requests arriving 2.5 times as fast as the 8 slots finish them (an open loop: the
    waiting queue grew by 1.5 times the finished count, 56 waiting on average): 16 slots
    would still fall behind, so the first move goes past them. Read from the queue time
    alone (a lower bound of a growing backlog), 16 slots were forecast to clear it."""
    clients = _clients(64)
    window = clients.model_copy(update={"waiting_delta": 1.5 * clients.requests})
    change = _plan(window)
    assert int(change.to_value or 0) > 16
    assert "past 16" in change.reason
