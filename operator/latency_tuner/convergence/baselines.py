"""Search baselines under the operator's budget and measurement rules (``protocol``).

Each baseline moves a ``stage.Stage`` -- the same virtual Deployment, load stream, clock and
window rule as the operator's run -- from configuration to configuration of the scenario's
allowed space (``space``). Every method first measures the starting configuration (free);
every Deployment change is one rollout (a configuration that fails to start costs its rollout
and yields nothing); a configuration measured before is answered from memory, free. Success
is the first window the operator's rule lets be judged (``minRequests`` requests, or a busy or
saturated server's fewer) that meets every target and whose longer confirmation window
agrees, as for the operator. A search that ends without success reverts to the best configuration it
measured, and that revert is a rollout too (the operator's rollbacks are). The budget counts
rollouts.

- ``grid``: vLLM ``benchmarks/auto_tune``'s sweep -- max-num-seqs x max-num-batched-tokens,
  then the other allowed knobs -- in the space's order;
- ``random``: the space in a random order (seeded);
- ``tpe``: Optuna's TPE sampler over the same discrete space, minimising the window's
  violation score with the GPU count as a tie-break (needs ``optuna``: the ``bench`` extra).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from latency_tuner.convergence.evaluate import Failed, meets
from latency_tuner.convergence.operator_run import RunResult
from latency_tuner.convergence.space import Point, dimensions
from latency_tuner.convergence.stage import Stage
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.observation import Observation, ObservationResult
from latency_tuner.core.saturation import usable
from latency_tuner.core.score import score

FAILED_OBJECTIVE = 100.0  # what a configuration that does not start scores, for TPE
GPU_TIE_BREAK = 1e-3  # per GPU: equal scores prefer fewer GPUs


class OptunaMissing(RuntimeError):
    """TPE needs optuna; install the ``bench`` extra (pip install optuna)."""


class _Search:
    """The bookkeeping of one search over a stage: what was measured, the best, success."""

    def __init__(self, method: str, stage: Stage, budget: int) -> None:
        self.method = method
        self.stage = stage
        self.budget = budget
        scenario = stage.scenario
        self.objectives = scenario.objectives
        self.min_requests = scenario.evaluation.min_requests
        self.trials = 0
        self.best: tuple[float, ContainerConfig] | None = None
        self.memory: dict[object, float] = {}
        self.history: list[str] = []
        self.success: RunResult | None = None
        start = stage.deployed
        self.memory[stage.key(start)] = self._judge("start", start, stage.measure_start())

    @property
    def spent(self) -> bool:
        return self.stage.changes >= self.budget or self.success is not None

    def try_point(self, point: Point) -> float:
        """Deploy and measure ``point`` (free when measured before); its objective (violation
        score + GPU tie-break)."""
        key = self.stage.key(point.container)
        known = self.memory.get(key)
        if known is not None:
            return known
        self.trials += 1
        result = self.stage.trial(point.container)
        if isinstance(result, Failed):
            self.history.append(f"{point.label()}: did not start ({result.reason})")
            value = FAILED_OBJECTIVE
        else:
            value = self._judge(point.label(), point.container, result)
        self.memory[key] = value
        return value

    def _judge(self, label: str, container: ContainerConfig, obs: ObservationResult) -> float:
        if not isinstance(obs, Observation):
            self.history.append(f"{label}: no window ({obs})")
            return FAILED_OBJECTIVE
        s = score(obs, self.objectives)
        gpus = container.gpu_limit or 1
        value = (s.value if s.value is not None else FAILED_OBJECTIVE) + GPU_TIE_BREAK * gpus
        self.history.append(f"{label}: {s.describe()}")
        if self.best is None or value < self.best[0]:
            self.best = (value, container)
        # The operator's own rule decides whether a window can be judged (a busy or saturated
        # server's few requests count); the longer window confirms as it does the operator's.
        if usable(obs, self.min_requests) and s.met is True:
            if meets(self.stage.confirm(), self.objectives, self.min_requests):
                self.success = RunResult(self.method, True, self.stage.changes, self.trials,
                                         False, container, self.stage.now,
                                         "targets met, confirmed", self.history)  # fmt: skip
            else:
                self.history.append("  the longer window missed: searching on")
        return value

    def result(self, exhausted_space: bool) -> RunResult:
        if self.success is not None:
            return self.success
        final = self.best[1] if self.best is not None else self.stage.deployed
        if self.stage.key(final) != self.stage.key(self.stage.deployed):
            self.stage.revert(final)  # back to the best seen: a Deployment change like any other
            self.history.append("reverted to the best configuration seen")
        why = "space exhausted" if exhausted_space else "budget spent"
        return RunResult(self.method, False, self.stage.changes, self.trials, exhausted_space,
                         final, self.stage.now, why, self.history)  # fmt: skip


def _sweep(method: str, order: Iterator[Point], stage: Stage, budget: int) -> RunResult:
    search = _Search(method, stage, budget)
    for point in order:
        if search.spent:
            return search.result(False)
        search.try_point(point)
    return search.result(search.success is None)


def run_grid(stage: Stage, space: list[Point], budget: int, seed: int = 0) -> RunResult:
    return _sweep("grid", iter(space), stage, budget)


def run_random(stage: Stage, space: list[Point], budget: int, seed: int) -> RunResult:
    order = list(space)
    random.Random(f"random:{seed}").shuffle(order)
    return _sweep("random", iter(order), stage, budget)


def optuna_available() -> bool:
    try:
        import optuna  # noqa: F401
    except ImportError:
        return False
    return True


def run_tpe(stage: Stage, space: list[Point], budget: int, seed: int) -> RunResult:
    """Optuna TPE (ask/tell) over the space's dimensions; a configuration it asks for again is
    answered from what was measured, without a rollout."""
    try:
        import optuna
    except ImportError as exc:
        raise OptunaMissing(
            "the tpe baseline needs optuna: pip install optuna (the `bench` extra)"
        ) from exc
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dims = dimensions(stage.scenario)
    by_values = {tuple(v for _, v in p.values): p for p in space}
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=4, multivariate=True)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    search = _Search("tpe", stage, budget)
    start = stage.key(stage.deployed)
    for point in space:  # TPE is told the starting configuration's measurement too
        if stage.key(point.container) == start:
            study.enqueue_trial(dict(point.values))
            break
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


Method = Callable[[Stage, list[Point], int, int], RunResult]
SEARCHES: dict[str, Method] = {"grid": run_grid, "random": run_random, "tpe": run_tpe}
