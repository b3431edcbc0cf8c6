"""Under sparse traffic every trial may come out Inconclusive and each window's load differs by
chance: the planner must not retry the same change until the budget ends (issue 19)."""

from __future__ import annotations

from tests.unit.core.builders import A100, command_line, knobs, objectives, queueing

from latency_tuner.api.status import Verdict
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.observation import LoadFingerprint
from latency_tuner.core.planner import MAX_INCONCLUSIVE_ANY_LOAD, TrialRecord, plan

TTFT = objectives(ttft="500ms")
SEQS = KnobName.MAX_NUM_SEQS.value
WINDOW = queueing(running_mean=500.0, running_max=512.0, requests=40, request_rate=0.67)
CL = command_line()


def first_change(history: list[TrialRecord]) -> Change:
    spec = knobs()
    d = diagnose(WINDOW, TTFT, CL, A100, spec)
    change = plan(d, WINDOW, CL, spec, A100, history)
    assert isinstance(change, Change), change
    return change


def load(rate: float, requests: int | None) -> LoadFingerprint:
    return WINDOW.load.model_copy(
        update={"request_rate": rate, "concurrency_mean": rate * 400, "requests": requests}
    )


def test_an_inconclusive_change_rests_after_three_tries_whatever_the_load_did() -> None:
    # Each window's load differs from the current one beyond any tolerance.
    moving = [
        TrialRecord(SEQS, None, "512", Verdict.INCONCLUSIVE, load(rate, None))
        for rate in (3.0, 6.0, 12.0)
    ]
    assert first_change(moving[:2]).to_value == "512"
    assert MAX_INCONCLUSIVE_ANY_LOAD == 3
    change = first_change(moving)
    assert (change.knob, change.to_value) != (KnobName.MAX_NUM_SEQS, "512")


def test_loads_that_differ_by_the_counting_noise_of_sparse_windows_are_comparable() -> None:
    # 28 and 55 requests against the current 40: chance for counts this small, so two
    # Inconclusive trials under them count as under a comparable load.
    sparse = [
        TrialRecord(SEQS, None, "512", Verdict.INCONCLUSIVE, load(0.47, 28)),
        TrialRecord(SEQS, None, "512", Verdict.INCONCLUSIVE, load(0.92, 55)),
    ]
    change = first_change(sparse)
    assert (change.knob, change.to_value) != (KnobName.MAX_NUM_SEQS, "512")
