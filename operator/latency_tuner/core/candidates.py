"""Which knob values could help now, ranked; and which could not be tried, and why.

For each cause (objective + bottleneck) the knobs of DESIGN section 4 pull in a direction with
a prior expected gain: the relative latency reduction published for that knob in that setting
(reference/effect_sizes.md), adjusted to the observed load (speculative decoding only at low
concurrency, FP8 KV only with long contexts, INT4 weights shrinking with batch size). A knob's
next value is checked against the spec (opt-in, bounds), the GPU (FP8) and the interconnect
(tensor parallelism). Candidates are ranked: fixes of deployment problems first, then safe
before lossy before costly, then by expected score reduction. History is the planner's
business, not this module's. Pure.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any

from latency_tuner.api.spec import Knobs, QuantizationVariant
from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Bottleneck, Cause, Finding
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import (
    BATCHED_TOKENS_LADDER,
    CATALOG,
    MAX_NUM_SEQS_LADDER,
    TENSOR_PARALLEL_LADDER,
    KnobClass,
    KnobName,
    format_number,
    ladder_in,
    next_gpu_memory_utilization,
    next_rung,
    variant_flags,
)
from latency_tuner.core.observation import Observation
from latency_tuner.vllm.args import VllmCommandLine

PREFIX_PROMPT = 1024  # tokens: prompts long enough that a cached prefix saves a visible prefill
AT_MAX_SEQS = 0.9  # running (per pod, at peak) within 10% of max-num-seqs: the slot limit binds
KV_FULL = 0.9  # KV-cache usage at peak: admission is limited by free blocks
LONG_CONTEXT = 2048  # tokens of context below which FP8 KV barely changes decode time
PCIE_TP_FACTOR = 0.3  # forced TP over PCIe keeps a fraction of its NVLink gain (effect sizes)

FIX_GAINS: dict[KnobName, tuple[float, float]] = {
    # (TTFT-side gain, ITL-side gain). CPU offload streams every offloaded GB per step
    # (>= 15.6 ms/GB on PCIe Gen5 vs 0.4 ms from HBM); eager mode loses CUDA graphs, felt most
    # in short decode steps.
    KnobName.CPU_OFFLOAD: (0.5, 0.7),
    KnobName.ENFORCE_EAGER: (0.1, 0.3),
}
_FIX_FOR = {Finding.CPU_OFFLOAD: KnobName.CPU_OFFLOAD, Finding.EAGER_MODE: KnobName.ENFORCE_EAGER}
_FINDING_OF = {knob: finding for finding, knob in _FIX_FOR.items()}
_FIX_WHY = {
    KnobName.CPU_OFFLOAD: "offloaded weights cross PCIe on every step",
    KnobName.ENFORCE_EAGER: "CUDA graphs remove per-step kernel-launch overhead",
}
K = KnobName  # short alias for the tables below
_ITL_SIDE = (Bottleneck.DECODE_BANDWIDTH, Bottleneck.PREFILL_INTERFERENCE)


@dataclass(frozen=True)
class Load:
    """The load signals the gains depend on, per pod (the metrics are summed over pods)."""

    running: float | None = None
    running_peak: float | None = None
    waiting: float | None = None
    kv_usage_peak: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None

    @classmethod
    def of(cls, observation: Observation) -> Load:
        pods = max(observation.pods, 1)

        def per_pod(value: float | None) -> float | None:
            return None if value is None else value / pods

        return cls(
            running=per_pod(observation.running_mean),
            running_peak=per_pod(observation.running_max),
            waiting=per_pod(observation.waiting_mean),
            kv_usage_peak=observation.kv_cache_usage_max,
            prompt_tokens=observation.prompt_tokens_mean,
            generation_tokens=observation.generation_tokens_mean,
        )

    @property
    def context_tokens(self) -> float | None:
        """Mean tokens in a running request's context (prompt plus half the output)."""
        if self.prompt_tokens is None:
            return None
        return self.prompt_tokens + (self.generation_tokens or 0.0) / 2

    def at_max_seqs(self, max_num_seqs: int) -> bool:
        return self.running_peak is not None and self.running_peak >= AT_MAX_SEQS * max_num_seqs

    @property
    def kv_full(self) -> bool:
        return self.kv_usage_peak is not None and self.kv_usage_peak >= KV_FULL


