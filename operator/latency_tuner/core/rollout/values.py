"""Status values made from what was seen: container snapshots, metric snapshots, the
diagnosis as the status shows it, the container a change leads to. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from latency_tuner.api.durations import format_duration
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import (
    Baseline,
    ContainerSnapshot,
    Evidence,
    MetricSnapshot,
    Prediction,
    Trial,
)
from latency_tuner.api.status import Diagnosis as DiagnosisStatus
from latency_tuner.core import knobs as knob_catalog
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.diagnosis import Diagnosis
from latency_tuner.core.model import Forecast
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import TrialRecord
from latency_tuner.core.score import OBJECTIVE_NAMES, ObjectiveName
from latency_tuner.vllm.args import VllmCommandLine

DEFAULT_PERCENTILE = 95  # shown in status.observed for a latency no objective names


def container_snapshot(c: ContainerConfig) -> ContainerSnapshot:
    return ContainerSnapshot(
        command=list(c.command) if c.command is not None else None,
        args=list(c.args) if c.args is not None else None,
        image=c.image,
        gpu_limit=c.gpu_limit,
        fingerprint=c.fingerprint(),
    )


def changed_arguments(before: ContainerConfig, after: ContainerConfig) -> list[str]:
    """What differs between two containers, one line per argument, e.g.
    ``["--enable-chunked-prefill: false -> true", "--max-num-batched-tokens: (absent) -> 2048"]``;
    the model, the image and the GPU limit too when they change. A knob that sets companion
    flags shows each of them, not only its own."""
    lines: list[str] = []
    old, new = _arguments(before), _arguments(after)
    for key in [*new, *(k for k in old if k not in new)]:
        if old.get(key) != new.get(key):
            was, now = old.get(key, "(absent)"), new.get(key, "(removed)")
            lines.append(f"{key}: {was} -> {now}")
    if before.image != after.image:
        lines.append(f"image: {before.image} -> {after.image}")
    if before.gpu_limit != after.gpu_limit:
        lines.append(f"GPU limit: {before.gpu_limit} -> {after.gpu_limit}")
    return lines


def _arguments(c: ContainerConfig) -> dict[str, str]:
    # "--no-x" and "--x" are one argument (false / true); a flag without a value is "true".
    line = VllmCommandLine.parse(c.command, c.args)
    found: dict[str, str] = {"model": line.model or "(none)"}
    for key, value in line.flags():
        if key.startswith("no-"):
            found[f"--{key[3:]}"] = "false"
        else:
            found[f"--{key}"] = "true" if value is None else value
    return found


def config_of(s: ContainerSnapshot) -> ContainerConfig:
    return ContainerConfig(
        command=tuple(s.command) if s.command is not None else None,
        args=tuple(s.args) if s.args is not None else None,
        image=s.image,
        gpu_limit=s.gpu_limit,
    )


def baseline_container(baseline: Baseline) -> ContainerConfig:
    """The container a Restore on deletion puts back."""
    return ContainerConfig(
        command=tuple(baseline.command) if baseline.command is not None else None,
        args=tuple(baseline.args) if baseline.args is not None else None,
        image=baseline.image,
        gpu_limit=int(baseline.gpu_limit) if baseline.gpu_limit is not None else None,
    )


def target_container(
    change: knob_catalog.Change, cl: VllmCommandLine, current: ContainerConfig
) -> ContainerConfig:
    """The container ``current`` becomes with ``change`` applied to its command line ``cl``."""
    applied = knob_catalog.apply(change, cl)
    command, args = applied.command_line.render()
    return ContainerConfig(
        command=tuple(command) if command is not None else None,
        args=tuple(args) if args is not None else None,
        image=applied.image or current.image,
        gpu_limit=applied.gpu_limit if applied.gpu_limit is not None else current.gpu_limit,
    )


def _percentile(spec: LatencyTargetSpec, name: str) -> int:
    objective = getattr(spec.objectives, name)
    return int(objective.percentile) if objective is not None else DEFAULT_PERCENTILE


def metric_snapshot(spec: LatencyTargetSpec, obs: Observation, stamp: str) -> MetricSnapshot:
    def at(name: str) -> float | None:
        quantiles: dict[int, float] = getattr(obs, name)
        return quantiles.get(_percentile(spec, name))

    return MetricSnapshot(
        ttft_seconds=at("ttft"),
        itl_seconds=at("itl"),
        e2e_seconds=at("e2e"),
        request_rate=obs.request_rate,
        arrival_rate=obs.arrival_rate if obs.arrivals > obs.requests else None,
        prompt_tokens_mean=obs.prompt_tokens_mean,
        generation_tokens_mean=obs.generation_tokens_mean,
        concurrency=obs.load.concurrency_mean if obs.running_mean is not None else None,
        window=format_duration(obs.window_seconds),
        requests=obs.requests,
        observed_at=stamp,
    )


def arm_snapshot(
    spec: LatencyTargetSpec, arm: Sequence[Observation], stamp: str, *, pods_serving: int
) -> MetricSnapshot | None:
    """One arm of a canary trial over its intervals: each latency is the median of the
    intervals' quantiles (the samples the side-by-side test compares); the request rate and the
    requests in flight are a pod's mean times ``pods_serving`` (every pod of the trial, canary
    included), so the snapshot reads as the whole Deployment's load, like the windows the
    planner compares a finished trial's load with; ``requests`` is the arm's own count. None
    for an arm with no interval."""
    if not arm:
        return None

    def at(name: str) -> float | None:
        percentile = _percentile(spec, name)
        values = [q[percentile] for o in arm if percentile in (q := getattr(o, name))]
        return statistics.median(values) if values else None

    def mean(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return statistics.fmean(present) if present else None

    per_pod_rate = statistics.fmean(o.request_rate / max(o.pods, 1) for o in arm)
    held = mean(
        [
            o.load.concurrency_mean / max(o.pods, 1) if o.running_mean is not None else None
            for o in arm
        ]
    )
    return MetricSnapshot(
        ttft_seconds=at("ttft"),
        itl_seconds=at("itl"),
        e2e_seconds=at("e2e"),
        request_rate=per_pod_rate * pods_serving,
        prompt_tokens_mean=mean([o.prompt_tokens_mean for o in arm]),
        generation_tokens_mean=mean([o.generation_tokens_mean for o in arm]),
        concurrency=held * pods_serving if held is not None else None,
        window=format_duration(sum(o.window_seconds for o in arm)),
        requests=sum(o.requests for o in arm),
        observed_at=stamp,
    )


def diagnosis_status(d: Diagnosis) -> DiagnosisStatus:
    return DiagnosisStatus(
        bottleneck=d.bottleneck.value,
        findings=[*(f.value for f in d.findings), *d.conclusions],
        evidence=[
            Evidence(signal=e.signal, value=e.value, unit=e.unit, text=e.text) for e in d.evidence
        ],
        knobs=[k.value for k in d.knobs],
        advice=list(d.advice),
    )


def history(trials: Sequence[Trial]) -> list[TrialRecord]:
    return [TrialRecord.from_trial(t) for t in trials]


def _latency(snapshot: MetricSnapshot | None, objective: ObjectiveName) -> float | None:
    return None if snapshot is None else snapshot.latency(objective)


def predictions(
    change: knob_catalog.Change, before: MetricSnapshot | None, forecast: Forecast | None = None
) -> list[Prediction]:
    """What ``change`` is expected to do to each latency, from the window before: for each
    objective it aims at the calibrated model's forecast where it has one, else the knob's
    prior; and the model's forecast of the other latencies it expects the change to move."""
    found = []
    aimed = [objective for objective, _ in change.expected]
    for objective, prior in change.expected:
        modelled = forecast.change(objective) if forecast is not None else None
        expected = modelled if modelled is not None else -min(max(prior, 0.0), 1.0)
        found.append(_prediction(objective, expected, before, modelled is not None, aimed=True))
    for objective in OBJECTIVE_NAMES:
        modelled = forecast.change(objective) if forecast is not None else None
        if objective not in aimed and modelled is not None:
            found.append(_prediction(objective, modelled, before, True, aimed=False))
    return found


