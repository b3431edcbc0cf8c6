"""Rollout against Canary: the same scenarios in the same N-replica world, once per strategy.

One job is one scenario in one world with one seed. The oracle measures every allowed
configuration in steady state on one pod at the scenario's load (``oracle.search``): what each
replica serves in the N-replica world (``replicated``), where the scenario's load is per
replica. Then the production reconcile loop runs the scenario on ``replicas`` replicas once
per strategy, ``spec.strategy`` set, on the same load stream and seed (``operator_run``); with
``blind`` its planner is the blind one (``blind``: the allowed changes in a seeded order, the
diagnosis ignored), whose trials are often bad -- what a strategy must then protect users
from; with ``from_best`` the scenario starts at its best configuration with targets out of
reach (``from_the_best``), so that almost every trial is harmful or neutral.

Per run:

- success and rollouts, as the convergence benchmark counts them (a rollout is a Deployment
  change users see: a container patch of the main Deployment, or a configuration put on a
  canary);
- harm: the share of the run's requests served by a pod whose configuration is worse than the
  starting configuration in steady state (``worse``);
- wrong keeps: kept changes whose configuration is not better in steady state than the one
  it replaced (the verdict was fooled by noise, drift, a cold cache or a backlog);
- short: requests finished while fewer pods were ready than the Deployments want (a rollout
  that takes an old pod down before its new one is ready; a canary trial whose main Deployment
  gave up its replica before the canary was ready).

Worse and better compare the oracle's steady states (``Steady``): the violation score first
(sum over objectives of max(0, observed / threshold - 1)), the same within ``TOLERANCE`` of
the other's (relative, and at least ``TOLERANCE`` absolute); then the sum of observed /
threshold ratios (lower is better even when every target is met), the same within
``TOLERANCE`` relative. A configuration the oracle cannot measure (it does not
start, or cannot serve the load) is worse than any it can. Pure apart from the simulations
the job runs; no I/O.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from latency_tuner.api.durations import format_duration
from latency_tuner.api.spec import Strategy
from latency_tuner.convergence import oracle
from latency_tuner.convergence.evaluate import Evaluator, Measured, Measurer
from latency_tuner.convergence.operator_run import run_operator
from latency_tuner.convergence.scenario import Scenario, parse_scenario
from latency_tuner.convergence.space import build_space, start_container
from latency_tuner.convergence.world import WorldKind, make_world
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.knobs import KnobClass
from latency_tuner.core.observation import Observation
from latency_tuner.core.rollout.facts import CANARY_INTERVALS
from latency_tuner.core.score import score

STRATEGIES: dict[str, Strategy] = {"rollout": Strategy.ROLLOUT, "canary": Strategy.CANARY}
TOLERANCE = 0.02  # steady states closer than this are the same (the oracle's own noise)
DEFAULT_REPLICAS = 2


@dataclass(frozen=True)
class Steady:
    """A configuration's steady state on one pod at the scenario's load, as two numbers."""

    violation: float  # the violation score; inf when it cannot be measured
    ratios: float  # sum of observed / threshold; inf when it cannot be measured


def steady(evaluator: Measurer, container: ContainerConfig) -> Steady:
    result = evaluator.measure(container)
    if not isinstance(result, Measured) or not isinstance(result.steady, Observation):
        return Steady(math.inf, math.inf)
    s = score(result.steady, evaluator.scenario.objectives)
    value, ratios = s.value, s.tie_break
    return Steady(math.inf if value is None else value, math.inf if ratios is None else ratios)


def worse(a: Steady, b: Steady, tolerance: float = TOLERANCE) -> bool:
    """``a`` is worse than ``b``: a higher violation score by more than ``tolerance`` of
    ``b``'s (at least ``tolerance``: scores of saturated servers run to tens); or, within
    that, a higher sum of ratios by more than ``tolerance`` of ``b``'s."""
    margin = tolerance * max(1.0, b.violation) if math.isfinite(b.violation) else 0.0
    if a.violation > b.violation + margin:
        return True
    if a.violation < b.violation - margin:
        return False
    return a.ratios > b.ratios * (1 + tolerance)


Rating = Callable[[ContainerConfig], Steady]


def harm(
    served: Sequence[tuple[ContainerConfig, int]], rating: Rating, start: ContainerConfig
) -> tuple[int, int]:
    """(requests served by a configuration worse than ``start``, all requests served)."""
    base = rating(start)
    harmful = sum(n for c, n in served if n and worse(rating(c), base))
    return harmful, sum(n for _, n in served)


def wrong_keeps(kept: Sequence[tuple[ContainerConfig, ContainerConfig]], rating: Rating) -> int:
    """Kept changes (from, to) whose new configuration is not better than the old one."""
    return sum(1 for before, after in kept if not worse(rating(before), rating(after)))


def with_min_window(scenario: Scenario, seconds: float) -> Scenario:
    """The scenario with ``evaluation.window`` at least ``seconds`` (its own if longer): one
    setting for the oracle and for both strategies."""
    if scenario.evaluation.window_seconds >= seconds:
        return scenario
    data = scenario.model_dump(by_alias=True)
    target = data["latencyTarget"]
    evaluation = dict((target.get("spec") or {}).get("evaluation") or {})
    evaluation["window"] = format_duration(seconds)
    target["spec"] = {**target["spec"], "evaluation": evaluation}
    return parse_scenario(data, scenario.name)


