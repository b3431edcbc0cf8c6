"""spec.strategy and spec.quality: accepted as documented, refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from latency_tuner.api import InvalidLatencyTarget, LatencyTarget
from latency_tuner.api.crd import build_crd
from latency_tuner.api.spec import QualityMetric, QualityMode, Strategy
from latency_tuner.core.quality.samples import SAMPLES_LABEL, SAMPLES_LABEL_VALUE


def manifest(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "targetRef": {"name": "llama"},
        "objectives": {"ttft": {"percentile": 95, "threshold": "500ms"}},
    }
    base.update(spec)
    return {
        "apiVersion": "tuning.latencytuner.io/v1alpha1",
        "kind": "LatencyTarget",
        "metadata": {"name": "t", "namespace": "llm"},
        "spec": base,
    }


def problems(**spec: Any) -> str:
    with pytest.raises(InvalidLatencyTarget) as caught:
        LatencyTarget.from_manifest(manifest(**spec))
    return str(caught.value)


def test_strategy_is_unset_by_default_and_takes_rollout_or_canary() -> None:
    assert LatencyTarget.from_manifest(manifest()).spec.strategy is None
    for name in ("Rollout", "Canary"):
        assert LatencyTarget.from_manifest(manifest(strategy=name)).spec.strategy is Strategy(name)


def test_an_unknown_strategy_is_refused_naming_the_field() -> None:
    text = problems(strategy="BlueGreen")
    assert "strategy" in text
    assert "Canary" in text


def test_a_quality_gate_needs_only_a_configmap_and_defaults_the_rest() -> None:
    spec = LatencyTarget.from_manifest(manifest(quality={"configMap": "qa-prompts"})).spec
    assert spec.quality is not None
    assert spec.quality.config_map == "qa-prompts"
    assert spec.quality.key == "samples.json"
    assert spec.quality.mode is QualityMode.EXPECTED
    assert spec.quality.metric is QualityMetric.SIMILARITY
    assert spec.quality.min_draft_acceptance is None


def test_every_quality_setting_is_read_from_its_camel_case_field() -> None:
    quality = {
        "configMap": "maths",
        "key": "gsm8k.json",
        "mode": "Reference",
        "metric": "NumericAnswer",
        "tolerance": 0.05,
        "minDraftAcceptance": 0.4,
        "maxTokens": 128,
    }
    gate = LatencyTarget.from_manifest(manifest(quality=quality)).spec.quality
    assert gate is not None
    assert (gate.mode, gate.metric) == (QualityMode.REFERENCE, QualityMetric.NUMERIC_ANSWER)
    assert (gate.tolerance, gate.min_draft_acceptance, gate.max_tokens) == (0.05, 0.4, 128)


@pytest.mark.parametrize(
    ("quality", "field"),
    [
        ({}, "quality.configMap"),
        ({"configMap": "Not_A_Name"}, "quality.configMap"),
        ({"configMap": "qa", "tolerance": 1.5}, "quality.tolerance"),
        ({"configMap": "qa", "minDraftAcceptance": -0.1}, "quality.minDraftAcceptance"),
        ({"configMap": "qa", "metric": "BLEU"}, "quality.metric"),
        ({"configMap": "qa", "mode": "Judge"}, "quality.mode"),
        ({"configMap": "qa", "key": "../etc"}, "quality.key"),
    ],
)
def test_a_bad_quality_gate_is_refused_naming_the_field(
    quality: dict[str, Any], field: str
) -> None:
    assert field in problems(quality=quality)


def test_kubectl_explain_names_the_label_a_quality_configmap_must_carry() -> None:
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    field = schema["properties"]["spec"]["properties"]["quality"]["properties"]["configMap"]
    assert f'{SAMPLES_LABEL}: "{SAMPLES_LABEL_VALUE}"' in " ".join(field["description"].split())
