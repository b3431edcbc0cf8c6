"""The scenario schema: one YAML format for the sandbox demo and the convergence benchmark.

A scenario is what a cluster would hold (a vLLM Deployment and its LatencyTarget), the machines
it runs on, the load it serves and what its author expects::

    name: prefix-caching                 # lowercase words joined by "-" (unique in a suite)
    description: >                       # what is slow, and what should fix it
      RAG traffic with a long shared prefix; prefix caching is off.
    tags: [rag, misconfigured]
    hardware:
      gpu: H100-SXM                      # a simulator GPU name (latency-tuner sim --sim-gpu)
      gpus: 8                            # GPUs per node: the most one replica may get
      interconnect: NVLink               # NVLink | PCIe; default: the GPU's form factor
      nodes: 1
    workload:
      arrival: closed                    # closed | poisson | bursty
      users: 8                           # closed: clients, each waits for its answer;
                                         # poisson/bursty: the most requests in flight (or none)
      thinkSeconds: 0                    # closed: pause between a client's requests
      rate: null                         # poisson, bursty: requests per second (the mean)
      burstFactor: 4                     # bursty: rate during a burst / mean rate
      burstSeconds: 5                    # bursty: burst length, once per burstPeriodSeconds
      burstPeriodSeconds: 20
      promptTokens: 2100                 # mean; lengths spread uniformly by +-spread
      outputTokens: 64
      spread: 0
      sharedPrefixTokens: 2000           # leading tokens shared by the prompts of one group
      prefixGroups: 1                    # distinct shared prefixes
      drift: 1                           # poisson/bursty: the rate ends at drift x rate,
      driftSeconds: 0                    # reached linearly over this long (0: no drift);
                                         # only the benchmark's virtual load drifts
      seed: 0
    deployment: {apiVersion: apps/v1, kind: Deployment, ...}   # the vLLM server at its start
    latencyTarget: {apiVersion: tuning.latencytuner.io/v1alpha1, kind: LatencyTarget, ...}
    expect:                              # optional: what a run should end with
      feasible: true                     # false: the targets cannot be met (give up cleanly)
      maxTrials: 2                       # at most this many trials to get there
      fix: {enable-prefix-caching: true} # vLLM flags that meet the targets (checked offline)
    timeouts:                            # optional: for runs against a (sandbox) cluster
      ready: 60s                         # the Deployment must be available within this
      converge: 5m                       # the whole run must end within this

Checks (``ScenarioError`` lists every problem with its path): the Deployment is an ``apps/v1``
Deployment whose container runs vLLM (``VllmCommandLine`` parses it) and names a model; the
LatencyTarget validates against the API models and points at the Deployment (same name and
namespace); the GPU is one the simulator knows; the workload is well formed. What only one
consumer cannot run (the sandbox's load generator has no bursts, the benchmark's simulated
world caps no open arrivals) is that consumer's check.

The derived values both consumers read (``command_line()``, ``gpus``, ``objectives``,
``knobs``, ``evaluation``, ``spec(max_trials=...)``) come from the two manifests, so a scenario
says each thing once. This module reads and validates; it runs nothing.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from latency_tuner.api import InvalidLatencyTarget, LatencyTarget, parse_duration
from latency_tuner.api._base import SpecModel
from latency_tuner.api.resource import describe_errors
from latency_tuner.api.spec import Evaluation, Knobs, LatencyTargetSpec, Objectives, Strategy
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

__all__ = [
    "Expect",
    "Hardware",
    "Scenario",
    "ScenarioError",
    "Timeouts",
    "Workload",
    "latency_target",
    "vllm_deployment",
]

NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
GPU_RESOURCE = "nvidia.com/gpu"
IMAGE = "vllm/vllm-openai:v0.11.0"


class ScenarioError(ValueError):
    """A scenario that cannot be used; ``problems`` are "path: what" lines."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"scenario {source} is invalid:\n{lines}")


