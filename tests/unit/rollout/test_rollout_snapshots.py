"""Trial snapshots always hold TTFT, ITL and E2E, whichever objectives the spec names (issue 12
item 4): the latencies no objective names are recorded at p95, which every source fetches. A
window whose server fell behind also records the rate that arrived, beside the finished one."""

from __future__ import annotations

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.core import signals
from latency_tuner.core.observation import Observation
from latency_tuner.core.rollout.values import metric_snapshot
from latency_tuner.vllm.metrics import Signal

SPEC = LatencyTargetSpec.model_validate(
    {
        "targetRef": {"name": "llama", "container": "vllm"},
        "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
    }
)


def window(**answered: float) -> Observation:
    """Every aggregate a source would fetch for SPEC, answered with a plausible value: 300
    requests finished in 60 s, gauges flat unless ``answered`` says otherwise."""
    wanted = signals.queries_for([o.percentile for o in (SPEC.objectives.ttft,) if o])
    answers: dict[signals.SignalQuery, float | None] = {q: 0.05 for q in wanted}
    answers[signals.REQUESTS] = 300.0
    answers[signals.REQUEST_RATE] = 5.0
    for signal in (Signal.REQUESTS_RUNNING, Signal.REQUESTS_WAITING):
        delta = signals.SignalQuery(signals.QueryKind.GAUGE_SUM_DELTA, signal)
        answers[delta] = answered.get(signal.value, 0.0)
    obs = signals.assemble(answers, window_seconds=60.0)
    assert isinstance(obs, Observation)
    return obs


def test_a_spec_with_only_a_ttft_objective_still_snapshots_itl_and_e2e() -> None:
    snap = metric_snapshot(SPEC, window(), "2026-12-02T10:00:00Z")
    assert snap.ttft_seconds == 0.05
    assert snap.itl_seconds == 0.05
    assert snap.e2e_seconds == 0.05


def test_a_window_that_fell_behind_snapshots_the_arrival_rate_beside_the_finished_one() -> None:
    # 300 finished, and 120 more piled up in the queue: 7 requests/s arrived, 5/s finished.
    behind = window(**{Signal.REQUESTS_WAITING.value: 120.0})
    snap = metric_snapshot(SPEC, behind, "2026-12-02T10:00:00Z")
    assert snap.request_rate == 5.0
    assert snap.arrival_rate == 7.0
    assert metric_snapshot(SPEC, window(), "2026-12-02T10:00:00Z").arrival_rate is None
