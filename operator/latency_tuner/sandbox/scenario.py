"""Sandbox scenarios: a vLLM Deployment, the hardware it runs on, its load and its LatencyTarget.

A scenario is one YAML file (the ready ones ship in ``sandbox/scenarios/``)::

    name: prefix-caching                 # lowercase words joined by "-"
    description: >                       # what is slow, and what should fix it
      RAG traffic with a long shared prefix; prefix caching is off.
    hardware:
      gpu: H100-SXM                      # a simulator GPU name (latency-tuner sim --sim-gpu)
      gpus: 8                            # GPUs per node (room for a surge pod in rollouts)
      interconnect: NVLink               # NVLink | PCIe; default: the GPU's form factor
      nodes: 1
    load:                                # background load while the scenario runs
      concurrency: 8                     # closed loop: requests in flight (1..256)
      rate: null                         # or Poisson arrivals per second (capped by concurrency)
      promptTokens: 2100
      outputTokens: 64
      sharedPrefixTokens: 2000           # identical leading tokens of every prompt (< promptTokens)
      seed: 0
    deployment: {apiVersion: apps/v1, kind: Deployment, ...}   # the vLLM server
    latencyTarget: {apiVersion: tuning.latencytuner.io/v1alpha1, kind: LatencyTarget, ...}
    expect:                              # optional: what a run should end with
      targetsMet: true                   # false: the operator must give up (or fail) cleanly
      maxTrials: 2                       # at most this many trials to get there
      fix: {enable-prefix-caching: true} # vLLM flags that meet the targets (checked offline)
    timeouts:                            # optional
      ready: 60s                         # the Deployment must be available within this
      converge: 5m                       # the whole run must end within this

Checks (``ScenarioError`` lists every problem with its path): the Deployment is an
``apps/v1`` Deployment whose container runs vLLM (``VllmCommandLine`` parses it) and names a
model; the LatencyTarget validates against the API models and points at the Deployment (same
name and namespace); the GPU is one the simulator knows; the load is well formed.

``estimate()`` runs the scenario's load through the simulator in virtual time (no processes,
a second or two of CPU) to tell what TTFT/ITL the Deployment, or the Deployment with ``fix``
applied, would show: the ready scenarios are tuned so that the first misses its targets and the
second meets them with margin. This module reads files and computes; it starts nothing.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from latency_tuner.api import InvalidLatencyTarget, LatencyTarget, parse_duration
from latency_tuner.api.resource import describe_errors
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

__all__ = [
    "Estimate",
    "Expect",
    "Hardware",
    "Load",
    "Scenario",
    "ScenarioError",
    "Timeouts",
    "estimate",
    "list_scenarios",
    "load_scenario",
]

_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class ScenarioError(ValueError):
    """A scenario that does not validate; ``problems`` are "path: what" lines."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"scenario {source} is invalid:\n{lines}")


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class Hardware(_Model):
    """The nodes of the sandbox."""

    gpu: str = "H100-SXM"
    gpus: int = Field(default=8, ge=1, le=64)
    interconnect: Literal["NVLink", "PCIe"] | None = None
    nodes: int = Field(default=1, ge=1, le=16)

    @model_validator(mode="after")
    def _known_gpu(self) -> Hardware:
        from latency_tuner.simulator.hardware import UnknownGpuError, get_gpu

        try:
            get_gpu(self.gpu)
        except UnknownGpuError as exc:
            raise ValueError(str(exc)) from None
        return self

    @property
    def canonical_gpu(self) -> str:
        from latency_tuner.simulator.hardware import get_gpu

        return get_gpu(self.gpu).name

    @property
    def link(self) -> Literal["NVLink", "PCIe"]:
        from latency_tuner.simulator.hardware import get_gpu

        return self.interconnect or get_gpu(self.gpu).link


