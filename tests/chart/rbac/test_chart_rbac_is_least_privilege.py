"""The operator's RBAC: exactly the verbs it needs, no wildcards, never Secrets.

Cluster-wide (the default) renders one ClusterRole; namespaced mode renders a Role per listed
namespace and a ClusterRole holding only cluster-scoped reads. Peering rules appear only with
more than one replica (kopf does not touch peering objects when standalone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]
Rules = dict[tuple[str, str], frozenset[str]]

READ = frozenset({"get", "list", "watch"})
NAMESPACED_RULES: Rules = {
    # kopf watches and patches (finalizer, annotations); the operator reads one fresh and lists
    # the namespace's targets to find a second one for the same Deployment.
    ("tuning.latencytuner.io", "latencytargets"): READ | {"patch"},
    ("tuning.latencytuner.io", "latencytargets/status"): frozenset({"patch"}),
    ("tuning.latencytuner.io", "latencytargets/finalizers"): frozenset({"patch"}),
    # Deployments are watched (an index), read by name until the watch has them, and one
    # container is patched; a canary trial creates its own Deployment and deletes it.
    ("apps", "deployments"): READ | {"patch", "create", "delete"},
    # The Deployment's pods by label selector: crash loops, restarts, IPs for scraping.
    ("", "pods"): frozenset({"list"}),
    # The quality gate's prompts: the ConfigMap a LatencyTarget names, in its namespace.
    ("", "configmaps"): frozenset({"get"}),
    ("", "events"): frozenset({"create", "patch"}),
    ("events.k8s.io", "events"): frozenset({"create", "patch"}),
}
CRDS: Rules = {("apiextensions.k8s.io", "customresourcedefinitions"): frozenset({"list", "watch"})}
NODES: Rules = {("", "nodes"): frozenset({"get"})}  # the pods' nodes, by name
NAMESPACES: Rules = {("", "namespaces"): frozenset({"list", "watch"})}
CLUSTER_PEERINGS: Rules = {("kopf.dev", "clusterkopfpeerings"): READ | {"patch"}}
PEERINGS: Rules = {("kopf.dev", "kopfpeerings"): READ | {"patch"}}


def rules_of(role: Manifest) -> Rules:
    """(apiGroup, resource) -> verbs, failing if one pair is granted by two rules."""
    found: Rules = {}
    for rule in role["rules"]:
        assert not rule.get("resourceNames")
        assert not rule.get("nonResourceURLs")
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert (group, resource) not in found, f"{group}/{resource} granted twice"
                found[(group, resource)] = frozenset(rule["verbs"])
    return found


def aggregated(role: Manifest) -> bool:
    """A user-facing role folded into view/edit/admin (test_chart_user_roles.py checks those)."""
    labels = role["metadata"].get("labels") or {}
    return any(k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in labels)


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    """The objects of one kind, leaving out the user-facing aggregated roles: these tests are
    about the operator's own rights."""
    return [m for m in manifests if m["kind"] == kind and not aggregated(m)]


def test_cluster_wide_mode_grants_exactly_the_operators_needs(render: Render) -> None:
    manifests = render("defaults")
    (cluster_role,) = of_kind(manifests, "ClusterRole")
    assert rules_of(cluster_role) == NAMESPACED_RULES | CRDS | NODES
    assert not of_kind(manifests, "Role")
    assert not of_kind(manifests, "RoleBinding")


def test_peering_replicas_may_also_keep_alive_in_the_cluster_peering(render: Render) -> None:
    (cluster_role,) = of_kind(render("peering"), "ClusterRole")
    assert rules_of(cluster_role) == NAMESPACED_RULES | CRDS | NODES | CLUSTER_PEERINGS


def test_namespaced_mode_renders_roles_only_in_the_listed_namespaces(render: Render) -> None:
    manifests = render("namespaced")
    roles = of_kind(manifests, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    for role in roles:
        assert rules_of(role) == NAMESPACED_RULES
    bindings = of_kind(manifests, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]


def test_namespaced_mode_keeps_only_cluster_scoped_reads_in_its_cluster_role(
    render: Render,
) -> None:
    (cluster_role,) = of_kind(render("namespaced"), "ClusterRole")
    assert rules_of(cluster_role) == CRDS | NODES | NAMESPACES


def test_namespaced_peering_uses_namespaced_kopf_peerings(render: Render) -> None:
    manifests = render("namespaced-peering")
    for role in of_kind(manifests, "Role"):
        assert rules_of(role) == NAMESPACED_RULES | PEERINGS
    (cluster_role,) = of_kind(manifests, "ClusterRole")
    assert ("kopf.dev", "clusterkopfpeerings") not in rules_of(cluster_role)


def test_node_reads_can_be_turned_off(render: Render) -> None:
    for role in of_kind(render("scrape-without-nodes"), "ClusterRole"):
        assert ("", "nodes") not in rules_of(role)


def test_no_option_set_grants_a_wildcard_or_secrets(render: Render, option_set: str) -> None:
    for role in of_kind(render(option_set), "ClusterRole") + of_kind(render(option_set), "Role"):
        for rule in role["rules"]:
            for word in (*rule["apiGroups"], *rule["resources"], *rule["verbs"]):
                assert "*" not in word, f"wildcard in {role['metadata']['name']}: {rule}"
            assert "secrets" not in rule["resources"]
            assert not {"deletecollection", "escalate", "bind", "impersonate"} & set(rule["verbs"])
            # Deleting is granted on Deployments alone: the canaries the operator made.
            assert "delete" not in rule["verbs"] or rule["resources"] == ["deployments"]


def test_every_binding_names_a_rendered_role_and_the_operators_service_account(
    render: Render, option_set: str
) -> None:
    manifests = render(option_set)
    (account,) = of_kind(manifests, "ServiceAccount")
    for deployment in of_kind(manifests, "Deployment"):  # one, or one per shard
        spec = deployment["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == account["metadata"]["name"]
    roles = {
        (r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"])
        for r in of_kind(manifests, "ClusterRole") + of_kind(manifests, "Role")
    }
    bindings = of_kind(manifests, "ClusterRoleBinding") + of_kind(manifests, "RoleBinding")
    assert bindings
    for binding in bindings:
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        assert (ref["kind"], namespace, ref["name"]) in roles
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": account["metadata"]["name"],
                "namespace": account["metadata"]["namespace"],
            }
        ]