# From the best start, each objective's threshold is this share of what the best configuration
# serves: out of its reach, so the loop keeps trying, and most changes from there are harmful.
FROM_BEST_TIGHTEN = 0.8


def from_the_best(scenario: Scenario, judge: Measurer) -> Scenario | None:
    """The harmful-change variant of ``scenario``: the Deployment starts at the best safe
    configuration of its space (lowest violation score, then ratios, in steady state at the
    start's GPUs) and every objective is tightened to ``FROM_BEST_TIGHTEN`` of what that
    configuration serves. Every trial from there is at best neutral, often harmful: what a
    trial strategy must protect users from. None when the best cannot be measured."""
    start = start_container(scenario)
    safe = [
        p.container
        for p in build_space(scenario)
        if oracle.class_of_container(scenario, p.container) is KnobClass.SAFE
        and p.container.gpu_limit == start.gpu_limit
    ]
    rated = [(steady(judge, c), c) for c in safe]
    finite = [(r, c) for r, c in rated if math.isfinite(r.violation)]
    if not finite:
        return None
    _, best = min(finite, key=lambda rc: (rc[0].violation, rc[0].ratios))
    measured = judge.measure(best)
    assert isinstance(measured, Measured) and isinstance(measured.steady, Observation)
    data = scenario.model_dump(by_alias=True)
    container = data["deployment"]["spec"]["template"]["spec"]["containers"][0]
    container["command"] = list(best.command) if best.command is not None else None
    container["args"] = list(best.args) if best.args is not None else None
    objectives = data["latencyTarget"]["spec"]["objectives"]
    for name, objective in objectives.items():
        if not objective:
            continue
        quantiles: dict[int, float] = getattr(measured.steady, name)
        served = quantiles.get(int(objective["percentile"]))
        if served is None or served <= 0:
            return None
        objective["threshold"] = format_duration(FROM_BEST_TIGHTEN * served)
    data["name"] = f"{scenario.name}-from-best"
    return parse_scenario(data, data["name"])


def canary_min_window(scrape_seconds: float) -> float:
    """The shortest window a canary trial can be judged on: each of its ``CANARY_INTERVALS``
    intervals needs two scrapes of every pod."""
    return CANARY_INTERVALS * 2 * scrape_seconds


@dataclass(frozen=True)
class StrategyOutcome:
    strategy: str
    success: bool
    rollouts: int
    canaries: int  # of the rollouts: configurations put on a canary
    trials: int
    kept: int
    wrong_keeps: int
    requests: int
    harmful: int  # requests served by a configuration worse than the start
    short: int  # requests finished while fewer pods were ready than wanted
    gave_up: bool
    final_meets: bool  # the final configuration meets the targets in steady state
    seconds: float  # virtual time until success (or the end)
    reason: str
    history: tuple[str, ...] = ()


@dataclass(frozen=True)
class StrategyJob:
    scenario: Scenario
    world: WorldKind
    seed: int
    strategies: tuple[str, ...]
    budget: int
    replicas: int = DEFAULT_REPLICAS
    blind: bool = False  # the blind planner's trials (``blind``): bad changes are common
    from_best: bool = False  # start at the best configuration, targets out of its reach


@dataclass(frozen=True)
class StrategyJobResult:
    scenario: str
    world: WorldKind
    seed: int
    replicas: int
    budget: int
    window: float  # evaluation.window the job ran with
    feasible: bool
    start_meets: bool
    space: int
    seconds: float  # CPU wall time of the job
    outcomes: dict[str, StrategyOutcome] = field(default_factory=dict)


def run_strategy_job(job: StrategyJob) -> StrategyJobResult:
    started = time.perf_counter()
    s = job.scenario
    world = make_world(job.world, job.seed)
    judge = Evaluator(s, world, job.seed, stream="oracle")
    if job.from_best:
        moved = from_the_best(s, judge)
        if moved is not None:
            s = moved
            judge = Evaluator(s, world, job.seed, stream="oracle")
    space = build_space(s)
    best = oracle.search(judge, space)

    def rating(container: ContainerConfig) -> Steady:
        return steady(judge, container)

    outcomes = {}
    for name in job.strategies:
        run = run_operator(s, world, job.seed, budget=job.budget, replicas=job.replicas,
                           strategy=STRATEGIES[name], blind=job.blind)  # fmt: skip
        harmful, requests = harm(run.served, rating, start_container(s))
        outcomes[name] = StrategyOutcome(
            name, run.success, run.rollouts, run.canaries, run.trials, len(run.kept),
            wrong_keeps(run.kept, rating), requests, harmful, run.short, run.gave_up,
            oracle.quality(judge, run.final).meets, run.seconds, run.reason,
            tuple(run.history),
        )  # fmt: skip
    return StrategyJobResult(
        s.name, job.world, job.seed, job.replicas, job.budget, s.evaluation.window_seconds,
        best.feasible, oracle.quality(judge, start_container(s)).meets, len(space),
        time.perf_counter() - started, outcomes,
    )  # fmt: skip
