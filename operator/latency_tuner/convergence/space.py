"""A scenario's allowed space: every configuration its knobs let anyone reach, as containers.

Dimensions follow the operator's own ladders and steps (``core.knobs``), so the baselines search
the values the operator could choose: max-num-seqs and max-num-batched-tokens rungs within the
spec's bounds (plus the starting value), gpu-memory-utilization in the operator's steps up to
its ceiling, prefix caching and chunked prefill switched on when allowed and off at the start,
the deployment problems (--enforce-eager, --cpu-offload-gb) kept or removed, each quantization
variant, each KV-cache dtype, each speculative config, and tensor-parallel sizes up to the
GPU budget (without NVLink only when the spec sets ``force``, as the operator reads it).
Points enumerate in vLLM ``auto_tune``'s order: max-num-seqs (outer) x max-num-batched-tokens
(inner) first, then the other knobs, slowest. Pure.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from latency_tuner.api.spec import QuantizationVariant
from latency_tuner.convergence.scenario import Scenario
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.config_view import view
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import (
    BATCHED_TOKENS_LADDER,
    MAX_NUM_SEQS_LADDER,
    TENSOR_PARALLEL_LADDER,
    Change,
    KnobClass,
    KnobName,
    apply,
    format_number,
    ladder_in,
    next_gpu_memory_utilization,
)
from latency_tuner.core.knobs.tensor_parallel import allowed_on
from latency_tuner.simulator.hardware import get_gpu
from latency_tuner.vllm.args import VllmCommandLine

IMAGE = "vllm/vllm-openai:v0.11.0"
ORIGINAL = "original"  # the quantization dimension's value for the starting checkpoint


class SpaceError(ValueError):
    """The knobs describe no usable space."""


@dataclass(frozen=True)
class Setting:
    """A container state while a point is rendered."""

    cl: VllmCommandLine
    image: str
    gpus: int


Apply = Callable[[Setting, str], Setting]


@dataclass(frozen=True)
class Dimension:
    knob: str
    values: tuple[str, ...]
    apply: Apply


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
        image=setting.image,
        gpu_limit=setting.gpus,
    )


def _value(flag: str) -> Apply:
    def set_(s: Setting, v: str) -> Setting:
        return Setting(s.cl.with_value(flag, v), s.image, s.gpus)

    return set_


def _switch(flag: str) -> Apply:
    def set_(s: Setting, v: str) -> Setting:
        return Setting(s.cl.with_flag(flag, v == "true"), s.image, s.gpus)

    return set_


def _remove_unless_kept(flag: str) -> Apply:
    def set_(s: Setting, v: str) -> Setting:
        return s if v == "kept" else Setting(s.cl.without(flag), s.image, s.gpus)

    return set_


def _kv_dtype(s: Setting, v: str) -> Setting:
    return s if v == "auto" else Setting(s.cl.with_value("kv-cache-dtype", v), s.image, s.gpus)


def _speculative(s: Setting, v: str) -> Setting:
    return s if v == "none" else Setting(s.cl.with_value("speculative-config", v), s.image, s.gpus)


def _tensor_parallel(s: Setting, v: str) -> Setting:
    return Setting(s.cl.with_value("tensor-parallel-size", v), s.image, int(v))


def _variant_apply(variants: Sequence[QuantizationVariant]) -> Apply:
    by_name = {v.name: v for v in variants}

    def set_(s: Setting, v: str) -> Setting:
        if v == ORIGINAL:
            return s
        change = Change(
            knob=KnobName.QUANTIZATION,
            from_value=None,
            to_value=v,
            knob_class=KnobClass.LOSSY,
            expected_gain=0.0,
            expected_score_gain=0.0,
            bottleneck=Bottleneck.DECODE_BANDWIDTH,
            reason="benchmark space",
            variant=by_name[v],
        )
        applied = apply(change, s.cl)
        return Setting(applied.command_line, applied.image or s.image, s.gpus)

    return set_


def dimensions(scenario: Scenario) -> list[Dimension]:
    """The space's dimensions, slowest first (auto_tune order: ..., seqs, batched tokens)."""
    knobs = scenario.knobs
    cl = scenario.command_line()
    cv = view(cl, hardware_of(scenario))
    dims: list[Dimension] = []
    if cv.tensor_parallel_size != scenario.gpus:
        raise SpaceError(
            f"--tensor-parallel-size {cv.tensor_parallel_size} but gpus is {scenario.gpus}"
        )
    tp = knobs.tensor_parallel
    # The operator's own rule (without NVLink only with ``force``): a search that raised it
    # anyway would leave what the user allowed.
    if tp is not None and allowed_on(tp, hardware_of(scenario)):
        sizes = [n for n in TENSOR_PARALLEL_LADDER if scenario.gpus <= n]
        sizes = [n for n in sizes if n <= tp.max_size]
        if len(sizes) > 1:
            dims.append(Dimension("tensorParallel", tuple(map(str, sizes)), _tensor_parallel))
    if knobs.quantization is not None:
        names = (ORIGINAL, *(v.name for v in knobs.quantization.variants))
        dims.append(Dimension("quantization", names, _variant_apply(knobs.quantization.variants)))
    if knobs.kv_cache_dtype:
        dims.append(Dimension("kvCacheDtype", ("auto", *knobs.kv_cache_dtype), _kv_dtype))
    if knobs.speculative_decoding is not None:
        configs = [json.dumps(c, separators=(",", ":")) for c in knobs.speculative_decoding.configs]
        dims.append(Dimension("speculativeDecoding", ("none", *configs), _speculative))
    if cv.cpu_offload_gb > 0:
        dims.append(
            Dimension("cpuOffloadGb", ("kept", "removed"), _remove_unless_kept("cpu-offload-gb"))
        )
    if cv.enforce_eager:
        dims.append(
            Dimension("enforceEager", ("kept", "removed"), _remove_unless_kept("enforce-eager"))
        )
    if knobs.prefix_caching and not cv.prefix_caching:
        dims.append(Dimension("prefixCaching", ("false", "true"), _switch("enable-prefix-caching")))
    if knobs.chunked_prefill and not cv.chunked_prefill:
        dims.append(
            Dimension("chunkedPrefill", ("false", "true"), _switch("enable-chunked-prefill"))
        )
    if knobs.gpu_memory_utilization is not None:
        steps = [cv.gpu_memory_utilization]
        while nxt := next_gpu_memory_utilization(steps[-1], knobs.gpu_memory_utilization.max):
            steps.append(nxt)
        if len(steps) > 1:
            values = tuple(format_number(v) for v in steps)
            dims.append(Dimension("gpuMemoryUtilization", values, _value("gpu-memory-utilization")))
    if knobs.max_num_seqs is not None:
        rungs = sorted({*ladder_in(MAX_NUM_SEQS_LADDER, knobs.max_num_seqs), cv.max_num_seqs})
        if len(rungs) > 1:
            dims.append(Dimension("maxNumSeqs", tuple(map(str, rungs)), _value("max-num-seqs")))
    if knobs.max_num_batched_tokens is not None:
        bounds = knobs.max_num_batched_tokens
        rungs = sorted({*ladder_in(BATCHED_TOKENS_LADDER, bounds), cv.max_num_batched_tokens})
        if len(rungs) > 1:
            dims.append(
                Dimension(
                    "maxNumBatchedTokens", tuple(map(str, rungs)), _value("max-num-batched-tokens")
                )
            )
    return dims


def build_space(scenario: Scenario) -> list[Point]:
    """Every allowed configuration, in grid order (the last dimension varies fastest)."""
    dims = dimensions(scenario)
    start = Setting(scenario.command_line(), IMAGE, scenario.gpus)
    points = []
    for combo in itertools.product(*(d.values for d in dims)):
        setting = start
        for dim, value in zip(dims, combo, strict=True):
            setting = dim.apply(setting, value)
        pairs = tuple((d.knob, v) for d, v in zip(dims, combo, strict=True))
        points.append(Point(pairs, container_of(setting)))
    return points
