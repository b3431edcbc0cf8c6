"""`sharding.shards` renders one Deployment per shard, each with its shard index, its replicas,
its own kopf peering (the name the operator itself derives) and PodDisruptionBudget; one shard
renders no trace of sharding."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from latency_tuner.settings import parse_settings

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]
SHARD_LABEL = "latencytuner.io/shard"


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def env(deployment: Manifest) -> dict[str, str]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {v["name"]: v["value"] for v in container["env"] if "value" in v}


def settings_of(deployment: Manifest) -> Any:
    """The settings the operator in this Deployment's pods would run with."""
    lt = {k: v for k, v in env(deployment).items() if k.startswith("LT_")}
    return parse_settings([], {**lt, "HOSTNAME": "pod-abc12"})


def test_one_shard_renders_one_deployment_without_shard_settings_or_labels(
    render: Render,
) -> None:
    for option_set in ("defaults", "peering"):
        (deployment,) = of_kind(render(option_set), "Deployment")
        assert deployment["metadata"]["name"] == "lt-latency-tuner"
        assert not any(k.startswith("LT_SHARD") for k in env(deployment))
        assert SHARD_LABEL not in deployment["spec"]["selector"]["matchLabels"]
        assert settings_of(deployment).shards == 1


def test_each_shard_is_a_deployment_that_runs_as_its_own_index(render: Render) -> None:
    deployments = of_kind(render("sharded"), "Deployment")
    names = [d["metadata"]["name"] for d in deployments]
    assert names == [f"lt-latency-tuner-shard-{i}" for i in range(3)]
    for index, deployment in enumerate(deployments):
        settings = settings_of(deployment)
        assert (settings.shard_index, settings.shards, settings.shard_mode) == (index, 3, "hash")
        assert settings.standalone  # one replica per shard: no peering
        assert deployment["spec"]["strategy"]["type"] == "Recreate"
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector[SHARD_LABEL] == str(index)
        assert deployment["spec"]["template"]["metadata"]["labels"][SHARD_LABEL] == str(index)
    assert not of_kind(render("sharded"), "ClusterKopfPeering")


def test_replicas_of_a_shard_peer_only_with_each_other(render: Render) -> None:
    manifests = render("sharded-peering-namespaced")
    deployments = of_kind(manifests, "Deployment")
    peerings = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in of_kind(
        manifests, "KopfPeering")}  # fmt: skip
    wanted = set()
    for deployment in deployments:
        settings = settings_of(deployment)
        assert deployment["spec"]["replicas"] == 2
        assert not settings.standalone
        assert (settings.shard_mode, settings.shard_lease_seconds) == ("label", 300.0)
        wanted |= {(ns, settings.shard_peering_name) for ns in ("team-a", "team-b")}
    assert peerings == wanted
    assert len(wanted) == 4  # two shards in two namespaces


def test_each_shard_has_a_disruption_budget_over_its_own_pods(render: Render) -> None:
    manifests = render("sharded-peering-namespaced")
    budgets = {b["metadata"]["name"]: b for b in of_kind(manifests, "PodDisruptionBudget")}
    for deployment in of_kind(manifests, "Deployment"):
        budget = budgets.pop(deployment["metadata"]["name"])
        assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert not budgets


def test_a_lease_other_than_the_default_reaches_even_a_single_operator(helm: Any) -> None:
    result = helm.template({"sharding": {"lease": "10m"}})
    assert result.returncode == 0, result.stderr
    assert "LT_SHARD_LEASE" in result.stdout
    assert '"10m"' in result.stdout
