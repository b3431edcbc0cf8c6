"""LatencyTargets naming Prometheus URLs of their own cannot make the operator keep a thread
pool for each: past ``MAX_TENANT_SOURCES`` the oldest tenant source is closed and forgotten,
and the operator's own Prometheus is never the one dropped."""

from __future__ import annotations

from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.handlers.operator import MAX_TENANT_SOURCES, _forget_oldest_tenant_source

OWN = "http://prometheus.monitoring:9090"


def test_the_oldest_tenant_source_goes_first_and_the_operators_own_stays() -> None:
    sources = {OWN: PrometheusSource(PrometheusSettings(url=OWN))}
    for i in range(MAX_TENANT_SOURCES + 5):
        _forget_oldest_tenant_source(sources, keep=OWN)
        url = f"http://tenant-{i}.example:9090"
        sources[url] = PrometheusSource(PrometheusSettings(url=url))
    tenants = [u for u in sources if u != OWN]
    assert OWN in sources
    assert len(tenants) == MAX_TENANT_SOURCES
    assert tenants[0] == "http://tenant-5.example:9090"  # 0..4 were dropped, oldest first
    for source in sources.values():
        source.close()