class Hardware(SpecModel):
    """The nodes: ``nodes`` identical machines with ``gpus`` GPUs of type ``gpu``."""

    gpu: str = "H100-SXM"
    gpus: int = Field(default=8, ge=1, le=64)
    interconnect: Literal["NVLink", "PCIe"] | None = None
    nodes: int = Field(default=1, ge=1, le=16)

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, gpu: str) -> str:
        from latency_tuner.simulator.hardware import UnknownGpuError, get_gpu

        try:
            get_gpu(gpu)
        except UnknownGpuError as exc:
            raise ValueError(str(exc)) from None
        return gpu

    @property
    def canonical_gpu(self) -> str:
        from latency_tuner.simulator.hardware import get_gpu

        return get_gpu(self.gpu).name

    @property
    def link(self) -> Literal["NVLink", "PCIe"]:
        from latency_tuner.simulator.hardware import get_gpu

        return self.interconnect or get_gpu(self.gpu).link


class Workload(SpecModel):
    """The load offered to the Deployment: arrivals and request shapes."""

    arrival: Literal["closed", "poisson", "bursty"] = "closed"
    users: int | None = Field(default=None, ge=1, le=512)
    think_seconds: float = Field(default=0.0, ge=0)
    rate: float | None = Field(default=None, gt=0, le=200)
    burst_factor: float = Field(default=4.0, ge=1, le=20)
    burst_seconds: float = Field(default=5.0, gt=0)
    burst_period_seconds: float = Field(default=20.0, gt=0)
    prompt_tokens: int = Field(default=512, ge=1, le=131072)
    output_tokens: int = Field(default=128, ge=1, le=8192)
    spread: float = Field(default=0.0, ge=0, lt=1)
    shared_prefix_tokens: int = Field(default=0, ge=0)
    prefix_groups: int = Field(default=1, ge=1, le=64)
    drift: float = Field(default=1.0, gt=0, le=10)
    drift_seconds: float = Field(default=0.0, ge=0)
    seed: int = 0

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
        if self.drift != 1.0 and (self.arrival == "closed" or self.drift_seconds <= 0):
            raise ValueError("drift needs open (poisson, bursty) arrivals and driftSeconds > 0")
        if self.shared_prefix_tokens >= self.prompt_tokens * (1 - self.spread):
            raise ValueError("sharedPrefixTokens must be shorter than the shortest prompt")
        return self


class Expect(SpecModel):
    """What the author meant; the checks of a run (or the benchmark's oracle) decide."""

    feasible: bool = True
    max_trials: int | None = Field(default=None, ge=1)
    fix: dict[str, str | bool] = Field(default_factory=dict)
    """vLLM flags (dash names) that meet the targets: a string value, or true/false."""


class Timeouts(SpecModel):
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


