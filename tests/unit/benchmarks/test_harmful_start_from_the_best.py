"""The harm measurement's scenario variant: start at the best safe configuration of the space,
every target tightened out of its reach, so that the trials that follow are harmful or
neutral."""

from __future__ import annotations

from tests.unit.benchmarks.support import EASY

from latency_tuner.api.durations import parse_duration
from latency_tuner.convergence.evaluate import Evaluator, Measured
from latency_tuner.convergence.scenario import parse_scenario
from latency_tuner.convergence.space import build_space, start_container
from latency_tuner.convergence.strategies import (
    FROM_BEST_TIGHTEN,
    from_the_best,
    steady,
    worse,
)
from latency_tuner.convergence.world import make_world
from latency_tuner.core.observation import Observation


def test_the_variant_starts_at_the_best_configuration_with_targets_just_out_of_its_reach() -> None:
    scenario = parse_scenario(EASY)
    world = make_world("matched", 0)
    judge = Evaluator(scenario, world, 0, stream="oracle")
    moved = from_the_best(scenario, judge)
    assert moved is not None
    best = start_container(moved)
    assert best != start_container(scenario)  # EASY starts queueing behind max-num-seqs 8
    # No configuration of the space is better than the new start in steady state.
    ratings = {p.container: steady(judge, p.container) for p in build_space(scenario)}
    assert not any(worse(ratings[best], r) for r in ratings.values())
    # Its TTFT target is 80% of what it serves: the start no longer meets.
    served = judge.measure(best)
    assert isinstance(served, Measured)
    assert isinstance(served.steady, Observation)
    objective = moved.objectives.ttft
    assert objective is not None
    threshold = parse_duration(str(objective.threshold))
    p90 = served.steady.ttft[90]
    assert abs(threshold - FROM_BEST_TIGHTEN * p90) <= 0.001 * p90 + 1e-6
    moved_judge = Evaluator(moved, world, 0, stream="oracle")
    assert steady(moved_judge, best).violation > 0.0
    # The rest of the scenario is the same: load, knobs, evaluation.
    assert moved.workload == scenario.workload
    assert moved.knobs == scenario.knobs
    assert moved.name == f"{scenario.name}-from-best"
