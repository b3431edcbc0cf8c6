"""The spec refuses what cannot work, and says so in the user's words and field names."""

from __future__ import annotations

from typing import Any

import pytest

from latency_tuner.api import (
    IntRange,
    InvalidLatencyTarget,
    Knobs,
    LatencyTarget,
    LatencyTargetSpec,
    Mode,
    Objective,
    Objectives,
    TargetRef,
)


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


def test_the_smallest_spec_gets_the_documented_defaults() -> None:
    spec = LatencyTarget.from_manifest(manifest()).spec
    assert spec.mode is Mode.AUTO
    assert spec.objectives.ttft is not None
    assert spec.objectives.ttft.threshold_seconds == 0.5
    assert spec.evaluation.window_seconds == 300
    assert spec.evaluation.settle_seconds == 120
    assert spec.evaluation.progress_deadline_seconds == 600
    assert spec.evaluation.cooldown_seconds == 1800
    assert (spec.evaluation.min_requests, spec.evaluation.max_trials) == (100, 10)
    assert spec.knobs.max_num_batched_tokens == IntRange(min=512, max=16384)
    assert spec.knobs.max_num_seqs == IntRange(min=16, max=1024)
    assert spec.knobs.gpu_memory_utilization is not None
    assert spec.knobs.gpu_memory_utilization.max == 0.95
    assert spec.knobs.prefix_caching
    assert spec.knobs.chunked_prefill
    assert spec.knobs.quantization is None
    assert spec.knobs.tensor_parallel is None
    assert spec.knobs.kv_cache_dtype == []
    assert spec.metrics.matchers == []
    assert spec.metrics.prometheus_url is None
    assert (spec.paused, spec.on_delete) == (False, "Keep")


def test_python_names_and_yaml_names_both_build_a_spec() -> None:
    by_name = LatencyTargetSpec(
        target_ref=TargetRef(name="llama"),
        objectives=Objectives(itl=Objective(percentile=99, threshold="40ms")),
        knobs=Knobs(max_num_seqs=None),
    )
    by_alias = LatencyTargetSpec.model_validate(
        {
            "targetRef": {"name": "llama"},
            "objectives": {"itl": {"percentile": 99, "threshold": "40ms"}},
            "knobs": {"maxNumSeqs": None},
        }
    )
    assert by_name == by_alias
    assert by_name.knobs.max_num_seqs is None


def test_a_null_safe_knob_means_hands_off_and_survives_a_dump() -> None:
    spec = LatencyTarget.from_manifest(manifest(knobs={"maxNumSeqs": None})).spec
    dumped = spec.model_dump(mode="json")
    assert dumped["knobs"]["maxNumSeqs"] is None
    assert "hardware" not in dumped  # a null that only means "unset" is left out
    assert LatencyTargetSpec.model_validate(dumped).knobs.max_num_seqs is None


@pytest.mark.parametrize("threshold", ["0s", "0ms"])
def test_a_zero_threshold_is_refused(threshold: str) -> None:
    text = problems(objectives={"ttft": {"percentile": 95, "threshold": threshold}})
    assert "spec.objectives.ttft.threshold" in text
    assert "longer than zero" in text


def test_a_zero_settle_time_is_allowed_but_a_zero_window_is_not() -> None:
    spec = LatencyTarget.from_manifest(manifest(evaluation={"settle": "0s"})).spec
    assert spec.evaluation.settle_seconds == 0
    assert "spec.evaluation.window: '0s' must be longer than zero" in problems(
        evaluation={"window": "0s"}
    )


def test_a_duration_without_unit_is_refused_with_a_hint() -> None:
    assert "spec.evaluation.window: 300 has no unit: write e.g. '300s'" in problems(
        evaluation={"window": 300}
    )


def test_objectives_with_only_nulls_count_as_none() -> None:
    assert "at least one objective" in problems(objectives={"ttft": None, "itl": None})


def test_an_e2e_objective_alone_is_enough() -> None:
    spec = LatencyTarget.from_manifest(
        manifest(objectives={"e2e": {"percentile": 50, "threshold": "30s"}})
    ).spec
    assert spec.objectives.e2e is not None
    assert spec.objectives.e2e.threshold_seconds == 30


@pytest.mark.parametrize("knob", ["maxNumBatchedTokens", "maxNumSeqs"])
def test_a_range_whose_min_exceeds_its_max_is_refused(knob: str) -> None:
    text = problems(knobs={knob: {"min": 9, "max": 8}})
    assert f"spec.knobs.{knob}: min (9) must not be greater than max (8)" in text


def test_a_range_of_one_value_is_allowed() -> None:
    spec = LatencyTarget.from_manifest(manifest(knobs={"maxNumSeqs": {"min": 8, "max": 8}})).spec
    assert spec.knobs.max_num_seqs == IntRange(min=8, max=8)


