"""The operator on a scenario: the production ``controller.Reconciler`` over the virtual world.

Every ``RECONCILE_SECONDS`` of virtual time the virtual Deployment serves on, then
``Reconciler.run`` reconciles the LatencyTarget through the virtual world's ports
(``virtual.virtual_ports``; ``replicated.replicated_ports`` with ``replicas`` >= 2, canaries
included), exactly as the kopf timer does over the Kubernetes adapters: the same gathering
(every window ``windows_needed`` names), the same ``decide``, the same chained steps, status
writes and guarded patches. This module only keeps the score.

Success: the phase reaches Converged and a window twice as long right after it meets every
target too; with a drifting load, that window starts no sooner than the load has been at its
drifted rate for the oracle's warm-up (``protocol.drift_settled``: the oracle scores that steady
state; a configuration converged on the early load must still hold there, or the
operator must have tuned again, as it does after a sustained miss). The run ends there, when
the operator gives up (Exhausted; under a drift, still Exhausted once the drift is over: a load
that moved opens planning again), or when the rollout budget or the time limit (longer by the
drift) is spent. ``blind=True`` runs the same loop with the blind planner
(``blind``), as the method "blind". ``strategy`` sets the spec's (Rollout or Canary).

A rollout is a Deployment change users see: a patch of the Deployment's container (a trial, a
rollback, a promotion) or a configuration put on a canary. In the N-replica world the run also
reports what the harm figures need: the requests each configuration served, and every kept
change (the configuration it replaced and the one it kept).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

from latency_tuner.api.durations import parse_timestamp
from latency_tuner.api.spec import Strategy
from latency_tuner.api.status import LatencyTargetStatus, Phase, Verdict
from latency_tuner.controller.gather import percentiles
from latency_tuner.controller.reconciler import Reconciler
from latency_tuner.convergence.blind import blind_planner, planning_with
from latency_tuner.convergence.evaluate import meets
from latency_tuner.convergence.measure import NAMESPACE
from latency_tuner.convergence.protocol import TICK_SECONDS, confirm_window, drift_settled
from latency_tuner.convergence.replicated import ReplicatedDeployment, replicated_ports
from latency_tuner.convergence.scenario import Scenario
from latency_tuner.convergence.virtual import (
    STARTUP_SECONDS,
    T0,
    TARGET,
    VirtualDeployment,
    virtual_ports,
)
from latency_tuner.convergence.world import World
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.rollout.values import config_of

RECONCILE_SECONDS = TICK_SECONDS  # the operator's timer interval, in virtual seconds


# (objective, expected change, measured change, basis "model" or "prior", aimed at) of a
# finished trial's prediction
Forecasted = tuple[str, float, float, str, bool]


@dataclass
class RunResult:
    """One method on one scenario in one world."""

    method: str
    success: bool
    rollouts: int  # Deployment changes: trials, rollbacks, the final move to the best
    trials: int  # configurations tried
    gave_up: bool  # ended by its own decision that nothing is left (not by the budget)
    final: ContainerConfig
    seconds: float  # virtual time until success (or the end)
    reason: str
    history: list[str] = field(default_factory=list)
    # (patched at, window start) of every trial measured, in virtual seconds: the protocol's
    # window rule, checkable for every method
    windows: list[tuple[float, float]] = field(default_factory=list)
    canaries: int = 0  # of ``rollouts``: configurations put on a canary
    kept: list[tuple[ContainerConfig, ContainerConfig]] = field(default_factory=list)  # from, to
    served: list[tuple[ContainerConfig, int]] = field(default_factory=list)  # N replicas only
    short: int = 0  # requests finished while fewer pods were ready than wanted (N replicas)
    templates: list[ContainerConfig] = field(default_factory=list)  # main's, each (N replicas)
    # every finished trial's predictions (``Forecasted``)
    predictions: list[Forecasted] = field(default_factory=list)


@dataclass(frozen=True)
class _Run:
    replicas: int
    strategy: Strategy | None


def run_operator(
    scenario: Scenario,
    world: World,
    seed: int,
    *,
    budget: int,
    time_limit: float | None = None,
    blind: bool = False,
    replicas: int = 1,
    strategy: Strategy | None = None,
) -> RunResult:
    """Reconcile until confirmed success, Exhausted, the budget or the time limit.
    ``replicas`` >= 2: the N-replica world (``replicated``), where canaries can run."""
    method = "blind" if blind else "operator"
    run = _Run(replicas, strategy)
    if not blind:
        return asyncio.run(_run(scenario, world, seed, budget, time_limit, method, run))
    with planning_with(blind_planner(scenario, seed)):
        return asyncio.run(_run(scenario, world, seed, budget, time_limit, method, run))


async def _run(
    scenario: Scenario,
    world: World,
    seed: int,
    budget: int,
    time_limit: float | None,
    method: str,
    run: _Run,
) -> RunResult:
    spec = scenario.spec(max_trials=budget, strategy=run.strategy)
    window = spec.evaluation.window_seconds
    # Every replica of a rolling update starts in turn (at most one at a time up to 3).
    startup = STARTUP_SECONDS * run.replicas
    # A drifting load is scored at its drifted rate (the oracle's): a success counts only once
    # the load has got there, and the run lasts that much longer.
    settle = spec.evaluation.settle_seconds
    drifted = drift_settled(scenario.workload.drift_seconds, settle, window)
    limit = time_limit or budget * (startup + settle + 3 * window) + drifted
    dep: VirtualDeployment | ReplicatedDeployment
    if run.replicas == 1:
        dep = VirtualDeployment(scenario, world, seed)
        ports, targets = virtual_ports(scenario, dep, spec)
    else:
        dep = ReplicatedDeployment(scenario, world, seed, run.replicas)
        ports, targets = replicated_ports(scenario, dep, spec)
    reconciler = Reconciler(ports)
    body = {"metadata": {"namespace": NAMESPACE, "name": TARGET}}
    rollouts = 0
    confirming: tuple[float, float] | None = None  # the confirming window: start, end
    history: list[str] = []
    windows: list[tuple[float, float]] = []
    kept: list[tuple[ContainerConfig, ContainerConfig]] = []
    changes: dict[int, tuple[ContainerConfig, ContainerConfig]] = {}  # trial id -> from, to
    predictions: list[Forecasted] = []

    def canaries() -> int:
        return dep.canary_rollouts if isinstance(dep, ReplicatedDeployment) else 0

    def result(success: bool, gave_up: bool, seconds: float, reason: str) -> RunResult:
        out = RunResult(method, success, rollouts + canaries(), targets.status.trial_count,
                        gave_up, dep.container, seconds, reason, history, windows,
                        kept=kept, predictions=predictions)  # fmt: skip
        if isinstance(dep, ReplicatedDeployment):
            out.canaries, out.served, out.short = canaries(), dep.served(), dep.service.short
            out.templates = list(dep.template_history)
        return out

    seen_trials: set[int] = set()
    t = 0.0
    while t < limit:
        t += RECONCILE_SECONDS
        dep.advance(t)
        outcome = await reconciler.run(body)
        rollouts += outcome.patched
        status = targets.status
        for trial in status.trials:
            if trial.id not in seen_trials and trial.finished_at is not None:
                seen_trials.add(trial.id)
                verdict = trial.verdict.value if trial.verdict else "?"
                change = f"{trial.knob} {trial.from_value} -> {trial.to_value}"
                expected = "; ".join(p.describe() for p in trial.predictions)
                history.append(f"{change}: {verdict} ({trial.reason})"
                               + (f" [{expected}]" if expected else ""))  # fmt: skip
                predictions += [(p.objective, p.expected_change, p.measured_change, p.basis,
                                 p.aimed)
                                for p in trial.predictions
                                if p.measured_change is not None]  # fmt: skip
                if trial.measure_started_at is not None:
                    windows.append((_virtual(trial.started_at), _virtual(trial.measure_started_at)))
                if trial.verdict is Verdict.KEEP and trial.id in changes:
                    kept.append(changes[trial.id])
        running = status.current_trial
        if running is not None and running.from_container and running.to_container:
            # A finished trial drops its containers from the status: note them while it runs.
            changes[running.id] = (config_of(running.from_container),
                                   config_of(running.to_container))  # fmt: skip
        if status.phase is Phase.CONVERGED:
            if confirming is None:
                confirming = confirm_window(t, window, drifted)
            elif t >= confirming[1]:
                length = confirming[1] - confirming[0]
                obs = dep.recorder.observe(end=t, seconds=length, percentiles=percentiles(spec))
                if meets(obs, spec.objectives, spec.evaluation.min_requests):
                    return result(True, False, confirming[0], "converged and confirmed")
                history.append("converged but the longer window missed: looking again")
                confirming = (math.inf, math.inf)  # wait for the operator to leave Converged
        else:
            confirming = None
        if status.phase is Phase.EXHAUSTED and t >= drifted:  # under a drift it may resume
            reason = _condition_message(status, "Progressing")
            history.append(_last_words(status))
            return result(False, True, t, f"exhausted: {reason}")
        if rollouts + canaries() >= budget and status.current_trial is None:
            break
    history.append(_last_words(targets.status))
    return result(False, False, t, "budget or time limit reached")


def _virtual(stamp: str) -> float:
    return (parse_timestamp(stamp) - T0).total_seconds()


def _last_words(status: LatencyTargetStatus) -> str:
    """Where the operator stood at the end: phase, diagnosis, progress and metrics."""
    d = status.diagnosis
    diagnosis = f"{d.bottleneck} ({', '.join(d.findings)})" if d is not None else "none"
    return (
        f"end: phase {status.phase.value}; diagnosis {diagnosis}; "
        f"Progressing: {_condition_message(status, 'Progressing')}; "
        f"MetricsAvailable: {_condition_message(status, 'MetricsAvailable')}"
    )


def _condition_message(status: LatencyTargetStatus, type_: str) -> str:
    for c in status.conditions:
        if c.type == type_:
            return c.message
    return ""
