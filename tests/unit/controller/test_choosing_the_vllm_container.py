"""Without `targetRef.container` the operator tunes the container that runs vLLM, or says why
it cannot choose; it never gives vLLM's flags to a sidecar."""

from __future__ import annotations

from typing import Any

import pytest

from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.errors import ContainerNotFound

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
VLLM = {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "args": [MODEL]}
ENVOY = {"name": "proxy", "image": "envoyproxy/envoy:v1.31", "args": ["-c", "/etc/envoy.yaml"]}
EXPORTER = {"name": "exporter", "image": "prom/statsd-exporter", "args": ["--web.listen=:9102"]}


def view(*containers: dict[str, Any]) -> DeploymentView:
    return DeploymentView(
        {
            "metadata": {"name": "llama", "namespace": "ml"},
            "spec": {"template": {"spec": {"containers": list(containers)}}},
        }
    )


def test_the_vllm_container_is_chosen_wherever_it_stands() -> None:
    assert view(ENVOY, VLLM, EXPORTER).container_index(None) == 1
    assert view(VLLM, ENVOY).container_index(None) == 0


def test_a_single_container_is_taken_as_it_is() -> None:
    assert view(ENVOY).container_index(None) == 0  # gather then reports "not vLLM"


def test_several_vllm_containers_need_a_name_and_the_error_lists_them() -> None:
    other = {**VLLM, "name": "vllm-draft"}
    with pytest.raises(ContainerNotFound, match=r"several containers .* \(vllm, vllm-draft\)"):
        view(ENVOY, VLLM, other).container_index(None)
    assert view(ENVOY, VLLM, other).container_index("vllm-draft") == 2


def test_no_vllm_container_among_several_says_so() -> None:
    with pytest.raises(ContainerNotFound, match=r"none of the containers .* \(proxy, exporter\)"):
        view(ENVOY, EXPORTER).container_index(None)
