"""The chart's admission policy refuses a LatencyTarget its author could not act on themselves.

A LatencyTarget makes the operator patch the Deployment it names, with the operator's rights.
The ValidatingAdmissionPolicy makes the API server ask its authorizer whether the requesting
user may `patch` that Deployment, and refuses the LatencyTarget otherwise.

The policy's CEL is evaluated here as the API server would, with cel-python, against an
authorizer that answers from RBAC rules (the same matching as Kubernetes' RBAC authorizer for
resource requests: API group, resource, verb, namespace, resourceNames).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import celpy
import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]


@dataclass(frozen=True)
class Rule:
    """One RBAC PolicyRule, bound in ``namespace`` (None: by a ClusterRoleBinding)."""

    verbs: tuple[str, ...]
    resources: tuple[str, ...] = ("deployments",)
    groups: tuple[str, ...] = ("apps",)
    namespace: str | None = None
    names: tuple[str, ...] = ()

    def allows(self, group: str, resource: str, namespace: str, name: str, verb: str) -> bool:
        return (
            (self.namespace is None or self.namespace == namespace)
            and group in self.groups
            and resource in self.resources
            and verb in self.verbs
            and (not self.names or name in self.names)
        )


@dataclass
class Authorizer:
    """CEL's `authorizer` library over RBAC rules: each call narrows the request."""

    rules: list[Rule]
    request: dict[str, str] = field(default_factory=dict)

    def functions(self) -> dict[str, Any]:
        def narrow(key: str) -> Callable[[Any, Any], Any]:
            return lambda request, value: celtypes.MapType(
                {**request, celtypes.StringType(key): value}
            )

        def allowed(request: Any) -> celtypes.BoolType:
            r = {str(k): str(v) for k, v in request.items()}
            return celtypes.BoolType(
                any(
                    rule.allows(r["group"], r["resource"], r["namespace"], r["name"], r["verb"])
                    for rule in self.rules
                )
            )

        keys = {"group": "group", "resource": "resource", "namespace": "namespace"}
        return {
            **{fn: narrow(key) for fn, key in keys.items()},
            "name": narrow("name"),
            "check": narrow("verb"),
            "allowed": allowed,
        }


def policy(render: Render) -> Manifest:
    (found,) = [m for m in render("defaults") if m["kind"] == "ValidatingAdmissionPolicy"]
    return found


def latency_target(namespace: str = "llm", deployment: str = "chat") -> Manifest:
    return {
        "apiVersion": "tuning.latencytuner.io/v1alpha1",
        "kind": "LatencyTarget",
        "metadata": {"name": "chat-ttft", "namespace": namespace},
        "spec": {
            "targetRef": {"name": deployment},
            "objectives": {"ttft": {"percentile": 95, "threshold": "500ms"}},
        },
    }


def admit(render: Render, user: str, rules: list[Rule], obj: Manifest) -> tuple[bool, str | None]:
    """(admitted, message of the first refusing validation), as the API server would answer."""
    env = celpy.Environment()
    functions = Authorizer(rules).functions()
    activation = {
        "object": json_to_cel(obj),
        "request": json_to_cel({"userInfo": {"username": user}, "operation": "CREATE"}),
        "authorizer": celtypes.MapType({}),
    }
    for validation in policy(render)["spec"]["validations"]:
        verdict = env.program(env.compile(validation["expression"]), functions=functions)
        if not bool(verdict.evaluate(activation)):
            message = env.program(env.compile(validation["messageExpression"]))
            return False, str(message.evaluate(activation))
    return True, None


def test_an_author_who_may_patch_the_deployment_gets_the_latency_target(render: Render) -> None:
    admitted, _ = admit(
        render, "alice", [Rule(("get", "patch"), namespace="llm")], latency_target()
    )
    assert admitted


def test_an_author_who_may_only_read_deployments_is_refused_with_a_clear_message(
    render: Render,
) -> None:
    admitted, message = admit(
        render, "bob", [Rule(("get", "list", "watch"), namespace="llm")], latency_target()
    )
    assert not admitted
    assert message == (
        "user bob may not patch Deployment llm/chat: a LatencyTarget lets the operator patch"
        " that Deployment, so its author needs that right"
    )


def test_patch_rights_in_another_namespace_do_not_count(render: Render) -> None:
    admitted, _ = admit(render, "carol", [Rule(("patch",), namespace="team-b")], latency_target())
    assert not admitted


def test_patch_rights_limited_to_other_deployments_do_not_count(render: Render) -> None:
    rules = [Rule(("patch",), namespace="llm", names=("embeddings",))]
    assert not admit(render, "dan", rules, latency_target(deployment="chat"))[0]
    assert admit(render, "dan", rules, latency_target(deployment="embeddings"))[0]


def test_patch_rights_on_another_resource_do_not_count(render: Render) -> None:
    rules = [
        Rule(("patch",), resources=("statefulsets",), namespace="llm"),
        Rule(("patch",), resources=("latencytargets",), groups=("tuning.latencytuner.io",)),
    ]
    assert not admit(render, "erin", rules, latency_target())[0]


def test_cluster_wide_patch_rights_count_everywhere(render: Render) -> None:
    assert admit(render, "ops", [Rule(("patch",))], latency_target(namespace="any"))[0]


def test_the_policy_checks_creates_and_updates_of_latency_targets_but_not_their_status(
    render: Render,
) -> None:
    spec = policy(render)["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["tuning.latencytuner.io"]
    assert rule["resources"] == ["latencytargets"]  # the operator's status writes pass
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}
    assert all(v["reason"] == "Forbidden" for v in spec["validations"])


def test_the_binding_denies_everywhere(render: Render) -> None:
    manifests = render("defaults")
    (binding,) = [m for m in manifests if m["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"]["policyName"] == policy(render)["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert "matchResources" not in binding["spec"]


@pytest.mark.parametrize("version", ["1.25.0", "1.29.9"])
def test_an_older_cluster_gets_an_error_that_says_what_to_do(
    helm: Any, chart_dir: Path, version: str
) -> None:
    result = helm.run("template", "lt", str(chart_dir), "--kube-version", version)
    assert result.returncode != 0
    assert f"this cluster is v{version}" in result.stderr
    assert "set admissionPolicy.enabled=false" in result.stderr


def test_turned_off_it_installs_on_an_older_cluster(helm: Any, chart_dir: Path) -> None:
    values = helm.values_file({"admissionPolicy": {"enabled": False}})
    result = helm.run(
        "template", "lt", str(chart_dir), "--kube-version", "1.25.0", "--values", str(values)
    )
    assert result.returncode == 0, result.stderr
    assert "ValidatingAdmissionPolicy" not in result.stdout
