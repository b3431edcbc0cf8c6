"""Plan, apply, judge, remember: a ladder climbs while it helps and the planner moves on at
the first step that does not."""

from __future__ import annotations

from tests.unit.core.builders import A100, command_line, knobs, objectives, queueing

from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.knobs import Change, KnobName, apply
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import TrialRecord, plan
from latency_tuner.core.verdict import Outcome, judge_trial
from latency_tuner.vllm.args import VllmCommandLine

TTFT = objectives(ttft="500ms")
SPEC = knobs()


def step(cl: VllmCommandLine, window: Observation, history: list[TrialRecord]) -> Change:
    d = diagnose(window, TTFT, cl, A100, SPEC, min_requests=100)
    change = plan(d, window, cl, SPEC, A100, history)
    assert isinstance(change, Change), change
    return change


def trial(
    change: Change, before: Observation, after: Observation, history: list[TrialRecord]
) -> Outcome:
    j = judge_trial(before, after, TTFT, min_requests=100, min_improvement=0.05)
    history.append(
        TrialRecord(
            change.knob.value,
            change.from_value,
            change.to_value,
            j.outcome.status_verdict,
            before.load,
        )
    )
    return j.outcome


def test_a_ladder_climbs_while_it_helps_then_the_planner_moves_on() -> None:
    cl = command_line()
    history: list[TrialRecord] = []
    saturated = queueing()  # 256 running of 256, TTFT p90 0.85 s

    first = step(cl, saturated, history)
    assert (first.knob, first.to_value) == (KnobName.MAX_NUM_SEQS, "512")
    better = queueing(ttft={50: 0.5, 90: 0.7, 99: 1.0}, running_mean=500.0, running_max=512.0)
    assert trial(first, saturated, better, history) is Outcome.KEEP
    cl = apply(first, cl).command_line

    second = step(cl, better, history)
    assert (second.knob, second.from_value, second.to_value) == (
        KnobName.MAX_NUM_SEQS,
        "512",
        "1024",
    )
    assert second.reason.startswith("continuing the kept direction")
    worse = queueing(ttft={50: 0.6, 90: 0.75, 99: 1.1}, running_mean=900.0, running_max=1024.0)
    assert trial(second, better, worse, history) is Outcome.REVERT
    # Reverted: the command line stays at 512.

    third = step(cl, better, history)
    assert third.knob is KnobName.MAX_NUM_BATCHED_TOKENS
    assert (third.from_value, third.to_value) == (None, "4096")
