"""The canary Deployment's shape: derived from the main one, never claimable by it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from latency_tuner.core.canary import (
    CANARY_LABEL,
    TARGET_LABEL,
    Owner,
    canary_deployment,
    canary_name,
    is_canary_of,
)

OWNER = Owner("tuning.latencytuner.io/v1alpha1", "LatencyTarget", "fast", "u-1")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def main(name: str = "llama", **selector: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": "main-uid",
            "resourceVersion": "42",
            "generation": 7,
            "managedFields": [{"manager": "kubectl"}],
            "labels": {"app": "llama"},
            "ownerReferences": [{"kind": "InferenceService", "name": "x", "uid": "i"}],
        },
        "spec": {
            "replicas": 4,
            "paused": True,
            "strategy": {"type": "Recreate"},
            "selector": selector or {"matchLabels": {"app": "llama"}},
            "template": {
                "metadata": {"labels": {"app": "llama"}},
                "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai"}]},
            },
        },
        "status": {"replicas": 4},
    }


def test_the_canary_keeps_the_template_and_strategy_but_not_the_server_fields() -> None:
    canary = canary_deployment(main(), OWNER)
    meta = canary["metadata"]
    assert set(meta) == {"name", "namespace", "labels", "annotations", "ownerReferences"}
    assert meta["ownerReferences"][0]["uid"] == OWNER.uid  # not the InferenceService's
    assert canary["spec"]["strategy"] == {"type": "Recreate"}
    assert canary["spec"]["replicas"] == 0
    assert "paused" not in canary["spec"]
    assert "status" not in canary
    containers = canary["spec"]["template"]["spec"]["containers"]
    assert containers == [{"name": "vllm", "image": "vllm/vllm-openai"}]


def test_the_canary_selector_is_the_main_one_narrowed_by_its_own_labels() -> None:
    canary = canary_deployment(main(), OWNER)
    selector = canary["spec"]["selector"]["matchLabels"]
    labels = canary["spec"]["template"]["metadata"]["labels"]
    assert selector == {"app": "llama", CANARY_LABEL: "llama", TARGET_LABEL: "fast"}
    assert labels == selector  # its pods match its selector, and the Service's


def test_the_main_object_is_not_modified() -> None:
    original = main()
    canary_deployment(original, OWNER)
    assert original == main()


def test_a_main_deployment_selecting_by_expressions_gets_a_clear_refusal() -> None:
    with pytest.raises(ValueError, match="matchExpressions"):
        canary_deployment(main(matchExpressions=[{"key": "app", "operator": "Exists"}]), OWNER)


@pytest.mark.parametrize("name", ["llama", "a" * 63, "x" * 253, "model-.-v2"])
def test_canary_names_and_labels_stay_valid_for_any_deployment_name(name: str) -> None:
    canary = canary_deployment(main(name), OWNER)
    canary_pod_prefix = canary["metadata"]["name"]
    assert len(canary_pod_prefix) + 17 <= 63  # pod names add "-<10>-<5>"
    assert DNS_LABEL.match(canary_pod_prefix)
    assert len(canary["metadata"]["labels"][CANARY_LABEL]) <= 63


def test_names_differ_per_target_and_stay_stable() -> None:
    assert canary_name("llama", "a") == canary_name("llama", "a")
    assert canary_name("llama", "a") != canary_name("llama", "b")


def test_a_deployment_with_the_name_but_another_owner_is_not_our_canary() -> None:
    ours = canary_deployment(main(), OWNER)
    assert is_canary_of(ours, "llama", OWNER)
    impostor = Owner(OWNER.api_version, OWNER.kind, OWNER.name, "other-uid")
    assert not is_canary_of(ours, "llama", impostor)
    assert not is_canary_of({"metadata": {"name": ours["metadata"]["name"]}}, "llama", OWNER)