@pytest.mark.parametrize("value", [0, -0.1, 1.01])
def test_gpu_memory_utilization_must_be_a_fraction(value: float) -> None:
    assert "spec.knobs.gpuMemoryUtilization.max" in problems(
        knobs={"gpuMemoryUtilization": {"max": value}}
    )


def test_gpu_memory_utilization_of_exactly_one_is_allowed() -> None:
    knobs = LatencyTarget.from_manifest(manifest(knobs={"gpuMemoryUtilization": {"max": 1}}))
    assert knobs.spec.knobs.gpu_memory_utilization is not None


def test_a_typo_names_the_field_and_suggests_the_spelling() -> None:
    text = problems(evaluaton={"window": "5m"})
    assert "spec: unknown field 'evaluaton' (did you mean 'evaluation'?)" in text


def test_an_unknown_field_with_no_near_spelling_lists_the_known_ones() -> None:
    text = problems(targetRef={"name": "llama", "kind": "StatefulSet"})
    assert "spec.targetRef: unknown field 'kind' (known fields: name, container)" in text


def test_quantization_variants_need_unique_names_and_something_to_change() -> None:
    twice = problems(
        knobs={
            "quantization": {
                "variants": [{"name": "a", "model": "org/x"}, {"name": "a", "image": "y"}]
            }
        }
    )
    assert "spec.knobs.quantization: variant names must be unique; repeated: a" in twice
    empty = problems(knobs={"quantization": {"variants": [{"name": "a", "args": []}]}})
    assert "variants[0]: variant 'a' needs at least one of model, image or args" in empty
    none = problems(knobs={"quantization": {"variants": []}})
    assert "spec.knobs.quantization.variants" in none


def test_a_variant_with_only_args_is_enough() -> None:
    spec = LatencyTarget.from_manifest(
        manifest(knobs={"quantization": {"variants": [{"name": "fp8", "args": ["-q", "fp8"]}]}})
    ).spec
    assert spec.knobs.quantization is not None
    assert spec.knobs.quantization.variants[0].args == ["-q", "fp8"]


@pytest.mark.parametrize("config", [{"num_speculative_tokens": 3}, {"method": 5}, {}])
def test_a_speculative_config_needs_a_method_or_a_model(config: dict[str, Any]) -> None:
    text = problems(knobs={"speculativeDecoding": {"configs": [config]}})
    assert (
        'spec.knobs.speculativeDecoding.configs[0]: a speculative config needs a "method"' in text
    )


def test_speculative_configs_keep_unknown_keys_as_written() -> None:
    config = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 5}
    spec = LatencyTarget.from_manifest(
        manifest(knobs={"speculativeDecoding": {"configs": [config]}})
    ).spec
    assert spec.knobs.speculative_decoding is not None
    assert spec.knobs.speculative_decoding.configs == [config]
    assert spec.knobs.speculative_decoding.max_concurrency == 4


@pytest.mark.parametrize("size", [0, 3, 16])
def test_tensor_parallel_size_is_a_power_of_two_up_to_eight(size: int) -> None:
    assert "spec.knobs.tensorParallel.maxSize: Input should be 1, 2, 4 or 8" in problems(
        knobs={"tensorParallel": {"maxSize": size}}
    )


def test_kv_cache_dtypes_are_the_fp8_family_listed_once() -> None:
    assert "spec.knobs.kvCacheDtype[0]" in problems(knobs={"kvCacheDtype": ["auto"]})
    assert "kvCacheDtype lists a value twice" in problems(knobs={"kvCacheDtype": ["fp8", "fp8"]})


def test_label_matchers_are_structured_and_regexes_must_compile() -> None:
    assert "spec.metrics.matchers[0].label" in problems(
        metrics={"matchers": [{"label": "bad-label", "value": "x"}]}
    )
    assert "is not a regular expression" in problems(
        metrics={"matchers": [{"label": "pod", "op": "=~", "value": "llama-("}]}
    )
    assert "spec.metrics.matchers[0].op" in problems(
        metrics={"matchers": [{"label": "pod", "op": "==", "value": "x"}]}
    )


def test_the_prometheus_url_must_be_http() -> None:
    assert "spec.metrics.prometheusUrl: 'file:///etc/passwd' is not an http" in problems(
        metrics={"prometheusUrl": "file:///etc/passwd"}
    )


def test_the_target_name_must_be_a_kubernetes_name() -> None:
    assert "spec.targetRef.name: 'Llama_3' is not a Kubernetes name" in problems(
        targetRef={"name": "Llama_3"}
    )


def test_every_problem_is_listed_not_just_the_first() -> None:
    text = problems(mode="Sometimes", onDelete="Forget", paused="maybe")
    assert "spec.mode" in text
    assert "spec.onDelete" in text
    assert "spec.paused" in text


def test_the_api_version_and_kind_are_checked() -> None:
    bad = manifest()
    bad["apiVersion"] = "tuning.latencytuner.io/v1"
    with pytest.raises(InvalidLatencyTarget, match="apiVersion"):
        LatencyTarget.from_manifest(bad)


