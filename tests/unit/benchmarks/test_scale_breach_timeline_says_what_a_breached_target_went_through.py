"""The scale benchmark's breach timeline: each status write of a breached target is kept with
what tells a stuck target from a slow one (phase, window, diagnosis, conditions, trial)."""

from __future__ import annotations

from benchmarks.scale.run import _status_event


def test_a_status_write_keeps_phase_window_diagnosis_conditions_and_trial() -> None:
    status = {
        "phase": "RollingOut",
        "observed": {"ttftSeconds": 2.35, "observedAt": "2026-12-04T14:00:27Z", "requests": 1807},
        "diagnosis": {"bottleneck": "Queueing"},
        "conditions": [
            {"type": "MetricsAvailable", "status": "True", "reason": "Measured"},
            {"type": "TargetsMet", "status": "False", "reason": "TargetsMissed"},
        ],
        "currentTrial": {"id": 1},
    }
    event = _status_event("lt-0000", status)
    assert {k: v for k, v in event.items() if k != "t"} == {
        "target": "lt-0000",
        "event": "status",
        "phase": "RollingOut",
        "ttft_s": 2.35,
        "observed_at": "2026-12-04T14:00:27Z",
        "requests": 1807,
        "bottleneck": "Queueing",
        "conditions": {"MetricsAvailable": "True Measured", "TargetsMet": "False TargetsMissed"},
        "trial": True,
    }


def test_a_status_without_a_window_says_so_rather_than_failing() -> None:
    event = _status_event("lt-2000", {"phase": "Observing"})
    assert (event["phase"], event["ttft_s"], event["bottleneck"], event["trial"]) == (
        "Observing", None, None, False,
    )  # fmt: skip
    assert event["conditions"] == {}
