"""The bottleneck -> knobs table of DESIGN section 4, as data: which knobs each bottleneck pulls,
in order, which way, with what prior gain and why.

- ``TABLE``: per bottleneck, its entries in order (this order breaks ties in ranking). An
  entry names a knob, the way it is pulled (``UP``, ``DOWN``, or ``SET`` for a non-numeric
  setting: on, a variant, a dtype), its prior (the relative latency reduction published for
  that knob in that setting, reference/effect_sizes.md; ``None`` leaves it to the knob's
  load-adjusted ``prior``, and such an entry is dropped when that comes out 0), why in words (with
  ``{max_num_seqs}``, ``{prompt_tokens}`` or ``{context_tokens}`` filled from the window), and
  the load condition under which it applies (``When``).
- ``AHEAD``: entries placed before the row of every TTFT-side cause (an objective of TTFT, or a
  bottleneck not on the ITL side) except the rows named, whatever the bottleneck.
- ``FIXES``: a deployment problem found before any tuning, the knob that undoes it, and its
  prior on the TTFT side and on the ITL side.

Values only: what a knob's value can be, and whether the spec, GPU or interconnect allow it,
is the knob module's business (``core.knobs.<knob>``); evaluating ``When`` and ranking is
``core.candidates``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from latency_tuner.core.evidence import Bottleneck, Finding
from latency_tuner.core.knobs.base import KnobName as K

UP, DOWN, SET = +1, -1, 0


class When(StrEnum):
    """The load condition under which a table entry applies."""

    ALWAYS = "always"
    AT_MAX_SEQS = "at-max-seqs"  # the slot limit binds (Load.at_max_seqs)
    KV_FULL = "kv-full"  # KV-cache usage at peak near 1
    KV_NOT_FULL = "kv-not-full"
    LONG_PROMPTS = "long-prompts"  # mean prompt >= LONG_PROMPT_TOKENS
    PREFILL_HEAVY = "prefill-heavy"  # prefill a large part of each request's service time


LONG_PROMPT_TOKENS = 1024  # prompts long enough that a cached prefix saves a visible prefill
# Prefill a third of a request's GPU time: with decode steps batched and prefills not, such a
# share is what the steps of a busy server mostly spend on (a prefill-bound queue).
PREFILL_HEAVY_SHARE = 1 / 3


@dataclass(frozen=True)
class Entry:
    """One knob of a bottleneck's row."""

    knob: K
    direction: int
    gain: float | None  # None: the knob's own load-adjusted prior
    why: str
    when: When = When.ALWAYS
    frees_memory: bool = False  # pulled for the memory it frees (KV blocks), not for speed


@dataclass(frozen=True)
class Ahead:
    """An entry placed before the row of every TTFT-side cause, except the rows named."""

    entry: Entry
    except_rows: frozenset[Bottleneck] = frozenset()


@dataclass(frozen=True)
class Fix:
    """A deployment problem and the knob that undoes it, with its priors per side."""

    finding: Finding
    knob: K
    ttft_gain: float
    itl_gain: float
    why: str


