"""The shipped scenarios load, validate and are tuned: the start misses, the fix meets."""

from __future__ import annotations

import pytest

from latency_tuner.sandbox.scenario import (
    Load,
    Scenario,
    ScenarioError,
    estimate,
    list_scenarios,
    load_scenario,
)

SHIPPED = list_scenarios()


def test_at_least_the_four_documented_scenarios_ship_with_the_package() -> None:
    assert {"prefix-caching", "queueing", "prefill-interference", "fp8-kv-on-a100"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_scenario_loads_and_points_its_target_at_its_deployment(name: str) -> None:
    scenario = load_scenario(name)

    target = scenario.latency_target_model()
    assert scenario.name == name
    assert target.spec.target_ref.name == scenario.deployment_name
    assert scenario.latency_target_manifest()["metadata"]["namespace"] == scenario.namespace
    assert scenario.model == "meta-llama/Llama-3.1-8B-Instruct"
    # A demo run takes minutes, not hours.
    assert target.spec.evaluation.window_seconds <= 30
    assert target.spec.evaluation.settle_seconds <= 10
    assert Load.of(scenario.workload).concurrency <= 32


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_scenario_misses_its_targets_at_the_start_and_meets_them_with_its_fix(
    name: str,
) -> None:
    scenario = load_scenario(name)
    target = scenario.latency_target_model()

    before = estimate(scenario, requests=200)
    after = estimate(scenario, fixed=True, requests=200)

    assert not before.meets(target), before
    assert after.meets(target), after


def test_fp8_kv_cache_cannot_start_on_the_a100_scenario() -> None:
    scenario = load_scenario("fp8-kv-on-a100")
    broken = scenario.model_copy(
        update={"expect": scenario.expect.model_copy(update={"fix": {"kv-cache-dtype": "fp8"}})}
    )

    result = estimate(broken, fixed=True, requests=50)

    assert result.startup_error is not None
    assert "fp8" in result.startup_error.lower()


def test_an_invalid_scenario_names_every_bad_field() -> None:
    scenario = load_scenario("queueing").model_dump(by_alias=True)
    scenario["workload"]["sharedPrefixTokens"] = 10_000
    scenario["hardware"]["gpu"] = "TPU-v5"
    scenario["latencyTarget"]["spec"]["targetRef"]["name"] = "someone-else"
    scenario["latencyTarget"]["spec"]["objectives"]["ttft"]["percentile"] = 42

    with pytest.raises(ScenarioError) as caught:
        Scenario.from_mapping(scenario, "broken.yaml")

    text = str(caught.value)
    assert "broken.yaml" in text
    assert "sharedPrefixTokens must be shorter than the shortest prompt" in text
    assert "unknown GPU 'TPU-v5'" in text
    assert "latencyTarget.spec.objectives.ttft.percentile" in text


def test_a_target_that_points_elsewhere_is_refused() -> None:
    scenario = load_scenario("queueing").model_dump(by_alias=True)
    scenario["latencyTarget"]["spec"]["targetRef"]["name"] = "someone-else"

    with pytest.raises(
        ScenarioError, match=r"targetRef\.name: 'someone-else' is not the Deployment"
    ):
        Scenario.from_mapping(scenario)


def test_a_deployment_that_does_not_run_vllm_is_refused() -> None:
    scenario = load_scenario("queueing").model_dump(by_alias=True)
    container = scenario["deployment"]["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["text-generation-launcher"]
    container["args"] = ["--model-id", "x"]

    with pytest.raises(ScenarioError, match=r"containers\[0\]: not vLLM"):
        Scenario.from_mapping(scenario)


def test_an_unknown_scenario_name_lists_the_known_ones() -> None:
    with pytest.raises(ScenarioError, match=r"known: .*queueing"):
        load_scenario("no-such-scenario")