class Load(_Model):
    """Background load: closed loop (``concurrency``) or Poisson ``rate`` capped by it."""

    concurrency: int = Field(default=8, ge=1, le=256)
    rate: float | None = Field(default=None, gt=0)
    prompt_tokens: int = Field(default=512, ge=1)
    output_tokens: int = Field(default=128, ge=1)
    shared_prefix_tokens: int = Field(default=0, ge=0)
    seed: int = 0

    @model_validator(mode="after")
    def _prefix_shorter(self) -> Load:
        if self.shared_prefix_tokens >= self.prompt_tokens:
            raise ValueError("sharedPrefixTokens must be smaller than promptTokens")
        return self


class Expect(_Model):
    targets_met: bool = True
    max_trials: int | None = Field(default=None, ge=1)
    fix: dict[str, str | bool] = Field(default_factory=dict)
    """vLLM flags (dash names) that meet the targets: a string value, or true/false."""


class Timeouts(_Model):
    ready: str = "60s"
    converge: str = "10m"

    @model_validator(mode="after")
    def _durations(self) -> Timeouts:
        for text in (self.ready, self.converge):
            parse_duration(text)
        return self

    @property
    def ready_seconds(self) -> float:
        return parse_duration(self.ready)

    @property
    def converge_seconds(self) -> float:
        return parse_duration(self.converge)


