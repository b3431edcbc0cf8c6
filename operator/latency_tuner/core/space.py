"""The allowed space: every configuration a spec's knobs let the operator reach from a command
line, dimension by dimension.

Dimensions follow the operator's own ladders and steps (``core.knobs``): max-num-seqs and
max-num-batched-tokens rungs within the spec's bounds (plus the running value),
gpu-memory-utilization in the operator's steps up to its ceiling, prefix caching and chunked
prefill switched on when allowed and off now, the deployment problems (--enforce-eager,
--cpu-offload-gb) kept or removed, each quantization variant, each KV-cache dtype, each
speculative config, and tensor-parallel sizes up to the spec's maximum (without NVLink only
when the spec sets ``force``, as the operator reads it). Dimensions come slowest first, in vLLM
``auto_tune``'s order: ..., max-num-seqs, max-num-batched-tokens (fastest).

The benchmark's baselines search this space and the planner forecasts it (``core.reach``): one
definition of "what the user allowed". Pure; it never starts, probes or measures anything.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from latency_tuner.api.spec import Knobs, QuantizationVariant
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
from latency_tuner.vllm.args import VllmCommandLine

ORIGINAL = "original"  # the quantization dimension's value for the running checkpoint


class SpaceError(ValueError):
    """The knobs describe no usable space."""


@dataclass(frozen=True)
class Setting:
    """A container state while a point is rendered: its command line, image and GPUs."""

    cl: VllmCommandLine
    image: str | None
    gpus: int


Apply = Callable[[Setting, str], Setting]


@dataclass(frozen=True)
class Dimension:
    knob: str
    values: tuple[str, ...]
    apply: Apply
    start: str  # the running configuration's value, one of ``values``


def dimensions(
    knobs: Knobs, cl: VllmCommandLine, hardware: HardwareInfo, gpus: int
) -> list[Dimension]:
    """The space's dimensions around ``cl`` running on ``gpus`` GPUs, slowest first. A switch
    or a choice lists the running value first ("false", "kept", "auto", ...); a numeric knob its
    rungs ascending; ``Dimension.start`` says which is running."""
    cv = view(cl, hardware)
    dims: list[Dimension] = []
    if cv.tensor_parallel_size != gpus:
        raise SpaceError(f"--tensor-parallel-size {cv.tensor_parallel_size} but gpus is {gpus}")
    tp = knobs.tensor_parallel
    # The operator's own rule (without NVLink only with ``force``): a search that raised it
    # anyway would leave what the user allowed.
    if tp is not None and allowed_on(tp, hardware):
        sizes = [n for n in TENSOR_PARALLEL_LADDER if gpus <= n <= tp.max_size]
        if len(sizes) > 1:
            dims.append(
                Dimension("tensorParallel", tuple(map(str, sizes)), _tensor_parallel, str(gpus))
            )
    if knobs.quantization is not None:
        names = (ORIGINAL, *(v.name for v in knobs.quantization.variants))
        dims.append(
            Dimension("quantization", names, _variant_apply(knobs.quantization.variants), ORIGINAL)
        )
    if knobs.kv_cache_dtype:
        dims.append(Dimension("kvCacheDtype", ("auto", *knobs.kv_cache_dtype), _kv_dtype, "auto"))
    if knobs.speculative_decoding is not None:
        configs = [json.dumps(c, separators=(",", ":")) for c in knobs.speculative_decoding.configs]
        dims.append(Dimension("speculativeDecoding", ("none", *configs), _speculative, "none"))
    if cv.cpu_offload_gb > 0:
        dims.append(
            Dimension(
                "cpuOffloadGb", ("kept", "removed"), _remove_unless_kept("cpu-offload-gb"), "kept"
            )
        )
    if cv.enforce_eager:
        dims.append(
            Dimension(
                "enforceEager", ("kept", "removed"), _remove_unless_kept("enforce-eager"), "kept"
            )
        )
    if knobs.prefix_caching and not cv.prefix_caching:
        dims.append(
            Dimension("prefixCaching", ("false", "true"), _switch("enable-prefix-caching"), "false")
        )
    if knobs.chunked_prefill and not cv.chunked_prefill:
        dims.append(
            Dimension(
                "chunkedPrefill", ("false", "true"), _switch("enable-chunked-prefill"), "false"
            )
        )
    if knobs.gpu_memory_utilization is not None:
        steps = [cv.gpu_memory_utilization]
        while nxt := next_gpu_memory_utilization(steps[-1], knobs.gpu_memory_utilization.max):
            steps.append(nxt)
        if len(steps) > 1:
            values = tuple(format_number(v) for v in steps)
            dims.append(
                Dimension(
                    "gpuMemoryUtilization", values, _value("gpu-memory-utilization"), values[0]
                )
            )
    if knobs.max_num_seqs is not None:
        rungs = _rungs(ladder_in(MAX_NUM_SEQS_LADDER, knobs.max_num_seqs), cv.max_num_seqs)
        if len(rungs) > 1:
            dims.append(
                Dimension("maxNumSeqs", rungs, _value("max-num-seqs"), str(cv.max_num_seqs))
            )
    if knobs.max_num_batched_tokens is not None:
        bounds = knobs.max_num_batched_tokens
        rungs = _rungs(ladder_in(BATCHED_TOKENS_LADDER, bounds), cv.max_num_batched_tokens)
        if len(rungs) > 1:
            dims.append(
                Dimension(
                    "maxNumBatchedTokens",
                    rungs,
                    _value("max-num-batched-tokens"),
                    str(cv.max_num_batched_tokens),
                )
            )
    return dims


def size(dims: Sequence[Dimension]) -> int:
    """How many configurations ``dims`` make."""
    total = 1
    for d in dims:
        total *= len(d.values)
    return total


def settings(
    dims: Sequence[Dimension], start: Setting
) -> Iterator[tuple[tuple[tuple[str, str], ...], Setting]]:
    """Every configuration of ``dims`` from ``start`` as (knob, value) pairs and the setting it
    makes, in grid order (the last dimension varies fastest)."""
    for combo in itertools.product(*(d.values for d in dims)):
        setting = start
        for dim, value in zip(dims, combo, strict=True):
            setting = dim.apply(setting, value)
        yield tuple((d.knob, v) for d, v in zip(dims, combo, strict=True)), setting


def _rungs(ladder: Sequence[int], running: int) -> tuple[str, ...]:
    """The ladder's rungs within bounds and the running value, ascending."""
    return tuple(map(str, sorted({*ladder, running})))


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
            reason="a point of the allowed space",
            variant=by_name[v],
        )
        applied = apply(change, s.cl)
        return Setting(applied.command_line, applied.image or s.image, s.gpus)

    return set_
