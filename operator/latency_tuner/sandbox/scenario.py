"""Sandbox scenarios: the shared scenario schema, the shipped demos, and an offline estimate.

The format is ``latency_tuner.scenario`` (one schema for the demo and the benchmark); the ready
ones ship in ``sandbox/scenarios/``. On top of the schema's checks, the sandbox refuses what its
load generator cannot produce: ``Load.of(workload)`` runs closed loops (``users`` clients) or
Poisson arrivals capped at ``users`` in flight, with fixed prompt lengths, one shared prefix
and no think time.

``estimate()`` runs the scenario's load through the simulator in virtual time (no processes,
a second or two of CPU) to tell what TTFT/ITL the Deployment, or the Deployment with ``fix``
applied, would show: the ready scenarios are tuned so that the first misses its targets and the
second meets them with margin. This module reads files and computes; it starts nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from latency_tuner.api import LatencyTarget
from latency_tuner.scenario import (
    Expect,
    Hardware,
    Scenario,
    ScenarioError,
    Timeouts,
    Workload,
)

__all__ = [
    "Estimate",
    "Expect",
    "Hardware",
    "Load",
    "Scenario",
    "ScenarioError",
    "Timeouts",
    "Workload",
    "estimate",
    "list_scenarios",
    "load_scenario",
    "sandbox_problems",
]


class Load(BaseModel):
    """What the sandbox's load generator runs: a closed loop of ``concurrency`` clients, or
    Poisson arrivals at ``rate`` with at most ``concurrency`` in flight."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int = Field(default=8, ge=1, le=256)
    rate: float | None = Field(default=None, gt=0)
    prompt_tokens: int = Field(default=512, ge=1)
    output_tokens: int = Field(default=128, ge=1)
    shared_prefix_tokens: int = Field(default=0, ge=0)
    seed: int = 0

    @classmethod
    def of(cls, workload: Workload) -> Load:
        """The generator's settings for ``workload``; ``ValueError`` when it cannot run it."""
        problems = _load_problems(workload)
        if problems:
            raise ValueError("; ".join(problems))
        assert workload.users is not None
        return cls(
            concurrency=workload.users,
            rate=workload.rate if workload.arrival == "poisson" else None,
            prompt_tokens=workload.prompt_tokens,
            output_tokens=workload.output_tokens,
            shared_prefix_tokens=workload.shared_prefix_tokens,
            seed=workload.seed,
        )


def _load_problems(w: Workload) -> list[str]:
    problems = []
    if w.arrival == "bursty":
        problems.append("workload.arrival: the sandbox's load generator runs closed or poisson")
    if w.users is None:
        problems.append("workload.users: the sandbox caps the requests in flight; say how many")
    elif w.users > 256:
        problems.append("workload.users: at most 256 clients in the sandbox")
    if w.spread:
        problems.append("workload.spread: the sandbox's prompts all have promptTokens tokens")
    if w.prefix_groups != 1:
        problems.append("workload.prefixGroups: the sandbox's prompts share one prefix")
    if w.think_seconds:
        problems.append("workload.thinkSeconds: the sandbox's clients do not pause")
    return problems


def sandbox_problems(scenario: Scenario) -> list[str]:
    """What keeps ``scenario`` from running in the sandbox (empty: nothing)."""
    return _load_problems(scenario.workload)


def _checked(scenario: Scenario, source: str) -> Scenario:
    problems = sandbox_problems(scenario)
    if problems:
        raise ScenarioError(source, problems)
    return scenario


# --------------------------------------------------------------------------------------------
# The shipped scenarios
# --------------------------------------------------------------------------------------------


def list_scenarios() -> list[str]:
    """Names of the scenarios shipped in ``latency_tuner/sandbox/scenarios``."""
    folder = resources.files("latency_tuner.sandbox").joinpath("scenarios")
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A shipped scenario by name (``prefix-caching``) or any scenario file by path, checked
    to run in the sandbox."""
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml"} or path.exists():
        return _checked(Scenario.from_file(path), str(path))
    folder = resources.files("latency_tuner.sandbox").joinpath("scenarios")
    resource = folder.joinpath(f"{name_or_path}.yaml")
    if not resource.is_file():
        known = ", ".join(list_scenarios())
        raise ScenarioError(str(name_or_path), [f"(top level): no such scenario (known: {known})"])
    source = f"{name_or_path}.yaml"
    return _checked(Scenario.from_yaml(resource.read_text(), source), source)


# --------------------------------------------------------------------------------------------
# Offline estimate (virtual time)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """What the simulator predicts for the scenario's load; None when vLLM would not start."""

    ttft_s: float | None
    itl_s: float | None
    e2e_s: float | None
    startup_error: str | None = None

    def meets(self, target: LatencyTarget) -> bool:
        if self.startup_error is not None:
            return False
        objectives = target.spec.objectives
        pairs = ((objectives.ttft, self.ttft_s), (objectives.itl, self.itl_s),
                 (objectives.e2e, self.e2e_s))  # fmt: skip
        return all(
            value is not None and value <= objective.threshold_seconds
            for objective, value in pairs
            if objective is not None
        )


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def estimate(scenario: Scenario, *, fixed: bool = False, requests: int = 400) -> Estimate:
    """Run ``requests`` of the scenario's load through the simulator in virtual time and
    return the objectives' percentiles (the first tenth of requests is warm-up, dropped)."""
    import random

    from latency_tuner.loadgen.prompts import PromptFactory
    from latency_tuner.perf.config import StartupError, build_engine_config
    from latency_tuner.simulator.engine import SimRequest, VirtualEngine
    from latency_tuner.simulator.tokenizer import encode

    cl = scenario.fixed_command_line() if fixed else scenario.command_line()
    try:
        config = build_engine_config(
            cl, gpu=scenario.hardware.canonical_gpu, num_gpus=scenario.gpus
        )
    except (StartupError, ValueError) as exc:
        return Estimate(None, None, None, startup_error=str(exc))
    load = Load.of(scenario.workload)
    prompts = PromptFactory(
        prompt_tokens=load.prompt_tokens,
        shared_prefix_tokens=load.shared_prefix_tokens,
        seed=load.seed,
    )
    engine = VirtualEngine(config, seed=load.seed)

    def make(i: int) -> tuple[list[int], int]:
        return encode(prompts.prompt(i).text), load.output_tokens

    if load.rate is None:
        records = engine.run_closed_loop(
            concurrency=load.concurrency, num_requests=requests, make_request=make
        )
    else:
        arrivals, at = random.Random(load.seed), 0.0
        batch = []
        for i in range(requests):
            at += arrivals.expovariate(load.rate)
            ids, out = make(i)
            batch.append(SimRequest(ids, out, at))
        records = engine.run_requests(batch)
    records = sorted(records, key=lambda r: r.arrival)[requests // 10 :]
    objectives = scenario.latency_target_model().spec.objectives

    def pct(values: list[float], objective: Any) -> float | None:
        return _percentile(values, objective.percentile if objective else 95)

    return Estimate(
        ttft_s=pct([r.ttft for r in records], objectives.ttft),
        itl_s=pct([g for r in records for g in r.itls], objectives.itl),
        e2e_s=pct([r.e2e for r in records], objectives.e2e),
    )
