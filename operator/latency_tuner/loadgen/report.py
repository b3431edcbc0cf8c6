"""Render results for a terminal: the final text report and the live progress line. No I/O
beyond the stream it is handed."""

from __future__ import annotations

import time
from typing import TextIO

from latency_tuner.loadgen.results import BenchResult, Progress
from latency_tuner.loadgen.stats import Summary


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}ms"


def render_text(result: BenchResult) -> str:
    config = result.config
    mode = f"open loop {config.rate:g} req/s" if config.rate else "closed loop"
    lines = [
        f"model {result.model}  {'chat' if config.chat else 'completions'}  {mode}  "
        f"concurrency {config.concurrency}  prompt {config.prompt_tokens} tok "
        f"(shared {config.shared_prefix_tokens})  output {config.output_tokens} tok",
        f"duration {result.duration_s:.2f}s  completed {result.completed}  "
        f"failed {result.failed}  cancelled {result.cancelled}",
        f"throughput {result.request_throughput:.2f} req/s  "
        f"{result.output_throughput:.1f} output tok/s",
        "",
        f"{'':6}{'mean':>10}{'p50':>10}{'p90':>10}{'p95':>10}{'p99':>10}{'n':>9}",
    ]
    rows: list[tuple[str, Summary | None]] = [
        ("TTFT", result.ttft),
        ("ITL", result.itl),
        ("TPOT", result.tpot),
        ("E2E", result.e2e),
    ]
    for name, summary in rows:
        if summary is None:
            lines.append(f"{name:6}{'-':>10}")
            continue
        cells = (summary.mean, summary.p50, summary.p90, summary.p95, summary.p99)
        lines.append(
            f"{name:6}" + "".join(f"{v * 1000:>8.2f}ms" for v in cells) + f"{summary.count:>9}"
        )
    if result.short_completions:
        lines.append(
            f"\nwarning: {result.short_completions} completions were shorter than "
            f"{config.output_tokens} tokens (server ignores ignore_eos?)"
        )
    if config.rate and result.max_dispatch_lag_s > 0.05:
        lines.append(
            f"\nnote: sends fell up to {result.max_dispatch_lag_s:.2f}s behind the arrival "
            f"schedule (concurrency {config.concurrency} was the limit)"
        )
    if result.process_cpu_share > 0.8:
        lines.append(
            f"\nwarning: this process used {100 * result.process_cpu_share:.0f}% of a core: the "
            "client was near saturation, its own queueing is inside these latencies "
            "(lower --concurrency or run several clients)"
        )
    if result.errors:
        lines.append("\nfirst errors:")
        lines += [f"  [{e.status or '-'}] {e.message}" for e in result.errors]
    return "\n".join(lines)


class ProgressLine:
    """A single self-overwriting status line (``\\r``), at most ``hz`` updates a second."""

    def __init__(self, stream: TextIO, hz: float = 4.0) -> None:
        self.stream = stream
        self.min_gap = 1.0 / hz
        self.last = 0.0
        self.width = 0

    def __call__(self, progress: Progress) -> None:
        now = time.monotonic()
        if now - self.last < self.min_gap:
            return
        self.last = now
        line = (
            f"[bench] {progress.elapsed_s:6.1f}s  done {progress.completed}  "
            f"failed {progress.failed}  in flight {progress.in_flight}  "
            f"TTFT {_ms(progress.mean_ttft_s)}  ITL {_ms(progress.mean_itl_s)}  "
            f"{progress.output_tokens_per_s:.0f} tok/s"
        )
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def clear(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
