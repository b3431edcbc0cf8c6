"""Scenario files: the shipped suite loads, and every kind of mistake is named with its place."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from latency_tuner.convergence.scenario import (
    MAX_SPACE,
    ScenarioError,
    load_suite,
    parse_scenario,
)
from latency_tuner.convergence.space import build_space
from latency_tuner.scenario import latency_target, vllm_deployment

SUITE = Path(__file__).resolve().parents[3] / "benchmarks" / "scenarios"

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
OBJECTIVES = {"ttft": {"percentile": 90, "threshold": "100ms"}}
KNOBS = {
    "maxNumSeqs": {"min": 8, "max": 32},
    "maxNumBatchedTokens": None,
    "gpuMemoryUtilization": None,
}
EVALUATION = {"window": "20s", "settle": "10s", "minRequests": 50}

GOOD: dict[str, Any] = {
    "name": "tiny",
    "hardware": {"gpu": "H100-SXM", "gpus": 1},
    "workload": {
        "arrival": "poisson",
        "rate": 10,
        "promptTokens": 200,
        "outputTokens": 40,
        "spread": 0.25,
    },
    "deployment": vllm_deployment("llama", MODEL, ["--max-num-seqs", "8"]),
    "latencyTarget": latency_target("llama", OBJECTIVES, knobs=KNOBS, evaluation=EVALUATION),
}


def bad(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    return data


def problems(data: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "test.yaml")
    return "; ".join(info.value.problems)


def test_the_shipped_suite_loads_with_at_least_24_scenarios_of_every_kind() -> None:
    suite = load_suite(SUITE)
    assert len(suite) >= 24
    assert {s.gpu for s in suite} >= {"H100-SXM", "H200", "A100-80G", "L40S"}
    models = " ".join(s.model for s in suite)
    assert all(size in models for size in ("8B", "32B", "70B"))
    assert {s.workload.arrival for s in suite} == {"poisson", "bursty", "closed"}
    assert any(not s.expect.feasible for s in suite)
    assert any(s.knobs.tensor_parallel is not None for s in suite)
    assert any(s.knobs.quantization is not None for s in suite)
    assert all(len(build_space(s)) <= MAX_SPACE for s in suite)


def test_a_valid_scenario_becomes_a_latency_target_with_its_knobs_and_hardware() -> None:
    scenario = parse_scenario(GOOD)
    spec = scenario.spec(max_trials=12)
    assert spec.evaluation.max_trials == 12
    assert spec.knobs.max_num_seqs is not None
    assert spec.knobs.max_num_seqs.max == 32
    assert spec.hardware is not None
    assert spec.hardware.gpu_product == "H100-SXM"
    assert [p.label() for p in build_space(scenario)] == [
        "maxNumSeqs=8",
        "maxNumSeqs=16",
        "maxNumSeqs=32",
    ]


@pytest.mark.parametrize(
    ("gpu", "tensor_parallel", "sizes"),
    [
        ("H100-SXM", {"maxSize": 4}, ["1", "2", "4"]),
        ("L40S", {"maxSize": 4}, []),  # PCIe: the spec allows TP only with force
        ("L40S", {"maxSize": 4, "force": True}, ["1", "2", "4"]),
    ],
)
def test_tensor_parallel_sizes_are_in_the_space_as_far_as_the_spec_allows_them(
    gpu: str, tensor_parallel: dict[str, Any], sizes: list[str]
) -> None:
    knobs = {**KNOBS, "maxNumSeqs": None, "tensorParallel": tensor_parallel}
    data = bad(
        hardware={"gpu": gpu, "gpus": 4},
        latencyTarget=latency_target("llama", OBJECTIVES, knobs=knobs, evaluation=EVALUATION),
    )
    points = build_space(parse_scenario(data))
    found = [dict(p.values).get("tensorParallel", "none") for p in points]
    assert found == (sizes or ["none"])


def test_a_misspelt_field_is_named_with_the_spelling_expected() -> None:
    data = bad()
    data["workload"]["promtTokens"] = 3
    assert "promptTokens" in problems(data)


def test_a_closed_loop_without_users_and_a_poisson_load_without_rate_are_refused() -> None:
    assert "needs users" in problems(bad(workload={"arrival": "closed"}))
    assert "needs a rate" in problems(bad(workload={"rate": None}))


def test_an_unknown_gpu_and_a_start_that_cannot_start_are_refused() -> None:
    assert "gpu" in problems(bad(hardware={"gpu": "Z9000"}))
    start = vllm_deployment("llama", MODEL, ["--max-num-seqs", "8", "-tp", "2"])
    assert "does not start" in problems(bad(deployment=start))


def test_a_space_too_large_for_the_oracle_is_refused() -> None:
    wide = {
        "maxNumSeqs": {"min": 8, "max": 1024},
        "maxNumBatchedTokens": {"min": 512, "max": 16384},
        "gpuMemoryUtilization": {"max": 0.95},
    }
    assert f"at most {MAX_SPACE}" in problems(
        bad(latencyTarget=latency_target("llama", OBJECTIVES, knobs=wide))
    )


def test_a_shared_prefix_longer_than_the_prompts_is_refused() -> None:
    assert "sharedPrefixTokens" in problems(bad(workload={"sharedPrefixTokens": 190}))


def test_a_drift_needs_open_arrivals_and_a_duration() -> None:
    assert "drift needs open" in problems(bad(workload={"drift": 2.0}))
    closed = {"arrival": "closed", "users": 4, "rate": None, "drift": 2.0, "driftSeconds": 60}
    assert "drift needs open" in problems(bad(workload=closed))
    parse_scenario({**GOOD, "workload": {**GOOD["workload"], "drift": 2.0, "driftSeconds": 60}})


def test_a_suite_with_a_name_used_twice_is_refused(tmp_path: Path) -> None:
    for file in ("a.yaml", "b.yaml"):
        (tmp_path / file).write_text(yaml.safe_dump(GOOD))
    with pytest.raises(ScenarioError, match="used twice: tiny"):
        load_suite(tmp_path)
