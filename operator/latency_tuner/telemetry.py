"""The operator's own Prometheus metrics (prometheus-client), served on ``--metrics-port``.

Kept in one registry per process, never module globals: ``OperatorMetrics`` is created at
startup and handed to whoever records.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.trials = Counter(
            "latency_tuner_trials", "Trials finished, by verdict.", ["verdict"], registry=r
        )
        self.rollbacks = Counter(
            "latency_tuner_rollbacks", "Trials rolled back (reverted or failed).", registry=r
        )
        self.patches = Counter(
            "latency_tuner_deployment_patches", "Container patches applied.", registry=r
        )
        self.events = Counter(
            "latency_tuner_events", "Events posted, by reason.", ["reason"], registry=r
        )
        self.observed = Gauge(
            "latency_tuner_observed_seconds",
            "Latest observed latency at the objective's percentile.",
            ["namespace", "name", "objective"],
            registry=r,
        )
        self.target = Gauge(
            "latency_tuner_target_seconds",
            "The objective's threshold.",
            ["namespace", "name", "objective"],
            registry=r,
        )
        self.targets_met = Gauge(
            "latency_tuner_targets_met",
            "1 when the latest window met every objective.",
            ["namespace", "name"],
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "latency_tuner_reconcile_duration_seconds", "Time of one reconcile.", registry=r
        )
        self.errors = Counter(
            "latency_tuner_reconcile_errors", "Reconciles that raised.", ["kind"], registry=r
        )

    def record_status(
        self, namespace: str, name: str, spec: LatencyTargetSpec, status: LatencyTargetStatus
    ) -> None:
        observed = status.observed
        for objective in ("ttft", "itl", "e2e"):
            goal = getattr(spec.objectives, objective)
            if goal is None:
                continue
            self.target.labels(namespace, name, objective).set(goal.threshold_seconds)
            value = getattr(observed, f"{objective}_seconds") if observed else None
            if value is not None:
                self.observed.labels(namespace, name, objective).set(value)
        met = any(c.type == "TargetsMet" and c.status == "True" for c in status.conditions)
        self.targets_met.labels(namespace, name).set(1 if met else 0)

    def forget(self, namespace: str, name: str) -> None:
        for gauge in (self.observed, self.target):
            for objective in ("ttft", "itl", "e2e"):
                with contextlib.suppress(KeyError):
                    gauge.remove(namespace, name, objective)
        with contextlib.suppress(KeyError):
            self.targets_met.remove(namespace, name)
