"""One configuration measured in steady state, for the oracle.

``Evaluator.measure(container)`` starts a fresh simulated pod with the container's command
line on the scenario's GPUs in the run's world (a configuration vLLM refuses to start, or one
that needs more GPUs than the budget, is ``Failed``), serves the run's load trace (the oracle's
own stream: a method's luck is not the oracle's; a drifting load is served at its drifted
rate), skips ``protocol.steady_warmup`` (cold caches, a closed loop's first burst) and
measures ``protocol.STEADY_WINDOWS`` evaluation windows with the operator's signal maths:
``steady``. Results are cached per engine configuration (two spellings of one configuration
are measured once). Virtual time only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from latency_tuner.api.spec import Objectives
from latency_tuner.convergence.measure import SCRAPE_SECONDS, Pod, Recorder
from latency_tuner.convergence.protocol import STEADY_WINDOWS, steady_warmup
from latency_tuner.convergence.scenario import Scenario
from latency_tuner.convergence.world import Load, World
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.observation import Observation, ObservationResult
from latency_tuner.core.score import Score, score
from latency_tuner.perf.config import EngineConfig, StartupError, build_engine_config
from latency_tuner.vllm.args import VllmCommandLine


@dataclass(frozen=True)
class Failed:
    """The configuration does not come up (vLLM refuses it, or no node has its GPUs)."""

    reason: str


@dataclass(frozen=True)
class Measured:
    steady: ObservationResult  # after the warm-up, STEADY_WINDOWS windows long


Result = Measured | Failed


def engine_config(
    scenario: Scenario, world: World, container: ContainerConfig, seed: int
) -> EngineConfig | Failed:
    """What the pod runs, or why it never serves."""
    gpus = container.gpu_limit or 1
    if gpus > scenario.gpu_budget:
        return Failed(f"Unschedulable: {gpus} GPUs wanted, nodes have {scenario.gpu_budget}")
    cl = VllmCommandLine.parse(
        list(container.command) if container.command is not None else None,
        list(container.args) if container.args is not None else None,
    )
    try:
        return build_engine_config(
            cl, gpu=scenario.gpu, num_gpus=gpus, seed=seed, spec_acceptance=world.spec_acceptance
        )
    except (StartupError, ValueError) as exc:
        return Failed(f"CrashLoopBackOff: {exc}")


def violation(obs: ObservationResult, objectives: Objectives) -> Score | None:
    return score(obs, objectives) if isinstance(obs, Observation) else None


def meets(obs: ObservationResult, objectives: Objectives, min_requests: int) -> bool:
    """Every target met, on a window with enough requests to judge."""
    if not isinstance(obs, Observation) or obs.requests < min_requests:
        return False
    return score(obs, objectives).met is True


class Measurer(Protocol):
    """What the oracle needs of an evaluator (tests give their own)."""

    @property
    def scenario(self) -> Scenario: ...

    def measure(self, container: ContainerConfig) -> Result: ...


class Evaluator:
    """Measures configurations of one scenario in one world with one noise seed; caches."""

    def __init__(
        self, scenario: Scenario, world: World, seed: int, *, stream: str = "trace"
    ) -> None:
        self._scenario = scenario
        self.world = world
        self.seed = seed
        self.stream = stream
        self._cache: dict[EngineConfig | str, Result] = {}
        self.simulations = 0

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    def measure(self, container: ContainerConfig) -> Result:
        config = engine_config(self.scenario, self.world, container, self.seed)
        if isinstance(config, Failed):
            return self._cache.setdefault(config.reason, config)
        cached = self._cache.get(config)
        if cached is None:
            cached = self._cache[config] = self._simulate(config)
        return cached

    def _simulate(self, config: EngineConfig) -> Result:
        self.simulations += 1
        s = self.scenario
        window = s.evaluation.window_seconds
        warmup = steady_warmup(s.evaluation.settle_seconds, window)
        load = Load(s.workload, self.world, seed=self.seed, stream=f"{s.name}:{self.stream}",
                    offset=s.workload.drift_seconds)  # fmt: skip
        percentiles = [o.percentile for o in (s.objectives.ttft, s.objectives.itl, s.objectives.e2e)
                       if o is not None]  # fmt: skip
        seconds = STEADY_WINDOWS * window
        try:
            observed = serve(config, self.world, load, seed=self.seed, warmup=warmup,
                             seconds=seconds, percentiles=percentiles)  # fmt: skip
        except RuntimeError as exc:  # a prompt the KV cache can never hold
            return Failed(f"cannot serve the load: {exc}")
        return Measured(observed)


def serve(
    config: EngineConfig,
    world: World,
    load: Load,
    *,
    seed: int,
    warmup: float,
    seconds: float,
    percentiles: Sequence[int],
) -> ObservationResult:
    """One simulated pod of ``config`` serving ``load`` from time 0: the window of its last
    ``seconds`` after ``warmup``, as the operator's metrics source reads it. RuntimeError
    where the engine cannot serve the load (a prompt its KV cache can never hold)."""
    recorder = Recorder()
    pod = Pod("llama-eval-0", config, world, load, seed=seed, started=0.0)
    end = warmup + seconds
    t = 0.0
    while True:
        pod.sample(recorder, t)
        if t >= end:
            break
        t = min(t + SCRAPE_SECONDS, end)
        pod.run_until(t)
    return recorder.observe(end=end, seconds=seconds, percentiles=percentiles)
