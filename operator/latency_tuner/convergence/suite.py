"""A whole suite: every scenario x world (matched, perturbed) x seed, every method, the oracle.

One job is one scenario in one world with one seed: the oracle measures the whole allowed
space on its own load trace, the search baselines share a second trace (their evaluator caches,
so grid, random and TPE measure a configuration once), the operator runs its own continuous
timeline on a third, and each method's final configuration is rated by the oracle's measure.
Jobs run in worker processes (``jobs``); results are plain values.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from latency_tuner.convergence import baselines, oracle
from latency_tuner.convergence.evaluate import Evaluator
from latency_tuner.convergence.operator_run import RunResult, run_operator
from latency_tuner.convergence.scenario import Scenario, expectation
from latency_tuner.convergence.space import build_space
from latency_tuner.convergence.world import WorldKind, make_world

METHODS = ("operator", "grid", "random", "tpe")
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
    final_meets: bool  # the oracle's long window of the final configuration meets the targets
    reason: str
    history: tuple[str, ...] = ()


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

    def gap(self, method: str) -> float | None:
        """Relative gap of the method's final configuration to the oracle's best."""
        o = self.outcomes[method]
        best = self.best_objective
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
    evaluator = Evaluator(s, world, job.seed, stream="trace")
    space = build_space(s)
    best = oracle.search(judge, space)
    runs: list[RunResult] = []
    for method in job.methods:
        if method == "operator":
            runs.append(run_operator(s, world, job.seed, budget=job.budget))
        elif method == "grid":
            runs.append(baselines.run_grid(evaluator, space, job.budget))
        elif method == "random":
            runs.append(baselines.run_random(evaluator, space, job.budget, job.seed))
        elif method == "tpe":
            runs.append(baselines.run_tpe(evaluator, space, job.budget, job.seed))
        else:
            raise ValueError(f"unknown method {method!r}")
    outcomes = {}
    for run in runs:
        q = oracle.quality(judge, run.final)
        outcomes[run.method] = MethodOutcome(
            run.method, run.success, run.rollouts, run.trials, run.gave_up, run.seconds,
            q.objective, q.gpus, q.meets, run.reason, tuple(run.history),
        )  # fmt: skip
    return JobResult(
        s.name, job.world, job.seed, expectation(s), best.feasible, best.best_objective,
        best.min_gpus, len(space), best.meeting, judge.simulations + evaluator.simulations,
        time.perf_counter() - started, outcomes,
    )  # fmt: skip


def jobs_for(
    scenarios: Sequence[Scenario],
    *,
    seeds: int,
    methods: Sequence[str],
    budget: int = DEFAULT_BUDGET,
    worlds: Sequence[WorldKind] = ("matched", "perturbed"),
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
) -> list[JobResult]:
    """Run every job (in ``processes`` workers when more than one), longest spaces first."""
    ordered = sorted(jobs, key=lambda j: -len(build_space(j.scenario)))
    results: list[JobResult] = []
    if processes <= 1:
        for job in ordered:
            results.append(run_job(job))
            if progress:
                progress(results[-1], len(results), len(ordered))
    else:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            for result in pool.imap_unordered(run_job, ordered):
                results.append(result)
                if progress:
                    progress(result, len(results), len(ordered))
    return sorted(results, key=lambda r: (r.scenario, r.world, r.seed))