@dataclass(frozen=True)
class Candidate:
    """One knob value worth a trial, with why and how much it is expected to help."""

    knob: KnobName
    to_value: str | None
    direction: int  # +1 up, -1 down, 0 for non-numeric
    gain: float  # prior relative latency reduction on the cause's objective
    score_gain: float  # prior reduction of the violation score, summed over causes it helps
    bottleneck: Bottleneck
    objective_label: str
    why: str
    finding: Finding | None = None  # the deployment problem this candidate fixes, if any
    variant: QuantizationVariant | None = None

    @property
    def fixes_finding(self) -> bool:
        return self.finding is not None

    @property
    def knob_class(self) -> KnobClass:
        return CATALOG[self.knob].knob_class

    def sort_key(self) -> tuple[int, int, float]:
        return (0 if self.fixes_finding else 1, self.knob_class.rank, -self.score_gain)


@dataclass(frozen=True)
class Ranking:
    candidates: tuple[Candidate, ...]
    blocked: tuple[str, ...]  # knobs that would apply but may not or cannot be tried, in words


@dataclass(frozen=True)
class _Context:
    cl: VllmCommandLine
    view: ConfigView
    knobs: Knobs
    hardware: HardwareInfo
    load: Load


@dataclass(frozen=True)
class _Pull:
    knob: KnobName
    direction: int
    gain: float
    why: str


def rank(
    causes: tuple[Cause, ...],
    findings: tuple[Finding, ...],
    *,
    cl: VllmCommandLine,
    view: ConfigView,
    knobs: Knobs,
    hardware: HardwareInfo,
    observation: Observation,
) -> Ranking:
    """Candidates for ``causes`` (and fixes for ``findings``), best first."""
    ctx = _Context(cl, view, knobs, hardware, Load.of(observation))
    found: list[Candidate] = []
    blocked: list[str] = []
    for cause in causes:
        for pull in _fix_pulls(cause, findings) + _prefix_first(cause, ctx) + _pulls(cause, ctx):
            options = _options(pull, cause, ctx)
            if isinstance(options, str):
                blocked.append(options)
                continue
            for to_value, gain, variant, note in options:
                found.append(
                    Candidate(
                        knob=pull.knob,
                        to_value=to_value,
                        direction=pull.direction,
                        gain=gain,
                        score_gain=min(cause.violation, cause.ratio * gain),
                        bottleneck=cause.bottleneck,
                        objective_label=cause.label,
                        why=pull.why + (f"; {note}" if note else ""),
                        finding=_FINDING_OF.get(pull.knob),
                        variant=variant,
                    )
                )
    merged = _merge(_settle_conflicts(found, causes))
    # Stable sort: ties keep the order of causes (most violated first) and of the table rows.
    ordered = sorted(merged, key=Candidate.sort_key)
    return Ranking(tuple(ordered), tuple(dict.fromkeys(blocked)))


def _fix_pulls(cause: Cause, findings: tuple[Finding, ...]) -> list[_Pull]:
    pulls = []
    for finding, knob in _FIX_FOR.items():
        if finding in findings:
            ttft_gain, itl_gain = FIX_GAINS[knob]
            gain = itl_gain if cause.bottleneck in _ITL_SIDE else ttft_gain
            pulls.append(_Pull(knob, 0, gain, _FIX_WHY[knob]))
    return pulls


