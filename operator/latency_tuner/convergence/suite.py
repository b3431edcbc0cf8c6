"""A whole suite: every scenario x world (matched, perturbed, foreign) x seed, every method,
the oracle.

One job is one scenario in one world with one seed: the oracle measures the whole allowed
space in steady state on its own load trace; every method -- the operator, the blind planner
(the operator's loop, diagnosis ignored), grid, random and TPE -- runs its own continuous
timeline of the same virtual Deployment serving the same load stream under ``protocol``; each
method's final configuration is rated by the oracle's measure, with its knob class. Jobs run in
worker processes (``jobs``); results are plain values.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from latency_tuner.convergence import baselines, oracle
from latency_tuner.convergence.evaluate import Evaluator
from latency_tuner.convergence.operator_run import RunResult, run_operator
from latency_tuner.convergence.scenario import Scenario, expectation
from latency_tuner.convergence.space import build_space
from latency_tuner.convergence.stage import LiveStage
from latency_tuner.convergence.world import WORLDS, WorldKind, make_world

METHODS = ("operator", "blind", "grid", "random", "tpe")
DEFAULT_BUDGET = 12


@dataclass(frozen=True)
class MethodOutcome:
    method: str
    success: bool
    rollouts: int
    trials: int
    gave_up: bool
    seconds: float
    final_objective: float  # the oracle's objective of the final configuration
    final_gpus: int
    final_meets: bool  # the oracle's steady window of the final configuration meets the targets
    reason: str
    history: tuple[str, ...] = ()
    final_class: str | None = None  # safe, lossy, costly: what the final configuration changed
    # (objective, expected change, measured change, basis, aimed at) per prediction of its
    # finished trials (``operator_run.Forecasted``; runs written before the basis have three)
    predictions: tuple[tuple[Any, ...], ...] = ()


@dataclass(frozen=True)
class JobResult:
    scenario: str
    world: WorldKind
    seed: int
    expect: str
    feasible: bool
    best_objective: float
    min_gpus: int | None
    space: int
    meeting: int  # configurations of the space that meet the targets (oracle)
    simulations: int
    seconds: float  # CPU wall time of the job
    outcomes: dict[str, MethodOutcome] = field(default_factory=dict)
    reference_class: str | None = None  # the cheapest class that meets (the reference's)
    by_class: dict[str, tuple[str, float, int]] = field(default_factory=dict)  # label, obj., GPUs
    budget: int = 0

    @property
    def give_up_compares(self) -> bool:
        """Every method could search the whole space within the budget (else a search that
        "never gives up" only ran out of budget)."""
        return self.space - 1 <= self.budget

    def gap(self, method: str) -> float | None:
        """Relative gap of the method's final configuration to the oracle's reference; None
        unless both meet the targets in steady state."""
        o = self.outcomes[method]
        best = self.best_objective
        if not (self.feasible and o.final_meets):
            return None
        if not math.isfinite(o.final_objective) or not math.isfinite(best):
            return None
        if best <= 0:
            return 0.0 if o.final_objective <= 0 else math.inf
        return o.final_objective / best - 1.0


@dataclass(frozen=True)
class Job:
    scenario: Scenario
    world: WorldKind
    seed: int
    methods: tuple[str, ...]
    budget: int


def run_job(job: Job) -> JobResult:
    started = time.perf_counter()
    s = job.scenario
    world = make_world(job.world, job.seed)
    # The oracle measures on its own trace: a search method's luck is not the oracle's.
    judge = Evaluator(s, world, job.seed, stream="oracle")
    space = build_space(s)
    best = oracle.search(judge, space)
    runs: list[RunResult] = []
    for method in job.methods:
        if method in ("operator", "blind"):
            runs.append(run_operator(s, world, job.seed, budget=job.budget,
                                     blind=method == "blind"))  # fmt: skip
        elif method in baselines.SEARCHES:
            stage = LiveStage(s, world, job.seed)
            runs.append(baselines.SEARCHES[method](stage, space, job.budget, job.seed))
        else:
            raise ValueError(f"unknown method {method!r}")
    outcomes = {run.method: outcome(judge, run) for run in runs}
    by_class = {c.value: (b.point.label(), b.objective, b.gpus) for c, b in best.by_class.items()}
    return JobResult(
        s.name, job.world, job.seed, expectation(s), best.feasible, best.best_objective,
        best.min_gpus, len(space), best.meeting, judge.simulations,
        time.perf_counter() - started, outcomes,
        None if best.reference_class is None else best.reference_class.value, by_class,
        job.budget,
    )  # fmt: skip


def outcome(judge: Evaluator, run: RunResult) -> MethodOutcome:
    """A method's run as the table counts it: its final configuration measured by the
    oracle's judge (steady state, on the oracle's own trace)."""
    q = oracle.quality(judge, run.final)
    cls = oracle.class_of_container(judge.scenario, run.final)
    return MethodOutcome(
        run.method, run.success, run.rollouts, run.trials, run.gave_up, run.seconds,
        q.objective, q.gpus, q.meets, run.reason, tuple(run.history),
        cls.value, tuple(run.predictions),
    )  # fmt: skip


def jobs_for(
    scenarios: Sequence[Scenario],
    *,
    seeds: int,
    methods: Sequence[str],
    budget: int = DEFAULT_BUDGET,
    worlds: Sequence[WorldKind] = WORLDS,
) -> list[Job]:
    return [
        Job(s, w, seed, tuple(methods), budget)
        for s in scenarios
        for w in worlds
        for seed in range(seeds)
    ]


def run_suite(
    jobs: Sequence[Job],
    *,
    processes: int = 2,
    progress: Callable[[JobResult, int, int], None] | None = None,
    in_order: bool = False,
) -> list[JobResult]:
    """Run every job (in ``processes`` workers when more than one), longest spaces first (in
    the given order with ``in_order``: a partial run then covers a prefix of the suite)."""
    ordered = list(jobs) if in_order else sorted(jobs, key=lambda j: -len(build_space(j.scenario)))
    results = map_jobs(run_job, ordered, processes=processes, progress=progress)
    return sorted(results, key=lambda r: (r.scenario, r.world, r.seed))


J = TypeVar("J")
R = TypeVar("R")


def map_jobs(
    run: Callable[[J], R],
    jobs: Sequence[J],
    *,
    processes: int,
    progress: Callable[[R, int, int], None] | None = None,
) -> list[R]:
    """``run`` over ``jobs`` (in ``processes`` forked workers when more than one), results in
    the order they finish; ``progress`` is told of each."""
    results: list[R] = []
    if processes <= 1:
        for job in jobs:
            results.append(run(job))
            if progress:
                progress(results[-1], len(results), len(jobs))
    else:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            for result in pool.imap_unordered(run, jobs):
                results.append(result)
                if progress:
                    progress(result, len(results), len(jobs))
    return results
