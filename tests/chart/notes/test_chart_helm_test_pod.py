"""`helm test` runs a restricted pod that fetches the operator's metrics through its Service."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, start_http_server

from latency_tuner import __version__
from latency_tuner.telemetry import OperatorMetrics

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]


def helm_test_pod(manifests: list[Manifest]) -> Manifest:
    (pod,) = [m for m in manifests if m["kind"] == "Pod"]
    return pod


def test_the_test_pod_is_a_helm_test_hook_that_asks_the_metrics_service(render: Render) -> None:
    manifests = render("defaults")
    pod = helm_test_pod(manifests)
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (service,) = [m for m in manifests if m["kind"] == "Service"]
    (container,) = pod["spec"]["containers"]
    script = container["args"][0]
    url = (
        f"http://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:"
        f"{service['spec']['ports'][0]['port']}/metrics"
    )
    assert url in script
    compile(script, "helm-test", "exec")  # the script the pod runs is valid Python


def test_the_test_pods_script_passes_on_the_operators_metrics_and_fails_on_others(
    render: Render,
) -> None:
    (container,) = helm_test_pod(render("defaults"))["spec"]["containers"]
    script: str = container["args"][0]
    (url,) = re.findall(r'url = "([^"]+)"', script)
    metrics = OperatorMetrics()
    server, thread = start_http_server(0, addr="127.0.0.1", registry=metrics.registry)
    other = CollectorRegistry()  # an exporter that is not the operator's
    Gauge("up_and_running", "Something else.", registry=other).set(1)
    server2, thread2 = start_http_server(0, addr="127.0.0.1", registry=other)
    try:
        ours = _run(script.replace(url, f"http://127.0.0.1:{server.server_port}/metrics"))
        theirs = _run(script.replace(url, f"http://127.0.0.1:{server2.server_port}/metrics"))
    finally:
        for s, t in ((server, thread), (server2, thread2)):
            s.shutdown()
            t.join(timeout=5)
    assert ours.returncode == 0, ours.stderr
    assert f'version="{__version__}"' in ours.stdout
    assert theirs.returncode != 0
    assert "without the operator's metrics" in theirs.stderr


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )


def test_the_test_pod_is_as_restricted_as_the_operator(render: Render) -> None:
    manifests = render("defaults")
    pod = helm_test_pod(manifests)
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    operator_spec = deployment["spec"]["template"]["spec"]
    assert pod["spec"]["securityContext"] == operator_spec["securityContext"]
    assert (
        pod["spec"]["containers"][0]["securityContext"]
        == (operator_spec["containers"][0]["securityContext"])
    )
    assert pod["spec"]["automountServiceAccountToken"] is False
