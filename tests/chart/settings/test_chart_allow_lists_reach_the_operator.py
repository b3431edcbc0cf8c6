"""The operator's allow-lists are chart values: `variantImages` and
`prometheus.perResourceUrlPrefixes` render to the environment `latency-tuner run` reads, and
the operator's own settings parser reads them back as the same lists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.chart.settings.test_chart_wires_the_operator_settings import env

from latency_tuner.settings import parse_settings

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]


def operator_settings(manifests: list[Manifest]) -> Any:
    variables = {k: v for k, v in env(manifests).items() if isinstance(v, str)}
    return parse_settings([], variables)


def test_the_allow_lists_reach_the_operator_as_the_lists_written(render: Render) -> None:
    settings = operator_settings(render("allow-lists"))
    assert settings.allow_per_resource_prometheus_url is True
    assert settings.prometheus_url_prefixes == (
        "https://prometheus.team-a.svc:9090/",
        "http://thanos-query.monitoring:10902/tenant/",
    )
    assert settings.variant_images == ("registry.example/ml/", "ghcr.io/org/vllm-openai:")


def test_by_default_the_operator_gets_no_allow_list_and_keeps_its_narrow_defaults(
    render: Render,
) -> None:
    variables = env(render("defaults"))
    assert "LT_VARIANT_IMAGES" not in variables
    assert "LT_PROMETHEUS_URL_PREFIXES" not in variables
    settings = operator_settings(render("defaults"))
    assert settings.variant_images == ()  # only the running image's repository
    assert settings.allow_per_resource_prometheus_url is False


@pytest.mark.parametrize(
    ("values", "where"),
    [
        # A bare host would also admit host.attacker.example: a prefix must carry a path.
        ({"prometheus": {"perResourceUrlPrefixes": ["https://prom.team-a"]}}, "/0"),
        ({"prometheus": {"perResourceUrlPrefixes": ["prom.team-a:9090/"]}}, "/0"),
        # A comma would split into two prefixes once joined into the environment variable.
        ({"prometheus": {"perResourceUrlPrefixes": ["http://a/,http://b/"]}}, "/0"),
        ({"prometheus": {"perResourceUrlPrefixes": ["http://user:pw@prom/"]}}, "/0"),
        ({"prometheus": {"perResourceUrlPrefixes": "http://prom/"}}, "perResourceUrlPrefixes"),
        ({"variantImages": ["registry.example/ml/,attacker.example/"]}, "/variantImages/0"),
        ({"variantImages": [""]}, "/variantImages/0"),
        # Without a `/` or `:` at its end a prefix admits longer names: ml -> mlx/miner.
        ({"variantImages": ["registry.example/ml"]}, "/variantImages/0"),
        ({"variantImages": ["a/", "a/"]}, "/variantImages"),
        ({"variantImages": "registry.example/ml/"}, "/variantImages"),
    ],
)
def test_helm_refuses_an_allow_list_entry_the_operator_would_misread(
    helm: Any, values: dict[str, Any], where: str
) -> None:
    result = helm.template(values)
    assert result.returncode != 0
    assert where in result.stderr, result.stderr
