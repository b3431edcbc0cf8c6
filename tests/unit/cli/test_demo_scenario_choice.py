"""`latency-tuner demo --scenario NAME`: with the real engine a name means real vLLM's own
scenario (sized for 2 CPU cores), with the simulator the simulator's; a file is a file."""

from __future__ import annotations

from pathlib import Path

from latency_tuner.cli.demo import REAL_SCENARIOS, scenario_for
from latency_tuner.sandbox.demo import DEFAULT_SCENARIO


def test_the_real_engine_runs_its_own_queueing_scenario_by_default() -> None:
    assert scenario_for("vllm", None) == REAL_SCENARIOS / "queueing.yaml"


def test_a_name_with_the_real_engine_picks_the_scenario_sized_for_the_cpu() -> None:
    chosen = scenario_for("vllm", "prefix-caching")
    assert chosen == REAL_SCENARIOS / "prefix-caching.yaml"
    assert isinstance(chosen, Path)
    assert chosen.is_file()


def test_a_users_file_is_loaded_as_given_with_either_engine() -> None:
    assert scenario_for("vllm", "mine.yaml") == "mine.yaml"
    assert scenario_for("sim", "mine.yaml") == "mine.yaml"


def test_the_simulator_keeps_its_own_scenarios_and_default() -> None:
    assert scenario_for("sim", None) == DEFAULT_SCENARIO
    assert scenario_for("sim", "prefix-caching") == "prefix-caching"
