from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.unit.simulator.engine.support import MODEL, engine_config, words

from latency_tuner.simulator.engine import SimRequest, VirtualEngine
from latency_tuner.simulator.metrics import EngineMetrics
from latency_tuner.simulator.tokenizer import encode
from latency_tuner.vllm.metrics import FAMILIES, MetricsVersion, MetricType, Signal

SPEC = '{"method": "eagle3", "model": "x/eagle", "num_speculative_tokens": 2}'


def scrape(version: MetricsVersion, *flags: str) -> dict[str, object]:
    config = engine_config(*flags)
    metrics = EngineMetrics(config, version=version)
    engine = VirtualEngine(config, sink=metrics)
    system = words(64)
    engine.run_requests(
        [SimRequest(encode(f"{system} {words(30, 100 * i)}"), 20, 0.1 * i) for i in range(4)]
    )
    text = metrics.exposition().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.mark.parametrize("version", list(MetricsVersion))
def test_every_vllm_family_is_exposed_with_its_type_labels_and_buckets(
    version: MetricsVersion,
) -> None:
    families = scrape(version, "--speculative-config", SPEC)
    for signal, fam in FAMILIES.items():
        name = fam.name(version)
        base = name.removesuffix("_total") if fam.type is MetricType.COUNTER else name
        assert base in families, name
        parsed = families[base]
        assert parsed.type == fam.type.value  # type: ignore[attr-defined]
        samples = parsed.samples  # type: ignore[attr-defined]
        assert samples, name
        if signal is Signal.CACHE_CONFIG:
            continue
        for sample in samples:
            assert sample.labels["model_name"] == MODEL
            assert sample.labels["engine"] == "0"
        if fam.buckets is not None:
            bounds = [float(s.labels["le"]) for s in samples if s.name.endswith("_bucket")]
            assert bounds[:-1] == list(fam.buckets)
            assert bounds[-1] == float("inf")


def test_legacy_and_current_names_are_never_mixed() -> None:
    current = scrape(MetricsVersion.CURRENT)
    legacy = scrape(MetricsVersion.LEGACY)
    assert "vllm:inter_token_latency_seconds" in current
    assert "vllm:time_per_output_token_seconds" not in current
    assert "vllm:time_per_output_token_seconds" in legacy
    assert "vllm:gpu_cache_usage_perc" in legacy
    assert "vllm:kv_cache_usage_perc" not in legacy
    assert "vllm:gpu_prefix_cache_hits" in legacy


def test_counters_carry_the_total_suffix_and_count_what_happened() -> None:
    families = scrape(MetricsVersion.CURRENT)

    def value(name: str, suffix: str = "_total", **labels: str) -> float:
        fam = families[name]
        return sum(
            s.value
            for s in fam.samples  # type: ignore[attr-defined]
            if s.name == name + suffix and all(s.labels.get(k) == v for k, v in labels.items())
        )

    assert value("vllm:generation_tokens") == 80
    assert value("vllm:prompt_tokens") == 4 * 94
    assert value("vllm:request_success", finished_reason="length") == 4
    assert value("vllm:request_success", finished_reason="stop") == 0
    assert value("vllm:prefix_cache_hits") == 3 * 64  # the shared 64-word system prompt
    assert value("vllm:prefix_cache_queries") == 4 * 94
    assert value("vllm:time_to_first_token_seconds", "_count") == 4
    assert value("vllm:inter_token_latency_seconds", "_count") == 4 * 19
    assert value("vllm:iteration_tokens_total", "_count") > 0
    assert value("vllm:request_prompt_tokens", "_count") == 4


def test_cache_config_info_echoes_the_cache_config_as_strings() -> None:
    families = scrape(
        MetricsVersion.CURRENT, "--no-enable-prefix-caching", "--kv-cache-dtype", "fp8"
    )
    (sample,) = families["vllm:cache_config_info"].samples  # type: ignore[attr-defined]
    assert sample.value == 1
    assert sample.labels["enable_prefix_caching"] == "False"
    assert sample.labels["cache_dtype"] == "fp8"
    assert sample.labels["block_size"] == "16"
    assert sample.labels["engine"] == "0"
    assert int(sample.labels["num_gpu_blocks"]) > 0
    assert float(sample.labels["gpu_memory_utilization"]) == pytest.approx(0.92)


