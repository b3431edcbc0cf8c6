"""The opt-in NetworkPolicy lets only the listed peers reach the operator's metrics port."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]


def policy(manifests: list[Manifest]) -> Manifest | None:
    found = [m for m in manifests if m["kind"] == "NetworkPolicy"]
    return found[0] if found else None


def test_there_is_no_network_policy_unless_asked(render: Render) -> None:
    assert policy(render("defaults")) is None


def test_it_selects_the_operator_pods_and_admits_only_the_metrics_port(render: Render) -> None:
    manifests = render("everything-on")
    found = policy(manifests)
    assert found is not None
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert found["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    (ingress,) = found["spec"]["ingress"]
    assert ingress["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert ingress["from"] == [
        {
            "namespaceSelector": {},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]
    container_ports = {
        p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    }
    assert "metrics" in container_ports


def test_listed_egress_restricts_egress_and_keeps_dns(render: Render) -> None:
    found = policy(render("everything-on"))
    assert found is not None
    assert found["spec"]["policyTypes"] == ["Ingress", "Egress"]
    dns, api = found["spec"]["egress"]
    assert {(p["port"], p["protocol"]) for p in dns["ports"]} == {(53, "UDP"), (53, "TCP")}
    assert api == {"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"port": 443}]}


def test_without_egress_rules_egress_is_left_open(helm: Any) -> None:
    result = helm.template({"networkPolicy": {"enabled": True}})
    assert result.returncode == 0, result.stderr
    (found,) = [d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "NetworkPolicy"]
    assert found["spec"]["policyTypes"] == ["Ingress"]
    assert "egress" not in found["spec"]