def test_a_manifest_round_trips_through_to_manifest() -> None:
    original = manifest(mode="Recommend", knobs={"gpuMemoryUtilization": None})
    target = LatencyTarget.from_manifest(original)
    again = LatencyTarget.from_manifest(target.to_manifest())
    assert again == target
    assert again.to_manifest()["spec"]["knobs"]["gpuMemoryUtilization"] is None
    assert "status" not in again.to_manifest()


def test_the_spec_is_immutable() -> None:
    spec = LatencyTarget.from_manifest(manifest()).spec
    with pytest.raises(ValueError, match="frozen"):
        spec.paused = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"evaluation": {"settle": "100000000h"}}, "spec.evaluation.settle", "too large"),
        ({"evaluation": {"settle": "25h"}}, "spec.evaluation.settle", "longer than 24h"),
        ({"evaluation": {"window": "24h1s"}}, "spec.evaluation.window", "longer than 24h"),
        ({"evaluation": {"cooldown": "169h"}}, "spec.evaluation.cooldown", "longer than 168h"),
        (
            {"evaluation": {"progressDeadline": "999999h"}},
            "spec.evaluation.progressDeadline",
            "longer than 24h",
        ),
        (
            {"objectives": {"itl": {"percentile": 95, "threshold": "2h"}}},
            "spec.objectives.itl.threshold",
            "longer than 1h",
        ),
        ({"evaluation": {"minRequests": 10**12}}, "spec.evaluation.minRequests", "10000000"),
        (
            {"knobs": {"maxNumSeqs": {"min": 1, "max": 10**12}}},
            "spec.knobs.maxNumSeqs.max",
            "16777216",
        ),
        (
            {
                "knobs": {
                    "speculativeDecoding": {
                        "configs": [{"method": "ngram"}],
                        "maxConcurrency": 1e308,
                    }
                }
            },
            "spec.knobs.speculativeDecoding.maxConcurrency",
            "100000",
        ),
        (
            {
                "knobs": {
                    "speculativeDecoding": {
                        "configs": [{"method": "ngram"}],
                        "maxConcurrency": float("inf"),
                    }
                }
            },
            "spec.knobs.speculativeDecoding.maxConcurrency",
            "finite",
        ),
        (
            {"knobs": {"gpuMemoryUtilization": {"max": float("nan")}}},
            "spec.knobs.gpuMemoryUtilization.max",
            "finite",
        ),
    ],
)
def test_absurd_durations_and_numbers_are_refused_when_written(
    spec: dict[str, Any], field: str, words: str
) -> None:
    """An accepted absurd value used to overflow the operator's date maths on every reconcile,
    with no status at all; it is now refused up front, naming the field."""
    message = problems(**spec)
    assert field in message
    assert words in message


def test_the_largest_allowed_values_are_accepted() -> None:
    spec = LatencyTarget.from_manifest(
        manifest(
            evaluation={"window": "24h", "settle": "24h", "cooldown": "168h"},
            objectives={"e2e": {"percentile": 99, "threshold": "1h"}},
        )
    ).spec
    assert spec.evaluation.cooldown_seconds == 168 * 3600


def variant(**fields: Any) -> dict[str, Any]:
    return {"quantization": {"variants": [{"name": "v", **fields}]}}


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"args": ["--trust-remote-code"]}, "may not set --trust-remote-code"),
        ({"args": ["--api-key", "stolen"]}, "may not set --api-key"),
        ({"args": ["--served-model-name=x"]}, "may not set --served-model-name=x"),
        ({"args": ["-q", "awq", "--port", "1"]}, "may not set --port"),
        ({"model": "--trust-remote-code"}, "spec.knobs.quantization.variants[0].model"),
        ({"model": "model with spaces/x"}, "spec.knobs.quantization.variants[0].model"),
        ({"image": "attacker.example/miner latest"}, "spec.knobs.quantization.variants[0].image"),
        ({"image": "registry/Upper-Case:1"}, "spec.knobs.quantization.variants[0].image"),
    ],
)
def test_a_quantization_variant_may_change_only_model_image_and_checkpoint_flags(
    fields: dict[str, Any], words: str
) -> None:
    assert words in problems(knobs=variant(**fields))


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "org/model-AWQ", "args": ["--quantization", "awq_marlin"]},
        {"model": "/models/llama-fp8", "args": ["-q=fp8", "--max_model_len", "8192"]},
        {"image": "registry.example:5000/ml/vllm-openai:v0.11.0-awq"},
        {"args": ["--dtype", "float16", "--load-format=safetensors"]},
    ],
)
def test_checkpoint_variants_are_accepted(fields: dict[str, Any]) -> None:
    spec = LatencyTarget.from_manifest(manifest(knobs=variant(**fields))).spec
    assert spec.knobs.quantization is not None
