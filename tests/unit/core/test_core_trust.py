"""A LatencyTarget's text never brings in an image or a Prometheus the operator does not allow."""

from __future__ import annotations

import pytest

from latency_tuner.core.trust import (
    image_repository,
    prometheus_url_refusal,
    variant_image_refusal,
)


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("vllm/vllm-openai:v0.11.0", "docker.io/vllm/vllm-openai"),
        ("docker.io/vllm/vllm-openai@sha256:" + "a" * 64, "docker.io/vllm/vllm-openai"),
        ("nginx", "docker.io/library/nginx"),
        ("registry.example:5000/ml/vllm:1.2", "registry.example:5000/ml/vllm"),
        ("localhost/vllm", "localhost/vllm"),
    ],
)
def test_an_image_reference_names_its_registry_and_repository(image: str, repository: str) -> None:
    assert image_repository(image) == repository


def test_a_variant_may_switch_tags_within_the_running_repository() -> None:
    running = "vllm/vllm-openai:v0.11.0"
    assert (
        variant_image_refusal("vllm/vllm-openai:v0.11.0-awq", running=running, allowed_prefixes=())
        is None
    )
    assert (
        variant_image_refusal(
            "docker.io/vllm/vllm-openai:v0.12.0", running=running, allowed_prefixes=()
        )
        is None
    )


@pytest.mark.parametrize(
    "image",
    [
        "attacker.example/miner:latest",
        "vllm/vllm-openai-evil:1",
        "docker.io/vllm-openai:1",
        "vllm:latest",
    ],
)
def test_a_variant_may_not_bring_another_repository(image: str) -> None:
    reason = variant_image_refusal(image, running="vllm/vllm-openai:v0.11.0", allowed_prefixes=())
    assert reason is not None
    assert image in reason
    assert "docker.io/vllm/vllm-openai" in reason


def test_the_operator_may_allow_more_images_by_prefix() -> None:
    allowed = ("registry.example/ml/",)
    assert (
        variant_image_refusal(
            "registry.example/ml/llama-awq:1",
            running="vllm/vllm-openai:1",
            allowed_prefixes=allowed,
        )
        is None
    )
    assert (
        variant_image_refusal(
            "registry.example/mlx/other:1", running="vllm/vllm-openai:1", allowed_prefixes=allowed
        )
        is not None
    )


def test_any_http_prometheus_is_allowed_without_prefixes_but_never_credentials_in_it() -> None:
    assert prometheus_url_refusal("http://prom.team-a:9090", allowed_prefixes=()) is None
    assert prometheus_url_refusal("file:///etc/passwd", allowed_prefixes=()) is not None
    assert prometheus_url_refusal("http://u:p@prom:9090", allowed_prefixes=()) is not None


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://prometheus.monitoring.svc:9090/", True),
        ("https://prometheus.monitoring.svc:9090/tenant-a/api", True),
        ("https://prometheus.monitoring.svc:9090.attacker.example/", False),
        ("https://prometheus.monitoring.svc:9091/", False),
        ("http://prometheus.monitoring.svc:9090/", False),
        ("https://attacker.example/https://prometheus.monitoring.svc:9090/", False),
    ],
)
def test_a_prefix_admits_only_its_own_host_and_path(url: str, allowed: bool) -> None:
    prefixes = ("https://prometheus.monitoring.svc:9090/",)
    assert (prometheus_url_refusal(url, allowed_prefixes=prefixes) is None) is allowed
