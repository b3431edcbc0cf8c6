"""The Deployment a search method moves, on the same timeline and rules as the operator's.

A ``Stage`` is what a search baseline (grid, random, TPE) needs: measure the starting
configuration, deploy a configuration and measure its window, confirm a meeting window, revert
to a configuration, and count every Deployment change. ``LiveStage`` is the virtual
Deployment the operator runs on (``virtual.VirtualDeployment``: the same pods, the same
30 s startup with a cold cache, the same continuous load stream and seed as the operator's
run, so every method sees the same arrivals), timed by ``protocol``. Tests give their own
``Stage``. Virtual time only.
"""

from __future__ import annotations

from typing import Protocol

from latency_tuner.controller.gather import percentiles
from latency_tuner.convergence.evaluate import Failed, engine_config
from latency_tuner.convergence.protocol import (
    TICK_SECONDS,
    confirm_window,
    drift_settled,
    next_look,
    trial_window,
)
from latency_tuner.convergence.scenario import Scenario
from latency_tuner.convergence.virtual import VirtualDeployment
from latency_tuner.convergence.world import World
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.observation import ObservationResult
from latency_tuner.perf.config import EngineConfig


class Stage(Protocol):
    @property
    def scenario(self) -> Scenario: ...

    @property
    def changes(self) -> int: ...  # Deployment changes so far: the rollouts

    @property
    def now(self) -> float: ...

    @property
    def deployed(self) -> ContainerConfig: ...

    def key(self, container: ContainerConfig) -> object:
        """Equal for two containers that run the same engine configuration."""
        ...

    def measure_start(self) -> ObservationResult: ...

    def trial(self, container: ContainerConfig) -> ObservationResult | Failed:
        """Deploy ``container`` (one change) and measure its window, or say why it never
        served."""
        ...

    def confirm(self) -> ObservationResult: ...

    def revert(self, container: ContainerConfig) -> None:
        """Deploy ``container`` without measuring it (one change)."""
        ...


class LiveStage:
    """``Stage`` over a virtual Deployment serving the operator's load stream."""

    def __init__(self, scenario: Scenario, world: World, seed: int) -> None:
        self._scenario = scenario
        self.world = world
        self.seed = seed
        self.deployment = VirtualDeployment(scenario, world, seed)
        self._changes = 0
        self.windows: list[tuple[float, float]] = []  # (patched at, window start) per trial
        self._patched_at = 0.0
        ev = scenario.evaluation
        self.settle, self.window = ev.settle_seconds, ev.window_seconds
        self.percentiles = percentiles(scenario.spec(max_trials=1))

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    @property
    def changes(self) -> int:
        return self._changes

    @property
    def now(self) -> float:
        return self.deployment.now

    @property
    def deployed(self) -> ContainerConfig:
        return self.deployment.container

    def key(self, container: ContainerConfig) -> EngineConfig | str:
        config = engine_config(self._scenario, self.world, container, self.seed)
        return config.reason if isinstance(config, Failed) else config

    def _observe(self, end: float, seconds: float) -> ObservationResult:
        self.deployment.advance(end)
        return self.deployment.recorder.observe(
            end=end, seconds=seconds, percentiles=self.percentiles
        )

    def _measure(self, seen_ready: float) -> ObservationResult:
        w = trial_window(seen_ready, self.settle, self.window)
        obs = self._observe(w.end, self.window)
        self.deployment.advance(w.judged)
        return obs

    def measure_start(self) -> ObservationResult:
        return self._measure(max(TICK_SECONDS, next_look(self.now)))

    def _apply(self, container: ContainerConfig) -> None:
        self._changes += 1
        self.deployment.advance(next_look(self.now))  # changes happen at a look
        self._patched_at = self.now
        self.deployment.apply(container)

    def trial(self, container: ContainerConfig) -> ObservationResult | Failed:
        self._apply(container)
        pending = self.deployment.pending
        if pending is not None and pending.pod is None:
            self.deployment.advance(next_look(self.now + TICK_SECONDS))  # seen at the next look
            return Failed(pending.problem or "never served")
        ready = self.now if pending is None else pending.ready_at
        seen = next_look(ready)
        self.windows.append((self._patched_at, trial_window(seen, self.settle, self.window).start))
        return self._measure(seen)

    def confirm(self) -> ObservationResult:
        settled = drift_settled(self._scenario.workload.drift_seconds, self.settle, self.window)
        start, end = confirm_window(next_look(self.now), self.window, settled)
        return self._observe(end, end - start)

    def revert(self, container: ContainerConfig) -> None:
        self._apply(container)
