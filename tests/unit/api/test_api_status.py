"""Status values: what the operator writes is what it reads back after a restart."""

from __future__ import annotations

from typing import Any

from latency_tuner.api import (
    TRIAL_HISTORY_LIMIT,
    Baseline,
    Diagnosis,
    Evidence,
    JsonPatchOperation,
    LatencyTargetStatus,
    MetricSnapshot,
    Phase,
    Recommendation,
    Trial,
    Verdict,
    with_trial,
)

NOW = "2026-12-02T09:00:00Z"


def trial(number: int, **extra: Any) -> Trial:
    return Trial(id=number, knob="maxNumBatchedTokens", started_at=NOW, **extra)


def test_the_phases_are_the_documented_ones() -> None:
    assert [str(p) for p in Phase] == [
        "Observing",
        "RollingOut",
        "Settling",
        "Measuring",
        "RollingBack",
        "Promoting",
        "Converged",
        "Paused",
        "Exhausted",
        "Failed",
    ]
    assert Phase("RollingOut") is Phase.ROLLING_OUT
    assert [str(v) for v in Verdict] == ["Keep", "Revert", "Inconclusive", "Failed"]


def test_a_trial_is_written_with_from_and_to_keys() -> None:
    written = trial(1, from_value="2048", to_value="8192").model_dump(mode="json")
    assert written["from"] == "2048"
    assert written["to"] == "8192"
    assert "fromValue" not in written
    assert Trial.model_validate(written).from_value == "2048"


def test_observed_latencies_are_also_written_as_durations_for_the_printer_columns() -> None:
    snapshot = MetricSnapshot(ttft_seconds=0.4123, itl_seconds=0.021, requests=120)
    written = snapshot.model_dump(mode="json", exclude_none=True)
    assert written["ttft"] == "412.3ms"
    assert written["itl"] == "21ms"
    assert "e2e" not in written
    assert MetricSnapshot.model_validate(written) == snapshot


def test_a_full_status_survives_a_write_and_a_read() -> None:
    status = LatencyTargetStatus(
        phase=Phase.MEASURING,
        phase_since=NOW,
        observed_generation=4,
        observed=MetricSnapshot(ttft_seconds=0.9, request_rate=3.5, window="5m", observed_at=NOW),
        diagnosis=Diagnosis(
            bottleneck="Queueing",
            findings=["requests wait in queue"],
            evidence=[Evidence(signal="queue_p95", value=1.2, unit="s", text="1.2s in queue")],
            knobs=["maxNumSeqs"],
            advice=["add replicas"],
        ),
        baseline=Baseline(
            container="vllm",
            command=["vllm", "serve"],
            args=["m"],
            image="vllm/vllm-openai:v0.9",
            gpu_limit="1",
            config_hash="abc",
            captured_at=NOW,
        ),
        current_trial=trial(2, config_hash="def"),
        trials=[trial(1, verdict=Verdict.KEEP, reason="ttft -30%", finished_at=NOW)],
        trial_count=2,
        recommendation=Recommendation(
            knob="maxNumSeqs",
            from_value=None,
            to_value="256",
            patch=[JsonPatchOperation(op="add", path="/spec/x", value={"a": [1]})],
            reason="queueing",
        ),
    )
    written = status.model_dump(mode="json", exclude_none=True)
    assert written["currentTrial"]["configHash"] == "def"
    assert written["recommendation"]["to"] == "256"
    assert LatencyTargetStatus.model_validate(written) == status


def test_a_status_from_another_version_with_unknown_keys_still_loads() -> None:
    status = LatencyTargetStatus.model_validate({"phase": "Converged", "futureField": {"x": 1}})
    assert status.phase is Phase.CONVERGED


def test_the_trial_history_is_bounded_and_keeps_the_newest() -> None:
    trials: list[Trial] = []
    for number in range(1, TRIAL_HISTORY_LIMIT + 6):
        trials = with_trial(trials, trial(number))
    assert len(trials) == TRIAL_HISTORY_LIMIT
    assert trials[-1].id == TRIAL_HISTORY_LIMIT + 5
    assert trials[0].id == 6


def test_an_overlong_history_is_trimmed_on_read_rather_than_refused() -> None:
    raw = [trial(n).model_dump(mode="json") for n in range(1, TRIAL_HISTORY_LIMIT + 3)]
    status = LatencyTargetStatus.model_validate({"trials": raw, "trialCount": len(raw)})
    assert len(status.trials) == TRIAL_HISTORY_LIMIT
    assert status.trial_count == TRIAL_HISTORY_LIMIT + 2
