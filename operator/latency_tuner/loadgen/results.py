"""What a benchmark measured: per-request records, their running aggregate, the final result.

Method (kept identical to vLLM's ``benchmark_serving.py`` so numbers compare):

* TTFT = arrival of the first chunk carrying non-empty generated text - request sent.
* ITL samples = gaps between successive *content chunks*, pooled over all requests. A server
  may pack several tokens into one chunk (speculative decoding, stream batching); like vLLM we
  then record one gap for that chunk rather than splitting it per token, so ITL describes what
  a streaming user sees. TPOT = (e2e - TTFT) / (completion_tokens - 1) per request uses the
  token count from ``usage`` and is the per-token figure when chunks carry several tokens.
* Chunks that arrive in one network read share one timestamp (they did arrive together).
* e2e = ``data: [DONE]`` (or end of stream) - request sent.
* Throughputs are over the measurement duration: first request sent -> last one finished.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import asdict, dataclass, field
from typing import Any

from latency_tuner.loadgen.config import BenchConfig
from latency_tuner.loadgen.stats import Summary, summarize

NS = 1_000_000_000
MAX_ERROR_SAMPLES = 5


@dataclass(frozen=True)
class ErrorSample:
    """One failure as the user should see it: HTTP status (None if none arrived) and text."""

    status: int | None
    message: str


@dataclass(frozen=True)
class RequestRecord:
    """Timestamps (``time.perf_counter_ns``) and outcome of one request."""

    index: int
    start_ns: int
    end_ns: int
    chunk_ns: tuple[int, ...]  # arrival of every content chunk; [0] is the first token
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # from usage; None when the server sent none
    status: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ttft_s(self) -> float | None:
        return (self.chunk_ns[0] - self.start_ns) / NS if self.chunk_ns else None

    @property
    def e2e_s(self) -> float:
        return (self.end_ns - self.start_ns) / NS

    @property
    def itls_s(self) -> list[float]:
        chunks = self.chunk_ns
        return [(chunks[i] - chunks[i - 1]) / NS for i in range(1, len(chunks))]

    @property
    def output_tokens(self) -> int:
        """Tokens generated: usage when present, else one per content chunk (a lower bound)."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return len(self.chunk_ns)

    @property
    def tpot_s(self) -> float | None:
        ttft, tokens = self.ttft_s, self.output_tokens
        if ttft is None or tokens < 2:
            return None
        return (self.e2e_s - ttft) / (tokens - 1)


@dataclass(frozen=True)
class Progress:
    """A cheap snapshot while running (means only: percentiles would need a sort)."""

    elapsed_s: float
    completed: int
    failed: int
    in_flight: int
    output_tokens: int
    mean_ttft_s: float | None
    mean_itl_s: float | None

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass(frozen=True)
class BenchResult:
    """The outcome of a run. Latencies are in seconds (JSON: milliseconds)."""

    config: BenchConfig
    model: str
    duration_s: float
    completed: int
    failed: int
    cancelled: int
    prompt_tokens: int
    output_tokens: int
    short_completions: int  # completed with fewer tokens than asked (server ignored ignore_eos)
    ttft: Summary | None
    itl: Summary | None
    tpot: Summary | None
    e2e: Summary | None
    errors: tuple[ErrorSample, ...]
    max_dispatch_lag_s: float  # open loop: worst delay of a send behind its Poisson arrival
    #: CPU time of this whole process during the run. Near duration_s, the client itself was
    #: the bottleneck and its queueing is inside the latencies (meaningful when the process
    #: runs nothing but the benchmark).
    process_cpu_s: float = 0.0

    @property
    def request_throughput(self) -> float:
        return self.completed / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def output_throughput(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def process_cpu_share(self) -> float:
        """Process CPU time over wall time: ~1.0 means one core saturated by the client."""
        return self.process_cpu_s / self.duration_s if self.duration_s > 0 else 0.0

    def to_json_dict(self) -> dict[str, Any]:
        config = asdict(self.config)
        config.pop("api_key", None)  # never echo a credential

        def ms(summary: Summary | None) -> dict[str, float | int] | None:
            return summary.scaled(1000.0).as_dict() if summary else None

        return {
            "model": self.model,
            "config": config,
            "duration_s": self.duration_s,
            "completed": self.completed,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "request_throughput_rps": self.request_throughput,
            "output_throughput_tps": self.output_throughput,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "short_completions": self.short_completions,
            "ttft_ms": ms(self.ttft),
            "itl_ms": ms(self.itl),
            "tpot_ms": ms(self.tpot),
            "e2e_ms": ms(self.e2e),
            "max_dispatch_lag_ms": self.max_dispatch_lag_s * 1000.0,
            "process_cpu_share": self.process_cpu_share,
            "errors": [asdict(error) for error in self.errors],
        }


@dataclass
class Aggregate:
    """Running totals of finished requests. Samples live in compact arrays, not records, so
    a background load running for many minutes keeps memory small (8 bytes per sample)."""

    output_tokens_wanted: int
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    short_completions: int = 0
    ttft: array[float] = field(default_factory=lambda: array("d"))
    itl: array[float] = field(default_factory=lambda: array("d"))
    tpot: array[float] = field(default_factory=lambda: array("d"))
    e2e: array[float] = field(default_factory=lambda: array("d"))
    errors: list[ErrorSample] = field(default_factory=list)
    _ttft_sum: float = 0.0
    _itl_sum: float = 0.0

    def add(self, record: RequestRecord) -> None:
        if not record.ok:
            self.add_failure(record.status, record.error or "unknown error")
            return
        self.completed += 1
        self.prompt_tokens += record.prompt_tokens or 0
        self.output_tokens += record.output_tokens
        if record.output_tokens < self.output_tokens_wanted:
            self.short_completions += 1
        ttft = record.ttft_s
        if ttft is not None:
            self.ttft.append(ttft)
            self._ttft_sum += ttft
        itls = record.itls_s
        self.itl.extend(itls)
        self._itl_sum += math.fsum(itls)
        tpot = record.tpot_s
        if tpot is not None:
            self.tpot.append(tpot)
        self.e2e.append(record.e2e_s)

    def add_failure(self, status: int | None, message: str) -> None:
        self.failed += 1
        if len(self.errors) < MAX_ERROR_SAMPLES:
            self.errors.append(ErrorSample(status=status, message=message))

    def mean_ttft(self) -> float | None:
        return self._ttft_sum / len(self.ttft) if self.ttft else None

    def mean_itl(self) -> float | None:
        return self._itl_sum / len(self.itl) if self.itl else None

    def result(
        self,
        *,
        config: BenchConfig,
        model: str,
        duration_s: float,
        max_dispatch_lag_s: float,
        process_cpu_s: float,
    ) -> BenchResult:
        return BenchResult(
            config=config,
            model=model,
            duration_s=duration_s,
            completed=self.completed,
            failed=self.failed,
            cancelled=self.cancelled,
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            short_completions=self.short_completions,
            ttft=summarize(self.ttft),
            itl=summarize(self.itl),
            tpot=summarize(self.tpot),
            e2e=summarize(self.e2e),
            errors=tuple(self.errors),
            max_dispatch_lag_s=max_dispatch_lag_s,
            process_cpu_s=process_cpu_s,
        )
