"""The oracle and the search baselines over a hand-made space with hand-made measurements."""

from __future__ import annotations

import math

import pytest
from tests.unit.benchmarks.support import short_chats

from latency_tuner.convergence import baselines, oracle, protocol
from latency_tuner.convergence.evaluate import Failed, Measured, Result
from latency_tuner.convergence.scenario import Scenario, parse_scenario
from latency_tuner.convergence.space import Point, build_space, start_container
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.observation import Observation, ObservationResult

SCENARIO = short_chats("two-points", rate=10, max_seqs=16)


def window(ttft: float, requests: int = 200) -> Observation:
    return Observation(window_seconds=10.0, requests=requests, ttft={50: ttft / 2, 90: ttft})


def _seqs(container: ContainerConfig) -> str:
    args = list(container.args or ())
    return args[args.index("--max-num-seqs") + 1]


class Table:
    """A measurer that answers from a table: seqs value -> TTFT p90 (None: fails to start)."""

    def __init__(self, scenario: Scenario, ttft: dict[str, float | None]) -> None:
        self._scenario = scenario
        self.ttft = ttft
        self.calls = 0

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    def measure(self, container: ContainerConfig) -> Result:
        self.calls += 1
        value = self.ttft[_seqs(container)]
        if value is None:
            return Failed("CrashLoopBackOff")
        return Measured(window(value))


class TableStage:
    """A stage that answers from a table and counts Deployment changes."""

    def __init__(self, scenario: Scenario, ttft: dict[str, float | None]) -> None:
        self._scenario = scenario
        self.ttft = ttft
        self._deployed = start_container(scenario)
        self._changes = 0
        self.log: list[str] = []

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    @property
    def changes(self) -> int:
        return self._changes

    @property
    def now(self) -> float:
        return 60.0 * self._changes

    @property
    def deployed(self) -> ContainerConfig:
        return self._deployed

    def key(self, container: ContainerConfig) -> object:
        return _seqs(container)

    def _window(self, container: ContainerConfig) -> Observation | Failed:
        value = self.ttft[_seqs(container)]
        return Failed("CrashLoopBackOff") if value is None else window(value)

    def measure_start(self) -> ObservationResult:
        self.log.append(f"start {_seqs(self._deployed)}")
        result = self._window(self._deployed)
        assert isinstance(result, Observation)
        return result

    def trial(self, container: ContainerConfig) -> ObservationResult | Failed:
        self._changes += 1
        self._deployed = container
        self.log.append(f"trial {_seqs(container)}")
        return self._window(container)

    def confirm(self) -> ObservationResult:
        result = self._window(self._deployed)
        assert isinstance(result, Observation)
        return result

    def revert(self, container: ContainerConfig) -> None:
        self._changes += 1
        self._deployed = container
        self.log.append(f"revert {_seqs(container)}")


class BusyStage(TableStage):
    """Each trial window finishes fewer than minRequests (50) requests from a server that never
    idled (a busy window); the longer confirmation window finishes enough."""

    def _window(self, container: ContainerConfig) -> Observation | Failed:
        value = self.ttft[_seqs(container)]
        if value is None:
            return Failed("CrashLoopBackOff")
        return Observation(
            window_seconds=10.0, requests=20, ttft={50: value / 2, 90: value}, running_mean=6.0
        )

    def confirm(self) -> ObservationResult:
        return window(self.ttft[_seqs(self._deployed)] or math.inf)


@pytest.fixture
def space() -> tuple[Scenario, list[Point]]:
    scenario = parse_scenario(SCENARIO)
    return scenario, build_space(scenario)


def test_the_oracle_finds_the_one_point_of_two_that_meets_the_target(
    space: tuple[Scenario, list[Point]],
) -> None:
    scenario, points = space
    best = oracle.search(Table(scenario, {"8": 0.4, "16": 0.08}), points)
    assert best.feasible
    assert best.min_gpus == 1
    assert best.best is points[1]
    assert best.best_objective == pytest.approx(0.8)  # 0.08 s of a 0.1 s target


def test_the_oracle_calls_a_space_infeasible_and_keeps_the_least_violating_point(
    space: tuple[Scenario, list[Point]],
) -> None:
    scenario, points = space
    best = oracle.search(Table(scenario, {"8": 0.4, "16": 0.15}), points)
    assert not best.feasible
    assert best.min_gpus is None
    assert best.best is points[1]
    assert best.best_objective == pytest.approx(0.5)


def test_a_configuration_that_does_not_start_rates_as_infinitely_bad(
    space: tuple[Scenario, list[Point]],
) -> None:
    scenario, points = space
    assert math.isinf(oracle.quality(Table(scenario, {"8": None}), points[0].container).objective)


