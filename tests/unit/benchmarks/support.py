"""Scenarios the benchmark's unit tests share: short chats on one H100, tuned by max-num-seqs."""

from __future__ import annotations

from typing import Any

from latency_tuner.scenario import latency_target, vllm_deployment


def short_chats(name: str, *, rate: float, max_seqs: int) -> dict[str, Any]:
    """Poisson short chats at ``rate`` req/s against max-num-seqs 8, which may rise to
    ``max_seqs``; TTFT p90 under 100ms is the target."""
    return {
        "name": name,
        "hardware": {"gpu": "H100-SXM", "gpus": 1},
        "workload": {
            "arrival": "poisson",
            "rate": rate,
            "promptTokens": 200,
            "outputTokens": 40,
            "spread": 0.25,
        },
        "deployment": vllm_deployment(
            "llama", "meta-llama/Llama-3.1-8B-Instruct", ["--max-num-seqs", "8"]
        ),
        "latencyTarget": latency_target(
            "llama",
            {"ttft": {"percentile": 90, "threshold": "100ms"}},
            knobs={
                "maxNumSeqs": {"min": 8, "max": max_seqs},
                "maxNumBatchedTokens": None,
                "gpuMemoryUtilization": None,
            },
            evaluation={"window": "10s", "settle": "5s", "minRequests": 50},
        ),
    }


# 24 req/s of short chats queue behind max-num-seqs 8 on an H100; 16 slots are enough.
EASY = short_chats("easy", rate=24, max_seqs=32)
