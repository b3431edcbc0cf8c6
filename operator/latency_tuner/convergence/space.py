"""A scenario's allowed space: every configuration its knobs let anyone reach, as containers.

The dimensions are the operator's own (``core.space``: its ladders and steps within the
spec's bounds), taken from the scenario's start, so the baselines search the values the
operator could choose. Points enumerate in vLLM ``auto_tune``'s order: max-num-seqs (outer) x
max-num-batched-tokens (inner) first, then the other knobs, slowest. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from latency_tuner.convergence.scenario import Scenario
from latency_tuner.core import space as core_space
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.space import ORIGINAL, Dimension, Setting, SpaceError
from latency_tuner.simulator.hardware import get_gpu

__all__ = [
    "IMAGE",
    "ORIGINAL",
    "Dimension",
    "Point",
    "Setting",
    "SpaceError",
    "build_space",
    "dimensions",
    "hardware_of",
    "start_container",
]

IMAGE = "vllm/vllm-openai:v0.11.0"


@dataclass(frozen=True)
class Point:
    """One configuration of the space: a value per dimension, and the container it makes."""

    values: tuple[tuple[str, str], ...]
    container: ContainerConfig

    @property
    def gpus(self) -> int:
        return self.container.gpu_limit or 1

    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.values) or "start"


def hardware_of(scenario: Scenario) -> HardwareInfo:
    return HardwareInfo.from_labels(
        get_gpu(scenario.gpu).name,
        interconnect=scenario.effective_interconnect,
        gpus_per_node=scenario.gpu_budget,
    )


def start_container(scenario: Scenario) -> ContainerConfig:
    command, args = scenario.command_line().render()
    return ContainerConfig(
        command=tuple(command) if command is not None else None,
        args=tuple(args) if args is not None else None,
        image=IMAGE,
        gpu_limit=scenario.gpus,
    )


def container_of(setting: Setting) -> ContainerConfig:
    command, args = setting.cl.render()
    return ContainerConfig(
        command=tuple(command) if command is not None else None,
        args=tuple(args) if args is not None else None,
        image=setting.image or IMAGE,
        gpu_limit=setting.gpus,
    )


def dimensions(scenario: Scenario) -> list[Dimension]:
    """The space's dimensions from the scenario's start, slowest first (``core.space``)."""
    return core_space.dimensions(
        scenario.knobs, scenario.command_line(), hardware_of(scenario), scenario.gpus
    )


def build_space(scenario: Scenario) -> list[Point]:
    """Every allowed configuration, in grid order (the last dimension varies fastest)."""
    start = Setting(scenario.command_line(), IMAGE, scenario.gpus)
    return [
        Point(pairs, container_of(setting))
        for pairs, setting in core_space.settings(dimensions(scenario), start)
    ]