def _prediction(
    objective: ObjectiveName,
    change: float,
    before: MetricSnapshot | None,
    modelled: bool,
    *,
    aimed: bool,
) -> Prediction:
    change = max(change, -1.0)  # a latency can fall by all of itself at most
    latency = _latency(before, objective)
    return Prediction(
        objective=objective,
        basis="model" if modelled else "prior",
        aimed=aimed,
        expected_change=change,
        expected_seconds=None if latency is None else latency * (1.0 + change),
    )


def forecast_note(found: Sequence[Prediction]) -> str:
    """ "the calibrated model forecasts ITL -45%, TTFT +3%" for the model's
    predictions, "" when there are none (for the message that starts a trial)."""
    modelled = [f"{p.objective.upper()} {p.expected_change:+.0%}" for p in found
                if p.basis == "model"]  # fmt: skip
    return f"the calibrated model forecasts {', '.join(modelled)}" if modelled else ""


def scored(trial: Trial) -> Trial:
    """``trial`` with each prediction's measured change and error, from its before and after
    snapshots (the windows its verdict compared); unchanged where either has no value."""
    if not trial.predictions:
        return trial
    updated = []
    for p in trial.predictions:
        was, now = _latency(trial.before, p.objective), _latency(trial.after, p.objective)
        if was is None or now is None or was <= 0:
            updated.append(p.model_copy(update={"measured_change": None, "error": None}))
            continue
        measured = now / was - 1.0
        error = measured - p.expected_change
        # Validated again (not model_copy): the figures are rounded like every status value.
        fields = p.model_dump(by_alias=False) | {"measured_change": measured, "error": error}
        updated.append(Prediction.model_validate(fields))
    return trial.model_copy(update={"predictions": updated})
