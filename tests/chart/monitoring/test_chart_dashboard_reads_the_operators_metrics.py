"""The Grafana dashboard's queries run on real Prometheus against the operator's real metrics.

The operator's metrics (``telemetry.OperatorMetrics``, recorded as the handlers record them)
are served with prometheus-client and scraped by a real Prometheus; every panel query and
every template variable of the dashboard the chart ships must then parse and return series.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import start_http_server

from latency_tuner.api.resource import LatencyTarget
from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.sandbox.prometheus import PrometheusRunner, Target, binary, free_port
from latency_tuner.telemetry import OperatorMetrics

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]
NAMESPACE, NAME = "llm", "chat-ttft"


def dashboard(render: Render) -> dict[str, Any]:
    (config_map,) = [m for m in render("everything-on") if m["kind"] == "ConfigMap"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == "grafana"
    loaded: dict[str, Any] = json.loads(config_map["data"]["latency-tuner.json"])
    return loaded


def record(metrics: OperatorMetrics) -> None:
    """What the handlers record after a reconcile that kept one trial."""
    target = LatencyTarget.from_manifest(
        {
            "apiVersion": "tuning.latencytuner.io/v1alpha1",
            "kind": "LatencyTarget",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {
                "targetRef": {"name": "chat"},
                "objectives": {
                    "ttft": {"percentile": 95, "threshold": "500ms"},
                    "itl": {"percentile": 95, "threshold": "50ms"},
                },
            },
        }
    )
    status = LatencyTargetStatus.model_validate(
        {
            "phase": "Measuring",
            "observed": {"ttftSeconds": 0.62, "itlSeconds": 0.031, "requests": 200},
        }
    )
    metrics.record_status(NAMESPACE, NAME, target.spec, status)
    metrics.trials.labels(NAMESPACE, NAME, "Keep").inc()
    metrics.patches.labels(NAMESPACE, NAME).inc()
    metrics.rollbacks.labels(NAMESPACE, NAME).inc()
    metrics.events.labels(NAMESPACE, NAME, "Kept").inc()
    metrics.errors.labels(NAMESPACE, NAME, "kubernetes").inc()
    metrics.reconcile_seconds.labels(NAMESPACE, NAME).observe(0.012)


@pytest.fixture
def prometheus_with_operator_metrics() -> Iterator[tuple[PrometheusRunner, OperatorMetrics]]:
    if binary() is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("prometheus is not installed; scripts/setup.sh installs it")
        pytest.skip("prometheus is not installed (scripts/setup.sh installs it as root)")
    metrics = OperatorMetrics()
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=metrics.registry)
    try:
        with PrometheusRunner(scrape_interval="1s") as prom:
            prom.set_targets([Target(f"127.0.0.1:{port}")])
            prom.wait_for_targets(1)
            yield prom, metrics
    finally:
        server.shutdown()
        thread.join(timeout=5)


def grafana_to_promql(expr: str) -> str:
    """Grafana's variables as Grafana would fill them for this LatencyTarget."""
    return (
        expr.replace("$namespace", NAMESPACE)
        .replace("$name", NAME)
        .replace("$__rate_interval", "15s")
    )


def query(prom: PrometheusRunner, expr: str) -> list[dict[str, Any]]:
    reply = httpx.get(f"{prom.url}/api/v1/query", params={"query": expr}, timeout=5).json()
    assert reply["status"] == "success", f"{expr}: {reply}"
    result: list[dict[str, Any]] = reply["data"]["result"]
    return result


def panel_queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]


def test_the_dashboard_is_a_grafana_dashboard_with_its_variables(render: Render) -> None:
    board = dashboard(render)
    assert board["uid"] == "latency-tuner"
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "namespace", "name"}
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]


def test_every_panel_query_returns_series_from_the_operators_metrics(
    render: Render,
    prometheus_with_operator_metrics: tuple[PrometheusRunner, OperatorMetrics],
) -> None:
    prom, metrics = prometheus_with_operator_metrics
    record(metrics)
    time.sleep(2.5)  # two scrapes before the counters move again, so rate() has its points
    record(metrics)
    queries = [(title, grafana_to_promql(expr)) for title, expr in panel_queries(dashboard(render))]
    deadline = time.monotonic() + 20
    empty = queries
    while empty and time.monotonic() < deadline:
        empty = [(title, expr) for title, expr in queries if not query(prom, expr)]
        time.sleep(0.5)
    assert not empty, f"queries with no series: {empty}"
    (ttft,) = query(prom, grafana_to_promql(panel_queries(dashboard(render))[1][1]))
    assert float(ttft["value"][1]) == pytest.approx(0.62)
    (phase,) = query(prom, grafana_to_promql(dict(panel_queries(dashboard(render)))["Phase"]))
    assert phase["metric"]["phase"] == "Measuring"
    assert query(prom, '{__name__=~"latency_tuner_.+_created"}') == []


def test_the_template_variables_list_the_latency_targets(
    render: Render,
    prometheus_with_operator_metrics: tuple[PrometheusRunner, OperatorMetrics],
) -> None:
    prom, metrics = prometheus_with_operator_metrics
    record(metrics)
    time.sleep(1.5)
    for variable in dashboard(render)["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]["query"])
        assert match, variable["query"]
        selector, label = grafana_to_promql(match.group(1)), match.group(2)
        reply = httpx.get(
            f"{prom.url}/api/v1/label/{label}/values", params={"match[]": selector}, timeout=5
        ).json()
        assert reply["status"] == "success"
        assert reply["data"] == [{"namespace": NAMESPACE, "name": NAME}[label]]


def test_the_shipped_file_and_the_rendered_config_map_agree(
    render: Render, chart_dir: Path
) -> None:
    shipped = json.loads((chart_dir / "dashboards" / "latency-tuner.json").read_text())
    assert dashboard(render) == shipped
