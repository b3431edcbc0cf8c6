"""The report's content, built from the LatencyTarget object, its events and its Deployment as
the API server returns them (plain dicts, camelCase). Pure: ``now`` is a parameter."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.report.cost import TuningCost, tuning_cost

GPU_RESOURCE_SUFFIX = "/gpu"  # nvidia.com/gpu, amd.com/gpu: a container's GPU limit


@dataclass
class TuningReport:
    """Everything a report shows. The demo fills the fields after ``problems`` too."""

    name: str
    namespace: str
    targets_met: bool
    phase: str
    objectives: dict[str, Any]
    observed: dict[str, Any]
    trials: list[dict[str, Any]]
    initial_args: list[str]
    final_args: list[str]
    cost: TuningCost
    diagnosis: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, str]] = field(default_factory=list)
    conditions: list[dict[str, Any]] = field(default_factory=list)
    # The demo's run: its scenario, how long it ran, whether its expectations held.
    scenario: str | None = None
    description: str = ""
    duration_seconds: float | None = None
    expectations_held: bool = True
    problems: list[str] = field(default_factory=list)
    metrics_source: str = ""

    @property
    def title(self) -> str:
        if self.scenario:
            return f"latency-tuner demo: {self.scenario}"
        return f"latency-tuner report: {self.namespace}/{self.name}"


def objectives_of(spec: LatencyTargetSpec) -> dict[str, Any]:
    """``{"ttft": {"percentile": 90, "thresholdSeconds": 0.5}, ...}`` for the set objectives."""
    out: dict[str, Any] = {}
    for name in ("ttft", "itl", "e2e"):
        goal = getattr(spec.objectives, name)
        if goal is not None:
            out[name] = {
                "percentile": int(goal.percentile),
                "thresholdSeconds": goal.threshold_seconds,
            }
    return out


def event_rows(items: Iterable[Mapping[str, Any]], *, name: str) -> list[dict[str, str]]:
    """The LatencyTarget's own events (core/v1 or events.k8s.io shape), oldest first."""
    rows = []
    for event in items:
        about = event.get("involvedObject") or event.get("regarding") or {}
        if about.get("kind") != "LatencyTarget" or about.get("name") != name:
            continue
        meta = event.get("metadata") or {}
        when = event.get("lastTimestamp") or event.get("eventTime") or meta.get("creationTimestamp")
        rows.append(
            {
                "time": str(when or ""),
                "type": str(event.get("type") or ""),
                "reason": str(event.get("reason") or ""),
                "message": str(event.get("message") or event.get("note") or ""),
                "count": str(event.get("count") or 1),
            }
        )
    return sorted(rows, key=lambda row: row["time"])


def build_report(
    target: Mapping[str, Any],
    *,
    events: Iterable[Mapping[str, Any]] = (),
    deployment: Mapping[str, Any] | None = None,
    now: datetime,
) -> TuningReport:
    """The report of ``target`` (a LatencyTarget object) as it stands at ``now``."""
    meta = target.get("metadata") or {}
    spec = LatencyTargetSpec.model_validate(target.get("spec") or {})
    status = dict(target.get("status") or {})
    container = _container(deployment, spec.target_ref.container)
    baseline = status.get("baseline") or {}
    final_args = _command_line(container) if container else []
    initial_args = _command_line(baseline) if baseline else final_args
    replicas = int(((deployment or {}).get("spec") or {}).get("replicas", 1) or 0)
    trials = list(status.get("trials") or [])
    if status.get("currentTrial"):
        trials.append(status["currentTrial"])
    return TuningReport(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        targets_met=_condition(status, "TargetsMet") == "True",
        phase=str(status.get("phase") or "Pending"),
        objectives=objectives_of(spec),
        observed=dict(status.get("observed") or {}),
        trials=trials,
        initial_args=initial_args,
        final_args=final_args,
        cost=tuning_cost(
            status, replicas=replicas, gpus_per_pod=_gpus(baseline, container), now=now
        ),
        diagnosis=dict(status.get("diagnosis") or {}),
        events=event_rows(events, name=str(meta.get("name", ""))),
        conditions=list(status.get("conditions") or []),
    )


def _condition(status: Mapping[str, Any], kind: str) -> str | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def _container(deployment: Mapping[str, Any] | None, name: str | None) -> dict[str, Any] | None:
    if deployment is None:
        return None
    template = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = template.get("containers") or []
    named = [c for c in containers if c.get("name") == name] if name else containers[:1]
    return dict(named[0]) if named else None


def _command_line(container: Mapping[str, Any]) -> list[str]:
    return [*(container.get("command") or []), *(container.get("args") or [])]


def _gpus(baseline: Mapping[str, Any], container: Mapping[str, Any] | None) -> int | None:
    # The baseline's limit (the configuration before any trial), else the container's now.
    for text in (baseline.get("gpuLimit"), _container_gpus(container)):
        if text is not None and str(text).isdigit():
            return int(text)
    return None


def _container_gpus(container: Mapping[str, Any] | None) -> str | None:
    limits = ((container or {}).get("resources") or {}).get("limits") or {}
    found = [str(v) for k, v in limits.items() if str(k).endswith(GPU_RESOURCE_SUFFIX)]
    return found[0] if found else None
