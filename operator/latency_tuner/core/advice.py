"""Advice the operator cannot act on: what a person could do about a bottleneck.

Add replicas (queueing, KV pressure), trim prompts or share their prefix (long prefill), a
higher-bandwidth GPU (decode bandwidth), NVLink before tensor parallelism, a separate deployment
for long prompts (prefill interference). Sentences with the numbers behind them. Pure.
"""

from __future__ import annotations

from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.hardware import Architecture, HardwareInfo
from latency_tuner.core.load import Load
from latency_tuner.core.observation import Observation

TRIM_PROMPT = 2048  # tokens: worth advising to trim
POOR_HIT_RATE = 0.3  # prefix-cache hit rate below which shared prefixes are worth advising


def advice_for(
    bottleneck: Bottleneck,
    obs: Observation,
    cv: ConfigView,
    load: Load,
    hardware: HardwareInfo,
) -> list[str]:
    """What only a person can do about ``bottleneck`` (add replicas, trim prompts, a faster
    GPU, NVLink), in words with the numbers behind it."""
    notes: list[str] = []
    prompt = load.prompt_tokens
    if bottleneck is Bottleneck.QUEUEING:
        if load.at_max_seqs(cv.max_num_seqs):
            notes.append(
                "add replicas: the server is saturated at max-num-seqs "
                f"({cv.max_num_seqs} running per pod)"
            )
        elif load.waiting is not None and load.waiting > 0:
            notes.append(f"add replicas: {load.waiting:.1f} requests wait per pod on average")
        else:
            notes.append("add replicas: requests spend most of their TTFT in the queue")
    elif bottleneck is Bottleneck.LONG_PREFILL:
        if prompt is not None and prompt >= TRIM_PROMPT:
            notes.append(
                f"trim prompts: mean prompt {prompt:.0f} tokens, and prefill time "
                "grows with input length"
            )
        hit = obs.prefix_cache_hit_rate
        if cv.prefix_caching and hit is not None and hit < POOR_HIT_RATE:
            notes.append(
                f"put the shared part of prompts first: prefix-cache hit rate is {hit:.0%}"
            )
        facts = hardware.facts
        if facts is not None and facts.architecture not in (
            Architecture.HOPPER,
            Architecture.BLACKWELL,
        ):
            notes.append(f"a GPU with more compute: prefill is compute-bound ({facts.name})")
        notes.extend(_nvlink(cv, hardware))
    elif bottleneck is Bottleneck.DECODE_BANDWIDTH:
        faster = hardware.higher_bandwidth_gpus()
        if faster:
            names = ", ".join(f"{g.name} ({g.bandwidth_tbs:g} TB/s)" for g in faster[:3])
            notes.append(f"a higher-bandwidth GPU: {names} instead of {hardware.describe()}")
        elif hardware.facts is None:
            notes.append(
                "a higher-bandwidth GPU (HBM3 or newer, e.g. H100 SXM or H200): "
                "decode speed follows memory bandwidth"
            )
        notes.extend(_nvlink(cv, hardware))
    elif bottleneck is Bottleneck.PREFILL_INTERFERENCE:
        notes.append(
            "serve long-prompt traffic from a separate deployment: its prefills stall "
            "the decodes of short requests"
        )
    else:  # KV-cache pressure: causes never carry Bottleneck.NONE
        notes.append("add replicas or use GPUs with more memory: the KV cache runs out")
    return notes


def _nvlink(cv: ConfigView, hardware: HardwareInfo) -> list[str]:
    multi = (hardware.gpus_per_node or 1) > 1 or cv.tensor_parallel_size > 1
    if multi and hardware.effective_interconnect == "PCIe":
        return [
            "enable NVLink (NVLink-connected GPUs): tensor parallelism over PCIe "
            "spends its gain on all-reduces"
        ]
    return []