def _prefix_first(cause: Cause, ctx: _Context) -> list[_Pull]:
    """Prefix caching, when it is off, first for any TTFT-side breach with long prompts, whatever
    the bottleneck: it costs under 1% when nothing is shared and skips the shared part of
    every prefill when something is (RAG, system prompts), which also frees the KV blocks and
    the queue slots the diagnosis may have blamed. The bottleneck rows that list it already
    (long prefill) keep their own entry."""
    prompt = ctx.load.prompt_tokens
    ttft_side = cause.objective == "ttft" or cause.bottleneck not in _ITL_SIDE
    if (
        ctx.view.prefix_caching
        or not ttft_side
        or prompt is None
        or prompt < PREFIX_PROMPT
        or cause.bottleneck is Bottleneck.LONG_PREFILL
    ):
        return []
    return [
        _Pull(
            K.PREFIX_CACHING,
            +1,
            0.4,
            f"long prompts ({prompt:.0f} tokens): cached prefixes "
            "skip their prefill and share their KV blocks",
        )
    ]


def _pulls(cause: Cause, ctx: _Context) -> list[_Pull]:
    """What the bottleneck's row of the DESIGN table wants, with load-adjusted priors."""
    load, view = ctx.load, ctx.view
    b = cause.bottleneck
    if b is Bottleneck.QUEUEING:
        pulls = []
        if load.at_max_seqs(view.max_num_seqs):
            pulls.append(
                _Pull(
                    K.MAX_NUM_SEQS,
                    +1,
                    0.3,
                    f"running requests reach max-num-seqs ({view.max_num_seqs})",
                )
            )
        kv_why = "the KV cache is full" if load.kv_full else "more KV cache admits more requests"
        return [
            *pulls,
            _Pull(K.PREFIX_CACHING, +1, 0.15, "cached prefixes shorten prefills"),
            _Pull(K.MAX_NUM_BATCHED_TOKENS, +1, 0.15, "a larger step budget admits prefills"),
            _Pull(K.GPU_MEMORY_UTILIZATION, +1, 0.15 if load.kv_full else 0.05, kv_why),
        ]
    if b is Bottleneck.LONG_PREFILL:
        return [
            _Pull(K.PREFIX_CACHING, +1, 0.4, "shared prompt prefixes skip their prefill"),
            _Pull(K.MAX_NUM_BATCHED_TOKENS, +1, 0.2, "larger chunks finish prompts in fewer steps"),
            _Pull(K.QUANTIZATION, 0, 0.0, "FP8 weights speed up prefill GEMMs"),
            _Pull(K.TENSOR_PARALLEL, +1, 0.4, "prefill compute splits across GPUs"),
        ]
    if b is Bottleneck.DECODE_BANDWIDTH:
        pulls = [
            _Pull(K.QUANTIZATION, 0, 0.0, "fewer weight bytes read per decode step"),
            _Pull(K.SPECULATIVE_DECODING, 0, 0.0, "several tokens per step at low concurrency"),
        ]
        kv_gain = _fp8_kv_decode_gain(load)
        if kv_gain > 0:
            pulls.append(
                _Pull(
                    K.KV_CACHE_DTYPE,
                    0,
                    kv_gain,
                    f"long contexts (~{load.context_tokens:.0f} tokens): KV reads dominate decode",
                )
            )
        pulls.append(_Pull(K.TENSOR_PARALLEL, +1, 0.35, "each GPU reads a share of the weights"))
        return pulls
    if b is Bottleneck.PREFILL_INTERFERENCE:
        return [
            _Pull(K.CHUNKED_PREFILL, +1, 0.5, "long prefills split into chunks between decodes"),
            _Pull(K.MAX_NUM_BATCHED_TOKENS, -1, 0.3, "smaller prefill chunks stall decodes less"),
            # The other way, less likely: a long prompt in fewer, larger chunks stalls fewer
            # decode steps, which can bring a p90 (not the p99) under the target.
            _Pull(K.MAX_NUM_BATCHED_TOKENS, +1, 0.1, "fewer prefill chunks stall fewer steps"),
            # Every step, stalled or not, reads the weights: lighter or split weights shorten
            # both kinds of step.
            _Pull(K.QUANTIZATION, 0, 0.0, "fewer weight bytes read per step"),
            _Pull(K.TENSOR_PARALLEL, +1, 0.35, "prefill and decode work split across GPUs"),
        ]
    if b is Bottleneck.KV_CACHE_PRESSURE:
        return [
            _Pull(K.GPU_MEMORY_UTILIZATION, +1, 0.25, "more KV blocks, fewer preemptions"),
            _Pull(K.KV_CACHE_DTYPE, 0, 0.3, "FP8 KV doubles the KV capacity"),
            _Pull(K.MAX_NUM_SEQS, -1, 0.2, "fewer concurrent sequences fit their KV blocks"),
            _Pull(K.TENSOR_PARALLEL, +1, 0.25, "more GPUs hold more KV cache"),
        ]
    return []


