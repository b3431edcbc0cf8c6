"""The operator's own Prometheus is asked in batches whose chunk size is the
``--prometheus-max-targets-per-query`` setting; a tenant's Prometheus is never batched."""

from __future__ import annotations

from latency_tuner.adapters.metrics.batch import MAX_TARGETS_PER_QUERY, BatchedPrometheus
from latency_tuner.adapters.metrics.prometheus import PrometheusSource
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.handlers.operator import _metrics_factory
from latency_tuner.settings import OperatorSettings, parse_settings

OWN = "http://prometheus.monitoring:9090"


def spec(prometheus_url: str | None = None) -> LatencyTargetSpec:
    return LatencyTargetSpec.model_validate(
        {
            "targetRef": {"name": "llama", "container": "vllm"},
            "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
            "metrics": {"prometheusUrl": prometheus_url} if prometheus_url else {},
        }
    )


async def test_the_setting_sizes_the_chunks_of_the_operators_batched_queries() -> None:
    config = parse_settings(
        ["--prometheus-url", OWN, "--prometheus-max-targets-per-query", "40"], {}
    )
    source = await _metrics_factory(config, None)(spec(), "team-a", "llama")
    assert isinstance(source, BatchedPrometheus)
    assert source.max_targets == 40
    default = await _metrics_factory(OperatorSettings(prometheus_url=OWN), None)(
        spec(), "team-a", "llama"
    )
    assert isinstance(default, BatchedPrometheus)
    assert default.max_targets == MAX_TARGETS_PER_QUERY == 500
    source.close()
    default.close()


async def test_a_tenants_own_prometheus_is_asked_per_target() -> None:
    config = OperatorSettings(prometheus_url=OWN, allow_per_resource_prometheus_url=True)
    source = await _metrics_factory(config, None)(
        spec("http://tenant.example:9090"), "team-a", "llama"
    )
    assert isinstance(source, PrometheusSource)
    source.close()
