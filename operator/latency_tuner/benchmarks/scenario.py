"""The benchmark scenario format: one YAML file per scenario, validated with every problem named.

A scenario is a vLLM Deployment at its starting arguments, the GPUs it may use, the load it
serves and the LatencyTarget's objectives, knobs and evaluation::

    name: h100-8b-chat-tiny-budget       # lowercase words joined by "-" (unique in a suite)
    description: Short chat behind a tiny batched-token budget.
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM                        # a simulator GPU name
    gpus: 1                              # GPUs per replica at the start (the container's limit)
    gpuBudget: 1                         # most GPUs one replica may get (the node's GPUs)
    interconnect: NVLink                 # optional: NVLink | PCIe (default: the GPU's)
    args: [--max-num-batched-tokens, "512"]   # vLLM arguments after `vllm serve MODEL`
    workload:
      arrival: poisson                   # poisson | bursty | closed
      rate: 12                           # requests/s (poisson, bursty: the mean)
      burstFactor: 4                     # bursty: rate during a burst / mean rate
      burstSeconds: 5                    # bursty: burst length, once per burstPeriodSeconds
      burstPeriodSeconds: 20
      users: null                        # closed: clients, each waits for its answer
      thinkSeconds: 0                    # closed: pause between a client's requests
      promptTokens: 512                  # mean; lengths spread uniformly by +-spread
      outputTokens: 128
      spread: 0.25
      sharedPrefixTokens: 0              # leading tokens shared by the prompts of one group
      prefixGroups: 1                    # distinct shared prefixes (documents, system prompts)
    objectives: {ttft: {percentile: 90, threshold: 300ms}}   # as in a LatencyTarget
    knobs: {...}                         # as in a LatencyTarget (keep the space small)
    evaluation: {window: 20s, settle: 10s, minRequests: 50}  # as in a LatencyTarget
    expect: feasible                     # feasible | infeasible: what the author meant
    tags: [chat, misconfigured]

The knobs define the allowed space (``benchmarks.space``); a scenario whose space holds more
than ``MAX_SPACE`` configurations is refused, so that the oracle's exhaustive search stays
cheap. The oracle, not ``expect``, decides feasibility; a disagreement is reported.
Reads files; never runs anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from latency_tuner.api._base import SpecModel
from latency_tuner.api.spec import Evaluation, Knobs, LatencyTargetSpec, Objectives
from latency_tuner.simulator.config import StartupError, build_engine_config
from latency_tuner.simulator.hardware import UnknownGpuError, get_gpu
from latency_tuner.simulator.models import UnknownModelError
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

MAX_SPACE = 48  # configurations per scenario: the oracle evaluates every one, every run
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class ScenarioError(ValueError):
    """A scenario file that cannot be used; ``problems`` lists each one with its place."""

    def __init__(self, source: str, problems: Iterable[str]) -> None:
        self.source = source
        self.problems = list(problems)
        super().__init__(f"{source}: " + "; ".join(self.problems))


class Workload(SpecModel):
    """The load offered to the Deployment: arrivals and request shapes."""

    arrival: Literal["poisson", "bursty", "closed"] = "poisson"
    rate: float | None = Field(default=None, gt=0, le=200)
    burst_factor: float = Field(default=4.0, ge=1, le=20)
    burst_seconds: float = Field(default=5.0, gt=0)
    burst_period_seconds: float = Field(default=20.0, gt=0)
    users: int | None = Field(default=None, ge=1, le=512)
    think_seconds: float = Field(default=0.0, ge=0)
    prompt_tokens: int = Field(ge=1, le=131072)
    output_tokens: int = Field(ge=1, le=8192)
    spread: float = Field(default=0.25, ge=0, lt=1)
    shared_prefix_tokens: int = Field(default=0, ge=0)
    prefix_groups: int = Field(default=1, ge=1, le=64)

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.arrival == "closed" and self.users is None:
            raise ValueError("a closed-loop workload needs users")
        if self.arrival != "closed" and self.rate is None:
            raise ValueError(f"a {self.arrival} workload needs a rate (requests per second)")
        if self.arrival == "bursty":
            if self.burst_seconds >= self.burst_period_seconds:
                raise ValueError("burstSeconds must be shorter than burstPeriodSeconds")
            share = self.burst_seconds / self.burst_period_seconds
            if self.burst_factor * share > 1:
                raise ValueError("burstFactor x burstSeconds / burstPeriodSeconds must be <= 1")
        if self.shared_prefix_tokens >= self.prompt_tokens * (1 - self.spread):
            raise ValueError("sharedPrefixTokens must be shorter than the shortest prompt")
        return self


class Scenario(SpecModel):
    """One benchmark scenario (see the module docstring for the format)."""

    name: str = Field(min_length=1, max_length=63)
    description: str = ""
    model: str = Field(min_length=1)
    gpu: str
    gpus: int = Field(default=1, ge=1, le=8)
    gpu_budget: int = Field(default=1, ge=1, le=8)
    interconnect: Literal["NVLink", "PCIe"] | None = None
    args: list[str] = Field(default_factory=list)
    workload: Workload
    objectives: Objectives
    knobs: Knobs = Knobs()
    evaluation: Evaluation = Evaluation(window="20s", settle="10s", min_requests=50)
    expect: Literal["feasible", "infeasible"] = "feasible"
    tags: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _checks(self) -> Scenario:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"name {self.name!r} is not lowercase words joined by '-'")
        if self.gpus > self.gpu_budget:
            raise ValueError(f"gpus ({self.gpus}) is more than gpuBudget ({self.gpu_budget})")
        tp = self.knobs.tensor_parallel
        if tp is not None and tp.max_size > self.gpu_budget:
            raise ValueError(
                f"knobs.tensorParallel.maxSize ({tp.max_size}) is more than gpuBudget "
                f"({self.gpu_budget})"
            )
        return self

    # ---- derived values ---------------------------------------------------------------------

    def command_line(self) -> VllmCommandLine:
        return VllmCommandLine.parse(["vllm", "serve", self.model], list(self.args))

    @property
    def effective_interconnect(self) -> Literal["NVLink", "PCIe"]:
        return self.interconnect or get_gpu(self.gpu).link

    def spec(self, *, max_trials: int) -> LatencyTargetSpec:
        """The LatencyTarget the operator is given (a cooldown of two windows, so a convergence
        that a longer window does not confirm is looked at again soon)."""
        window = self.evaluation.window_seconds
        evaluation = self.evaluation.model_copy(
            update={"max_trials": max_trials, "cooldown": f"{round(2 * window)}s"}
        )
        return LatencyTargetSpec(
            target_ref={"name": "llama", "container": "vllm"},
            objectives=self.objectives,
            knobs=self.knobs,
            evaluation=evaluation,
            hardware={
                "gpu_product": get_gpu(self.gpu).name,
                "interconnect": self.effective_interconnect,
            },
        )


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate one scenario's data; ``ScenarioError`` lists every problem."""
    if not isinstance(data, dict):
        raise ScenarioError(source, ["a scenario is a mapping of fields"])
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(source, [_problem(e) for e in exc.errors()]) from None
    problems = _runtime_problems(scenario)
    if problems:
        raise ScenarioError(source, problems)
    return scenario


def _problem(error: Any) -> str:
    where = ".".join(str(p) for p in error.get("loc", ())) or "(top)"
    return f"{where}: {error.get('msg', 'invalid')}"


def _runtime_problems(s: Scenario) -> list[str]:
    """What only the simulator and the space can tell: GPU, model, starting arguments."""
    from latency_tuner.benchmarks.space import SpaceError, build_space  # a cycle otherwise

    try:
        get_gpu(s.gpu)
    except UnknownGpuError as exc:
        return [f"gpu: {exc}"]
    try:
        cl = s.command_line()
    except NotVllmError as exc:
        return [f"args: {exc}"]
    try:
        build_engine_config(cl, gpu=s.gpu, num_gpus=s.gpus)
    except (StartupError, UnknownModelError) as exc:
        return [f"args: the starting configuration does not start: {exc}"]
    try:
        space = build_space(s)
    except SpaceError as exc:
        return [f"knobs: {exc}"]
    if len(space) > MAX_SPACE:
        return [f"knobs: {len(space)} configurations allowed; at most {MAX_SPACE} (narrow them)"]
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
