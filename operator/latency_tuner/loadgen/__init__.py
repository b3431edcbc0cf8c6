"""Streaming benchmark client for OpenAI-compatible LLM servers (vLLM and its simulator).

Sends synthetic prompts of a fixed length (optionally with a shared prefix) over streaming
``/v1/completions`` or ``/v1/chat/completions``, closed-loop or Poisson open-loop, and measures
TTFT, inter-token latency, TPOT and end-to-end latency with ``time.perf_counter_ns``. Usable
as a library (``run_benchmark``; runs until a ``stop`` event for background load) and as
``latency-tuner bench``.

It must never import anything of the operator (``latency_tuner.api``, ``core``, ``adapters``,
``handlers``) nor the simulator: it only knows the wire protocol, so it measures any server.
"""

from latency_tuner.loadgen.config import BenchConfig
from latency_tuner.loadgen.results import BenchResult, ErrorSample, Progress, RequestRecord
from latency_tuner.loadgen.runner import BenchError, run_benchmark, stream_request
from latency_tuner.loadgen.stats import Summary, percentile, summarize

__all__ = [
    "BenchConfig",
    "BenchError",
    "BenchResult",
    "ErrorSample",
    "Progress",
    "RequestRecord",
    "Summary",
    "percentile",
    "run_benchmark",
    "stream_request",
    "summarize",
]
