"""Readings real vLLM needs: ITL per token under speculative decoding, KV capacity from the
current cache_config_info labels (old ones as fallbacks), and quantiles that only interpolate
inside a histogram's lowest bucket."""

from __future__ import annotations

import pytest

from latency_tuner.core.observation import Observation
from latency_tuner.core.signals import REQUEST_RATE, REQUESTS, QueryKind, SignalQuery, assemble
from latency_tuner.vllm.metrics import Signal, kv_capacity

# Labels as vLLM 0.32.0 echoed them for the tiny model on this machine (trimmed).
REAL_ECHO = {
    "block_size": "128",
    "cache_dtype": "auto",
    "enable_prefix_caching": "True",
    "gpu_memory_utilization": "0.92",
    "kv_cache_max_concurrency": "42.65625",
    "kv_cache_memory_bytes": "1073741824",
    "kv_cache_size_tokens": "174720",
    "num_cpu_blocks": "None",
    "num_gpu_blocks": "1365",
    "num_gpu_blocks_override": "None",
}


def window(
    *,
    itl: float = 0.02,
    tpot: float | None = 0.008,
    speculative: bool,
    ttft: float = 0.5,
    e2e: float = 2.0,
    echo: dict[str, str] | None = None,
) -> Observation:
    results: dict[SignalQuery, float | None] = {REQUESTS: 40.0, REQUEST_RATE: 2.0}
    for p in (50, 90, 99):
        results[SignalQuery(QueryKind.QUANTILE, Signal.TTFT, p / 100)] = ttft
        results[SignalQuery(QueryKind.QUANTILE, Signal.ITL, p / 100)] = itl
        results[SignalQuery(QueryKind.QUANTILE, Signal.E2E, p / 100)] = e2e
        if tpot is not None:
            results[SignalQuery(QueryKind.QUANTILE, Signal.TPOT, p / 100)] = tpot
    results[SignalQuery(QueryKind.MEAN, Signal.ITL)] = itl
    results[SignalQuery(QueryKind.MEAN, Signal.TPOT)] = tpot
    if speculative:
        results[SignalQuery(QueryKind.COUNTER_RATE, Signal.SPEC_DRAFT_TOKENS)] = 30.0
        results[SignalQuery(QueryKind.COUNTER_RATE, Signal.SPEC_ACCEPTED_TOKENS)] = 18.0
    got = assemble(results, window_seconds=60.0, cache_config=echo)
    assert isinstance(got, Observation)
    return got


def test_with_speculative_decoding_itl_is_judged_on_time_per_output_token() -> None:
    obs = window(itl=0.02, tpot=0.008, speculative=True)
    assert obs.itl == {50: 0.008, 90: 0.008, 99: 0.008}
    assert obs.itl_mean == 0.008
    assert obs.itl_source == "request_time_per_output_token"
    assert obs.itl_per_chunk == {50: 0.02, 90: 0.02, 99: 0.02}


def test_without_speculative_decoding_itl_is_the_gap_between_chunks() -> None:
    obs = window(itl=0.02, tpot=0.008, speculative=False)
    assert obs.itl == {50: 0.02, 90: 0.02, 99: 0.02}
    assert obs.itl_source == "inter_token_latency"
    assert obs.itl_per_chunk == {}
    assert obs.tpot[50] == 0.008


def test_a_server_without_the_per_token_histogram_keeps_chunk_itl_even_when_speculating() -> None:
    obs = window(itl=0.02, tpot=None, speculative=True)
    assert obs.itl[50] == 0.02
    assert obs.itl_source == "inter_token_latency"


def test_kv_capacity_comes_from_the_current_labels() -> None:
    capacity = kv_capacity(REAL_ECHO)
    assert capacity is not None
    assert (capacity.tokens, capacity.source) == (174720, "kv_cache_size_tokens")
    assert capacity.max_concurrency == pytest.approx(42.65625)
    assert capacity.memory_bytes == 1 << 30
    obs = window(speculative=False, echo=REAL_ECHO)
    assert (obs.kv_capacity_tokens, obs.kv_max_concurrency) == (174720, 42.65625)


def test_an_older_server_gives_kv_capacity_as_blocks_times_block_size() -> None:
    old = {"block_size": "16", "num_gpu_blocks": "2000", "enable_prefix_caching": "False"}
    capacity = kv_capacity(old)
    assert capacity is not None
    assert (capacity.tokens, capacity.source) == (32000, "num_gpu_blocks x block_size")
    assert capacity.max_concurrency is None


@pytest.mark.parametrize(
    "labels", [{}, {"block_size": "16"}, {"num_gpu_blocks": "None", "block_size": "16"}]
)
def test_labels_without_any_capacity_say_nothing(labels: dict[str, str]) -> None:
    assert kv_capacity(labels) is None


def test_quantiles_inside_the_lowest_bucket_are_flagged_with_its_bound() -> None:
    # request-phase histograms start at 0.3 s, TTFT at 1 ms, ITL/TPOT at 10 ms
    obs = window(speculative=False, ttft=0.0005, itl=0.02, e2e=0.25)
    assert obs.lowest_bucket_quantiles == {
        "ttft_p50": 0.001, "ttft_p90": 0.001, "ttft_p99": 0.001,
        "e2e_p50": 0.3, "e2e_p90": 0.3, "e2e_p99": 0.3,
    }  # fmt: skip
    note = obs.coarse_quantile_note()
    assert note is not None
    assert "e2e p50 under 300ms" in note
    assert "interpolated, not measured" in note


def test_the_judged_itl_is_flagged_against_its_own_buckets() -> None:
    obs = window(speculative=True, itl=0.02, tpot=0.005)
    assert obs.lowest_bucket_quantiles == {"itl_p50": 0.01, "itl_p90": 0.01, "itl_p99": 0.01}


def test_quantiles_above_the_lowest_bucket_raise_no_flag() -> None:
    obs = window(speculative=False)
    assert obs.lowest_bucket_quantiles == {}
    assert obs.coarse_quantile_note() is None
