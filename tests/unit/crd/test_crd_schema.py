"""The generated CRD is one the API server accepts and that says what each field means."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import celpy
import kubernetes_validate
import pytest
import re2

from latency_tuner.api import parse_duration
from latency_tuner.api.durations import DURATION_PATTERN

SUPPORTED = kubernetes_validate.utils.all_versions()


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from nodes(child, f"{path}.{name}")
    if "items" in node:
        yield from nodes(node["items"], f"{path}[]")


def at(crd: dict[str, Any], dotted: str) -> dict[str, Any]:
    node = schema_of(crd)
    for name in dotted.split("."):
        node = node["items"] if name == "[]" else node["properties"][name]
    return node


@pytest.mark.parametrize("version", SUPPORTED)
def test_the_crd_passes_kubernetes_validate_strict_for_every_bundled_version(
    crd: dict[str, Any], version: str
) -> None:
    assert kubernetes_validate.validate(crd, version, strict=True) == ".".join(
        version.split(".")[:2]
    )


def test_kubernetes_validate_strict_would_catch_a_misspelt_schema_keyword(
    crd: dict[str, Any],
) -> None:
    broken = copy.deepcopy(crd)
    at(broken, "spec.knobs.maxNumSeqs")["descripton"] = "typo"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, SUPPORTED[-1], strict=True)


def test_the_crd_names_the_resource_as_users_type_it(crd: dict[str, Any]) -> None:
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "latencytargets.tuning.latencytuner.io"
    assert spec["group"] == "tuning.latencytuner.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "LatencyTarget"
    assert spec["names"]["plural"] == "latencytargets"
    assert spec["names"]["singular"] == "latencytarget"
    assert spec["names"]["shortNames"] == ["lt"]
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_the_printer_columns_show_latency_met_phase_trials_and_age(crd: dict[str, Any]) -> None:
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    shown = {c["name"].upper(): (c["type"], c["jsonPath"]) for c in columns if "priority" not in c}
    assert shown == {
        "TTFT": ("string", ".status.observed.ttft"),
        "ITL": ("string", ".status.observed.itl"),
        "MET": ("string", '.status.conditions[?(@.type=="TargetsMet")].status'),
        "PHASE": ("string", ".status.phase"),
        "TRIALS": ("integer", ".status.trialCount"),
        "AGE": ("date", ".metadata.creationTimestamp"),
    }
    # Every column points at a field the schema declares.
    for column in columns:
        path = column["jsonPath"].split("[")[0].strip(".")
        if not path.startswith("metadata"):
            at(crd, path)


def test_the_schema_is_structural(crd: dict[str, Any]) -> None:
    for path, node in nodes(schema_of(crd)):
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), path
        forbidden = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "title", "default"}
        assert not forbidden & node.keys(), (path, forbidden & node.keys())
        assert node.get("additionalProperties") is not False, path
        assert node.get("uniqueItems") is not True, path
        assert "properties" not in node or "additionalProperties" not in node, path
        if node.get("nullable"):
            assert node["type"] == "object", path  # only the knobs where null means "leave it"


def test_every_field_has_a_description_for_kubectl_explain(crd: dict[str, Any]) -> None:
    missing = [
        path
        for path, node in nodes(schema_of(crd))
        if path and not path.endswith("[]") and not node.get("description")
    ]
    assert missing == []
    assert "--max-num-seqs" in at(crd, "spec.knobs.maxNumSeqs")["description"]
    assert "Default" in at(crd, "spec.evaluation.window")["description"]


def test_free_form_fields_are_only_the_speculative_configs_and_patch_values(
    crd: dict[str, Any],
) -> None:
    free = [p for p, n in nodes(schema_of(crd)) if n.get("x-kubernetes-preserve-unknown-fields")]
    assert free == [
        ".spec.knobs.speculativeDecoding.configs[]",
        ".status.recommendation.patch[].value",
    ]


def test_ranges_and_durations_carry_the_cel_rules_the_schema_cannot_express(
    crd: dict[str, Any],
) -> None:
    for knob in ("maxNumBatchedTokens", "maxNumSeqs"):
        rules = [r["rule"] for r in at(crd, f"spec.knobs.{knob}")["x-kubernetes-validations"]]
        assert rules == ["self.min <= self.max"]
    for field, most in (
        ("objectives.ttft.threshold", "1h"),
        ("evaluation.window", "24h"),
        ("evaluation.progressDeadline", "24h"),
    ):
        rules = [r["rule"] for r in at(crd, f"spec.{field}")["x-kubernetes-validations"]]
        assert rules == ["duration(self) > duration('0s')", f"duration(self) <= duration('{most}')"]
    for field, most in (("evaluation.settle", "24h"), ("evaluation.cooldown", "168h")):
        rules = [r["rule"] for r in at(crd, f"spec.{field}")["x-kubernetes-validations"]]
        assert rules == [f"duration(self) <= duration('{most}')"]
    assert at(crd, "spec.objectives")["minProperties"] == 1
    variants = at(crd, "spec.knobs.quantization.variants")
    assert variants["x-kubernetes-list-type"] == "map"
    assert variants["x-kubernetes-list-map-keys"] == ["name"]
    assert at(crd, "spec.knobs.quantization.variants.[]")["x-kubernetes-validations"]
    assert at(crd, "status.conditions")["x-kubernetes-list-map-keys"] == ["type"]


def test_every_cel_rule_compiles_and_every_list_it_runs_under_is_bounded(
    crd: dict[str, Any],
) -> None:
    # Unbounded lists or strings under a rule make the API server's cost estimate refuse the CRD.
    environment = celpy.Environment()
    rules = 0
    for path, node in nodes(schema_of(crd)):
        for rule in node.get("x-kubernetes-validations", []):
            environment.compile(rule["rule"])
            assert rule["message"], path
            rules += 1
        if node.get("type") == "array" and path.startswith(".spec"):
            assert "maxItems" in node, path
        if node.get("type") == "string" and "x-kubernetes-validations" in node:
            assert "maxLength" in node, path
    assert rules >= 6


def test_every_pattern_is_valid_for_re2_which_kubernetes_uses(crd: dict[str, Any]) -> None:
    patterns = [n["pattern"] for _, n in nodes(schema_of(crd)) if "pattern" in n]
    assert len(patterns) >= 10
    for pattern in patterns:
        re2.compile(pattern)
        re.compile(pattern)


def crd_accepts_duration(crd: dict[str, Any], text: str) -> bool:
    node = at(crd, "spec.evaluation.settle")  # a duration that may be zero
    assert node["pattern"] == DURATION_PATTERN
    return node["minLength"] <= len(text) <= node["maxLength"] and bool(
        re2.search(node["pattern"], text)
    )


@pytest.mark.parametrize(
    "text", ["500ms", "30s", "2m", "1h", "1m30s", "1.5h", "0s", "1h2m3s4ms", "0.25s"]
)
def test_the_duration_pattern_accepts_what_parse_duration_accepts(
    crd: dict[str, Any], text: str
) -> None:
    parse_duration(text)
    assert crd_accepts_duration(crd, text)


@pytest.mark.parametrize("text", ["5 minutes", "-1s", "", "1d", "1s1m", "m", "1.s", "5M", "1 s"])
def test_the_duration_pattern_refuses_what_parse_duration_refuses(
    crd: dict[str, Any], text: str
) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)
    assert not crd_accepts_duration(crd, text)
