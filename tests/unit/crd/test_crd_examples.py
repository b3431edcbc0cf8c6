"""Every example is judged the same way by the models and by the CRD."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from latency_tuner.api import InvalidLatencyTarget, LatencyTarget

EXAMPLES = Path(__file__).resolve().parents[3] / "crds" / "examples"
INVALID_EXAMPLES = EXAMPLES / "invalid"

VALID = sorted(EXAMPLES.glob("*.yaml"))
INVALID = sorted(INVALID_EXAMPLES.glob("*.yaml"))

# file -> (what the model's error must say, what the CRD's error must say, checked by the
# schema alone (True) or only by API-server rules: CEL / list-map keys (False))
EXPECTED: dict[str, tuple[list[str], list[str], bool]] = {
    "no-objectives.yaml": (
        ["spec.objectives", "at least one objective"],
        ["spec.objectives", "non-empty"],
        True,
    ),
    "percentile-75.yaml": (
        ["spec.objectives.ttft.percentile", "50, 90, 95 or 99", "75"],
        ["spec.objectives.ttft.percentile", "75 is not one of [50, 90, 95, 99]"],
        True,
    ),
    "bad-duration.yaml": (
        ["spec.evaluation.window", "'5 minutes' is not a duration", "5m"],
        ["spec.evaluation.window", "does not match"],
        True,
    ),
    "negative-window.yaml": (
        ["spec.evaluation.window", "negative"],
        ["spec.evaluation.window", "does not match"],
        True,
    ),
    "min-greater-than-max.yaml": (
        ["spec.knobs.maxNumSeqs", "min (512) must not be greater than max (64)"],
        ["spec.knobs.maxNumSeqs", "min must not be greater than max"],
        False,
    ),
    "unknown-field-typo.yaml": (
        ["spec.knobs", "unknown field 'maxNumSeq'", "did you mean 'maxNumSeqs'"],
        ["spec.knobs", "'maxNumSeq' was unexpected"],
        True,
    ),
    "bad-mode.yaml": (
        ["spec.mode", "'Auto', 'Recommend' or 'Off'", "Automatic"],
        ["spec.mode", "'Automatic' is not one of"],
        True,
    ),
    "gpu-memory-over-one.yaml": (
        ["spec.knobs.gpuMemoryUtilization.max", "less than or equal to 1", "1.5"],
        ["spec.knobs.gpuMemoryUtilization.max", "1.5 is greater than the maximum of 1"],
        True,
    ),
    "zero-threshold.yaml": (
        ["spec.objectives.ttft.threshold", "'0s' must be longer than zero"],
        ["spec.objectives.ttft.threshold", "must be longer than zero"],
        False,
    ),
    "duplicate-variant-names.yaml": (
        ["spec.knobs.quantization", "variant names must be unique", "awq"],
        ["spec.knobs.quantization.variants", "Duplicate value"],
        False,
    ),
    "variant-without-change.yaml": (
        ["spec.knobs.quantization.variants[0]", "at least one of model, image or args"],
        ["spec.knobs.quantization.variants.0", "at least one of model, image or args"],
        False,
    ),
    "speculative-without-method.yaml": (
        ["spec.knobs.speculativeDecoding.configs[0]", '"method"', '"model"'],
        ["spec.knobs.speculativeDecoding.configs.0", '"method" or a draft "model"'],
        False,
    ),
    "tensor-parallel-three.yaml": (
        ["spec.knobs.tensorParallel.maxSize", "1, 2, 4 or 8", "3"],
        ["spec.knobs.tensorParallel.maxSize", "3 is not one of [1, 2, 4, 8]"],
        True,
    ),
    "bad-kv-cache-dtype.yaml": (
        ["spec.knobs.kvCacheDtype[0]", "'fp8', 'fp8_e4m3' or 'fp8_e5m2'", "int4"],
        ["spec.knobs.kvCacheDtype.0", "'int4' is not one of"],
        True,
    ),
    "absurd-settle.yaml": (
        ["spec.evaluation.settle", "'100000000h' is too large"],
        ["spec.evaluation.settle", "does not match"],
        True,
    ),
    "huge-batch-bound.yaml": (
        ["spec.knobs.maxNumBatchedTokens.max"],
        ["spec.knobs.maxNumBatchedTokens.max"],
        True,
    ),
    "variant-with-server-flags.yaml": (
        ["spec.knobs.quantization.variants[0]", "may not set --trust-remote-code, --api-key"],
        ["spec.knobs.quantization.variants.0", "a variant's args may set only quantization"],
        False,
    ),
    "missing-target-ref.yaml": (
        ["spec.targetRef", "Field required"],
        ["spec: 'targetRef' is a required property"],
        True,
    ),
}


def test_there_are_the_examples_the_docs_promise() -> None:
    names = {path.name for path in VALID}
    assert {"minimal-ttft.yaml", "full-auto.yaml", "recommend-gitops.yaml"} <= names
    assert "off-observe-only.yaml" in names
    assert len(INVALID) >= 8
    assert {path.name for path in INVALID} == set(EXPECTED)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_a_valid_example_passes_the_models(path: Path) -> None:
    target = LatencyTarget.from_manifest(load_yaml(path))
    assert target.spec.objectives.ttft or target.spec.objectives.itl or target.spec.objectives.e2e


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_a_valid_example_passes_the_crd_schema_and_its_rules(path: Path, judge: Any) -> None:
    assert judge.schema_errors(load_yaml(path), with_api_server_rules=True) == []


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_an_invalid_example_is_refused_by_the_models_naming_the_field(path: Path) -> None:
    model_words, _, _ = EXPECTED[path.name]
    with pytest.raises(InvalidLatencyTarget) as caught:
        LatencyTarget.from_manifest(load_yaml(path))
    message = str(caught.value)
    for words in model_words:
        assert words in message


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_an_invalid_example_is_refused_by_the_crd_naming_the_field(path: Path, judge: Any) -> None:
    _, crd_words, schema_alone = EXPECTED[path.name]
    manifest = load_yaml(path)
    errors = "\n".join(judge.schema_errors(manifest, with_api_server_rules=True))
    for words in crd_words:
        assert words in errors
    # What the schema alone catches, plain jsonschema catches; the rest only the API server's
    # rules (CEL, list-map keys) catch, which is why those rules must be in the CRD.
    assert bool(judge.schema_errors(manifest, with_api_server_rules=False)) is schema_alone


def test_a_bare_off_read_as_false_by_yaml_gets_a_hint_to_quote_it() -> None:
    manifest = load_yaml(EXAMPLES / "off-observe-only.yaml")
    manifest["spec"]["mode"] = False
    with pytest.raises(InvalidLatencyTarget, match=r'spec\.mode: .*write mode: "Off"'):
        LatencyTarget.from_manifest(manifest)


def load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def test_every_invalid_example_says_why_in_its_first_line() -> None:
    for path in INVALID:
        assert path.read_text().startswith("# Invalid")
