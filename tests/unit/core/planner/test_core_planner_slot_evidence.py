"""The slot limit is judged by evidence, and a kept move stops ruling out its way back once the
configuration it was judged on is gone (issue 19: a 90%-of-limit gate on max-num-seqs plus "no
stepping back" blocked the only move that helped)."""

from __future__ import annotations

from tests.unit.core.builders import H100, command_line, knobs, objectives, queueing

from latency_tuner.api.status import Verdict
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.planner import Exhausted, TrialRecord, plan

TTFT = objectives(ttft="500ms")
SEQS = KnobName.MAX_NUM_SEQS.value
CL = command_line("--max-num-seqs", "64", "--enable-prefix-caching")
# Only max-num-seqs is the operator's to move.
ONLY_SEQS = knobs(
    max_num_batched_tokens=None, gpu_memory_utilization=None, max_num_seqs={"min": 16, "max": 512}
)


def test_requests_waiting_beyond_the_slots_raise_max_num_seqs_below_the_sampled_peak() -> None:
    # The sampled running peak is 56 of 64 (87%), yet 20 requests wait on average: admitting
    # them would need 72 slots. The slot limit binds.
    window = queueing(running_mean=52.0, running_max=56.0, waiting_mean=20.0, waiting_max=30.0)
    d = diagnose(window, TTFT, CL, H100, ONLY_SEQS)
    change = plan(d, window, CL, ONLY_SEQS, H100)
    assert isinstance(change, Change), change
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "128")
    assert any(e.signal == "requests_in_flight" for e in d.evidence)


def test_free_slots_with_nobody_waiting_do_not_raise_max_num_seqs() -> None:
    window = queueing(running_mean=40.0, running_max=56.0, waiting_mean=0.0, waiting_max=0.0)
    d = diagnose(window, TTFT, CL, H100, ONLY_SEQS)
    assert KnobName.MAX_NUM_SEQS not in d.knobs


def test_a_kept_move_down_may_be_undone_after_another_knobs_change_was_kept() -> None:
    window = queueing(running_mean=64.0, running_max=64.0, waiting_mean=20.0, waiting_max=30.0)
    d = diagnose(window, TTFT, CL, H100, ONLY_SEQS)
    lowered = TrialRecord(SEQS, "128", "64", Verdict.KEEP, window.load)
    alone = plan(d, window, CL, ONLY_SEQS, H100, [lowered])
    assert isinstance(alone, Exhausted)
    assert "goes back towards 128" in alone.reason
    fp8_kv = TrialRecord(KnobName.KV_CACHE_DTYPE.value, None, "fp8", Verdict.KEEP, window.load)
    change = plan(d, window, CL, ONLY_SEQS, H100, [lowered, fp8_kv])
    assert isinstance(change, Change), change
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "128")


def test_a_burst_that_queued_beyond_the_slots_raises_max_num_seqs_though_the_mean_fits() -> None:
    # Bursty chat at max-num-seqs 32: on average 26 run and 3 wait (29 fit in 32 slots), but at
    # the busiest 8 waited beside a sampled peak of 30 running, with KV blocks to spare.
    cl = command_line("--max-num-seqs", "32", "--enable-prefix-caching")
    window = queueing(
        running_mean=26.0, running_max=30.0, waiting_mean=3.0, waiting_max=8.0,
        kv_cache_usage_max=0.5,
    )  # fmt: skip
    d = diagnose(window, TTFT, cl, H100, ONLY_SEQS)
    change = plan(d, window, cl, ONLY_SEQS, H100)
    assert isinstance(change, Change), change
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "64")
