"""The simulator's ``/metrics``: vLLM V1's Prometheus families, fed by the engine's step stats.

Names, types, help texts and buckets come from ``latency_tuner.vllm.metrics`` (current or legacy
generation, ``--sim-metrics-version``); labels are ``model_name`` (first served model name) and
``engine`` ("0"), as vLLM's ``PrometheusStatLogger`` declares them. Also exposed, as vLLM does:
``vllm:request_success_total{finished_reason}``, per-request token histograms, tokens per step,
inference time, per-request time per output token, prefill KV tokens computed (cache hits left
out), request parameters, spec-decoding counters (only with a speculative config),
``vllm:cache_config_info`` (labels echo the cache config as strings, plus ``engine``; like vLLM it
carries no ``model_name``), and prometheus_client's process / platform / GC collectors.

It owns one ``CollectorRegistry`` per server (never the global one), so tests can run several.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import (
    GCCollector as _GCCollector,
)
from prometheus_client import (
    PlatformCollector as _PlatformCollector,
)
from prometheus_client import (
    ProcessCollector as _ProcessCollector,
)

from latency_tuner.perf.config import EngineConfig
from latency_tuner.simulator.engine import StepStats
from latency_tuner.vllm.metrics import (
    ENGINE_LABEL,
    FAMILIES,
    MODEL_LABEL,
    REQUEST_TIME_BUCKETS,
    MetricsVersion,
    MetricType,
    Signal,
)

__all__ = ["CONTENT_TYPE", "EngineMetrics", "build_1_2_5_buckets"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
FINISH_REASONS = ("stop", "length", "abort")
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
_SPEC_SIGNALS = (Signal.SPEC_DRAFTS, Signal.SPEC_DRAFT_TOKENS, Signal.SPEC_ACCEPTED_TOKENS)


def build_1_2_5_buckets(max_value: int) -> list[float]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value`` (vLLM's token-count buckets)."""
    buckets: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return buckets
            buckets.append(float(value))
        exponent += 1


def _bare(name: str) -> str:
    """prometheus_client wants counter names without the ``_total`` it appends."""
    return name.removesuffix("_total")


