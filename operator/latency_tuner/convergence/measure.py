"""Simulated pods and what a metrics source would make of them.

A ``Pod`` is one simulated vLLM server in virtual time: the simulator's engine with its cost
model in the run's world, and vLLM's metric families (``simulator.metrics.EngineMetrics``).
A ``Recorder`` samples the families of the pods into series every scrape interval, under the
target labels a Prometheus would attach (``namespace``, ``pod``), and answers a window with
the operator's own maths: ``core.signals.evaluate_on_series`` for every aggregate, then
``assemble`` -- exactly what the direct-scrape source does with scraped text. In a "foreign"
world a pod's steps also carry the world's noise and preemption cost (``_ForeignSteps``): the
simulator prices a step, the world then stretches it. No I/O.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from latency_tuner.convergence.world import Load, Request, World
from latency_tuner.core import signals
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.promql import LabelMatcher, default_matchers
from latency_tuner.perf.config import EngineConfig
from latency_tuner.perf.cost import CostModel
from latency_tuner.simulator.clock import VirtualClock
from latency_tuner.simulator.engine import PlannedStep, RequestRecord, VirtualEngine
from latency_tuner.simulator.metrics import EngineMetrics
from latency_tuner.vllm.metrics import FAMILIES, MetricType

NAMESPACE = "bench"
DEPLOYMENT = "llama"
MATCHERS = default_matchers(NAMESPACE, DEPLOYMENT)
SCRAPE_SECONDS = 5.0


def _needed_names() -> frozenset[str]:
    """Sample names some aggregate reads (the rest is never queried: not kept)."""
    names: set[str] = set()
    for fam in FAMILIES.values():
        for name in fam.candidates:
            if fam.type is MetricType.HISTOGRAM:
                names.update({name + "_bucket", name + "_sum", name + "_count"})
            else:
                names.add(name)
    return frozenset(names)


NEEDED = _needed_names()


@dataclass
class Recorder:
    """Series of every pod ever sampled: (name, labels) -> [(time, value)], times ascending."""

    series: dict[signals.SeriesKey, list[tuple[float, float]]] = field(default_factory=dict)
    _times: dict[signals.SeriesKey, list[float]] = field(default_factory=dict)

    def sample(self, registry: CollectorRegistry, *, at: float, pod: str) -> None:
        extra = (("namespace", NAMESPACE), ("pod", pod))
        for metric in registry.collect():
            for s in metric.samples:
                if s.name not in NEEDED:
                    continue
                key = (s.name, frozenset((*s.labels.items(), *extra)))
                points = self.series.get(key)
                if points is None:
                    points = self.series[key] = []
                    self._times[key] = []
                points.append((at, float(s.value)))
                self._times[key].append(at)

    def window(
        self, start: float, end: float
    ) -> dict[signals.SeriesKey, list[tuple[float, float]]]:
        """The samples inside ``[start, end]`` of the series that have any there."""
        out = {}
        for key, times in self._times.items():
            lo = bisect.bisect_left(times, start)
            hi = bisect.bisect_right(times, end)
            if hi > lo:
                out[key] = self.series[key][lo:hi]
        return out

    def observe(
        self,
        *,
        end: float,
        seconds: float,
        percentiles: Iterable[int],
        matchers: Sequence[LabelMatcher] = MATCHERS,
    ) -> ObservationResult:
        """The window of the series ``matchers`` select (the Deployment's pods by default; a
        canary trial's arms select the canary's pods or all but them)."""
        start = end - seconds
        # Only the window's series: an old pod's config echo must not answer for a new pod.
        part = self.window(start, end)
        results = {
            q: signals.evaluate_on_series(q, part, matchers=matchers, start=start, end=end)
            for q in signals.queries_for(percentiles)
        }
        return signals.assemble(
            results,
            window_seconds=seconds,
            cache_config=signals.cache_config_from_series(part, matchers),
        )


class _ForeignSteps:
    """A step as the simulator prices it, then stretched by the world: log-normal jitter, a
    rare Pareto stall, and a cost per request the step preempts."""

    def __init__(self, plan: Callable[[float], PlannedStep | None], world: World, seed: int):
        self.plan = plan
        self.world = world
        self.rng = random.Random(f"steps:{world.key}:{seed}")

    def __call__(self, now: float) -> PlannedStep | None:
        step = self.plan(now)
        if step is None:
            return None
        w, rng = self.world, self.rng
        duration = step.duration * rng.lognormvariate(0.0, w.jitter_sigma)
        if rng.random() < w.stall_probability:
            duration += w.stall_scale_s * rng.paretovariate(w.stall_alpha)
        duration += w.preemption_s * len(step.output.preempted)
        return PlannedStep(step.output, duration)


_REFUSED_RETRY_S = 0.1  # a refused user's next request, when it has no think time
_MAX_REFUSED_IN_A_ROW = 100


class Pod:
    """One simulated vLLM server that serves ``load`` from ``started`` on: by itself (it draws
    the arrivals, and its closed-loop users send their next request to it), or, ``fed``, what
    a ``service.Service`` hands it (``accept``)."""

    def __init__(
        self,
        name: str,
        config: EngineConfig,
        world: World,
        load: Load,
        *,
        seed: int,
        started: float,
        fed: bool = False,
    ) -> None:
        self.name = name
        self.fed = fed
        self.metrics = EngineMetrics(config, process_collectors=False)
        cost = CostModel(config, efficiencies=world.efficiencies)
        self.engine = VirtualEngine(
            config, seed=seed, cost=cost, sink=self.metrics, clock=VirtualClock(started)
        )
        if world.kind == "foreign":
            core = self.engine.core
            core.begin_step = _ForeignSteps(core.begin_step, world, seed)  # type: ignore[method-assign]
        self.load = load
        self.max_model_len = config.max_model_len
        self.refused = 0  # requests the API server would refuse as longer than max-model-len
        self.serving = True
        if load.closed and not fed:
            users = load.workload.users or 1
            self.engine.on_finish = self._next_of_user
            for _ in range(users):
                self._submit(load.request(started))

    def accept(self, request: Request) -> str | None:
        """A request handed over by a Service: the engine's id of the one submitted (a refused
        closed-loop user tries again after its think time), None when the user gave up."""
        return self._submit(request)

    def _submit(self, request: Request) -> str | None:
        # vLLM's API server answers 400 to a request longer than max-model-len before the
        # engine sees it; the engine has no such check, and such a request would never finish.
        # A closed-loop user whose request is refused sends its next one after its think time.
        limit = self.max_model_len
        for _ in range(_MAX_REFUSED_IN_A_ROW):
            if len(request.prompt) + request.max_tokens <= limit:
                return self.engine.submit(request.prompt, request.max_tokens, at=request.arrival)
            self.refused += 1
            if not (self.load.closed and self.serving):
                return None
            retry = request.arrival + max(self.load.think(), _REFUSED_RETRY_S)
            request = self.load.request(retry)
        # Every request of this user is too long for this configuration: the user gives up.
        return None

    def _next_of_user(self, record: RequestRecord) -> None:
        if self.serving:
            self._submit(self.load.request(record.finish + self.load.think()))

    def run_until(self, t: float) -> None:
        """Serve until ``t``: open-loop arrivals before ``t`` are submitted first (unless a
        Service hands them over)."""
        if not self.load.closed and not self.fed:
            for request in self.load.arrivals_until(t):
                self._submit(request)
        self.engine.run_until(t)

    def sample(self, recorder: Recorder, at: float) -> None:
        recorder.sample(self.metrics.registry, at=at, pod=self.name)
