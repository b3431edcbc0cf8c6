"""Search baselines under the operator's budget and measurement rules.

Each baseline moves the Deployment from configuration to configuration of the scenario's
allowed space (``benchmarks.space``), measuring each one like a trial (settle, one window:
``Evaluator``). A move is one rollout; measuring the configuration already deployed is free;
a configuration that fails to start costs its rollout and yields nothing. Success is the
first configuration whose window meets every target and whose longer confirmation window
agrees, as for the operator. The budget counts rollouts.

- ``grid``: vLLM ``benchmarks/auto_tune``'s sweep -- max-num-seqs x max-num-batched-tokens,
  then the other allowed knobs -- in the space's order;
- ``random``: the space in a random order (seeded);
- ``tpe``: Optuna's TPE sampler over the same discrete space, minimising the window's
  violation score with the GPU count as a tie-break (needs ``optuna``: the ``bench`` extra).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from latency_tuner.convergence.evaluate import Measured, Measurer, meets
from latency_tuner.convergence.operator_run import RunResult
from latency_tuner.convergence.space import Point, dimensions, start_container
from latency_tuner.convergence.virtual import STARTUP_SECONDS
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.observation import Observation
from latency_tuner.core.score import score

FAILED_OBJECTIVE = 100.0  # what a configuration that does not start scores, for TPE
GPU_TIE_BREAK = 1e-3  # per GPU: equal scores prefer fewer GPUs


class OptunaMissing(RuntimeError):
    """TPE needs optuna; install the ``bench`` extra (pip install optuna)."""


class _Search:
    """The Deployment as a search method moves it, with the bookkeeping of rollouts."""

    def __init__(self, method: str, evaluator: Measurer, budget: int) -> None:
        self.method = method
        self.evaluator = evaluator
        self.budget = budget
        scenario = evaluator.scenario
        self.objectives = scenario.objectives
        self.min_requests = scenario.evaluation.min_requests
        self.window = scenario.evaluation.window_seconds
        self.settle = scenario.evaluation.settle_seconds
        self.deployed = start_container(scenario)
        self.rollouts = 0
        self.trials = 0
        self.seconds = 0.0
        self.best: tuple[float, ContainerConfig] | None = None
        self.history: list[str] = []
        self.success: RunResult | None = None

    @property
    def spent(self) -> bool:
        return self.rollouts >= self.budget or self.success is not None

    def try_point(self, point: Point) -> float:
        """Deploy and measure ``point``; its objective (violation score + GPU tie-break)."""
        if not self.evaluator.same(point.container, self.deployed):
            self.rollouts += 1
            self.seconds += STARTUP_SECONDS
            self.deployed = point.container
        self.trials += 1
        self.seconds += self.settle + self.window
        result = self.evaluator.measure(point.container)
        if not isinstance(result, Measured) or not isinstance(result.short, Observation):
            self.history.append(f"{point.label()}: did not start")
            return FAILED_OBJECTIVE
        s = score(result.short, self.objectives)
        value = (s.value if s.value is not None else FAILED_OBJECTIVE) + GPU_TIE_BREAK * point.gpus
        self.history.append(f"{point.label()}: {s.describe()}")
        if self.best is None or value < self.best[0]:
            self.best = (value, point.container)
        if meets(result.short, self.objectives, self.min_requests):
            self.seconds += 2 * self.window
            if meets(result.confirm, self.objectives, self.min_requests):
                self.success = RunResult(self.method, True, self.rollouts, self.trials, False,
                                         point.container, self.seconds, "targets met, confirmed",
                                         self.history)  # fmt: skip
            else:
                self.history.append("  the longer window missed: searching on")
        return value

    def result(self, exhausted_space: bool) -> RunResult:
        if self.success is not None:
            return self.success
        final = self.best[1] if self.best is not None else self.deployed
        why = "space exhausted" if exhausted_space else "budget spent"
        return RunResult(self.method, False, self.rollouts, self.trials, exhausted_space, final,
                         self.seconds, why, self.history)  # fmt: skip


def _sweep(method: str, order: Iterator[Point], evaluator: Measurer, budget: int) -> RunResult:
    search = _Search(method, evaluator, budget)
    for point in order:
        if search.spent:
            return search.result(False)
        search.try_point(point)
    return search.result(search.success is None)


def run_grid(evaluator: Measurer, space: list[Point], budget: int) -> RunResult:
    return _sweep("grid", iter(space), evaluator, budget)


def run_random(evaluator: Measurer, space: list[Point], budget: int, seed: int) -> RunResult:
    order = list(space)
    random.Random(f"random:{seed}").shuffle(order)
    return _sweep("random", iter(order), evaluator, budget)


def optuna_available() -> bool:
    try:
        import optuna  # noqa: F401
    except ImportError:
        return False
    return True


def run_tpe(evaluator: Measurer, space: list[Point], budget: int, seed: int) -> RunResult:
    """Optuna TPE (ask/tell) over the space's dimensions; a configuration it asks for again is
    answered from what was measured, without a rollout."""
    try:
        import optuna
    except ImportError as exc:
        raise OptunaMissing(
            "the tpe baseline needs optuna: pip install optuna (the `bench` extra)"
        ) from exc
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dims = dimensions(evaluator.scenario)
    by_values = {tuple(v for _, v in p.values): p for p in space}
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=4, multivariate=True)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    search = _Search("tpe", evaluator, budget)
    seen: dict[tuple[str, ...], float] = {}
    asks = 0
    while not search.spent and len(seen) < len(space) and asks < 20 * budget:
        asks += 1
        trial = study.ask()
        key = tuple(str(trial.suggest_categorical(d.knob, list(d.values))) for d in dims)
        if key not in seen:
            seen[key] = search.try_point(by_values[key])
        study.tell(trial, seen[key])
    return search.result(search.success is None and len(seen) == len(space))


Method = Callable[[Measurer, list[Point], int, int], RunResult]
