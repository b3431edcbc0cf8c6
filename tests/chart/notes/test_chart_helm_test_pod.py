"""`helm test` runs a restricted pod that fetches the operator's metrics through its Service."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    assert "latency_tuner_reconcile_duration_seconds" in script
    compile(script, "helm-test", "exec")  # the script the pod runs is valid Python


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
