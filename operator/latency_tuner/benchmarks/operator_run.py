"""The operator's own decision code, ``core.rollout.decide``, driven over a virtual Deployment.

Every ``RECONCILE_SECONDS`` of virtual time the runner does what ``reconcile.Reconciler`` does:
it gathers ``Facts`` (the container, the rollout and its pods, the metrics windows that
``windows_needed`` asks for, computed from the simulated pods' metric families with the
operator's signal maths), calls ``decide``, keeps the status it returns, applies
``Decision.apply`` to the virtual Deployment, and decides again at once while ``again``.

The virtual Deployment behaves like a rolling update with one replica: a new configuration
starts a new pod (``STARTUP_SECONDS`` later it is ready and takes the traffic, with a cold
prefix cache; the old pod serves meanwhile); a configuration the simulator refuses to start
(``StartupError``) or that needs more GPUs than a node has is a pod stuck in CrashLoopBackOff /
Unschedulable, which the decision code sees in ``RolloutFacts``; rolling back to the pod still
serving completes at once, as Kubernetes does. The load never stops.

Success: the phase reaches Converged and a window twice as long right after it meets every
target too. The run ends there, when the operator gives up (Exhausted), or when the rollout
budget or the time limit is spent. Only the phases that read the "current" window get it
computed (Observing, Converged, Exhausted): the others never look at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from latency_tuner.api.status import LatencyTargetStatus, Phase
from latency_tuner.benchmarks.evaluate import Failed, engine_config, meets
from latency_tuner.benchmarks.measure import SCRAPE_SECONDS, Pod, Recorder
from latency_tuner.benchmarks.scenario import Scenario
from latency_tuner.benchmarks.space import hardware_of, start_container
from latency_tuner.benchmarks.world import Load, World
from latency_tuner.core.cluster import ContainerConfig, PodFacts, RolloutFacts
from latency_tuner.core.rollout import Facts, WindowResult, decide, windows_needed
from latency_tuner.vllm.args import VllmCommandLine

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RECONCILE_SECONDS = 10.0
STARTUP_SECONDS = 30.0
MAX_STEPS = 6  # as reconcile.MAX_STEPS
_WINDOW_PHASES = (Phase.OBSERVING, Phase.CONVERGED, Phase.EXHAUSTED, Phase.PAUSED, Phase.FAILED)


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


def command_line(c: ContainerConfig) -> VllmCommandLine:
    return VllmCommandLine.parse(
        list(c.command) if c.command is not None else None,
        list(c.args) if c.args is not None else None,
    )


@dataclass
class _Pending:
    container: ContainerConfig
    pod: Pod | None  # None: it never serves
    ready_at: float
    problem: str | None


class VirtualDeployment:
    """One-replica Deployment of simulated vLLM pods, serving one continuous load."""

    def __init__(self, scenario: Scenario, world: World, seed: int) -> None:
        self.scenario = scenario
        self.world = world
        self.seed = seed
        self.load = Load(scenario.workload, world, seed=seed, stream=f"{scenario.name}:operator")
        self.recorder = Recorder()
        self.container = start_container(scenario)
        self.generation = 1
        self.pods_started = 0
        self.now = 0.0
        pod = self._pod(self.container, 0.0)
        if not isinstance(pod, Pod):
            raise ValueError(f"the starting configuration does not start: {pod.reason}")
        self.serving, self.serving_container = pod, self.container
        self.pending: _Pending | None = None
        self.serving.sample(self.recorder, 0.0)

    def _pod(self, container: ContainerConfig, at: float) -> Pod | Failed:
        config = engine_config(self.scenario, self.world, container, self.seed)
        if isinstance(config, Failed):
            return config
        self.pods_started += 1
        name = f"llama-{container.fingerprint()[:8]}-p{self.pods_started}"
        return Pod(
            name, config, self.world, self.load, seed=self.seed + self.pods_started, started=at
        )

    def apply(self, container: ContainerConfig) -> None:
        """A patch of the pod template: a rollout starts (or completes at once when the pod
        still serving already runs it)."""
        self.container = container
        self.generation += 1
        if container == self.serving_container:
            self.pending = None
            return
        pod = self._pod(container, self.now + STARTUP_SECONDS)
        if isinstance(pod, Failed):
            self.pending = _Pending(container, None, float("inf"), pod.reason)
        else:
            self.pending = _Pending(container, pod, self.now + STARTUP_SECONDS, None)

    def advance(self, until: float) -> None:
        """Serve until ``until``, scraping every ``SCRAPE_SECONDS``; a pod that became ready
        takes the traffic from the old one."""
        while self.now < until:
            t = min(until, (self.now // SCRAPE_SECONDS + 1) * SCRAPE_SECONDS)
            pending = self.pending
            if pending is not None and pending.pod is not None and pending.ready_at <= t:
                t = max(self.now, pending.ready_at)
                self.serving.run_until(t)
                self.serving.serving = False
                self.serving, self.serving_container = pending.pod, pending.container
                self.pending = None
                self.serving.sample(self.recorder, t)
                self.now = t
                continue
            self.serving.run_until(t)
            self.now = t
            if t % SCRAPE_SECONDS == 0:
                self.serving.sample(self.recorder, t)

    def rollout(self) -> RolloutFacts:
        old = PodFacts(
            name=self.serving.name,
            node="gpu-node",
            ready=True,
            restarts=0,
            config_fingerprint=self.serving_container.fingerprint(),
        )
        if self.pending is None:
            return RolloutFacts(self.generation, self.generation, 1, 1, 1, 1, pods=(old,))
        new = PodFacts(
            name=f"llama-{self.pending.container.fingerprint()[:8]}-new",
            node="gpu-node",
            ready=False,
            restarts=3 if self.pending.problem else 0,
            problem=self.pending.problem,
            config_fingerprint=self.pending.container.fingerprint(),
        )
        return RolloutFacts(
            self.generation, self.generation, 1, 1, 1, 1, pods=(old, new), total_replicas=2
        )

    def deployment_object(self) -> dict[str, Any]:
        c = self.container
        container: dict[str, Any] = {"name": "vllm", "image": c.image}
        if c.command is not None:
            container["command"] = list(c.command)
        if c.args is not None:
            container["args"] = list(c.args)
        container["resources"] = {"limits": {"nvidia.com/gpu": str(c.gpu_limit or 1)}}
        return {
            "metadata": {"name": "llama", "namespace": "bench", "generation": self.generation},
            "spec": {"template": {"spec": {"containers": [container]}}},
        }


def run_operator(
    scenario: Scenario,
    world: World,
    seed: int,
    *,
    budget: int,
    time_limit: float | None = None,
) -> RunResult:
    """Drive ``decide`` until confirmed success, Exhausted, the budget or the time limit."""
    spec = scenario.spec(max_trials=budget)
    window = spec.evaluation.window_seconds
    limit = time_limit or budget * (STARTUP_SECONDS + spec.evaluation.settle_seconds + 3 * window)
    percentiles = [int(o.percentile) for o in (spec.objectives.ttft, spec.objectives.itl,
                                               spec.objectives.e2e) if o is not None]  # fmt: skip
    hardware = hardware_of(scenario)
    dep = VirtualDeployment(scenario, world, seed)
    status = LatencyTargetStatus()
    rollouts = 0
    confirming: float | None = None
    history: list[str] = []
    seen_trials: set[int] = set()
    t = 0.0
    while t < limit:
        t += RECONCILE_SECONDS
        dep.advance(t)
        for _ in range(MAX_STEPS):
            now = T0 + timedelta(seconds=t)
            wanted = windows_needed(spec, status, now)
            windows: dict[str, WindowResult] = {}
            for name, w in wanted.items():
                if name == "current" and status.phase not in _WINDOW_PHASES:
                    continue
                end = w.end - T0.timestamp()
                windows[name] = dep.recorder.observe(
                    end=end, seconds=w.seconds, percentiles=percentiles
                )
            facts = Facts(
                deployment=dep.deployment_object(),
                container_index=0,
                container=dep.container,
                command_line=command_line(dep.container),
                rollout=dep.rollout(),
                hardware=hardware,
                windows=windows,
            )
            decision = decide(spec, 1, status, facts, now)
            status = decision.status
            if decision.apply is not None:
                dep.apply(decision.apply)
                rollouts += 1
            if not decision.again:
                break
        for trial in status.trials:
            if trial.id not in seen_trials and trial.finished_at is not None:
                seen_trials.add(trial.id)
                verdict = trial.verdict.value if trial.verdict else "?"
                change = f"{trial.knob} {trial.from_value} -> {trial.to_value}"
                history.append(f"{change}: {verdict} ({trial.reason})")
        if status.phase is Phase.CONVERGED:
            if confirming is None:
                confirming = t
            elif t >= confirming + 2 * window:
                obs = dep.recorder.observe(end=t, seconds=2 * window, percentiles=percentiles)
                if meets(obs, spec.objectives, spec.evaluation.min_requests):
                    return RunResult("operator", True, rollouts, status.trial_count, False,
                                     dep.container, confirming, "converged and confirmed",
                                     history)  # fmt: skip
                history.append("converged but the longer window missed: looking again")
                confirming = float("inf")  # wait for the operator to leave Converged
        else:
            confirming = None
        if status.phase is Phase.EXHAUSTED:
            reason = _condition_message(status, "Progressing")
            history.append(_last_words(status))
            return RunResult("operator", False, rollouts, status.trial_count, True,
                             dep.container, t, f"exhausted: {reason}", history)  # fmt: skip
        if rollouts >= budget and status.current_trial is None:
            break
    history.append(_last_words(status))
    return RunResult("operator", False, rollouts, status.trial_count, False, dep.container, t,
                     "budget or time limit reached", history)  # fmt: skip


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
