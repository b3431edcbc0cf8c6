"""What tuning cost, from a status: rollouts (one per trial, one more per rollback), and the
GPU-hours the trials held (duration x GPUs per pod x replicas), a running trial up to now."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from latency_tuner.report.cost import tuning_cost

NOW = datetime(2026, 12, 2, 21, 0, tzinfo=UTC)


def trial(
    number: int, start: str, end: str | None, verdict: str | None, **more: Any
) -> dict[str, Any]:
    out = {"id": number, "knob": "maxNumSeqs", "startedAt": start, "verdict": verdict, **more}
    if end:
        out["finishedAt"] = end
    return out


def test_kept_and_reverted_trials_cost_their_rollouts_and_their_gpu_hours() -> None:
    status = {
        "trialCount": 2,
        "trials": [
            trial(1, "2026-12-02T20:00:00Z", "2026-12-02T20:10:00Z", "Keep"),
            trial(2, "2026-12-02T20:20:00Z", "2026-12-02T20:35:00Z", "Revert"),
        ],
    }
    cost = tuning_cost(status, replicas=3, gpus_per_pod=2, now=NOW)
    assert cost.rollouts == 3  # two patches, one rollback
    assert cost.trial_seconds == 1500
    assert cost.gpu_hours == pytest.approx(1500 * 2 * 3 / 3600)
    assert (cost.trial_count, cost.listed_trials) == (2, 2)


def test_a_running_trial_counts_up_to_now_and_a_rolling_back_one_counts_its_rollback() -> None:
    running = trial(3, "2026-12-02T20:50:00Z", None, "Revert")
    status = {"phase": "RollingBack", "trialCount": 7, "trials": [], "currentTrial": running}
    cost = tuning_cost(status, replicas=1, gpus_per_pod=1, now=NOW)
    assert cost.trial_seconds == 600
    assert cost.rollouts == 2
    assert (cost.trial_count, cost.listed_trials) == (7, 1)  # older trials no longer listed


def test_a_trial_that_changed_the_gpu_count_holds_its_own_count() -> None:
    wider = trial(
        1, "2026-12-02T20:00:00Z", "2026-12-02T21:00:00Z", "Keep",
        changes=["--tensor-parallel-size: 1 -> 2", "GPU limit: 1 -> 2"],
    )  # fmt: skip
    cost = tuning_cost({"trials": [wider]}, replicas=2, gpus_per_pod=1, now=NOW)
    assert cost.gpu_hours == pytest.approx(4.0)


def test_without_a_gpu_limit_the_gpu_hours_are_unknown_not_zero() -> None:
    status = {"trials": [trial(1, "2026-12-02T20:00:00Z", "2026-12-02T20:10:00Z", "Keep")]}
    cost = tuning_cost(status, replicas=1, gpus_per_pod=None, now=NOW)
    assert cost.gpu_hours is None
    assert cost.trial_seconds == 600
