"""Users get LatencyTarget rights through Kubernetes' default roles, never the status.

`view` may read LatencyTargets; `edit` and `admin` may also create, change and delete them.
The status is the operator's memory (baseline, trial in progress): no aggregated role may write
it, or a tenant could forge what the operator resumes from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]

AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"


def user_roles(manifests: list[Manifest]) -> dict[str, Manifest]:
    """Aggregated ClusterRoles by the default roles they fold into ("view,edit,admin")."""
    found = {}
    for m in manifests:
        labels = m["metadata"].get("labels") or {}
        targets = sorted(
            k.removeprefix(AGGREGATE)
            for k, v in labels.items()
            if k.startswith(AGGREGATE) and v == "true"
        )
        if m["kind"] == "ClusterRole" and targets:
            found[",".join(targets)] = m
    return found


def test_view_edit_and_admin_may_read_latency_targets(render: Render) -> None:
    roles = user_roles(render("defaults"))
    (rule,) = roles["admin,edit,view"]["rules"]
    assert rule == {
        "apiGroups": ["tuning.latencytuner.io"],
        "resources": ["latencytargets"],
        "verbs": ["get", "list", "watch"],
    }


def test_only_edit_and_admin_may_create_change_and_delete_them(render: Render) -> None:
    roles = user_roles(render("defaults"))
    assert set(roles) == {"admin,edit,view", "admin,edit"}
    (rule,) = roles["admin,edit"]["rules"]
    assert rule["resources"] == ["latencytargets"]
    assert set(rule["verbs"]) == {"create", "update", "patch", "delete", "deletecollection"}


def test_no_aggregated_role_touches_the_status_or_anything_else(
    render: Render, option_set: str
) -> None:
    for role in user_roles(render(option_set)).values():
        for rule in role["rules"]:
            assert rule["apiGroups"] == ["tuning.latencytuner.io"]
            assert rule["resources"] == ["latencytargets"], rule
            assert "*" not in rule["verbs"]


def test_the_aggregation_can_be_turned_off(helm: Any) -> None:
    result = helm.template({"rbac": {"aggregateToDefaultRoles": False}})
    assert result.returncode == 0, result.stderr
    assert AGGREGATE not in result.stdout
