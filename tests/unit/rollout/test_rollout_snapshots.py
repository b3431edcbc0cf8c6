"""Trial snapshots always hold TTFT, ITL and E2E, whichever objectives the spec names (issue 12
item 4): the latencies no objective names are recorded at p95, which every source fetches."""

from __future__ import annotations

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.core import signals
from latency_tuner.core.observation import Observation
from latency_tuner.core.rollout.values import metric_snapshot


def test_a_spec_with_only_a_ttft_objective_still_snapshots_itl_and_e2e() -> None:
    spec = LatencyTargetSpec.model_validate(
        {
            "targetRef": {"name": "llama", "container": "vllm"},
            "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
        }
    )
    # Every aggregate a source would fetch for this spec, answered with a plausible value.
    wanted = signals.queries_for([o.percentile for o in (spec.objectives.ttft,) if o])
    answers: dict[signals.SignalQuery, float | None] = {q: 0.05 for q in wanted}
    answers[signals.REQUESTS] = 300.0
    answers[signals.REQUEST_RATE] = 5.0
    obs = signals.assemble(answers, window_seconds=60.0)
    assert isinstance(obs, Observation)
    snap = metric_snapshot(spec, obs, "2026-12-02T10:00:00Z")
    assert snap.ttft_seconds == 0.05
    assert snap.itl_seconds == 0.05
    assert snap.e2e_seconds == 0.05
