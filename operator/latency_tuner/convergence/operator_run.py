"""The operator on a scenario: the production ``controller.Reconciler`` over the virtual world.

Every ``RECONCILE_SECONDS`` of virtual time the virtual Deployment serves on, then
``Reconciler.run`` reconciles the LatencyTarget through ``virtual.VirtualPorts``, exactly as the
kopf timer does over the Kubernetes adapters: the same gathering (every window
``windows_needed`` names), the same ``decide``, the same chained steps, status writes and
guarded patches. This module only keeps the score.

Success: the phase reaches Converged and a window twice as long right after it meets every
target too. The run ends there, when the operator gives up (Exhausted), or when the rollout
budget or the time limit is spent. ``blind=True`` runs the same loop with the blind planner
(``blind``), as the method "blind".
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from latency_tuner.api.durations import parse_timestamp
from latency_tuner.api.status import LatencyTargetStatus, Phase
from latency_tuner.controller.gather import percentiles
from latency_tuner.controller.reconciler import Reconciler
from latency_tuner.convergence.blind import blind_planner, planning_with
from latency_tuner.convergence.evaluate import meets
from latency_tuner.convergence.measure import NAMESPACE
from latency_tuner.convergence.protocol import TICK_SECONDS
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

RECONCILE_SECONDS = TICK_SECONDS  # the operator's timer interval, in virtual seconds


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


def run_operator(
    scenario: Scenario,
    world: World,
    seed: int,
    *,
    budget: int,
    time_limit: float | None = None,
    blind: bool = False,
) -> RunResult:
    """Reconcile until confirmed success, Exhausted, the budget or the time limit."""
    method = "blind" if blind else "operator"
    if not blind:
        return asyncio.run(_run(scenario, world, seed, budget, time_limit, method))
    with planning_with(blind_planner(scenario, seed)):
        return asyncio.run(_run(scenario, world, seed, budget, time_limit, method))


async def _run(
    scenario: Scenario,
    world: World,
    seed: int,
    budget: int,
    time_limit: float | None,
    method: str,
) -> RunResult:
    spec = scenario.spec(max_trials=budget)
    window = spec.evaluation.window_seconds
    limit = time_limit or budget * (STARTUP_SECONDS + spec.evaluation.settle_seconds + 3 * window)
    dep = VirtualDeployment(scenario, world, seed)
    ports, targets = virtual_ports(scenario, dep, spec)
    reconciler = Reconciler(ports)
    body = {"metadata": {"namespace": NAMESPACE, "name": TARGET}}
    rollouts = 0
    confirming: float | None = None
    history: list[str] = []
    windows: list[tuple[float, float]] = []
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
                history.append(f"{change}: {verdict} ({trial.reason})")
                if trial.measure_started_at is not None:
                    windows.append((_virtual(trial.started_at), _virtual(trial.measure_started_at)))
        if status.phase is Phase.CONVERGED:
            if confirming is None:
                confirming = t
            elif t >= confirming + 2 * window:
                obs = dep.recorder.observe(end=t, seconds=2 * window, percentiles=percentiles(spec))
                if meets(obs, spec.objectives, spec.evaluation.min_requests):
                    return RunResult(method, True, rollouts, status.trial_count, False,
                                     dep.container, confirming, "converged and confirmed",
                                     history, windows)  # fmt: skip
                history.append("converged but the longer window missed: looking again")
                confirming = float("inf")  # wait for the operator to leave Converged
        else:
            confirming = None
        if status.phase is Phase.EXHAUSTED:
            reason = _condition_message(status, "Progressing")
            history.append(_last_words(status))
            return RunResult(method, False, rollouts, status.trial_count, True,
                             dep.container, t, f"exhausted: {reason}", history,
                             windows)  # fmt: skip
        if rollouts >= budget and status.current_trial is None:
            break
    status = targets.status
    history.append(_last_words(status))
    return RunResult(method, False, rollouts, status.trial_count, False, dep.container, t,
                     "budget or time limit reached", history, windows)  # fmt: skip


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
