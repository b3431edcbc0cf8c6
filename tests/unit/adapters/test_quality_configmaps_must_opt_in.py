"""The quality gate's ConfigMap reader lends the operator's rights to no one: a ConfigMap is
used only when it carries the opt-in label, and a refusal quotes nothing of its data (the
message reaches the LatencyTarget's status, its events and the operator's log)."""

from __future__ import annotations

from typing import Any

import pytest

from latency_tuner.adapters.kubernetes.configmaps import lent_value
from latency_tuner.core.quality.samples import (
    MAX_SAMPLES_BYTES,
    SAMPLES_LABEL,
    InvalidSamples,
    not_lent_message,
)

SECRET = "db-password=hunter2"
SAMPLES = '[{"prompt": "What is 2+2?", "expected": "4"}]'


def configmap(labels: dict[str, str] | None, data: dict[str, str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "qa", "namespace": "team-a"}
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def read(obj: dict[str, Any], key: str = "samples.json") -> str:
    return lent_value(obj, namespace="team-a", name="qa", key=key)


def test_a_configmap_labelled_for_the_quality_gate_is_read() -> None:
    assert read(configmap({SAMPLES_LABEL: "true"}, {"samples.json": SAMPLES})) == SAMPLES


@pytest.mark.parametrize(
    "labels",
    [
        None,
        {},
        {"app": "billing"},
        {SAMPLES_LABEL: "false"},
        {SAMPLES_LABEL: "True"},
        {SAMPLES_LABEL: ""},
        {"latency-tuner.io/quality-samples": "true"},
    ],
)
def test_a_configmap_without_the_label_is_refused_naming_the_label_and_quoting_none_of_its_data(
    labels: dict[str, str] | None,
) -> None:
    obj = configmap(labels, {"samples.json": f'[{{"prompt": "{SECRET}"}}]', "other": SECRET})
    with pytest.raises(InvalidSamples) as refused:
        read(obj)
    message = str(refused.value)
    assert message == not_lent_message("team-a", "qa")
    assert f"{SAMPLES_LABEL}=true" in message
    assert "qa" in message
    assert "team-a" in message
    assert "hunter2" not in message
    assert "prompt" not in message


def test_an_unlabelled_configmap_is_refused_before_its_keys_or_sizes_are_looked_at() -> None:
    # Neither "has no key" nor "larger than": they would tell what the ConfigMap holds.
    missing_key = configmap(None, {"notes": SECRET})
    too_big = configmap(None, {"samples.json": "x" * (MAX_SAMPLES_BYTES + 1)})
    for obj in (missing_key, too_big):
        with pytest.raises(InvalidSamples) as refused:
            read(obj)
        assert str(refused.value) == not_lent_message("team-a", "qa")


def test_a_labelled_configmap_is_still_capped_and_needs_the_key() -> None:
    lent = {SAMPLES_LABEL: "true"}
    with pytest.raises(InvalidSamples, match=r"has no key samples\.json"):
        read(configmap(lent, {"other.json": SAMPLES}))
    with pytest.raises(InvalidSamples, match="larger than"):
        read(configmap(lent, {"samples.json": "x" * (MAX_SAMPLES_BYTES + 1)}))
