"""The oracle: every allowed configuration measured on the long window, in the run's world.

It says whether any allowed configuration meets the targets (the scenario is feasible in
this world), which one is best, and the fewest GPUs that suffice. "Best": among the
configurations that meet the targets, the fewest GPUs, then the lowest objective (the sum of
observed/threshold ratios, the verdict's tie-break); when none meets them, the lowest violation
score. The measurements are the evaluator's (cached), so the search baselines of the same run
reuse them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from latency_tuner.convergence.evaluate import Measured, Measurer, meets
from latency_tuner.convergence.space import Point
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.observation import Observation
from latency_tuner.core.score import score


@dataclass(frozen=True)
class Quality:
    """A configuration as the oracle sees it (long window)."""

    meets: bool
    objective: float  # sum of ratios when met; violation score otherwise; inf: no measurement
    gpus: int


@dataclass(frozen=True)
class OracleResult:
    feasible: bool
    best: Point | None
    best_objective: float
    min_gpus: int | None  # fewest GPUs of a configuration meeting the targets
    measured: int  # configurations measured (failed starts included)
    meeting: int = 0  # configurations that meet the targets


def quality(evaluator: Measurer, container: ContainerConfig) -> Quality:
    scenario = evaluator.scenario
    gpus = container.gpu_limit or 1
    result = evaluator.measure(container)
    if not isinstance(result, Measured) or not isinstance(result.long, Observation):
        return Quality(False, math.inf, gpus)
    s = score(result.long, scenario.objectives)
    ok = meets(result.long, scenario.objectives, scenario.evaluation.min_requests)
    if ok:
        return Quality(True, s.tie_break or 0.0, gpus)
    return Quality(False, s.value if s.value is not None else math.inf, gpus)


def search(evaluator: Measurer, space: list[Point]) -> OracleResult:
    """Exhaustive: measure every point and rank them."""
    rated = [(p, quality(evaluator, p.container)) for p in space]
    good = [(p, q) for p, q in rated if q.meets]
    if good:
        best, q = min(good, key=lambda pq: (pq[1].gpus, pq[1].objective))
        return OracleResult(True, best, q.objective, q.gpus, len(rated), len(good))
    finite = [(p, q) for p, q in rated if math.isfinite(q.objective)]
    if not finite:
        return OracleResult(False, None, math.inf, None, len(rated))
    best, q = min(finite, key=lambda pq: (pq[1].objective, pq[1].gpus))
    return OracleResult(False, best, q.objective, None, len(rated))