def _fp8_kv_decode_gain(load: Load) -> float:
    # vLLM FP8-KV figures (8B, batch 32): ITL -27% at 8k context, -40% at 32k, ~0 short/batch 1.
    context = load.context_tokens
    if context is None or context < LONG_CONTEXT:
        return 0.0
    gain = 0.15 if context < 8192 else 0.27 if context < 32768 else 0.4
    small_batch = load.running is not None and load.running < 4
    return gain / 2 if small_batch else gain


_Option = tuple[str | None, float, QuantizationVariant | None, str]


def _options(pull: _Pull, cause: Cause, ctx: _Context) -> list[_Option] | str:
    """The value(s) the pull would set, or why it cannot (a sentence for the advice)."""
    knobs, view = ctx.knobs, ctx.view
    if pull.knob in FIX_GAINS:
        return [(None, pull.gain, None, "")]
    if pull.knob is K.PREFIX_CACHING or pull.knob is K.CHUNKED_PREFILL:
        allowed = knobs.prefix_caching if pull.knob is K.PREFIX_CACHING else knobs.chunked_prefill
        enabled = view.prefix_caching if pull.knob is K.PREFIX_CACHING else view.chunked_prefill
        if enabled:
            return []
        if not allowed:
            return (
                f"{pull.knob} is off ({CATALOG[pull.knob].flag} not enabled), and "
                f"spec.knobs.{pull.knob} forbids changing it"
            )
        return [("true", pull.gain, None, "")]
    if pull.knob is K.MAX_NUM_BATCHED_TOKENS or pull.knob is K.MAX_NUM_SEQS:
        return _ladder_options(pull, cause, ctx)
    if pull.knob is K.GPU_MEMORY_UTILIZATION:
        if knobs.gpu_memory_utilization is None:
            return f"{pull.knob} is off-limits (spec.knobs.{pull.knob} is null)"
        step = next_gpu_memory_utilization(
            view.gpu_memory_utilization, knobs.gpu_memory_utilization.max
        )
        if step is None:
            return f"{pull.knob} is at its ceiling ({format_number(view.gpu_memory_utilization)})"
        return [(format_number(step), pull.gain, None, "")]
    if pull.knob is K.QUANTIZATION:
        return _variant_options(cause, ctx)
    if pull.knob is K.SPECULATIVE_DECODING:
        return _speculative_options(ctx)
    if pull.knob is K.KV_CACHE_DTYPE:
        return _kv_dtype_options(pull, ctx)
    return _tensor_parallel_options(pull, ctx)


