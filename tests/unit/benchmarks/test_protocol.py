"""One protocol for every method: the same clock, window rule, cost and start; the oracle's
knob classes; the blind planner; the foreign world."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.unit.benchmarks.support import EASY

from latency_tuner.convergence import baselines, blind, oracle
from latency_tuner.convergence.evaluate import Measured, Result
from latency_tuner.convergence.operator_run import run_operator
from latency_tuner.convergence.protocol import steady_warmup, trial_window
from latency_tuner.convergence.scenario import Scenario, parse_scenario
from latency_tuner.convergence.space import build_space, start_container
from latency_tuner.convergence.stage import LiveStage
from latency_tuner.convergence.world import RANGES, make_world
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.knobs import KnobClass
from latency_tuner.core.observation import Observation
from latency_tuner.core.rollout import observing
from latency_tuner.scenario import latency_target, vllm_deployment


def easy(**changes: Any) -> Scenario:
    data = copy.deepcopy(EASY)
    for key, value in changes.items():
        data[key] = value
    return parse_scenario(data)


def test_a_window_starts_at_the_first_look_after_the_settle_and_is_judged_at_the_next() -> None:
    w = trial_window(40.0, settle=5.0, window=15.0)
    assert (w.start, w.end, w.judged) == (50.0, 65.0, 70.0)


def test_the_operator_and_a_search_measure_a_trial_from_the_same_moment_after_the_patch() -> None:
    scenario = easy()
    world = make_world("matched", 0)
    operator = run_operator(scenario, world, 0, budget=4)
    stage = LiveStage(scenario, world, 0)
    grid = baselines.run_grid(stage, build_space(scenario), 4)
    assert operator.success
    assert grid.success
    assert operator.windows
    assert stage.windows
    (op_patch, op_start), (grid_patch, grid_start) = operator.windows[0], stage.windows[0]
    assert op_start - op_patch == grid_start - grid_patch == 40.0  # 30 s startup, 5 s settle
    assert operator.rollouts == grid.rollouts == 1


def test_a_start_that_already_meets_costs_no_rollout_for_any_method() -> None:
    scenario = easy(
        deployment=vllm_deployment(
            "llama", "meta-llama/Llama-3.1-8B-Instruct", ["--max-num-seqs", "32"]
        )
    )
    world = make_world("matched", 0)
    assert run_operator(scenario, world, 0, budget=4).rollouts == 0
    for method in ("grid", "random"):
        result = baselines.SEARCHES[method](
            LiveStage(scenario, world, 0), build_space(scenario), 4, 0
        )
        assert result.success, result.history
        assert result.rollouts == 0


# A 32B model with an FP8 checkpoint allowed beside max-num-seqs: the oracle is told which
# points meet and how well, by a table on (seqs, variant).
QUANT: dict[str, Any] = {
    **EASY,
    "name": "quant",
    "deployment": vllm_deployment("llama", "Qwen/Qwen2.5-32B-Instruct", ["--max-num-seqs", "8"]),
    "latencyTarget": latency_target(
        "llama",
        {"ttft": {"percentile": 90, "threshold": "100ms"}},
        knobs={
            "maxNumSeqs": {"min": 8, "max": 16},
            "maxNumBatchedTokens": None,
            "gpuMemoryUtilization": None,
            "quantization": {"variants": [{"name": "fp8", "model": "Qwen/Qwen2.5-32B-FP8"}]},
        },
        evaluation={"window": "10s", "settle": "5s", "minRequests": 50},
    ),
}


class ByPoint:
    """TTFT p90 per (seqs, checkpoint)."""

    def __init__(self, scenario: Scenario, ttft: dict[tuple[str, bool], float]) -> None:
        self._scenario = scenario
        self.ttft = ttft

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    def measure(self, container: ContainerConfig) -> Result:
        args = list(container.args or ())
        seqs = args[args.index("--max-num-seqs") + 1]
        fp8 = "FP8" in " ".join((*(container.command or ()), *args))
        value = self.ttft[(seqs, fp8)]
        return Measured(Observation(window_seconds=30.0, requests=500, ttft={90: value}))


def test_the_oracle_keeps_a_best_per_class_and_refers_to_the_cheapest_class_that_meets() -> None:
    scenario = parse_scenario(QUANT)
    space = build_space(scenario)
    table = {("8", False): 0.2, ("16", False): 0.09, ("8", True): 0.05, ("16", True): 0.04}
    result = oracle.search(ByPoint(scenario, table), space)
    assert result.feasible
    assert result.reference_class is KnobClass.SAFE
    assert result.best_objective == pytest.approx(0.9)  # the safe fix, not FP8's 0.4
    assert set(result.by_class) == {KnobClass.SAFE, KnobClass.LOSSY}
    assert result.by_class[KnobClass.LOSSY].objective == pytest.approx(0.4)
    lossy = result.by_class[KnobClass.LOSSY].point
    assert oracle.class_of_container(scenario, lossy.container) is KnobClass.LOSSY
    assert oracle.class_of_container(scenario, start_container(scenario)) is KnobClass.SAFE


def test_when_no_safe_point_meets_the_reference_is_the_best_lossy_one() -> None:
    scenario = parse_scenario(QUANT)
    table = {("8", False): 0.2, ("16", False): 0.15, ("8", True): 0.05, ("16", True): 0.04}
    result = oracle.search(ByPoint(scenario, table), build_space(scenario))
    assert result.reference_class is KnobClass.LOSSY
    assert result.best_objective == pytest.approx(0.4)


def test_the_blind_planner_tries_the_allowed_changes_in_its_seeded_order_through_the_loop() -> None:
    scenario = easy()
    order = blind.moves(scenario, 3)
    assert set(order) == {("maxNumSeqs", "8"), ("maxNumSeqs", "16"), ("maxNumSeqs", "32")}
    assert blind.moves(scenario, 3) == order  # seeded
    production = getattr(observing, "propose")  # noqa: B009 (not re-exported)
    result = run_operator(scenario, make_world("matched", 0), 3, budget=4, blind=True)
    assert getattr(observing, "propose") is production  # noqa: B009 (the swap ends with the run)
    assert result.method == "blind"
    knob, value = next((k, v) for k, v in order if v != "8")  # 8 runs already
    assert result.history[0].startswith(f"{knob} 8 -> {value}:")


def test_the_blind_planner_ignores_what_the_diagnosis_says() -> None:
    scenario = easy()
    seen = []
    for seed in range(6):
        result = run_operator(scenario, make_world("matched", 0), seed, budget=4, blind=True)
        seen.append(result.history[0].split(":")[0])
    # The operator's diagnosis always asks for the next rung (16); blind runs start elsewhere too.
    assert "maxNumSeqs 8 -> 32" in seen
    assert "maxNumSeqs 8 -> 16" in seen


def test_a_foreign_world_draws_every_efficiency_outside_its_published_range() -> None:
    for seed in range(5):
        world = make_world("foreign", seed)
        assert world == make_world("foreign", seed)
        for name, low, high in RANGES:
            value = getattr(world.efficiencies, name)
            assert not low <= value <= high, (seed, name, value)
        assert world.jitter_sigma > 0
        assert world.stall_probability > 0
        assert world.preemption_s > 0
        assert world.efficiencies.request_overhead_s >= 3 * 9e-3


def test_a_drifting_load_succeeds_only_once_tuned_for_the_rate_it_drifts_to() -> None:
    # 6 req/s meet at max-num-seqs 8; the rate drifts to 24 req/s (16 slots needed) in 180 s.
    data = copy.deepcopy(EASY)
    data["workload"] |= {"rate": 6, "drift": 4.0, "driftSeconds": 180}
    scenario = parse_scenario(data)
    result = run_operator(scenario, make_world("matched", 0), 0, budget=4)
    assert result.success, result.history
    # Confirmed at the drifted rate's steady state, as the oracle scores it, not on the early load.
    assert result.seconds >= 180 + steady_warmup(5.0, 10.0)
    assert result.rollouts >= 1  # converged on the early load, missed, tuned again
    args = list(result.final.args or ())
    seqs = args[args.index("--max-num-seqs") + 1]
    assert int(seqs) >= 16, result.history


def test_a_search_on_a_drifting_load_is_confirmed_at_the_rate_it_drifts_to_as_well() -> None:
    data = copy.deepcopy(EASY)
    data["workload"] |= {"rate": 6, "drift": 4.0, "driftSeconds": 180}
    scenario = parse_scenario(data)
    grid = baselines.run_grid(LiveStage(scenario, make_world("matched", 0), 0),
                              build_space(scenario), 4)  # fmt: skip
    assert grid.success, grid.history
    assert grid.seconds >= 180 + steady_warmup(5.0, 10.0)
    assert "  the longer window missed: searching on" in grid.history  # the start met early on
    args = list(grid.final.args or ())
    assert int(args[args.index("--max-num-seqs") + 1]) >= 16, grid.history
