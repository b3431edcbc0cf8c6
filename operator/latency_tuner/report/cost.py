"""What tuning cost: Deployment rollouts, trials, and the GPU-hours the trials ran for.

A trial runs from the patch (``startedAt``) until its verdict, or until its rollback is done
(``finishedAt``); a running trial until ``now``. During that time every replica of the
Deployment runs the trial's configuration, so the trial holds
``duration x GPUs per pod x replicas`` GPU-hours: the serving fleet under experiment, not extra
hardware. Rollouts: one per trial, one more for each trial rolled back. Only the trials still
listed in the status are counted (the status keeps the newest ones; ``trialCount`` says how many
there were in all). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from latency_tuner.api.durations import parse_timestamp

ROLLED_BACK = {"Revert", "Inconclusive", "Failed"}  # verdicts whose change was rolled back
_GPU_CHANGE = re.compile(r"^GPU limit: \S+ -> (\d+)$")  # a line of trial.changes


@dataclass(frozen=True)
class TuningCost:
    """Rollouts, trials and GPU-hours of the trials a status lists."""

    trial_count: int  # every trial since the spec last changed (status.trialCount)
    listed_trials: int  # the trials the figures below cover (history + the running one)
    rollouts: int
    trial_seconds: float
    gpus_per_pod: int | None  # the baseline's GPU limit (None: the container sets none)
    replicas: int
    gpu_hours: float | None  # None when no GPU count is known


def tuning_cost(
    status: Mapping[str, Any], *, replicas: int, gpus_per_pod: int | None, now: datetime
) -> TuningCost:
    trials = list(status.get("trials") or [])
    running = status.get("currentTrial")
    if running:
        trials.append(running)
    rollouts, seconds, gpu_seconds = 0, 0.0, 0.0
    known = gpus_per_pod is not None
    for trial in trials:
        rollouts += 1
        rolled_back = trial.get("verdict") in ROLLED_BACK and trial.get("finishedAt")
        if rolled_back or (trial is running and status.get("phase") == "RollingBack"):
            rollouts += 1
        duration = _seconds(trial, now)
        gpus = _trial_gpus(trial, gpus_per_pod)
        seconds += duration
        if gpus is None:
            known = False
        else:
            gpu_seconds += duration * gpus * replicas
    return TuningCost(
        trial_count=max(int(status.get("trialCount") or 0), len(trials)),
        listed_trials=len(trials),
        rollouts=rollouts,
        trial_seconds=seconds,
        gpus_per_pod=gpus_per_pod,
        replicas=replicas,
        gpu_hours=gpu_seconds / 3600 if known else None,
    )


def _seconds(trial: Mapping[str, Any], now: datetime) -> float:
    if not trial.get("startedAt"):
        return 0.0
    start = parse_timestamp(trial["startedAt"])
    end = parse_timestamp(trial["finishedAt"]) if trial.get("finishedAt") else now
    return max(0.0, (end - start).total_seconds())


def _trial_gpus(trial: Mapping[str, Any], default: int | None) -> int | None:
    # A trial that changes the GPU count (tensor parallelism) holds its own count.
    container = trial.get("toContainer") or {}
    if container.get("gpuLimit") is not None:
        return int(container["gpuLimit"])
    for line in _lines(trial.get("changes")):
        match = _GPU_CHANGE.match(line)
        if match:
            return int(match.group(1))
    return default


def _lines(value: Sequence[str] | None) -> Sequence[str]:
    return value or ()
