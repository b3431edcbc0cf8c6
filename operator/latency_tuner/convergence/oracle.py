"""The oracle: every allowed configuration measured in steady state, in the run's world.

It says whether any allowed configuration meets the targets (the scenario is feasible in this
world: judged on steady state, never on a window with a cold start), and which one is best per
knob class. A configuration's class is the costliest class of the knobs it changes from the
start (``core.knobs``: tensor parallelism is costly; quantization and the KV-cache dtype are
lossy; the rest is safe). "Best" within a class: among the configurations of that class that
meet the targets, the fewest GPUs, then the lowest objective (the sum of observed/threshold
ratios, the verdict's tie-break).

The *reference* a method is scored against is the best it was allowed to prefer: safe before
lossy before costly, so the best configuration among those of the cheapest class that meets
the targets (a lossy FP8 optimum does not make a correct safe fix "poor"). When nothing
meets them, the reference is the configuration with the lowest violation score. The
measurements are the evaluator's (cached).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from latency_tuner.convergence.evaluate import Measured, Measurer, meets
from latency_tuner.convergence.protocol import steady_min_requests
from latency_tuner.convergence.scenario import Scenario
from latency_tuner.convergence.space import Point, dimensions, hardware_of, start_container
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.config_view import view
from latency_tuner.core.knobs import KnobClass, costliest_class
from latency_tuner.core.observation import Observation
from latency_tuner.core.score import score
from latency_tuner.vllm.args import VllmCommandLine

CLASSES = (KnobClass.SAFE, KnobClass.LOSSY, KnobClass.COSTLY)


@dataclass(frozen=True)
class Quality:
    """A configuration as the oracle sees it (steady state)."""

    meets: bool
    objective: float  # sum of ratios when met; violation score otherwise; inf: no measurement
    gpus: int


@dataclass(frozen=True)
class Best:
    """The best meeting configuration of one knob class."""

    point: Point
    objective: float
    gpus: int


@dataclass(frozen=True)
class OracleResult:
    feasible: bool
    best: Point | None  # the reference: the best of the cheapest class that meets
    best_objective: float
    min_gpus: int | None  # GPUs of the reference (fewest that suffice in its class)
    measured: int  # configurations measured (failed starts included)
    meeting: int = 0  # configurations that meet the targets
    reference_class: KnobClass | None = None
    by_class: dict[KnobClass, Best] = field(default_factory=dict)


def knob_class(scenario: Scenario, values: tuple[tuple[str, str], ...]) -> KnobClass:
    """The costliest class among the knobs ``values`` change from the start (the first value of
    each lossy or costly dimension is the start's; safe knobs cannot raise the class)."""
    first = {d.knob: d.values[0] for d in dimensions(scenario)}
    return costliest_class(knob for knob, value in values if value != first.get(knob))


def class_of_container(scenario: Scenario, container: ContainerConfig) -> KnobClass:
    """The class of what ``container`` changed from the start: more GPUs per replica is costly;
    another checkpoint, image, quantization or KV-cache dtype is lossy; anything else safe."""
    start = start_container(scenario)
    if (container.gpu_limit or 1) > (start.gpu_limit or 1):
        return KnobClass.COSTLY
    hardware = hardware_of(scenario)
    before, after = view(command_line(start), hardware), view(command_line(container), hardware)
    lossy = (before.model, before.quantization, before.kv_cache_dtype) != (
        after.model,
        after.quantization,
        after.kv_cache_dtype,
    )
    return KnobClass.LOSSY if lossy or container.image != start.image else KnobClass.SAFE


def command_line(container: ContainerConfig) -> VllmCommandLine:
    return VllmCommandLine.parse(
        list(container.command) if container.command is not None else None,
        list(container.args) if container.args is not None else None,
    )


def quality(evaluator: Measurer, container: ContainerConfig) -> Quality:
    scenario = evaluator.scenario
    gpus = container.gpu_limit or 1
    result = evaluator.measure(container)
    if not isinstance(result, Measured) or not isinstance(result.steady, Observation):
        return Quality(False, math.inf, gpus)
    s = score(result.steady, scenario.objectives)
    ok = meets(
        result.steady, scenario.objectives, steady_min_requests(scenario.evaluation.min_requests)
    )
    if ok:
        return Quality(True, s.tie_break or 0.0, gpus)
    return Quality(False, s.value if s.value is not None else math.inf, gpus)


def search(evaluator: Measurer, space: list[Point]) -> OracleResult:
    """Exhaustive: measure every point, rank them per class, pick the reference."""
    scenario = evaluator.scenario
    rated = [(p, quality(evaluator, p.container)) for p in space]
    by_class: dict[KnobClass, Best] = {}
    for p, q in rated:
        if not q.meets:
            continue
        cls = knob_class(scenario, p.values)
        held = by_class.get(cls)
        if held is None or (q.gpus, q.objective) < (held.gpus, held.objective):
            by_class[cls] = Best(p, q.objective, q.gpus)
    meeting = sum(1 for _, q in rated if q.meets)
    for cls in CLASSES:
        if cls in by_class:
            ref = by_class[cls]
            return OracleResult(True, ref.point, ref.objective, ref.gpus, len(rated), meeting,
                                cls, by_class)  # fmt: skip
    finite = [(p, q) for p, q in rated if math.isfinite(q.objective)]
    if not finite:
        return OracleResult(False, None, math.inf, None, len(rated))
    best, q = min(finite, key=lambda pq: (pq[1].objective, pq[1].gpus))
    return OracleResult(False, best, q.objective, None, len(rated))