def test_spec_decoding_counters_exist_only_with_a_speculative_config() -> None:
    assert "vllm:spec_decode_num_drafts" not in scrape(MetricsVersion.CURRENT)
    families = scrape(MetricsVersion.CURRENT, "--speculative-config", SPEC)
    drafts = families["vllm:spec_decode_num_draft_tokens"].samples  # type: ignore[attr-defined]
    accepted = families["vllm:spec_decode_num_accepted_tokens"].samples  # type: ignore[attr-defined]
    total_drafts = sum(s.value for s in drafts if s.name.endswith("_total"))
    total_accepted = sum(s.value for s in accepted if s.name.endswith("_total"))
    assert 0 < total_accepted < total_drafts


def test_gauges_follow_the_engine_state() -> None:
    config = engine_config()
    metrics = EngineMetrics(config)
    engine = VirtualEngine(config, sink=metrics)
    engine.submit(encode(words(100)), 1000)
    engine.submit(encode(words(100, 500)), 1000)
    engine.run_until(0.2)
    families = {f.name: f for f in text_string_to_metric_families(metrics.exposition().decode())}
    assert families["vllm:num_requests_running"].samples[0].value == 2
    assert families["vllm:num_requests_waiting"].samples[0].value == 0
    assert 0 < families["vllm:kv_cache_usage_perc"].samples[0].value < 0.01


def test_per_request_tpot_and_prefill_kv_computed_tokens_are_recorded_once_per_request() -> None:
    families = scrape(MetricsVersion.CURRENT)

    def samples(name: str, suffix: str) -> float:
        fam = families[name]
        return sum(s.value for s in fam.samples if s.name == name + suffix)  # type: ignore[attr-defined]

    assert samples("vllm:request_time_per_output_token_seconds", "_count") == 4
    assert samples("vllm:request_prefill_kv_computed_tokens", "_count") == 4
    # 4 prompts of 94 tokens; the shared 64-token prefix was cached for the last three.
    assert samples("vllm:request_prefill_kv_computed_tokens", "_sum") == 4 * 94 - 3 * 64
    assert samples("vllm:num_preemptions", "_total") == 0


def test_per_request_tpot_counts_each_token_under_speculative_decoding() -> None:
    families = scrape(MetricsVersion.CURRENT, "--speculative-config", SPEC)

    def total(name: str, suffix: str) -> float:
        fam = families[name]
        return sum(s.value for s in fam.samples if s.name == name + suffix)  # type: ignore[attr-defined]

    # Per request: the mean gap per output token; ITL: one sample per step that emitted tokens.
    tpot = total("vllm:request_time_per_output_token_seconds", "_sum") / 4
    itl = total("vllm:inter_token_latency_seconds", "_sum") / total(
        "vllm:inter_token_latency_seconds", "_count"
    )
    assert tpot < itl


def test_current_cache_config_info_carries_the_kv_capacity_and_legacy_does_not() -> None:
    (current,) = scrape(MetricsVersion.CURRENT)["vllm:cache_config_info"].samples  # type: ignore[attr-defined]
    config = engine_config()
    tokens = config.num_gpu_blocks * config.block_size
    assert int(current.labels["kv_cache_size_tokens"]) == tokens
    assert float(current.labels["kv_cache_max_concurrency"]) == pytest.approx(
        tokens / config.max_model_len
    )
    assert "swap_space" not in current.labels
    (legacy,) = scrape(MetricsVersion.LEGACY)["vllm:cache_config_info"].samples  # type: ignore[attr-defined]
    assert "kv_cache_size_tokens" not in legacy.labels
    assert legacy.labels["num_gpu_blocks"] == current.labels["num_gpu_blocks"]