def test_the_grid_measures_the_deployed_start_for_free_and_pays_one_rollout_per_move(
    space: tuple[Scenario, list[Point]],
) -> None:
    scenario, points = space
    stage = TableStage(scenario, {"8": 0.4, "16": 0.08})
    result = baselines.run_grid(stage, points, budget=12)
    assert result.success
    assert (result.rollouts, result.trials) == (1, 1)
    assert stage.log == ["start 8", "trial 16"]
    assert result.final == points[1].container


# A busy window of 20 requests (minRequests 50) is judged by the operator's own rule: a start
# that meets on one is a success for a search as for the operator, not a window it waits past.
@pytest.mark.parametrize("stage", [TableStage, BusyStage], ids=["enough requests", "busy window"])
def test_a_search_whose_start_meets_the_targets_succeeds_without_a_rollout(
    space: tuple[Scenario, list[Point]], stage: type[TableStage]
) -> None:
    scenario, points = space
    for run in (baselines.run_grid, baselines.run_random):
        result = run(stage(scenario, {"8": 0.05, "16": 0.08}), points, 12, 0)
        assert result.success
        assert result.rollouts == 0


def test_a_search_that_ends_away_from_its_best_pays_a_rollout_to_revert_to_it(
    space: tuple[Scenario, list[Point]],
) -> None:
    scenario, points = space
    stage = TableStage(scenario, {"8": 0.4, "16": None})
    result = baselines.run_random(stage, points, 12, seed=1)
    assert not result.success
    assert result.gave_up
    assert result.final == points[0].container
    assert stage.log == ["start 8", "trial 16", "revert 8"]
    assert result.rollouts == 2  # the move and the revert, as the operator's trial + rollback


def test_grid_order_is_auto_tunes_seqs_outer_and_batched_tokens_inner() -> None:
    knobs = {
        "maxNumSeqs": {"min": 8, "max": 16},
        "maxNumBatchedTokens": {"min": 1024, "max": 2048},
        "gpuMemoryUtilization": None,
    }
    target = SCENARIO["latencyTarget"]
    data = {**SCENARIO, "latencyTarget": {**target, "spec": {**target["spec"], "knobs": knobs}}}
    labels = [p.label() for p in build_space(parse_scenario(data))]
    assert labels[:4] == [  # 8192: the H100's default, where the Deployment starts
        "maxNumSeqs=8,maxNumBatchedTokens=1024",
        "maxNumSeqs=8,maxNumBatchedTokens=2048",
        "maxNumSeqs=8,maxNumBatchedTokens=8192",
        "maxNumSeqs=16,maxNumBatchedTokens=1024",
    ]


def test_tpe_asks_optuna_and_finds_the_meeting_point(
    space: tuple[Scenario, list[Point]],
) -> None:
    pytest.importorskip("optuna")
    scenario, points = space
    result = baselines.run_tpe(TableStage(scenario, {"8": 0.4, "16": 0.08}), points, 12, seed=0)
    assert result.success
    assert result.final == points[1].container


def test_a_quiet_window_with_few_requests_is_still_not_a_success(
    space: tuple[Scenario, list[Point]],
) -> None:
    class QuietStage(BusyStage):
        def _window(self, container: ContainerConfig) -> Observation | Failed:
            found = super()._window(container)
            return (
                found
                if isinstance(found, Failed)
                else found.model_copy(update={"running_mean": 0.2})
            )

    scenario, points = space
    result = baselines.run_grid(QuietStage(scenario, {"8": 0.05, "16": 0.08}), points, 12, 0)
    assert not result.success


def test_the_oracle_counts_a_configuration_as_meeting_only_at_the_confirming_windows_rate(
    space: tuple[Scenario, list[Point]],
) -> None:
    """A configuration meeting the targets with fewer requests over the oracle's long window
    than minRequests per confirming window could never be confirmed by any method: over
    STEADY_WINDOWS windows the count scales with the window."""
    scenario, points = space
    needed = protocol.steady_min_requests(scenario.evaluation.min_requests)
    assert needed > scenario.evaluation.min_requests  # the oracle's window is the longer one

    class Slow(Table):
        def __init__(self, requests: int) -> None:
            super().__init__(scenario, {"8": 0.4, "16": 0.08})
            self.requests = requests

        def measure(self, container: ContainerConfig) -> Result:
            result = super().measure(container)
            if isinstance(result, Measured) and isinstance(result.steady, Observation):
                return Measured(window(result.steady.ttft[90], requests=self.requests))
            return result

    assert not oracle.search(Slow(needed - 1), points).feasible
    best = oracle.search(Slow(needed), points)
    assert best.feasible
    assert best.best is points[1]