def _ladder_options(pull: _Pull, cause: Cause, ctx: _Context) -> list[_Option] | str:
    seqs = pull.knob is KnobName.MAX_NUM_SEQS
    bounds = ctx.knobs.max_num_seqs if seqs else ctx.knobs.max_num_batched_tokens
    current = ctx.view.max_num_seqs if seqs else ctx.view.max_num_batched_tokens
    if bounds is None:
        return f"{pull.knob} is off-limits (spec.knobs.{pull.knob} is null)"
    if not seqs and pull.direction < 0 and not ctx.view.chunked_prefill:
        # Without chunking vLLM needs max-num-batched-tokens >= max-model-len: do not lower it.
        return []
    if (
        not seqs
        and cause.bottleneck is Bottleneck.PREFILL_INTERFERENCE
        and not ctx.view.chunked_prefill
    ):
        return []  # without chunking a prompt is prefilled in one step whatever the budget
    rungs = ladder_in(MAX_NUM_SEQS_LADDER if seqs else BATCHED_TOKENS_LADDER, bounds)
    step = next_rung(rungs, current, pull.direction)
    if step is None:
        end = "upper" if pull.direction > 0 else "lower"
        return f"{pull.knob} is at its {end} bound ({current}; bounds {bounds.min}-{bounds.max})"
    # vLLM refuses max-num-seqs above max-num-batched-tokens. An unwritten max-num-seqs follows
    # the budget down by itself; a written one (or the one we would write) must fit under it.
    budget = ctx.view.max_num_batched_tokens
    if seqs and step > budget:
        return f"maxNumSeqs {step} would exceed max-num-batched-tokens ({budget})"
    if not seqs and ctx.cl.get("max-num-seqs") is not None and step < ctx.view.max_num_seqs:
        return f"maxNumBatchedTokens {step} would fall below max-num-seqs ({ctx.view.max_num_seqs})"
    note = ""
    if not seqs and cause.bottleneck is Bottleneck.PREFILL_INTERFERENCE:
        if pull.direction < 0:
            sized = _chunk_sized_from_target(rungs, current, cause, ctx)
            if sized is not None and sized < step:
                step, note = sized, "a budget sized from the prompt length and the ITL target"
        else:
            whole = _whole_prompt_budget(rungs, current, ctx)
            if whole is not None and whole > step:
                step, note = whole, "a budget that prefills a mean prompt in one step"
    return [(str(step), pull.gain, None, note)]


def _whole_prompt_budget(rungs: tuple[int, ...], current: int, ctx: _Context) -> int | None:
    """The smallest rung above ``current`` that holds a mean prompt in one chunk (else the top
    rung): between the two, a prompt still takes as many stalled steps, each one longer (8000-
    token prompts: 4096 stalls two steps twice as long as 2048's four; 8192 stalls one)."""
    prompt = ctx.load.prompt_tokens
    above = [r for r in rungs if r > current]
    if prompt is None or not above:
        return None
    return next((r for r in above if r >= prompt), above[-1])


def _chunk_sized_from_target(
    rungs: tuple[int, ...], current: int, cause: Cause, ctx: _Context
) -> int | None:
    """The batch budget that would bring a prefill stall under the ITL target in one move.

    A decode step that carries a prefill chunk takes about as long as that chunk's prefill, and
    a chunk is min(budget, prompt) tokens: a budget above the prompt length changes nothing
    (16384 -> 8192 with 2500-token prompts), and below it the stall shrinks with the budget. So
    the budget goes to the largest rung under min(current, prompt) / (observed / target), never
    below max-num-seqs when that is written (vLLM refuses it).
    """
    prompt = ctx.load.prompt_tokens
    if prompt is None or cause.ratio <= 1.0:
        return None
    goal = min(float(current), prompt) / cause.ratio
    floor = ctx.view.max_num_seqs if ctx.cl.get("max-num-seqs") is not None else 0
    below = [r for r in rungs if r < current and r >= floor]
    if not below:
        return None
    fitting = [r for r in below if r <= goal]
    return max(fitting) if fitting else min(below)


_INT4 = re.compile(r"awq|gptq|int4|w4a16|4bit|4-bit|marlin|nf4")
_FP8 = re.compile(r"fp8|float8")
_INT8 = re.compile(r"int8|w8a8|w8a16|8bit|8-bit")


