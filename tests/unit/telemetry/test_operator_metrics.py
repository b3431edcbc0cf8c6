"""The operator's own metrics: every series of a LatencyTarget names it and goes when it is
deleted, the phase gauge is 1 for the current phase only, build info is exported, and no
``_created`` series are (prometheus-client's exposition, read back with its parser)."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from latency_tuner import __version__
from latency_tuner.api.resource import LatencyTarget
from latency_tuner.api.status import LatencyTargetStatus, Phase
from latency_tuner.telemetry import OperatorMetrics

SPEC = LatencyTarget.from_manifest(
    {
        "apiVersion": "tuning.latencytuner.io/v1alpha1",
        "kind": "LatencyTarget",
        "metadata": {"name": "chat", "namespace": "llm"},
        "spec": {
            "targetRef": {"name": "chat"},
            "objectives": {"ttft": {"percentile": 95, "threshold": "500ms"}},
        },
    }
).spec


def samples(metrics: OperatorMetrics) -> list[tuple[str, dict[str, str], float]]:
    text = generate_latest(metrics.registry).decode()
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def record(metrics: OperatorMetrics, namespace: str, name: str, phase: Phase) -> None:
    status = LatencyTargetStatus.model_validate(
        {"phase": phase.value, "observed": {"ttftSeconds": 0.7, "requests": 100}}
    )
    metrics.record_status(namespace, name, SPEC, status)
    metrics.trials.labels(namespace, name, "Keep").inc()
    metrics.rollbacks.labels(namespace, name).inc()
    metrics.patches.labels(namespace, name).inc(2)
    metrics.events.labels(namespace, name, "Kept").inc()
    metrics.errors.labels(namespace, name, "kubernetes").inc()
    metrics.reconcile_seconds.labels(namespace, name).observe(0.02)


def test_every_series_but_build_info_names_its_latency_target() -> None:
    metrics = OperatorMetrics()
    record(metrics, "llm", "chat", Phase.MEASURING)
    found = samples(metrics)
    names = {n for n, _, _ in found}
    assert {
        "latency_tuner_trials_total",
        "latency_tuner_rollbacks_total",
        "latency_tuner_deployment_patches_total",
        "latency_tuner_events_total",
        "latency_tuner_reconcile_errors_total",
        "latency_tuner_reconcile_duration_seconds_count",
        "latency_tuner_target_phase",
        "latency_tuner_observed_seconds",
    } <= names
    for name, labels, _ in found:
        if name != "latency_tuner_build_info":
            assert (labels["namespace"], labels["name"]) == ("llm", "chat"), name


def test_no_created_series_are_exported() -> None:
    metrics = OperatorMetrics()
    record(metrics, "llm", "chat", Phase.OBSERVING)
    assert "_created" not in generate_latest(metrics.registry).decode()


def test_the_phase_gauge_is_one_for_the_current_phase_only() -> None:
    metrics = OperatorMetrics()
    record(metrics, "llm", "chat", Phase.MEASURING)
    record(metrics, "llm", "chat", Phase.ROLLING_BACK)
    phases = {
        labels["phase"]: value
        for name, labels, value in samples(metrics)
        if name == "latency_tuner_target_phase"
    }
    assert phases == {p.value: (1.0 if p is Phase.ROLLING_BACK else 0.0) for p in Phase}


def test_build_info_carries_the_version() -> None:
    (info,) = [s for s in samples(OperatorMetrics()) if s[0] == "latency_tuner_build_info"]
    assert info[1]["version"] == __version__
    assert info[1]["kopf_version"] != "unknown"
    assert info[2] == 1.0


def test_forgetting_a_deleted_target_removes_its_series_and_keeps_the_others() -> None:
    metrics = OperatorMetrics()
    record(metrics, "llm", "chat", Phase.MEASURING)
    record(metrics, "llm", "rag", Phase.OBSERVING)
    metrics.forget("llm", "chat")
    left = {labels.get("name") for name, labels, _ in samples(metrics)}
    assert "chat" not in left
    assert "rag" in left