class Scenario(_Model):
    """One scenario file, validated (see the module docstring)."""

    name: str = Field(pattern=_NAME.pattern, max_length=63)
    description: str = ""
    hardware: Hardware = Field(default_factory=Hardware)
    load: Load = Field(default_factory=Load)
    deployment: dict[str, Any]
    latency_target: dict[str, Any]
    expect: Expect = Field(default_factory=Expect)
    timeouts: Timeouts = Field(default_factory=Timeouts)

    @field_validator("deployment")
    @classmethod
    def _runs_vllm(cls, deployment: dict[str, Any]) -> dict[str, Any]:
        problems = _deployment_problems(deployment)
        if problems:
            raise ValueError("\n".join(problems))
        return deployment

    @field_validator("latency_target")
    @classmethod
    def _valid_target(cls, manifest: dict[str, Any]) -> dict[str, Any]:
        try:
            LatencyTarget.from_manifest(manifest)
        except InvalidLatencyTarget as exc:
            raise ValueError("\n".join(exc.problems)) from None
        return manifest

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        problems = []
        ref = LatencyTarget.from_manifest(self.latency_target).spec.target_ref.name
        if ref != self.deployment_name:
            problems.append(
                f"latencyTarget.spec.targetRef.name: {ref!r} is not the Deployment "
                f"({self.deployment_name!r})"
            )
        ns = (self.latency_target.get("metadata") or {}).get("namespace", self.namespace)
        if ns != self.namespace:
            problems.append(
                f"latencyTarget.metadata.namespace: {ns!r} is not the Deployment's "
                f"({self.namespace!r})"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    # -- reading ------------------------------------------------------------------------------

    @classmethod
    def from_mapping(cls, data: Any, source: str = "<mapping>") -> Scenario:
        if not isinstance(data, Mapping):
            raise ScenarioError(source, ["(top level): a scenario is a mapping"])
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise ScenarioError(source, _problems(exc)) from None

    @classmethod
    def from_yaml(cls, text: str, source: str = "<yaml>") -> Scenario:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ScenarioError(source, [f"(top level): not YAML: {exc}"]) from None
        return cls.from_mapping(data, source)

    @classmethod
    def from_file(cls, path: str | Path) -> Scenario:
        return cls.from_yaml(Path(path).read_text(), str(path))

    # -- what others need --------------------------------------------------------------------

    @property
    def namespace(self) -> str:
        return str((self.deployment.get("metadata") or {}).get("namespace") or "default")

    @property
    def deployment_name(self) -> str:
        return str((self.deployment.get("metadata") or {}).get("name", ""))

    def deployment_manifest(self) -> dict[str, Any]:
        manifest = copy.deepcopy(self.deployment)
        manifest.setdefault("metadata", {})["namespace"] = self.namespace
        return manifest

    def latency_target_manifest(self) -> dict[str, Any]:
        manifest = copy.deepcopy(self.latency_target)
        manifest.setdefault("metadata", {})["namespace"] = self.namespace
        return manifest

    def latency_target_model(self) -> LatencyTarget:
        return LatencyTarget.from_manifest(self.latency_target_manifest())

    def command_line(self) -> VllmCommandLine:
        container = _container(self.deployment)
        return VllmCommandLine.parse(container.get("command"), container.get("args"))

    @property
    def model(self) -> str:
        return self.command_line().served_model_name or ""

    @property
    def gpu_limit(self) -> int:
        limits = (_container(self.deployment).get("resources") or {}).get("limits") or {}
        return int(limits.get("nvidia.com/gpu", 1))

    def fixed_command_line(self) -> VllmCommandLine:
        """The vLLM command line with ``expect.fix`` applied."""
        cl = self.command_line()
        for flag, value in self.expect.fix.items():
            cl = (
                cl.with_flag(flag, value) if isinstance(value, bool) else cl.with_value(flag, value)
            )
        return cl


def _container(deployment: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers"
    ) or [{}]
    first: Mapping[str, Any] = containers[0]
    return first


def _deployment_problems(deployment: Mapping[str, Any]) -> list[str]:
    problems = []
    if deployment.get("apiVersion") != "apps/v1" or deployment.get("kind") != "Deployment":
        problems.append("(top level): must be an apps/v1 Deployment")
    name = (deployment.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append("metadata.name: a lowercase DNS name is required")
    spec = deployment.get("spec") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        problems.append("spec.selector.matchLabels: must match the template's labels")
    container = _container(deployment)
    if not container:
        problems.append("spec.template.spec.containers: one container is required")
        return problems
    try:
        cl = VllmCommandLine.parse(container.get("command"), container.get("args"))
    except (NotVllmError, ValueError) as exc:
        problems.append(f"spec.template.spec.containers[0]: not vLLM: {exc}")
    else:
        if not cl.model:
            problems.append("spec.template.spec.containers[0]: names no model")
    return problems


_NESTED_PATHS = {"(top level)", "deployment", "latencyTarget"}


def _problems(exc: ValidationError) -> list[str]:
    """One line per problem; a validator's message may hold several "path: what" lines of
    its own, relative to the field it checked."""
    lines = []
    for line in describe_errors(exc):
        head, _, rest = line.partition(": ")
        if head not in _NESTED_PATHS:
            lines.append(line)
            continue
        for inner in rest.splitlines():
            path, _, what = inner.partition(": ")
            if head == "(top level)":
                lines.append(inner)
            elif path == "(top level)":
                lines.append(f"{head}: {what}")
            else:
                lines.append(f"{head}.{path}: {what}")
    return lines


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
    """A shipped scenario by name (``prefix-caching``) or any scenario file by path."""
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml"} or path.exists():
        return Scenario.from_file(path)
    folder = resources.files("latency_tuner.sandbox").joinpath("scenarios")
    resource = folder.joinpath(f"{name_or_path}.yaml")
    if not resource.is_file():
        known = ", ".join(list_scenarios())
        raise ScenarioError(str(name_or_path), [f"(top level): no such scenario (known: {known})"])
    return Scenario.from_yaml(resource.read_text(), f"{name_or_path}.yaml")


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

    from latency_tuner.bench.prompts import PromptFactory
    from latency_tuner.simulator.config import StartupError, build_engine_config
    from latency_tuner.simulator.engine import SimRequest, VirtualEngine
    from latency_tuner.simulator.tokenizer import encode

    cl = scenario.fixed_command_line() if fixed else scenario.command_line()
    try:
        config = build_engine_config(
            cl, gpu=scenario.hardware.canonical_gpu, num_gpus=scenario.gpu_limit
        )
    except (StartupError, ValueError) as exc:
        return Estimate(None, None, None, startup_error=str(exc))
    load = scenario.load
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