def variant_kind(variant: QuantizationVariant) -> str:
    """ "int4", "fp8", "int8" or "unknown", from the variant's name, model and args."""
    text = " ".join([variant.name, variant.model or "", *variant.args]).lower()
    for kind, pattern in (("int4", _INT4), ("fp8", _FP8), ("int8", _INT8)):
        if pattern.search(text):
            return kind
    return "unknown"


def _variant_gain(kind: str, itl_side: bool, running: float | None) -> float:
    # MARLIN INT4: near 4x kernel speed up to batch 16-32, shrinking by 64-128, up to 2.8x end to
    # end; no TTFT gain. FP8: ITL -29% at batch 1, -21% at 64, -9% at 256; TTFT -22%.
    batch = running if running is not None else 1.0
    if not itl_side:
        return {"fp8": 0.2, "int8": 0.05}.get(kind, 0.0)
    if kind == "int4":
        return 0.5 if batch <= 16 else 0.35 if batch <= 64 else 0.2
    if kind == "fp8":
        return 0.28 if batch <= 4 else 0.21 if batch <= 64 else 0.09
    return 0.2 if kind == "int8" else 0.15


def current_variant(cl: VllmCommandLine, knobs: Knobs) -> QuantizationVariant | None:
    """The listed variant the command line already serves, if any (by model, else by args)."""
    for variant in knobs.quantization.variants if knobs.quantization else []:
        if variant.model is not None:
            if variant.model == cl.model:
                return variant
        elif variant.args and all(
            cl.get(name) == value if value else cl.has(name)
            for name, value in variant_flags(variant.args)
        ):
            return variant
    return None


def _variant_options(cause: Cause, ctx: _Context) -> list[_Option] | str:
    if ctx.knobs.quantization is None:
        return (
            "quantization is not allowed: list pre-quantized variants (AWQ, FP8) in "
            "spec.knobs.quantization to let the operator try them"
        )
    if current_variant(ctx.cl, ctx.knobs) is not None:
        return []  # one variant at a time: switching between variants is left to the user
    options: list[_Option] = []
    refused: list[str] = []
    itl_side = cause.bottleneck in _ITL_SIDE
    for variant in ctx.knobs.quantization.variants:
        kind = variant_kind(variant)
        if kind == "fp8" and ctx.hardware.supports_fp8 is False:
            refused.append(
                f"variant {variant.name!r} needs FP8, which {ctx.hardware.describe()} lacks"
            )
            continue
        gain = _variant_gain(kind, itl_side, ctx.load.running)
        if gain > 0:
            options.append((variant.name, gain, variant, f"variant {variant.name!r} ({kind})"))
    if not options and refused:
        return "; ".join(refused)
    return options


def _speedup(concurrency: float) -> float:
    # EAGLE-3 in vLLM: 2.03x at concurrency 1, 1.71x at 4, 1.66x at 16 (log-linear between).
    points = ((1.0, 2.03), (4.0, 1.71), (16.0, 1.66))
    if concurrency <= points[0][0]:
        return points[0][1]
    for (c0, s0), (c1, s1) in itertools.pairwise(points):
        if concurrency <= c1:
            t = math.log(concurrency / c0) / math.log(c1 / c0)
            return s0 + t * (s1 - s0)
    return points[-1][1]