TABLE: dict[Bottleneck, tuple[Entry, ...]] = {
    Bottleneck.QUEUEING: (
        Entry(
            K.MAX_NUM_SEQS,
            UP,
            0.3,
            "requests in flight fill the max-num-seqs slots ({max_num_seqs})",
            When.AT_MAX_SEQS,
        ),
        Entry(K.PREFIX_CACHING, UP, 0.15, "cached prefixes shorten prefills"),
        Entry(K.MAX_NUM_BATCHED_TOKENS, UP, 0.15, "a larger step budget admits prefills"),
        Entry(K.GPU_MEMORY_UTILIZATION, UP, 0.15, "the KV cache is full", When.KV_FULL),
        Entry(
            K.GPU_MEMORY_UTILIZATION,
            UP,
            0.05,
            "more KV cache admits more requests",
            When.KV_NOT_FULL,
        ),
        # A queue behind a full KV cache drains as fast as blocks free up: more blocks admit
        # the waiting requests (FP8 KV doubles them; a smaller checkpoint or more GPUs leave
        # more memory for them). Lossy and costly, so ranked after the safe knobs.
        Entry(
            K.KV_CACHE_DTYPE,
            SET,
            0.3,
            "FP8 KV doubles the KV blocks that admit the queue",
            When.KV_FULL,
        ),
        Entry(
            K.QUANTIZATION,
            SET,
            0.0,
            "smaller weights leave more memory for the KV blocks that admit the queue",
            When.KV_FULL,
            frees_memory=True,
        ),
        Entry(K.TENSOR_PARALLEL, UP, 0.25, "more GPUs hold more KV cache", When.KV_FULL),
        # A queue behind slow prefills drains as fast as prefills finish: faster GEMMs (FP8
        # weights; the variant's own gain replaces the 0) raise the service rate. Lossy, so
        # ranked after the safe knobs above.
        Entry(
            K.QUANTIZATION,
            SET,
            0.0,
            "FP8 weights speed up the prefills the queue waits on",
            When.PREFILL_HEAVY,
        ),
        # Whatever the steps the queue waits on are (prefills, or decodes that hold the slots
        # it waits for), split over more GPUs each is shorter and the queue drains faster: the
        # costly alternative to the replicas the advice names, ranked after everything else.
        Entry(
            K.TENSOR_PARALLEL,
            UP,
            0.3,
            "the steps the queue waits on split across GPUs",
        ),
    ),
    Bottleneck.LONG_PREFILL: (
        Entry(K.PREFIX_CACHING, UP, 0.4, "shared prompt prefixes skip their prefill"),
        Entry(K.MAX_NUM_BATCHED_TOKENS, UP, 0.2, "larger chunks finish prompts in fewer steps"),
        # The variant's own gain (FP8 speeds up prefill GEMMs) replaces the entry's 0.
        Entry(K.QUANTIZATION, SET, 0.0, "FP8 weights speed up prefill GEMMs"),
        Entry(K.TENSOR_PARALLEL, UP, 0.4, "prefill compute splits across GPUs"),
    ),
    Bottleneck.DECODE_BANDWIDTH: (
        Entry(K.QUANTIZATION, SET, 0.0, "fewer weight bytes read per decode step"),
        Entry(K.SPECULATIVE_DECODING, SET, 0.0, "several tokens per step at low concurrency"),
        Entry(
            K.KV_CACHE_DTYPE,
            SET,
            None,
            "long contexts (~{context_tokens:.0f} tokens): KV reads dominate decode",
        ),
        Entry(K.TENSOR_PARALLEL, UP, 0.35, "each GPU reads a share of the weights"),
    ),
    Bottleneck.PREFILL_INTERFERENCE: (
        Entry(K.CHUNKED_PREFILL, UP, 0.5, "long prefills split into chunks between decodes"),
        Entry(K.MAX_NUM_BATCHED_TOKENS, DOWN, 0.3, "smaller prefill chunks stall decodes less"),
        # The other way, less likely: a long prompt in fewer, larger chunks stalls fewer
        # decode steps, which can bring a p90 (not the p99) under the target.
        Entry(K.MAX_NUM_BATCHED_TOKENS, UP, 0.1, "fewer prefill chunks stall fewer steps"),
        # Every step, stalled or not, reads the weights: lighter or split weights shorten
        # both kinds of step.
        Entry(K.QUANTIZATION, SET, 0.0, "fewer weight bytes read per step"),
        Entry(K.TENSOR_PARALLEL, UP, 0.35, "prefill and decode work split across GPUs"),
    ),
    Bottleneck.KV_CACHE_PRESSURE: (
        Entry(K.GPU_MEMORY_UTILIZATION, UP, 0.25, "more KV blocks, fewer preemptions"),
        Entry(K.KV_CACHE_DTYPE, SET, 0.3, "FP8 KV doubles the KV capacity"),
        Entry(K.MAX_NUM_SEQS, DOWN, 0.2, "fewer concurrent sequences fit their KV blocks"),
        # A quantized checkpoint shrinks the weights (4-bit to a quarter, 8-bit to half) and
        # the memory freed becomes KV blocks; the variant's memory gain replaces the 0.
        Entry(
            K.QUANTIZATION,
            SET,
            0.0,
            "smaller weights leave more memory for KV blocks",
            frees_memory=True,
        ),
        Entry(K.TENSOR_PARALLEL, UP, 0.25, "more GPUs hold more KV cache"),
    ),
    Bottleneck.NONE: (),
}

# Prefix caching, when it is off, first for any TTFT-side breach with long prompts, whatever
# the bottleneck: it costs under 1% when nothing is shared and skips the shared part of every
# prefill when something is (RAG, system prompts), which also frees the KV blocks and the
# queue slots the diagnosis may have blamed. The long-prefill row lists it already.
AHEAD: tuple[Ahead, ...] = (
    Ahead(
        Entry(
            K.PREFIX_CACHING,
            UP,
            0.4,
            "long prompts ({prompt_tokens:.0f} tokens): cached prefixes "
            "skip their prefill and share their KV blocks",
            When.LONG_PROMPTS,
        ),
        except_rows=frozenset({Bottleneck.LONG_PREFILL}),
    ),
)

# CPU offload streams every offloaded GB per step (>= 15.6 ms/GB on PCIe Gen5 vs 0.4 ms from
# HBM); eager mode loses CUDA graphs, felt most in short decode steps.
FIXES: tuple[Fix, ...] = (
    Fix(
        Finding.CPU_OFFLOAD,
        K.CPU_OFFLOAD,
        0.5,
        0.7,
        "offloaded weights cross PCIe on every step",
    ),
    Fix(
        Finding.EAGER_MODE,
        K.ENFORCE_EAGER,
        0.1,
        0.3,
        "CUDA graphs remove per-step kernel-launch overhead",
    ),
)
