"""Benchmark scenarios: the shared scenario schema plus what only the benchmark can check.

The format is ``latency_tuner.scenario`` (one schema for the demo and the benchmark). A suite
is a directory of such files; here they are loaded and refused when the benchmark cannot run
them: the GPU and model must be the simulator's, the starting arguments must start, the
knobs' space must hold at most ``MAX_SPACE`` configurations (the oracle's exhaustive search
stays cheap), and open arrivals carry no ``users`` cap (the simulated world does not cap them).
The oracle, not ``expect``, decides feasibility; a disagreement is reported.
Reads files; never runs anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from latency_tuner.perf.config import StartupError, build_engine_config
from latency_tuner.perf.models import UnknownModelError
from latency_tuner.scenario import Scenario, ScenarioError, Workload
from latency_tuner.vllm.args import NotVllmError

__all__ = [
    "MAX_SPACE",
    "Scenario",
    "ScenarioError",
    "Workload",
    "expectation",
    "load_scenario",
    "load_suite",
    "parse_scenario",
]

MAX_SPACE = 48  # configurations per scenario: the oracle evaluates every one, every run


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate one scenario's data; ``ScenarioError`` lists every problem."""
    scenario = Scenario.from_mapping(data, source)
    problems = _runtime_problems(scenario)
    if problems:
        raise ScenarioError(source, problems)
    return scenario


def expectation(scenario: Scenario) -> str:
    """``feasible`` or ``infeasible``: what the author meant, as the reports spell it."""
    return "feasible" if scenario.expect.feasible else "infeasible"


def _runtime_problems(s: Scenario) -> list[str]:
    """What only the simulator and the space can tell: model, starting arguments, space."""
    from latency_tuner.convergence.space import SpaceError, build_space  # a cycle otherwise

    if s.workload.arrival != "closed" and s.workload.users is not None:
        return ["workload.users: the benchmark does not cap open (poisson, bursty) arrivals"]
    try:
        cl = s.command_line()
    except NotVllmError as exc:
        return [f"deployment: {exc}"]
    try:
        build_engine_config(cl, gpu=s.gpu, num_gpus=s.gpus)
    except (StartupError, UnknownModelError) as exc:
        return [f"deployment: the starting configuration does not start: {exc}"]
    try:
        space = build_space(s)
    except SpaceError as exc:
        return [f"latencyTarget.spec.knobs: {exc}"]
    if len(space) > MAX_SPACE:
        return [
            f"latencyTarget.spec.knobs: {len(space)} configurations allowed; at most "
            f"{MAX_SPACE} (narrow them)"
        ]
    return []


def load_scenario(path: Path) -> Scenario:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ScenarioError(str(path), [f"not YAML: {exc}"]) from None
    return parse_scenario(data, str(path))


def load_suite(directory: Path) -> list[Scenario]:
    """Every ``*.yaml`` of ``directory``, sorted by name; names must be unique."""
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise ScenarioError(str(directory), ["no *.yaml scenario in this directory"])
    scenarios = [load_scenario(f) for f in files]
    names = [s.name for s in scenarios]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ScenarioError(str(directory), [f"scenario names used twice: {', '.join(twice)}"])
    return sorted(scenarios, key=lambda s: s.name)
