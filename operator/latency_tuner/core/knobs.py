"""The knob catalog: what the operator can change, how risky each change is, and how to apply
one change to a vLLM command line.

A knob is one tuning lever (usually one vLLM flag). Its class orders the planner's choices:
``safe`` changes keep outputs and GPU count as they are; ``lossy`` ones may change outputs
(quantized weights or KV cache); ``costly`` ones take more GPUs. Numeric knobs move along a
ladder, one rung per trial. ``apply`` is pure: it returns the new command line, image and GPU
limit and leaves patching the Deployment to the shell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from latency_tuner.api.spec import IntRange, QuantizationVariant
from latency_tuner.core.config_view import parse_int
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.vllm.args import VllmCommandLine


class KnobName(StrEnum):
    """Knob names as the spec and status spell them (camelCase)."""

    CPU_OFFLOAD = "cpuOffloadGb"
    ENFORCE_EAGER = "enforceEager"
    PREFIX_CACHING = "prefixCaching"
    CHUNKED_PREFILL = "chunkedPrefill"
    MAX_NUM_BATCHED_TOKENS = "maxNumBatchedTokens"
    MAX_NUM_SEQS = "maxNumSeqs"
    GPU_MEMORY_UTILIZATION = "gpuMemoryUtilization"
    SPECULATIVE_DECODING = "speculativeDecoding"
    QUANTIZATION = "quantization"
    KV_CACHE_DTYPE = "kvCacheDtype"
    TENSOR_PARALLEL = "tensorParallel"


class KnobClass(StrEnum):
    SAFE = "safe"  # same outputs, same GPUs
    LOSSY = "lossy"  # may change outputs: compare quality before relying on it
    COSTLY = "costly"  # more GPUs per replica

    @property
    def rank(self) -> int:
        return (KnobClass.SAFE, KnobClass.LOSSY, KnobClass.COSTLY).index(self)


@dataclass(frozen=True)
class Knob:
    name: KnobName
    flag: str  # the vLLM flag (canonical dash name); quantization also sets model/image/args
    knob_class: KnobClass
    what: str  # in words, for reasons and events


# Ordered as DESIGN section 4 lists them; this order breaks ties in ranking.
# Speculative decoding is "safe": verification keeps the target model's outputs (greedy exactly,
# sampling in distribution). Its risk is load-dependent, handled by the concurrency gate.
# Removing --cpu-offload-gb is "safe" too: if the model does not fit without it, the rollout
# fails to start, is rolled back at its progress deadline and the value is marked incompatible;
# the old pod serves meanwhile (a Deployment rollout keeps it until the new one is ready).
CATALOG: dict[KnobName, Knob] = {
    k.name: k
    for k in (
        Knob(
            KnobName.CPU_OFFLOAD,
            "cpu-offload-gb",
            KnobClass.SAFE,
            "stop offloading weights to CPU memory",
        ),
        Knob(
            KnobName.ENFORCE_EAGER,
            "enforce-eager",
            KnobClass.SAFE,
            "turn CUDA graphs back on (remove --enforce-eager)",
        ),
        Knob(
            KnobName.PREFIX_CACHING,
            "enable-prefix-caching",
            KnobClass.SAFE,
            "enable prefix caching",
        ),
        Knob(
            KnobName.CHUNKED_PREFILL,
            "enable-chunked-prefill",
            KnobClass.SAFE,
            "enable chunked prefill",
        ),
        Knob(KnobName.MAX_NUM_SEQS, "max-num-seqs", KnobClass.SAFE, "change max-num-seqs"),
        Knob(
            KnobName.MAX_NUM_BATCHED_TOKENS,
            "max-num-batched-tokens",
            KnobClass.SAFE,
            "change max-num-batched-tokens",
        ),
        Knob(
            KnobName.GPU_MEMORY_UTILIZATION,
            "gpu-memory-utilization",
            KnobClass.SAFE,
            "raise gpu-memory-utilization (more KV cache)",
        ),
        Knob(
            KnobName.QUANTIZATION, "quantization", KnobClass.LOSSY, "serve a pre-quantized variant"
        ),
        Knob(
            KnobName.SPECULATIVE_DECODING,
            "speculative-config",
            KnobClass.SAFE,
            "enable speculative decoding",
        ),
        Knob(KnobName.KV_CACHE_DTYPE, "kv-cache-dtype", KnobClass.LOSSY, "quantize the KV cache"),
        Knob(
            KnobName.TENSOR_PARALLEL,
            "tensor-parallel-size",
            KnobClass.COSTLY,
            "raise tensor parallelism",
        ),
    )
}

# Ladders (DESIGN: numeric knobs step along a ladder in the diagnosed direction).
BATCHED_TOKENS_LADDER: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
# The chunk budget set when chunked prefill is turned on against prefill interference: vLLM's
# optimization guide names 2048 as the budget for better ITL.
CHUNKED_PREFILL_BUDGET = 2048
MAX_NUM_SEQS_LADDER: tuple[int, ...] = tuple(2**i for i in range(4, 13))  # 16 .. 4096
TENSOR_PARALLEL_LADDER: tuple[int, ...] = (1, 2, 4, 8)
GPU_MEMORY_STEP = 0.03  # about 3% of an 80 GB GPU: ~2.4 GB more KV cache per step


def ladder_in(ladder: Sequence[int], bounds: IntRange) -> tuple[int, ...]:
    """The rungs within ``bounds``, with the bounds themselves as the end rungs."""
    inside = {v for v in ladder if bounds.min <= v <= bounds.max} | {bounds.min, bounds.max}
    return tuple(sorted(inside))


def next_rung(rungs: Sequence[int], current: int, direction: int) -> int | None:
    """The adjacent rung above (direction > 0) or below ``current``; None at the end."""
    if direction > 0:
        return next((v for v in rungs if v > current), None)
    return next((v for v in reversed(rungs) if v < current), None)


def next_gpu_memory_utilization(current: float, ceiling: float) -> float | None:
    """One step up, never above ``ceiling``; None when already there."""
    if current >= ceiling - 1e-9:
        return None
    return round(min(current + GPU_MEMORY_STEP, ceiling), 2)


def format_number(value: float) -> str:
    """2048 -> "2048", 0.95 -> "0.95": how values appear in args, trials and events."""
    if float(value).is_integer():
        return str(int(value))
    return f"{round(value, 4):g}"


def same_value(a: str | None, b: str | None) -> bool:
    """Equal as numbers when both are numbers ("0.90" == "0.9"), else as text."""
    if a is None or b is None:
        return a is b
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip() == b.strip()


@dataclass(frozen=True)
class Change:
    """The next single change, as the planner proposes it.

    ``from_value`` is the flag as written (None: absent, vLLM's default ``from_effective``
    applies); ``to_value`` None means "remove the flag". ``variant`` carries the quantization
    variant to switch to.
    """

    knob: KnobName
    from_value: str | None
    to_value: str | None
    knob_class: KnobClass
    expected_gain: float  # prior relative latency reduction on the targeted objective
    expected_score_gain: float  # prior reduction of the violation score
    bottleneck: Bottleneck
    reason: str
    from_effective: str = ""
    variant: QuantizationVariant | None = None
    # Flags that belong to this change and are set with it: (vLLM flag, value). Enabling
    # chunked prefill sets the chunk budget too, since chunking with the budget vLLM keeps
    # from the unchunked setting (>= max-model-len) splits nothing.
    companions: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """ "maxNumBatchedTokens 2048 -> 4096"."""
        before = self.from_value if self.from_value is not None else f"{self.from_effective}"
        after = self.to_value if self.to_value is not None else "(removed)"
        extra = "".join(f" with --{flag}={value}" for flag, value in self.companions)
        return f"{self.knob} {before or '(default)'} -> {after}{extra}"


@dataclass(frozen=True)
class AppliedChange:
    """What the Deployment's container becomes: the command line, and the image and GPU limit
    when the change sets them (None: leave as they are)."""

    command_line: VllmCommandLine
    image: str | None = None
    gpu_limit: int | None = None


def apply(change: Change, cl: VllmCommandLine) -> AppliedChange:
    """``cl`` with ``change`` applied. Pure; raises ValueError for a change it cannot apply."""
    applied = _apply_main(change, cl)
    if not change.companions:
        return applied
    new = applied.command_line
    for flag, value in change.companions:
        new = new.with_value(flag, value)
    return AppliedChange(new, image=applied.image, gpu_limit=applied.gpu_limit)


def _apply_main(change: Change, cl: VllmCommandLine) -> AppliedChange:
    knob = CATALOG[change.knob]
    if change.knob in (KnobName.CPU_OFFLOAD, KnobName.ENFORCE_EAGER):
        return AppliedChange(cl.without(knob.flag))
    if change.knob in (KnobName.PREFIX_CACHING, KnobName.CHUNKED_PREFILL):
        return AppliedChange(cl.with_flag(knob.flag, change.to_value == "true"))
    if change.knob is KnobName.QUANTIZATION:
        if change.variant is None:
            raise ValueError("a quantization change needs its variant")
        return _apply_variant(change.variant, cl)
    if change.to_value is None:
        return AppliedChange(cl.without(knob.flag))
    new = cl.with_value(knob.flag, change.to_value)
    if change.knob is KnobName.TENSOR_PARALLEL:
        size = parse_int(change.to_value)
        if size is None:
            raise ValueError(f"tensor-parallel size {change.to_value!r} is not a number")
        pipeline = parse_int(cl.get("pipeline-parallel-size")) or 1
        return AppliedChange(new, gpu_limit=size * pipeline)
    return AppliedChange(new)


def _apply_variant(variant: QuantizationVariant, cl: VllmCommandLine) -> AppliedChange:
    new = cl
    pairs = variant_flags(variant.args)
    if variant.model is not None:
        new = new.with_model(variant.model)
        # A pre-quantized checkpoint declares its method in config.json; an explicit
        # --quantization left over from the original model would conflict with it.
        if all(name.replace("_", "-") not in ("quantization", "q") for name, _ in pairs):
            new = new.without("quantization")
    for name, value in pairs:
        if value is None:
            new = new.with_flag(name, True)
        elif name.startswith("no-") and value == "":
            new = new.with_flag(name[3:], False)
        else:
            new = new.with_value(name, value)
    return AppliedChange(new, image=variant.image)


def variant_flags(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """A variant's ``args`` as (flag, value) pairs; value None for a bare boolean ``--x`` and
    "" for ``--no-x``. ``["--quantization", "awq", "-tp=2", "--no-enforce-eager"]`` ->
    ``[("quantization", "awq"), ("tp", "2"), ("no-enforce-eager", "")]``."""
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        token = args[i]
        name, eq, value = token.lstrip("-").partition("=")
        if eq:
            pairs.append((name, value))
        elif name.startswith("no-"):
            pairs.append((name, ""))
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            pairs.append((name, args[i + 1]))
            i += 1
        else:
            pairs.append((name, None))
        i += 1
    return pairs


def written_value(knob: KnobName, cl: VllmCommandLine) -> str | None:
    """The knob's value as the command line writes it (booleans as "true"/"false"); None
    when absent."""
    flag = CATALOG[knob].flag
    if knob in (KnobName.PREFIX_CACHING, KnobName.CHUNKED_PREFILL, KnobName.ENFORCE_EAGER):
        try:
            enabled = cl.flag_enabled(flag)
        except ValueError:
            return cl.get(flag)
        return None if enabled is None else str(enabled).lower()
    return cl.get(flag)
