"""Values reach the operator as the LT_* environment variables `latency-tuner run` reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def deployment(manifests: list[Manifest]) -> Manifest:
    (found,) = of_kind(manifests, "Deployment")
    return found


def container(manifests: list[Manifest]) -> dict[str, Any]:
    (found,) = deployment(manifests)["spec"]["template"]["spec"]["containers"]
    return dict(found)


def env(manifests: list[Manifest]) -> dict[str, Any]:
    """name -> value, or name -> valueFrom for variables taken from elsewhere."""
    variables = container(manifests)["env"]
    names = [v["name"] for v in variables]
    assert len(names) == len(set(names)), "an env var is set twice"
    return {v["name"]: v.get("value", v.get("valueFrom")) for v in variables}


def test_defaults_give_the_operator_every_setting_it_reads(render: Render) -> None:
    assert {k: v for k, v in env(render("defaults")).items() if k.startswith("LT_")} == {
        "LT_METRICS_SOURCE": "prometheus",
        "LT_PROMETHEUS_URL": "http://prometheus-operated.monitoring:9090",
        "LT_PROMETHEUS_TIMEOUT": "10s",
        "LT_PROMETHEUS_MAX_TARGETS_PER_QUERY": "500",
        "LT_ALLOW_PER_RESOURCE_PROMETHEUS_URL": "false",
        "LT_NAMESPACES": "",
        "LT_INTERVAL": "30s",
        "LT_LOG_LEVEL": "info",
        "LT_LOG_FORMAT": "plain",
        "LT_STANDALONE": "true",
        "LT_METRICS_PORT": "8080",
        "LT_PROBE_PORT": "8081",
    }


def test_the_operator_runs_with_the_run_command(render: Render) -> None:
    found = container(render("defaults"))
    assert found["args"] == ["run"]
    assert "command" not in found  # the image's ENTRYPOINT is latency-tuner
    assert found["image"] == "ghcr.io/latency-tuner/latency-tuner:0.1.0"


def test_one_replica_is_standalone_and_is_replaced_not_surged(render: Render) -> None:
    manifests = render("defaults")
    assert env(manifests)["LT_STANDALONE"] == "true"
    assert "LT_PEERING_NAME" not in env(manifests)
    assert deployment(manifests)["spec"]["strategy"] == {"type": "Recreate"}
    assert not of_kind(manifests, "PodDisruptionBudget")
    assert not of_kind(manifests, "ClusterKopfPeering")


def test_several_replicas_peer_through_a_cluster_peering_and_get_a_budget(
    render: Render,
) -> None:
    manifests = render("peering")
    variables = env(manifests)
    assert variables["LT_STANDALONE"] == "false"
    assert variables["LT_PEERING_NAME"] == "latency-tuner"
    assert variables["POD_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert deployment(manifests)["spec"]["replicas"] == 3
    (peering,) = of_kind(manifests, "ClusterKopfPeering")
    assert peering["metadata"]["name"] == "latency-tuner"
    (budget,) = of_kind(manifests, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    pod_labels = deployment(manifests)["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_namespaced_peering_puts_a_kopf_peering_in_each_watched_namespace(
    render: Render,
) -> None:
    manifests = render("namespaced-peering")
    peerings = of_kind(manifests, "KopfPeering")
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["team-a", "team-b"]
    assert not of_kind(manifests, "ClusterKopfPeering")
    assert env(manifests)["LT_NAMESPACES"] == "team-a,team-b"


def test_the_bearer_token_is_a_read_only_file_from_the_named_secret_key(render: Render) -> None:
    """A file, not an env var: it never shows in `kubectl describe pod`, and rotates in place."""
    manifests = render("prometheus-secret-auth")
    variables = env(manifests)
    assert "LT_PROMETHEUS_BEARER_TOKEN" not in variables
    token_file = variables["LT_PROMETHEUS_BEARER_TOKEN_FILE"]
    assert token_file.endswith("/bearer")
    (mount,) = [
        m for m in container(manifests)["volumeMounts"] if token_file.startswith(m["mountPath"])
    ]
    assert mount["readOnly"] is True
    (volume,) = [
        v
        for v in deployment(manifests)["spec"]["template"]["spec"]["volumes"]
        if v["name"] == mount["name"]
    ]
    assert volume["secret"]["secretName"] == "prom-token"
    assert volume["secret"]["items"] == [{"key": "bearer", "path": "bearer"}]
    assert variables["LT_PROMETHEUS_URL"] == "https://prometheus.example.internal:9091"
    defaults = env(render("defaults"))
    assert "LT_PROMETHEUS_BEARER_TOKEN" not in defaults
    assert "LT_PROMETHEUS_BEARER_TOKEN_FILE" not in defaults


def test_the_ca_from_a_secret_is_mounted_read_only_where_the_operator_looks(
    render: Render,
) -> None:
    manifests = render("prometheus-secret-auth")
    ca_file = env(manifests)["LT_PROMETHEUS_CA_FILE"]
    (mount,) = [
        m for m in container(manifests)["volumeMounts"] if ca_file.startswith(m["mountPath"])
    ]
    assert mount["readOnly"] is True
    assert ca_file == f"{mount['mountPath']}/ca.pem"
    volumes = deployment(manifests)["spec"]["template"]["spec"]["volumes"]
    (volume,) = [v for v in volumes if v["name"] == mount["name"]]
    assert volume["secret"] == {
        "secretName": "prom-ca",
        "items": [{"key": "ca.pem", "path": "ca.pem"}],
    }


def test_the_ca_can_come_from_a_config_map(render: Render) -> None:
    manifests = render("prometheus-ca-configmap")
    ca_file = env(manifests)["LT_PROMETHEUS_CA_FILE"]
    assert ca_file.endswith("/bundle.pem")
    volumes = deployment(manifests)["spec"]["template"]["spec"]["volumes"]
    (volume,) = [v for v in volumes if "configMap" in v]
    assert volume["configMap"]["name"] == "trust-bundle"
    assert "LT_PROMETHEUS_CA_FILE" not in env(render("defaults"))


def test_json_logs_and_debug_level_reach_the_operator(render: Render) -> None:
    variables = env(render("json-logs"))
    assert variables["LT_LOG_FORMAT"] == "json"
    assert variables["LT_LOG_LEVEL"] == "debug"


def test_scrape_mode_needs_no_prometheus_url(render: Render) -> None:
    variables = env(render("scrape-without-nodes"))
    assert variables["LT_METRICS_SOURCE"] == "scrape"
    assert "LT_PROMETHEUS_URL" not in variables


def test_scheduling_values_reach_the_pod(render: Render) -> None:
    manifests = render("scheduling")
    template = deployment(manifests)["spec"]["template"]
    spec = template["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert "nodeAffinity" in spec["affinity"]
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["imagePullSecrets"] == [{"name": "registry-creds"}]
    assert template["metadata"]["annotations"]["example.com/owner"] == "ml-platform"
    assert template["metadata"]["labels"]["team"] == "ml-platform"
    assert env(manifests)["HTTPS_PROXY"] == "http://proxy:3128"


def test_the_metrics_service_and_monitors_point_at_the_metrics_port(render: Render) -> None:
    manifests = render("operator-monitors")
    (service,) = of_kind(manifests, "Service")
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}
    ]
    (service_monitor,) = of_kind(manifests, "ServiceMonitor")
    assert service_monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert (
        service_monitor["spec"]["selector"]["matchLabels"].items()
        <= service["metadata"]["labels"].items()
    )
    assert service_monitor["spec"]["endpoints"][0]["port"] == "metrics"
    (pod_monitor,) = of_kind(manifests, "PodMonitor")
    assert pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    assert not of_kind(render("defaults"), "ServiceMonitor")
    assert not of_kind(render("defaults"), "PodMonitor")


def test_the_vllm_pod_monitor_selects_the_configured_pods_and_namespaces(render: Render) -> None:
    (monitor,) = of_kind(render("vllm-podmonitor"), "PodMonitor")
    assert monitor["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": "vllm"}}
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["inference"]}
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "http"
    assert monitor["metadata"]["labels"]["team"] == "ml"


def test_the_vllm_pod_monitor_follows_the_watched_namespaces_by_default(render: Render) -> None:
    (monitor,) = of_kind(render("vllm-podmonitor-namespaced"), "PodMonitor")
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["team-a"]}