class Scenario(SpecModel):
    """One scenario file, validated (see the module docstring)."""

    name: str = Field(pattern=NAME.pattern, max_length=63)
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    hardware: Hardware = Field(default_factory=Hardware)
    workload: Workload
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
        if self.gpus > self.hardware.gpus:
            problems.append(
                f"deployment: {self.gpus} GPUs per replica, more than hardware.gpus "
                f"({self.hardware.gpus})"
            )
        tp = self.knobs.tensor_parallel
        if tp is not None and tp.max_size > self.hardware.gpus:
            problems.append(
                f"latencyTarget.spec.knobs.tensorParallel.maxSize: {tp.max_size} is more than "
                f"hardware.gpus ({self.hardware.gpus})"
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

    # -- the cluster objects ------------------------------------------------------------------

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
        return self._target

    @functools.cached_property
    def _target(self) -> LatencyTarget:
        # Validated once: the benchmark reads objectives and knobs in its inner loops.
        return LatencyTarget.from_manifest(self.latency_target_manifest())

    # -- derived values -----------------------------------------------------------------------

    def command_line(self) -> VllmCommandLine:
        """The vLLM command line of the Deployment's (first) container, as written."""
        container = _container(self.deployment)
        return VllmCommandLine.parse(container.get("command"), container.get("args"))

    def fixed_command_line(self) -> VllmCommandLine:
        """The vLLM command line with ``expect.fix`` applied."""
        cl = self.command_line()
        for flag, value in self.expect.fix.items():
            cl = (
                cl.with_flag(flag, value) if isinstance(value, bool) else cl.with_value(flag, value)
            )
        return cl

    @property
    def model(self) -> str:
        """The model the server loads (its path or Hugging Face name)."""
        return self.command_line().model or ""

    @property
    def served_model(self) -> str:
        """The model name clients ask for (``--served-model-name``, else the model)."""
        return self.command_line().served_model_name or ""

    @property
    def gpus(self) -> int:
        """GPUs per replica at the start: the container's ``nvidia.com/gpu`` limit (1 unset)."""
        limits = (_container(self.deployment).get("resources") or {}).get("limits") or {}
        return int(limits.get(GPU_RESOURCE, 1))

    @property
    def gpu(self) -> str:
        return self.hardware.gpu

    @property
    def gpu_budget(self) -> int:
        """The most GPUs one replica may get: a node's GPUs."""
        return self.hardware.gpus

    @property
    def effective_interconnect(self) -> Literal["NVLink", "PCIe"]:
        return self.hardware.link

    @property
    def objectives(self) -> Objectives:
        return self.latency_target_model().spec.objectives

    @property
    def knobs(self) -> Knobs:
        return self.latency_target_model().spec.knobs

    @property
    def evaluation(self) -> Evaluation:
        return self.latency_target_model().spec.evaluation

    def spec(
        self,
        *,
        max_trials: int,
        target_ref: Mapping[str, str] | None = None,
        strategy: Strategy | None = None,
    ) -> LatencyTargetSpec:
        """The LatencyTarget spec with a trial budget and the hardware made explicit (a
        cooldown of two windows, so a convergence that a longer window does not confirm is
        looked at again soon); ``target_ref`` replaces the scenario's own, ``strategy`` (when
        given) the spec's."""
        spec = self.latency_target_model().spec
        window = spec.evaluation.window_seconds
        evaluation = spec.evaluation.model_copy(
            update={"max_trials": max_trials, "cooldown": f"{round(2 * window)}s"}
        )
        return LatencyTargetSpec(
            target_ref=dict(target_ref) if target_ref else spec.target_ref,
            objectives=spec.objectives,
            knobs=spec.knobs,
            evaluation=evaluation,
            hardware={
                "gpu_product": self.hardware.canonical_gpu,
                "interconnect": self.hardware.link,
            },
            strategy=strategy or spec.strategy,
        )


def vllm_deployment(
    name: str,
    model: str,
    args: Sequence[str] = (),
    *,
    gpus: int = 1,
    namespace: str = "default",
    container: str = "vllm",
) -> dict[str, Any]:
    """A plain vLLM Deployment: one replica, ``vllm serve MODEL ARGS`` on ``gpus`` GPUs."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "containers": [
                        {
                            "name": container,
                            "image": IMAGE,
                            "command": ["vllm", "serve", model],
                            "args": list(args),
                            "resources": {"limits": {GPU_RESOURCE: str(gpus)}},
                        }
                    ]
                },
            },
        },
    }


def latency_target(
    name: str,
    objectives: Mapping[str, Any],
    *,
    knobs: Mapping[str, Any] | None = None,
    evaluation: Mapping[str, Any] | None = None,
    namespace: str = "default",
    container: str = "vllm",
) -> dict[str, Any]:
    """A LatencyTarget manifest for the Deployment ``name`` (camelCase spec parts as given)."""
    spec: dict[str, Any] = {
        "targetRef": {"name": name, "container": container},
        "objectives": dict(objectives),
    }
    if knobs is not None:
        spec["knobs"] = dict(knobs)
    if evaluation is not None:
        spec["evaluation"] = dict(evaluation)
    return {
        "apiVersion": "tuning.latencytuner.io/v1alpha1",
        "kind": "LatencyTarget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


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
    if not isinstance(name, str) or not NAME.match(name):
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
