"""The planner learns from history: ladders continue while they help, changes are not repeated
under a comparable load, values that failed to start are never retried."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from tests.unit.core.builders import (
    A100,
    H100,
    command_line,
    healthy,
    interference,
    knobs,
    objectives,
    queueing,
)

from latency_tuner.api.status import MetricSnapshot, Trial, Verdict
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.observation import LoadFingerprint, Observation
from latency_tuner.core.planner import Exhausted, TrialRecord, plan
from latency_tuner.core.verdict import BOTH_SATURATED, STEP_ON_SATURATED
from latency_tuner.vllm.args import VllmCommandLine

TTFT = objectives(ttft="500ms")
SEQS = KnobName.MAX_NUM_SEQS.value


def next_change(
    window: Observation,
    cl: VllmCommandLine,
    history: list[TrialRecord] | None = None,
    incompatible: Collection[tuple[str, str | None]] = (),
    **knob_fields: object,
) -> Change | Exhausted:
    spec = knobs(**knob_fields)
    d = diagnose(window, TTFT, cl, A100, spec)
    return plan(d, window, cl, spec, A100, history or [], incompatible)


def record(
    frm: str | None, to: str, verdict: Verdict, load: LoadFingerprint | None, knob: str = SEQS
) -> TrialRecord:
    return TrialRecord(knob, frm, to, verdict, load)


def test_a_kept_step_continues_one_more_rung_the_same_way() -> None:
    window = queueing(running_mean=500.0, running_max=512.0)
    cl = command_line("--max-num-seqs", "512")
    history = [record(None, "512", Verdict.KEEP, window.load)]
    change = next_change(window, cl, history)
    assert isinstance(change, Change)
    assert (change.knob, change.from_value, change.to_value) == (
        KnobName.MAX_NUM_SEQS,
        "512",
        "1024",
    )
    assert change.reason.startswith("continuing the kept direction: Queueing on TTFT p90")


def test_a_step_kept_on_a_saturated_server_is_not_continued() -> None:
    # The same kept move as above, kept only as a step (two saturated windows could not judge
    # it): it showed no gain, so the next change is whichever ranks first.
    window = queueing(running_mean=500.0, running_max=512.0)
    cl = command_line("--max-num-seqs", "512")
    step = replace(record(None, "512", Verdict.KEEP, window.load), step=True)
    change = next_change(window, cl, [step])
    assert isinstance(change, Change)
    assert not change.reason.startswith("continuing the kept direction")


def test_continuation_goes_first_even_when_another_knob_ranks_higher() -> None:
    # The last kept trial raised the step budget; max-num-seqs would rank first otherwise.
    window = queueing()
    cl = command_line("--max-num-batched-tokens", "4096")
    history = [
        record("2048", "4096", Verdict.KEEP, window.load, KnobName.MAX_NUM_BATCHED_TOKENS.value)
    ]
    change = next_change(window, cl, history)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "8192")


def test_more_gpus_do_not_continue_while_a_cheaper_change_is_open_again() -> None:
    # max-num-seqs 256 -> 512 was reverted on one GPU; TP 2 was kept since, which reopens it
    # (the server it was judged on is gone). TP 4 would continue the kept direction, but a
    # safe change that may meet the targets at two GPUs goes first.
    window = queueing()
    cl = command_line("--max-num-seqs", "256", "--tensor-parallel-size", "2")
    history = [
        record("256", "512", Verdict.REVERT, window.load),
        record(None, "2", Verdict.KEEP, window.load, KnobName.TENSOR_PARALLEL.value),
    ]
    change = next_change(window, cl, history, tensor_parallel={"maxSize": 4})
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "512")


def test_after_a_revert_the_next_rung_is_not_tried_under_the_same_load() -> None:
    window = queueing()
    cl = command_line("--max-num-seqs", "256")
    history = [record("256", "512", Verdict.REVERT, window.load)]
    change = next_change(window, cl, history)
    assert isinstance(change, Change)
    assert change.knob is not KnobName.MAX_NUM_SEQS


def test_a_reverted_change_is_open_again_once_another_knobs_change_was_kept_since() -> None:
    # max-num-seqs 512 lost on the old server; the kept step budget made a new server since.
    window = queueing()
    cl = command_line("--max-num-seqs", "256", "--max-num-batched-tokens", "4096")
    batched = KnobName.MAX_NUM_BATCHED_TOKENS.value
    reverted = record("256", "512", Verdict.REVERT, window.load)
    change = next_change(
        window, cl, [reverted, record("2048", "4096", Verdict.KEEP, None, batched)]
    )
    assert isinstance(change, Change)
    # The kept knob continues first; once that rung is ruled out, the reverted change is open.
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "8192")
    history = [
        reverted,
        record("2048", "4096", Verdict.KEEP, None, batched),
        record("4096", "8192", Verdict.REVERT, window.load, batched),
    ]
    change = next_change(window, cl, history)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "512")
    # Without the kept change in between it stays ruled out (the test above).
    other = next_change(window, cl, [reverted, history[2]])
    assert not isinstance(other, Change) or (other.knob, other.to_value) != (
        KnobName.MAX_NUM_SEQS,
        "512",
    )


def test_a_change_tried_under_a_different_load_may_be_tried_again() -> None:
    window = queueing()
    other = window.load.model_copy(
        update={
            "request_rate": window.load.request_rate * 2,
            "concurrency_mean": window.load.concurrency_mean * 2,
        }
    )
    history = [record(None, "512", Verdict.REVERT, other)]
    change = next_change(window, command_line(), history)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "512")


def test_an_inconclusive_trial_teaches_nothing_and_is_tried_again() -> None:
    window = queueing()
    history = [record(None, "512", Verdict.INCONCLUSIVE, window.load)]
    change = next_change(window, command_line(), history)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "512")


def test_a_change_inconclusive_twice_under_a_comparable_load_is_not_tried_a_third_time() -> None:
    window = queueing(running_mean=500.0, running_max=512.0)
    twice = [record(None, "512", Verdict.INCONCLUSIVE, window.load)] * 2
    change = next_change(window, command_line(), twice)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) != (KnobName.MAX_NUM_SEQS, "512")
    only = next_change(window, command_line(), twice, gpu_memory_utilization=None,
                       max_num_batched_tokens=None, prefix_caching=False)  # fmt: skip
    assert isinstance(only, Exhausted)
    assert "maxNumSeqs -> 512 was Inconclusive 2 times under a comparable load" in only.reason


def status_trial(verdict: str, **fields: object) -> Trial:
    """Trial 1 of the status: max-num-seqs (absent) -> 512, with ``verdict`` and ``fields``."""
    return Trial.model_validate(
        {"id": 1, "knob": SEQS, "from": None, "to": "512",
         "startedAt": "2026-12-02T09:00:00Z", "verdict": verdict, **fields}
    )  # fmt: skip


def saturated(to: str, load: LoadFingerprint | None, knob: str = SEQS) -> TrialRecord:
    return TrialRecord(knob, None, to, Verdict.INCONCLUSIVE, load, saturated=True)


def test_a_change_inconclusive_once_with_both_windows_saturated_rests_under_that_load() -> None:
    window = queueing(running_mean=500.0, running_max=512.0)
    once = next_change(window, command_line(), [saturated("512", window.load)],
                       gpu_memory_utilization=None, max_num_batched_tokens=None,
                       prefix_caching=False)  # fmt: skip
    assert isinstance(once, Exhausted)
    assert "maxNumSeqs -> 512 could not be judged under a comparable load" in once.reason
    # An Inconclusive for another reason (too few requests, say) is still tried once more.
    plain = [record(None, "512", Verdict.INCONCLUSIVE, window.load)]
    again = next_change(window, command_line(), plain, gpu_memory_utilization=None,
                        max_num_batched_tokens=None, prefix_caching=False)  # fmt: skip
    assert isinstance(again, Change)
    assert (again.knob, again.to_value) == (KnobName.MAX_NUM_SEQS, "512")


def test_a_saturated_inconclusive_change_is_open_under_another_load_or_on_a_changed_server() -> (
    None
):
    window = queueing(running_mean=500.0, running_max=512.0)
    lighter = window.load.model_copy(
        update={"request_rate": window.load.request_rate / 3, "concurrency_mean": 50.0}
    )
    elsewhere = next_change(window, command_line(), [saturated("512", lighter)],
                            max_num_batched_tokens=None, gpu_memory_utilization=None,
                            prefix_caching=False)  # fmt: skip
    assert isinstance(elsewhere, Change)
    assert (elsewhere.knob, elsewhere.to_value) == (KnobName.MAX_NUM_SEQS, "512")
    # The step budget was kept after it: the server that saturated is gone.
    batched = KnobName.MAX_NUM_BATCHED_TOKENS.value
    cl = command_line("--max-num-batched-tokens", "4096")
    history = [
        saturated("512", window.load),
        record("2048", "4096", Verdict.KEEP, window.load, batched),
        record("4096", "8192", Verdict.REVERT, window.load, batched),
    ]
    reopened = next_change(window, cl, history, gpu_memory_utilization=None,
                           prefix_caching=False)  # fmt: skip
    assert isinstance(reopened, Change)
    assert (reopened.knob, reopened.to_value) == (KnobName.MAX_NUM_SEQS, "512")
    closed = next_change(window, cl, [history[0], history[2]], gpu_memory_utilization=None,
                         prefix_caching=False)  # fmt: skip
    assert not isinstance(closed, Change) or closed.knob is not KnobName.MAX_NUM_SEQS


def _slots_saturated_then_a_batched_step(
    saturated_trials: int, step: bool = True
) -> Change | Exhausted:
    """max-num-seqs 512 Inconclusive on ``saturated_trials`` saturated servers; then batched
    tokens 2048 -> 4096 kept (as a step on a saturated server, or on its own windows) and
    4096 -> 8192 reverted."""
    window = queueing(running_mean=500.0, running_max=512.0)
    batched = KnobName.MAX_NUM_BATCHED_TOKENS.value
    kept = replace(record("2048", "4096", Verdict.KEEP, window.load, batched), step=step)
    beyond = record("4096", "8192", Verdict.REVERT, window.load, batched)
    history = [*[saturated("512", window.load)] * saturated_trials, kept, beyond]
    cl = command_line("--max-num-batched-tokens", "4096")
    return next_change(window, cl, history, gpu_memory_utilization=None, prefix_caching=False)


def test_a_change_saturated_on_two_servers_rests_though_another_change_was_kept_since() -> None:
    # Each change kept as a step on a saturated server gives a new server, as a Keep does, and
    # reopens the slots once; after two saturated trials under this load they rest, or every
    # step would buy them another two rollouts.
    reopened = _slots_saturated_then_a_batched_step(1)
    assert isinstance(reopened, Change)
    assert (reopened.knob, reopened.to_value) == (KnobName.MAX_NUM_SEQS, "512")
    result = _slots_saturated_then_a_batched_step(2)
    assert isinstance(result, Exhausted)
    assert "maxNumSeqs -> 512 could not be judged on 2 saturated servers" in result.reason


def test_giving_up_names_the_steps_still_applied_that_were_never_measured_alone() -> None:
    result = _slots_saturated_then_a_batched_step(2)
    assert isinstance(result, Exhausted)
    assert result.reason.endswith(
        "kept as steps on a saturated server and never measured on their own: "
        "maxNumBatchedTokens -> 4096"
    )
    # The same move kept on its own windows is no step.
    plain = _slots_saturated_then_a_batched_step(2, step=False)
    assert isinstance(plain, Exhausted)
    assert "kept as steps" not in plain.reason


def test_a_status_trial_inconclusive_on_two_saturated_windows_is_recorded_as_saturated() -> None:
    trial = status_trial(
        "Inconclusive",
        reason=f"{BOTH_SATURATED}: score 65.25 -> 65.20 (-0%; needs better than -5%)",
    )
    assert TrialRecord.from_trial(trial).saturated
    other = trial.model_copy(update={"reason": "too few requests in the trial window: 3 < 40"})
    assert not TrialRecord.from_trial(other).saturated
    kept = trial.model_copy(update={"verdict": Verdict.KEEP})
    assert not TrialRecord.from_trial(kept).saturated
    assert not TrialRecord.from_trial(kept).step


def test_a_status_trial_carries_the_latencies_of_the_windows_that_judged_it() -> None:
    before, after = {"ttftSeconds": 0.1, "itlSeconds": 0.05}, {"ttftSeconds": 0.2}
    record = TrialRecord.from_trial(status_trial("Keep", before=before, after=after))
    assert record.before is not None
    assert record.after is not None
    assert (record.before.ttft_seconds, record.before.itl_seconds) == (0.1, 0.05)
    assert (record.after.ttft_seconds, record.after.itl_seconds) == (0.2, None)


def test_a_status_trial_kept_as_a_step_on_a_saturated_server_is_recorded_as_a_step() -> None:
    reason = f"both windows saturated; the trial finished 98 of 150 arrivals: {STEP_ON_SATURATED}"
    assert TrialRecord.from_trial(status_trial("Keep", reason=reason)).step
    assert not TrialRecord.from_trial(status_trial("Inconclusive", reason=reason)).step


def test_a_status_trial_is_compared_by_the_load_that_arrived_when_its_snapshot_has_it() -> None:
    snapshot = {"requestRate": 0.1, "promptTokensMean": 2000.0, "generationTokensMean": 120.0,
                "concurrency": 80.0, "requests": 2}  # fmt: skip
    fell_behind = status_trial("Inconclusive", before={**snapshot, "arrivalRate": 4.0})
    load = TrialRecord.from_trial(fell_behind).load
    assert load is not None
    assert load.request_rate == 4.0
    kept_up = TrialRecord.from_trial(status_trial("Inconclusive", before=snapshot)).load
    assert kept_up is not None
    assert kept_up.request_rate == 0.1


def test_inconclusive_trials_under_another_load_do_not_count_against_a_change() -> None:
    window = queueing(running_mean=500.0, running_max=512.0)
    elsewhere = window.load.model_copy(
        update={"request_rate": 200.0, "concurrency_mean": 5000.0, "prompt_tokens_mean": 4000.0}
    )
    twice = [record(None, "512", Verdict.INCONCLUSIVE, elsewhere)] * 2
    change = next_change(window, command_line(), twice)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "512")


def test_a_numeric_knob_does_not_step_back_into_the_range_a_kept_trial_left() -> None:
    # 8192 -> 1024 was kept against interference; at the lower bound now, only "larger" is left,
    # and that would undo the kept move.
    window = interference()
    batched = KnobName.MAX_NUM_BATCHED_TOKENS.value
    cl = command_line("--max-num-batched-tokens", "1024")
    spec = knobs(max_num_batched_tokens={"min": 1024, "max": 16384})
    d = diagnose(window, objectives(itl="50ms"), cl, H100, spec)
    history = [record("8192", "1024", Verdict.KEEP, window.load, batched)]
    result = plan(d, window, cl, spec, H100, history)
    assert isinstance(result, Exhausted)
    assert "maxNumBatchedTokens -> 4096 goes back towards 8192" in result.reason
    assert isinstance(plan(d, window, cl, spec, H100, []), Change)


def _chunked_long_prompts_at_512(
    ttft_target: str, windows: tuple[MetricSnapshot, MetricSnapshot] | None = None
) -> Change | Exhausted:
    # 16384 -> 512 batched tokens was kept (it fixed ITL); 4,000-token prompts now take eight
    # chunks, and TTFT p90 (200 ms) is over its target while ITL is met.
    batched = KnobName.MAX_NUM_BATCHED_TOKENS.value
    cl = command_line("--enable-chunked-prefill", "--max-num-batched-tokens", "512")
    window = healthy(
        prompt_tokens_mean=4000.0,
        ttft={50: 0.15, 90: 0.2, 99: 0.25},
        ttft_mean=0.16,
        prefill_time_mean=0.12,
        queue_time_mean=0.03,
        itl={50: 0.012, 90: 0.014, 99: 0.016},
        itl_mean=0.012,
    )
    spec = knobs(max_num_batched_tokens={"min": 512, "max": 16384})
    d = diagnose(window, objectives(ttft=ttft_target, itl="30ms"), cl, H100, spec)
    history = [record("16384", "512", Verdict.KEEP, window.load, batched)]
    if windows is not None:
        history = [replace(history[0], before=windows[0], after=windows[1])]
    return plan(d, window, cl, spec, H100, history)


def test_a_value_inside_a_kept_jump_is_tried_when_the_model_expects_it_to_halve_the_miss() -> None:
    # TTFT p90 200 ms against 150 ms: the model expects 1024 to take 14% off prefill-bound
    # TTFT, the miss from 0.33 to 0.12 of the target, which opens the range; it expects 2048
    # to leave less (0.04), so the move goes on to that rung, still inside the jump.
    change = _chunked_long_prompts_at_512("150ms")
    assert isinstance(change, Change), change
    assert (change.knob, change.from_value, change.to_value) == (
        KnobName.MAX_NUM_BATCHED_TOKENS,
        "512",
        "2048",
    )
    assert "past 1024: the calibrated model expects 1024 to leave the targets missed" in (
        change.reason
    )


def test_a_value_inside_a_kept_jump_stays_closed_when_the_model_expects_less() -> None:
    # Against 120 ms the same 14% leaves most of the miss (0.67 -> 0.43 of the target).
    result = _chunked_long_prompts_at_512("120ms")
    assert isinstance(result, Exhausted)
    assert "maxNumBatchedTokens -> 1024 goes back towards 16384" in result.reason


def test_a_value_inside_a_jump_that_traded_one_target_for_another_is_tried() -> None:
    # The jump took ITL p90 from 50 ms (target 30 ms) to 14 ms and TTFT p90 from 100 ms (met,
    # target 120 ms) to 200 ms: it overshot, and the same 14% the model expects from 1024 is
    # now worth a trial.
    traded = (
        MetricSnapshot(ttft_seconds=0.1, itl_seconds=0.05),
        MetricSnapshot(ttft_seconds=0.2, itl_seconds=0.014),
    )
    change = _chunked_long_prompts_at_512("120ms", traded)
    assert isinstance(change, Change), change
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "1024")
    # A jump whose TTFT was missed before it too traded nothing: the range stays closed.
    missed_already = (MetricSnapshot(ttft_seconds=0.15, itl_seconds=0.05), traded[1])
    result = _chunked_long_prompts_at_512("120ms", missed_already)
    assert isinstance(result, Exhausted)
    assert "maxNumBatchedTokens -> 1024 goes back towards 16384" in result.reason


def test_a_record_without_a_load_counts_as_comparable() -> None:
    window = queueing()
    history = [record(None, "512", Verdict.REVERT, None)]
    change = next_change(window, command_line(), history)
    assert isinstance(change, Change)
    assert change.knob is not KnobName.MAX_NUM_SEQS


def test_a_value_that_failed_to_start_is_never_retried_whatever_the_load() -> None:
    window = queueing()
    other = window.load.model_copy(update={"request_rate": 100.0})
    for history, incompatible in (
        ([record(None, "512", Verdict.FAILED, other)], set()),
        ([], {(SEQS, "512")}),
    ):
        change = next_change(window, command_line(), history, incompatible)
        assert isinstance(change, Change)
        assert change.knob is not KnobName.MAX_NUM_SEQS


def test_a_kept_step_whose_next_rung_failed_moves_on_to_another_knob() -> None:
    window = queueing(running_mean=500.0, running_max=512.0)
    cl = command_line("--max-num-seqs", "512")
    history = [record("256", "512", Verdict.KEEP, window.load)]
    change = next_change(window, cl, history, {(SEQS, "1024")})
    assert isinstance(change, Change)
    assert change.knob is not KnobName.MAX_NUM_SEQS
    assert not change.reason.startswith("continuing")


def test_a_kept_non_numeric_change_has_no_direction_to_continue() -> None:
    window = queueing()
    history = [
        record(None, "true", Verdict.KEEP, window.load, KnobName.PREFIX_CACHING.value),
        record(None, "x", Verdict.KEEP, window.load, "someOtherKnob"),
    ]
    change = next_change(window, command_line(), history)
    assert isinstance(change, Change)
    assert not change.reason.startswith("continuing")


def test_a_revert_of_another_knob_does_not_stop_the_kept_direction() -> None:
    window = queueing()
    cl = command_line("--max-num-batched-tokens", "4096")
    history = [
        record("2048", "4096", Verdict.KEEP, window.load, KnobName.MAX_NUM_BATCHED_TOKENS.value),
        record(None, "512", Verdict.REVERT, window.load),
    ]
    change = next_change(window, cl, history)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "8192")
    assert change.reason.startswith("continuing")


def test_a_kept_direction_the_diagnosis_no_longer_wants_is_not_continued() -> None:
    # Batched tokens went up for TTFT; now only ITL misses, with interference: it wants less.
    window = interference()
    cl = command_line("--max-num-batched-tokens", "8192")
    batched = KnobName.MAX_NUM_BATCHED_TOKENS.value
    history = [record("4096", "8192", Verdict.KEEP, window.load, batched)]
    spec = knobs()
    d = diagnose(window, objectives(itl="50ms"), cl, H100, spec)
    change = plan(d, window, cl, spec, H100, history)
    assert isinstance(change, Change)
    # Down, sized from the 4000-token prompts and the 1.8x miss, past the kept range.
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "2048")
    assert not change.reason.startswith("continuing")


def test_when_everything_was_tried_the_planner_is_exhausted_with_reasons_and_advice() -> None:
    window = queueing()
    cl = command_line("--gpu-memory-utilization", "0.95")
    history = [
        record(None, "512", Verdict.REVERT, window.load),
        record(None, "4096", Verdict.REVERT, window.load, KnobName.MAX_NUM_BATCHED_TOKENS.value),
    ]
    result = next_change(window, cl, history)
    assert isinstance(result, Exhausted)
    assert result.reason.startswith(
        "every knob for Queueing was tried: maxNumSeqs -> 512 was "
        "tried under a comparable load (Revert)"
    )
    assert result.advice[0] == (
        "add replicas: the server is saturated at max-num-seqs (256 running per pod)"
    )
    assert "gpuMemoryUtilization is at its ceiling (0.95)" in result.advice


def test_a_removal_already_tried_is_not_repeated() -> None:
    window = queueing()
    cl = command_line("--enforce-eager")
    history = [TrialRecord(KnobName.ENFORCE_EAGER.value, "true", None, Verdict.REVERT, window.load)]
    change = next_change(window, cl, history)
    assert isinstance(change, Change)
    assert change.knob is not KnobName.ENFORCE_EAGER


def test_with_no_bottleneck_the_planner_has_nothing_to_do() -> None:
    window = queueing(ttft={90: 0.3})
    d = diagnose(window, TTFT, command_line(), H100, knobs())
    result = plan(d, window, command_line(), knobs(), H100)
    assert result == Exhausted("no objective is over its target: nothing to change")


def test_sizes_written_with_suffixes_still_give_a_direction() -> None:
    window = queueing()
    cl = command_line("--max-num-batched-tokens", "4K")
    batched = KnobName.MAX_NUM_BATCHED_TOKENS.value
    change = next_change(window, cl, [record("2K", "4K", Verdict.KEEP, window.load, batched)])
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "8192")


def test_a_record_with_unreadable_values_has_no_direction() -> None:
    window = queueing()
    batched = KnobName.MAX_NUM_BATCHED_TOKENS.value
    change = next_change(
        window, command_line(), [record("lots", "more", Verdict.KEEP, window.load, batched)]
    )
    assert isinstance(change, Change)
    assert not change.reason.startswith("continuing")


def test_a_status_trial_becomes_a_record_with_the_load_it_was_judged_under() -> None:
    before = MetricSnapshot(request_rate=2.0, prompt_tokens_mean=500.0, concurrency=8.0)
    trial = status_trial("Revert", before=before.model_dump())
    rec = TrialRecord.from_trial(trial)
    assert (rec.knob, rec.from_value, rec.to_value, rec.verdict) == (
        SEQS,
        None,
        "512",
        Verdict.REVERT,
    )
    assert rec.load == LoadFingerprint(
        request_rate=2.0, prompt_tokens_mean=500.0, generation_tokens_mean=0.0, concurrency_mean=8.0
    )
    after_only = trial.model_copy(update={"before": None, "after": before})
    assert TrialRecord.from_trial(after_only).load == rec.load
    blind = trial.model_copy(update={"before": MetricSnapshot()})
    assert TrialRecord.from_trial(blind).load is None


def transient(to: str, knob: str = SEQS) -> TrialRecord:
    return TrialRecord(knob, None, to, Verdict.FAILED, None, transient=True)


def test_a_change_whose_pods_waited_for_gpus_is_retried_after_the_other_candidates() -> None:
    window = queueing(running_mean=500.0, running_max=512.0, prompt_tokens_mean=2000.0)
    cl = command_line("--no-enable-prefix-caching")
    first = next_change(window, cl)
    assert isinstance(first, Change)
    later = next_change(window, cl, [transient(first.to_value or "", first.knob.value)])
    assert isinstance(later, Change)
    assert (later.knob, later.to_value) != (first.knob, first.to_value)
    # With nothing else open it is tried again, not ruled out for good.
    alone = next_change(window, command_line(), [transient("512")], prefix_caching=False,
                        max_num_batched_tokens=None, gpu_memory_utilization=None)  # fmt: skip
    assert isinstance(alone, Change)
    assert (alone.knob, alone.to_value) == (KnobName.MAX_NUM_SEQS, "512")


def test_a_change_that_could_not_be_scheduled_twice_rests() -> None:
    window = queueing(running_mean=500.0, running_max=512.0)
    twice = next_change(window, command_line(), [transient("512")] * 2, prefix_caching=False,
                        max_num_batched_tokens=None, gpu_memory_utilization=None)  # fmt: skip
    assert isinstance(twice, Exhausted)
    assert "could not be scheduled 2 times" in twice.reason


def test_a_change_reverted_for_margin_is_still_tried_to_fix_a_miss_under_the_same_load() -> None:
    """A refinement is judged on the sum of met latencies' ratios against the window's noise:
    its revert says the margin it bought was not beyond chance, not that it cannot fix a miss.
    Reverted as a fix, it is ruled out as usual."""
    window = queueing()
    cl = command_line()
    for_margin = TrialRecord(SEQS, None, "512", Verdict.REVERT, window.load, refinement=True)
    change = next_change(window, cl, [for_margin])
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_SEQS, "512")
    as_a_fix = record(None, "512", Verdict.REVERT, window.load)
    change = next_change(window, cl, [for_margin, as_a_fix])
    assert not (isinstance(change, Change) and change.to_value == "512")