def speculative_json(config: dict[str, Any]) -> str:
    """The --speculative-config value: compact JSON with sorted keys (stable across runs)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def _speculative_options(ctx: _Context) -> list[_Option] | str:
    spec = ctx.knobs.speculative_decoding
    if spec is None:
        return (
            "speculative decoding is not allowed: add configs to "
            "spec.knobs.speculativeDecoding to let the operator try it"
        )
    if ctx.view.speculative_config is not None:
        return []
    running = ctx.load.running
    if running is None:
        return "speculative decoding needs the running-requests metric to check concurrency"
    if running > spec.max_concurrency:
        return (
            f"speculative decoding is tried only at <= {spec.max_concurrency:g} running "
            f"requests per pod; observed {running:.1f}"
        )
    options: list[_Option] = []
    for config in spec.configs:
        speedup = _speedup(running)
        if str(config.get("method", "")).lower() in ("ngram", "suffix"):
            speedup = 1 + (speedup - 1) / 2  # prompt lookup accepts fewer tokens than a drafter
        options.append(
            (speculative_json(config), 1 - 1 / speedup, None, f"{running:.1f} running per pod")
        )
    return options


def _kv_dtype_options(pull: _Pull, ctx: _Context) -> list[_Option] | str:
    if not ctx.knobs.kv_cache_dtype:
        return (
            "FP8 KV cache is not allowed: list fp8 in spec.knobs.kvCacheDtype to let the "
            "operator try it"
        )
    if ctx.view.kv_cache_dtype != "auto":
        return []
    if ctx.hardware.supports_fp8 is False:
        return (
            f"FP8 KV cache needs an Ada, Hopper or newer GPU; {ctx.hardware.describe()} "
            "has no FP8 support"
        )
    return [(dtype, pull.gain, None, "") for dtype in ctx.knobs.kv_cache_dtype]


def _tensor_parallel_options(pull: _Pull, ctx: _Context) -> list[_Option] | str:
    tp = ctx.knobs.tensor_parallel
    if tp is None:
        return "tensor parallelism is not allowed (spec.knobs.tensorParallel)"
    gain = pull.gain
    if not ctx.hardware.has_nvlink:
        link = ctx.hardware.effective_interconnect or "unknown"
        if not tp.force:
            return (
                f"tensor parallelism needs NVLink (interconnect: {link}); over PCIe its "
                "all-reduces can make latency worse (set tensorParallel.force to try)"
            )
        gain *= PCIE_TP_FACTOR
    limit = min(tp.max_size, ctx.hardware.gpus_per_node or tp.max_size)
    rungs = [size for size in TENSOR_PARALLEL_LADDER if size <= limit]
    step = next_rung(rungs, ctx.view.tensor_parallel_size, +1)
    if step is None:
        return f"tensor parallelism is at its limit ({ctx.view.tensor_parallel_size} GPUs)"
    return [(str(step), gain, None, "")]


def _settle_conflicts(found: list[Candidate], causes: tuple[Cause, ...]) -> list[Candidate]:
    """A numeric knob pulled both ways by two causes (TTFT wants more batched tokens, ITL
    fewer) moves the way of the cause whose objective is violated more: the score decides.
    One cause may offer both ways (its likelier way first): that is a fallback, not a
    conflict."""
    worst: dict[KnobName, tuple[float, str]] = {}
    ratio_of = {c.label: c.ratio for c in causes}
    for c in found:
        if c.direction != 0 and not c.fixes_finding:
            ratio = ratio_of.get(c.objective_label, 0.0)
            if c.knob not in worst or ratio > worst[c.knob][0]:
                worst[c.knob] = (ratio, c.objective_label)
    ways: dict[KnobName, set[int]] = {}
    for c in found:
        if c.knob in worst and c.objective_label == worst[c.knob][1]:
            ways.setdefault(c.knob, set()).add(c.direction)
    return [
        c
        for c in found
        if c.knob not in worst or c.direction in ways.get(c.knob, set()) or c.fixes_finding
    ]


def _merge(found: list[Candidate]) -> list[Candidate]:
    """One candidate per (knob, value): score gains add up over the causes it helps."""
    merged: dict[tuple[KnobName, str | None], Candidate] = {}
    for c in found:
        key = (c.knob, c.to_value)
        if key not in merged:
            merged[key] = c
            continue
        first = merged[key]
        merged[key] = replace(
            first,
            gain=max(first.gain, c.gain),
            score_gain=first.score_gain + c.score_gain,
            why=first.why if c.why in first.why else f"{first.why}; {c.why}",
        )
    return list(merged.values())