def cache_config_labels(
    config: EngineConfig, version: MetricsVersion = MetricsVersion.CURRENT
) -> dict[str, str]:
    """``vllm:cache_config_info`` labels: ``CacheConfig.metrics_info()``, every field of vLLM's
    CacheConfig as ``str(value)``. Current vLLM (``vllm/config/cache.py``) also carries the
    profiled capacity (``kv_cache_size_tokens``, ``kv_cache_max_concurrency`` = capacity /
    max_model_len) and dropped ``swap_space``, ``cpu_offload_gb`` and ``calculate_kv_scales``."""
    labels = {
        "block_size": str(config.block_size),
        "cache_dtype": config.kv_cache_dtype_label,
        "enable_prefix_caching": str(bool(config.prefix_caching)),
        "gpu_memory_utilization": str(config.gpu_memory_utilization),
        "is_attention_free": "False",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(config.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_caching_hash_algo": "sha256",
        "sliding_window": "None",
    }
    if version is MetricsVersion.CURRENT:
        labels |= {
            "kv_cache_size_tokens": str(config.kv_cache_tokens),
            "kv_cache_max_concurrency": str(config.kv_cache_tokens / config.max_model_len),
            "kv_cache_memory_bytes": "None",
            "kv_sharing_fast_prefill": "False",
            "kv_offloading_size": "None",
            "kv_offloading_backend": "native",
            "mamba_cache_dtype": "auto",
        }
    else:
        labels |= {
            "calculate_kv_scales": "False",
            "cpu_offload_gb": str(config.cpu_offload_gb if config.cpu_offload_gb else 0),
            "swap_space": "4",
        }
    labels[ENGINE_LABEL] = "0"
    return labels


@dataclass
class _Totals:
    """Running totals for vLLM's periodic ``Engine 000: Avg prompt throughput ...`` log line."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    queries: int = 0
    hits: int = 0
    running: int = 0
    waiting: int = 0
    kv_usage: float = 0.0
    last_log: float = field(default_factory=time.monotonic)


class EngineMetrics:
    """A ``StatsSink`` that keeps vLLM's metric families up to date, step by step."""

    def __init__(
        self,
        config: EngineConfig,
        *,
        version: MetricsVersion = MetricsVersion.CURRENT,
        registry: CollectorRegistry | None = None,
        engine: str = "0",
        process_collectors: bool = True,
    ) -> None:
        self.config = config
        self.version = version
        self.registry = registry if registry is not None else CollectorRegistry()
        reg = self.registry
        if process_collectors:
            _ProcessCollector(registry=reg)
            _PlatformCollector(registry=reg)
            _GCCollector(registry=reg)
        self.model_name = config.served_model_name.split()[0]
        labels = [MODEL_LABEL, ENGINE_LABEL]
        values = (self.model_name, engine)
        self._totals = _Totals()

        def family(signal: Signal) -> Counter | Gauge | Histogram:
            fam = FAMILIES[signal]
            name = fam.name(version)
            if fam.type is MetricType.COUNTER:
                return Counter(_bare(name), fam.help, labels, registry=reg)
            if fam.type is MetricType.GAUGE:
                return Gauge(name, fam.help, labels, registry=reg)
            return Histogram(name, fam.help, labels, registry=reg, buckets=fam.buckets or ())

        def counter(signal: Signal) -> Counter:
            metric = family(signal)
            assert isinstance(metric, Counter)
            return metric.labels(*values)

        def gauge(signal: Signal) -> Gauge:
            metric = family(signal)
            assert isinstance(metric, Gauge)
            return metric.labels(*values)

        def histogram(signal: Signal) -> Histogram:
            metric = family(signal)
            assert isinstance(metric, Histogram)
            return metric.labels(*values)

        def extra_histogram(name: str, text: str, buckets: list[float]) -> Histogram:
            return Histogram(name, text, labels, registry=reg, buckets=buckets).labels(*values)

        self.running = gauge(Signal.REQUESTS_RUNNING)
        self.waiting = gauge(Signal.REQUESTS_WAITING)
        self.kv_usage = gauge(Signal.KV_CACHE_USAGE)
        self.prefix_queries = counter(Signal.PREFIX_CACHE_QUERIES)
        self.prefix_hits = counter(Signal.PREFIX_CACHE_HITS)
        self.preemptions = counter(Signal.PREEMPTIONS)
        self.prompt_tokens = counter(Signal.PROMPT_TOKENS)
        self.generation_tokens = counter(Signal.GENERATION_TOKENS)
        success_family = FAMILIES[Signal.REQUEST_SUCCESS]
        success = Counter(
            _bare(success_family.name(version)),
            success_family.help,
            [*labels, "finished_reason"],
            registry=reg,
        )
        self.success = {reason: success.labels(*values, reason) for reason in FINISH_REASONS}
        token_buckets = build_1_2_5_buckets(config.max_model_len)
        self.request_prompt_tokens = extra_histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
        )
        self.request_generation_tokens = extra_histogram(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            token_buckets,
        )
        self.iteration_tokens = extra_histogram(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            [float(b) for b in ITERATION_TOKEN_BUCKETS],
        )
        self.max_num_generation_tokens = extra_histogram(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            token_buckets,
        )
        self.params_n = extra_histogram(
            "vllm:request_params_n",
            "Histogram of the n request parameter.",
            [1.0, 2.0, 5.0, 10.0, 20.0],
        )
        self.params_max_tokens = extra_histogram(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            token_buckets,
        )
        self.ttft = histogram(Signal.TTFT)
        self.itl = histogram(Signal.ITL)
        self.e2e = histogram(Signal.E2E)
        self.queue = histogram(Signal.QUEUE_TIME)
        self.inference = extra_histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            list(REQUEST_TIME_BUCKETS),
        )
        self.prefill = histogram(Signal.PREFILL_TIME)
        # Per request: (e2e - TTFT) / (output tokens - 1), the ITL to judge under speculative
        # decoding (one ITL sample per multi-token step); vLLM's ITL buckets.
        self.request_tpot = extra_histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            list(FAMILIES[Signal.ITL].buckets or ()),
        )
        self.prefill_kv_computed = extra_histogram(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            token_buckets,
        )
        self.decode = histogram(Signal.DECODE_TIME)
        self.spec: tuple[Counter, Counter, Counter] | None = None
        self.spec_per_pos: list[Counter] = []
        if config.spec is not None:
            drafts, draft_tokens, accepted = (counter(s) for s in _SPEC_SIGNALS)
            self.spec = (drafts, draft_tokens, accepted)
            per_pos = Counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                [*labels, "position"],
                registry=reg,
            )
            self.spec_per_pos = [
                per_pos.labels(*values, str(p)) for p in range(config.spec.num_speculative_tokens)
            ]
        cache_family = FAMILIES[Signal.CACHE_CONFIG]
        info_labels = cache_config_labels(config, version)
        info_labels[ENGINE_LABEL] = engine
        Gauge(
            cache_family.name(version), cache_family.help, list(info_labels), registry=reg
        ).labels(**info_labels).set(1)

    # --- recording -----------------------------------------------------------------------------

    def record(self, stats: StepStats) -> None:
        """One engine step's SchedulerStats and IterationStats, as vLLM records them."""
        totals = self._totals
        self.running.set(stats.num_running)
        self.waiting.set(stats.num_waiting)
        self.kv_usage.set(stats.kv_cache_usage)
        totals.running, totals.waiting = stats.num_running, stats.num_waiting
        totals.kv_usage = stats.kv_cache_usage
        if stats.prefix_cache_queries:
            self.prefix_queries.inc(stats.prefix_cache_queries)
            self.prefix_hits.inc(stats.prefix_cache_hits)
            totals.queries += stats.prefix_cache_queries
            totals.hits += stats.prefix_cache_hits
        ev = stats.events
        if stats.num_preempted:
            self.preemptions.inc(stats.num_preempted)
        if stats.start == stats.end:
            return  # gauges only (no step ran)
        self.prompt_tokens.inc(ev.num_prompt_tokens)
        self.generation_tokens.inc(ev.num_generation_tokens)
        totals.prompt_tokens += ev.num_prompt_tokens
        totals.generation_tokens += ev.num_generation_tokens
        self.iteration_tokens.observe(ev.num_prompt_tokens + ev.num_generation_tokens)
        for ttft in ev.ttfts:
            self.ttft.observe(ttft)
        for itl in ev.itls:
            self.itl.observe(itl)
        if self.spec is not None and ev.spec_drafts:
            drafts, draft_tokens, accepted = self.spec
            drafts.inc(ev.spec_drafts)
            draft_tokens.inc(ev.spec_draft_tokens)
            accepted.inc(ev.spec_accepted_tokens)
            for position, count in enumerate(ev.spec_accepted_per_pos):
                if count and position < len(self.spec_per_pos):
                    self.spec_per_pos[position].inc(count)
        for req in ev.finished:
            assert req.scheduled_time is not None
            assert req.first_token_time is not None
            finish = req.finish_time if req.finish_time is not None else stats.end
            self.success["length"].inc()
            self.e2e.observe(finish - req.arrival_time)
            self.queue.observe(max(0.0, req.scheduled_time - req.queued_time))
            self.prefill.observe(req.first_token_time - req.scheduled_time)
            self.inference.observe(finish - req.scheduled_time)
            self.decode.observe(finish - req.first_token_time)
            if req.num_output_tokens > 1:
                decode = finish - req.first_token_time
                self.request_tpot.observe(decode / (req.num_output_tokens - 1))
            cached = max(0, req.num_cached_tokens)
            self.prefill_kv_computed.observe(max(0, req.num_prompt_tokens - cached))
            self.request_prompt_tokens.observe(req.num_prompt_tokens)
            self.request_generation_tokens.observe(req.num_output_tokens)
            self.max_num_generation_tokens.observe(req.max_tokens)
            self.params_n.observe(1)
            self.params_max_tokens.observe(req.max_tokens)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def log_line(self, now: float | None = None) -> str | None:
        """vLLM's periodic stats line, or None when idle since the last one (vLLM goes quiet)."""
        totals = self._totals
        now = time.monotonic() if now is None else now
        elapsed = max(now - totals.last_log, 1e-9)
        prompt = totals.prompt_tokens / elapsed
        generation = totals.generation_tokens / elapsed
        hit_rate = 100.0 * totals.hits / totals.queries if totals.queries else 0.0
        idle = not (totals.prompt_tokens or totals.generation_tokens or totals.running)
        totals.prompt_tokens = totals.generation_tokens = 0
        totals.last_log = now
        if idle:
            return None
        return (
            f"Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: "
            f"{generation:.1f} tokens/s, Running: {totals.running} reqs, Waiting: "
            f"{totals.waiting} reqs, GPU KV cache usage: {100.0 * totals.kv_usage:.1f}%, Prefix "
            f"cache hit rate: {hit_rate:.1f}%"
        )
