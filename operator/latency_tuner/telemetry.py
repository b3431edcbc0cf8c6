"""The operator's own Prometheus metrics (prometheus-client), served on ``--metrics-port``.

Kept in one registry per process, never module globals: ``OperatorMetrics`` is created at
startup and handed to whoever records. Every series of a LatencyTarget carries its ``namespace``
and ``name`` and is removed when the LatencyTarget is deleted (``forget``), so the number of
series stays bounded by the live targets. No ``_created`` series: they double the series count
and no dashboard or alert reads them.
"""

from __future__ import annotations

import platform
from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import disable_created_metrics as _disable_created_metrics

from latency_tuner import __version__
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus, Phase

TARGET = ["namespace", "name"]  # the labels naming the LatencyTarget of a series
OBJECTIVES = ("ttft", "itl", "e2e")


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        _disable_created_metrics()  # type: ignore[no-untyped-call]  # process-wide, idempotent
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.trials = Counter(
            "latency_tuner_trials", "Trials finished, by verdict.", [*TARGET, "verdict"], registry=r
        )
        self.rollbacks = Counter(
            "latency_tuner_rollbacks",
            "Trials rolled back (reverted or failed).",
            TARGET,
            registry=r,
        )
        self.patches = Counter(
            "latency_tuner_deployment_patches",
            "Container patches applied to the target's Deployment.",
            TARGET,
            registry=r,
        )
        self.events = Counter(
            "latency_tuner_events", "Events posted, by reason.", [*TARGET, "reason"], registry=r
        )
        self.observed = Gauge(
            "latency_tuner_observed_seconds",
            "Latest observed latency at the objective's percentile.",
            [*TARGET, "objective"],
            registry=r,
        )
        self.target = Gauge(
            "latency_tuner_target_seconds",
            "The objective's threshold.",
            [*TARGET, "objective"],
            registry=r,
        )
        self.targets_met = Gauge(
            "latency_tuner_targets_met",
            "1 when the latest window met every objective.",
            TARGET,
            registry=r,
        )
        self.phase = Gauge(
            "latency_tuner_target_phase",
            "1 for the LatencyTarget's current phase, 0 for the others.",
            [*TARGET, "phase"],
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "latency_tuner_reconcile_duration_seconds", "Time of one reconcile.", TARGET, registry=r
        )
        self.errors = Counter(
            "latency_tuner_reconcile_errors",
            "Reconciles that raised.",
            [*TARGET, "kind"],
            registry=r,
        )
        self.build_info = Gauge(
            "latency_tuner_build_info",
            "Always 1: the operator's version and what it runs on.",
            ["version", "python_version", "kopf_version"],
            registry=r,
        )
        self.build_info.labels(__version__, platform.python_version(), _version_of("kopf")).set(1)

    def record_status(
        self, namespace: str, name: str, spec: LatencyTargetSpec, status: LatencyTargetStatus
    ) -> None:
        observed = status.observed
        for objective in OBJECTIVES:
            goal = getattr(spec.objectives, objective)
            if goal is None:
                continue
            self.target.labels(namespace, name, objective).set(goal.threshold_seconds)
            value = getattr(observed, f"{objective}_seconds") if observed else None
            if value is not None:
                self.observed.labels(namespace, name, objective).set(value)
        met = any(c.type == "TargetsMet" and c.status == "True" for c in status.conditions)
        self.targets_met.labels(namespace, name).set(1 if met else 0)
        for phase in Phase:
            self.phase.labels(namespace, name, phase.value).set(1 if phase is status.phase else 0)

    def forget(self, namespace: str, name: str) -> None:
        """Remove every series of the LatencyTarget (it was deleted)."""
        mine = {"namespace": namespace, "name": name}
        for metric in (
            self.trials,
            self.rollbacks,
            self.patches,
            self.events,
            self.observed,
            self.target,
            self.targets_met,
            self.phase,
            self.reconcile_seconds,
            self.errors,
        ):
            metric.remove_by_labels(mine)


def _version_of(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"
