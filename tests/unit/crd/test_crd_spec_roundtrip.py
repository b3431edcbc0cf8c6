"""Any spec the models accept survives YAML and is accepted by the CRD too."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from latency_tuner.api import LatencyTargetSpec, format_duration
from latency_tuner.api.spec import MODEL_PATTERN

names = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)


def durations_up_to(hours: int) -> st.SearchStrategy[str]:
    """Durations the spec accepts: positive, and at most the field's cap."""
    return st.integers(min_value=1, max_value=hours * 3600 * 1000).map(
        lambda ms: format_duration(ms / 1000)
    )


thresholds = durations_up_to(1)
durations = durations_up_to(24)
maybe_zero_durations = st.one_of(st.just("0s"), durations)
cooldowns = st.one_of(st.just("0s"), durations_up_to(168))


@st.composite
def int_ranges(draw: st.DrawFn) -> dict[str, int]:
    low = draw(st.integers(min_value=1, max_value=1 << 16))
    return {"min": low, "max": draw(st.integers(min_value=low, max_value=1 << 17))}


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


objective = st.fixed_dictionaries(
    {"percentile": st.sampled_from([50, 90, 95, 99]), "threshold": thresholds}
)
objectives = st.fixed_dictionaries(
    {}, optional={"ttft": objective, "itl": objective, "e2e": objective}
).filter(bool)

variants = st.lists(
    st.fixed_dictionaries(
        {"name": names},
        optional={
            "model": st.from_regex(MODEL_PATTERN, fullmatch=True).filter(lambda m: len(m) < 64),
            "image": st.from_regex(
                r"[a-z0-9]{1,10}(/[a-z0-9]{1,10})?(:[a-z0-9][a-z0-9.]{0,7})?", fullmatch=True
            ),
            "args": st.lists(
                st.one_of(
                    st.sampled_from(["--quantization", "-q", "--dtype=half", "--max_model_len"]),
                    st.from_regex(r"[a-z0-9_]{1,12}", fullmatch=True),
                ),
                max_size=4,
            ),
        },
    ).filter(lambda v: "model" in v or "image" in v or v.get("args")),
    min_size=1,
    max_size=4,
    unique_by=lambda v: v["name"],
)
speculative = st.fixed_dictionaries(
    {"method": st.sampled_from(["ngram", "eagle", "mtp"])},
    optional={
        "num_speculative_tokens": st.integers(1, 8),
        "prompt_lookup_max": st.integers(1, 8),
    },
)
knobs = st.fixed_dictionaries(
    {},
    optional={
        "prefixCaching": st.booleans(),
        "chunkedPrefill": st.booleans(),
        "maxNumBatchedTokens": optional(int_ranges()),
        "maxNumSeqs": optional(int_ranges()),
        "gpuMemoryUtilization": optional(
            st.fixed_dictionaries(
                {"max": st.floats(min_value=0.01, max_value=1.0, allow_nan=False)}
            )
        ),
        "quantization": st.fixed_dictionaries({"variants": variants}),
        "kvCacheDtype": st.lists(
            st.sampled_from(["fp8", "fp8_e4m3", "fp8_e5m2"]), unique=True, max_size=3
        ),
        "speculativeDecoding": st.fixed_dictionaries(
            {"configs": st.lists(speculative, min_size=1, max_size=3)},
            optional={"maxConcurrency": st.floats(min_value=0.5, max_value=64)},
        ),
        "tensorParallel": st.fixed_dictionaries(
            {"maxSize": st.sampled_from([1, 2, 4, 8])},
            optional={"force": st.booleans(), "gpuResource": st.just("amd.com/gpu")},
        ),
    },
)
specs = st.fixed_dictionaries(
    {"targetRef": st.fixed_dictionaries({"name": names}, optional={"container": names})},
    optional={
        "objectives": objectives,
        "mode": st.sampled_from(["Auto", "Recommend", "Off"]),
        "evaluation": st.fixed_dictionaries(
            {},
            optional={
                "window": durations,
                "settle": maybe_zero_durations,
                "minRequests": st.integers(1, 10_000),
                "minImprovement": st.floats(min_value=0, max_value=0.99),
                "maxTrials": st.integers(1, 100),
                "progressDeadline": durations,
                "cooldown": cooldowns,
            },
        ),
        "knobs": knobs,
        "metrics": st.fixed_dictionaries(
            {},
            optional={
                "matchers": st.lists(
                    st.fixed_dictionaries(
                        {
                            "label": st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True),
                            "op": st.sampled_from(["=", "!="]),
                            "value": st.text(max_size=20),
                        }
                    ),
                    max_size=4,
                ),
                "prometheusUrl": st.just("http://prometheus.monitoring:9090"),
            },
        ),
        "hardware": st.fixed_dictionaries(
            {}, optional={"interconnect": st.sampled_from(["NVLink", "PCIe"])}
        ),
        "paused": st.booleans(),
        "onDelete": st.sampled_from(["Keep", "Restore"]),
    },
).map(lambda spec: {"objectives": {"itl": {"percentile": 95, "threshold": "50ms"}}, **spec})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=specs)
def test_a_spec_survives_model_to_yaml_to_model(raw: dict[str, Any]) -> None:
    spec = LatencyTargetSpec.model_validate(raw)
    written = yaml.safe_dump(spec.model_dump(mode="json"))
    assert LatencyTargetSpec.model_validate(yaml.safe_load(written)) == spec


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=specs)
def test_what_the_models_write_the_crd_accepts(raw: dict[str, Any], judge: Any) -> None:
    spec = LatencyTargetSpec.model_validate(raw)
    manifest = {
        "apiVersion": "tuning.latencytuner.io/v1alpha1",
        "kind": "LatencyTarget",
        "metadata": {"name": "t"},
        "spec": spec.model_dump(mode="json"),
    }
    assert judge.schema_errors(manifest, with_api_server_rules=True) == []
