from __future__ import annotations

import pytest
from tests.unit.simulator.engine.support import engine_config, words

from latency_tuner.perf.cost import CostModel
from latency_tuner.simulator.engine import SimRequest, VirtualEngine
from latency_tuner.simulator.tokenizer import encode


def test_a_lone_request_gets_the_cost_models_prefill_and_decode_times() -> None:
    config = engine_config()
    cost = CostModel(config)
    prompt = encode(words(1000))
    (record,) = VirtualEngine(config).run_requests([SimRequest(prompt, 5)])
    # The server's per-request work, then one prefill step.
    assert record.ttft == pytest.approx(
        cost.request_overhead(1000) + cost.step_time(decode_contexts=[], prefill_chunks=[(1000, 0)])
    )
    expected = [cost.step_time(decode_contexts=[1001 + i], prefill_chunks=[]) for i in range(4)]
    assert record.itls == pytest.approx(expected)
    assert record.queue_time == 0.0
    assert record.e2e == pytest.approx(record.ttft + sum(expected))
    assert record.decode_time == pytest.approx(sum(expected))


def test_requests_queue_behind_max_num_seqs_and_the_queue_time_is_recorded() -> None:
    config = engine_config("--max-num-seqs", "1", "--max-num-batched-tokens", "2048")
    engine = VirtualEngine(config)
    first, second = engine.run_requests(
        [SimRequest(encode(words(10)), 20), SimRequest(encode(words(10, 50)), 20)]
    )
    # Both reach the engine core after the server's work; the queue time starts there.
    server = engine.core.cost.request_overhead(10)
    assert first.queue_time == 0.0
    assert second.queue_time == pytest.approx(first.e2e - server)
    assert second.ttft == pytest.approx(server + second.queue_time + second.prefill_time)


def test_without_chunked_prefill_a_long_prompt_stalls_running_decodes() -> None:
    def worst_itl(*flags: str) -> float:
        engine = VirtualEngine(engine_config("--max-model-len", "8192", *flags))
        records = engine.run_requests(
            [
                SimRequest(encode(words(100)), 300, arrival=0.0, request_id="decoder"),
                SimRequest(encode(words(8000, 10_000)), 2, arrival=0.2, request_id="long"),
            ]
        )
        (decoder,) = [r for r in records if r.request_id == "decoder"]
        return max(decoder.itls)

    stalled = worst_itl("--no-enable-chunked-prefill")
    chunked = worst_itl("--max-num-batched-tokens", "512")
    assert stalled > 0.1  # the whole 8k prefill shares one step with the decode
    assert stalled > 3 * chunked


def test_a_shared_prefix_is_served_from_the_prefix_cache_only_when_enabled() -> None:
    system = words(256)
    prompts = [encode(f"{system} {words(20, 1000 * (i + 1))}") for i in range(2)]
    for flag, hit in (("--enable-prefix-caching", 256), ("--no-enable-prefix-caching", 0)):
        engine = VirtualEngine(engine_config(flag))
        a, b = engine.run_requests([SimRequest(prompts[0], 4, 0.0), SimRequest(prompts[1], 4, 1.0)])
        assert a.num_cached_tokens == 0
        assert b.num_cached_tokens == hit
    # and the cached prefix makes the second prefill faster
    cached = VirtualEngine(engine_config()).run_requests(
        [SimRequest(prompts[0], 4, 0.0), SimRequest(prompts[1], 4, 1.0)]
    )[1]
    uncached = VirtualEngine(engine_config("--no-enable-prefix-caching")).run_requests(
        [SimRequest(prompts[0], 4, 0.0), SimRequest(prompts[1], 4, 1.0)]
    )[1]
    assert cached.ttft < uncached.ttft


def test_a_tiny_kv_cache_preempts_and_every_request_still_completes() -> None:
    config = engine_config("--no-enable-prefix-caching", num_gpu_blocks=40)  # 39 x 16 slots
    engine = VirtualEngine(config)
    records = engine.run_requests(
        [SimRequest(encode(words(100, 1000 * i)), 200, 0.0) for i in range(6)]
    )
    assert len(records) == 6
    assert all(r.num_output_tokens == 200 for r in records)
    assert engine.core.scheduler.num_preemptions > 0
    assert sum(r.num_preemptions for r in records) == engine.core.scheduler.num_preemptions


def test_speculative_decoding_records_one_itl_per_step_and_zero_gaps_inside_a_step() -> None:
    spec = '{"method": "eagle3", "model": "x/eagle", "num_speculative_tokens": 3}'
    engine = VirtualEngine(engine_config("--speculative-config", spec), seed=3)
    (record,) = engine.run_requests([SimRequest(encode(words(50)), 300)])
    steps = len(set(record.token_times))
    assert len(record.itls) == steps - 1
    assert len(record.token_gaps) == 299
    assert record.token_gaps.count(0.0) == 300 - steps
    assert 300 / steps > 1.8  # more than one token per step at batch 1


def test_the_same_seed_gives_the_same_run() -> None:
    spec = '{"method": "eagle3", "model": "x/eagle", "num_speculative_tokens": 4}'
    config = engine_config("--speculative-config", spec)
    runs = [
        VirtualEngine(config, seed=7).run_requests([SimRequest(encode(words(30)), 200)])[0]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


def test_run_until_stops_at_the_given_virtual_time() -> None:
    engine = VirtualEngine(engine_config())
    engine.submit(encode(words(10)), 10_000)
    engine.run_until(0.5)
    assert 0.5 <= engine.clock.now() < 0.6
    assert engine.core.has_unfinished
    assert engine.records == []


def test_closed_loop_serves_every_request_and_leaves_none_running() -> None:
    # How much faster than real time it runs is measured in benchmarks/simulator/virtual_time.py
    # (a wall-clock ratio asserted here failed on a quiet CI machine at 18x against 20x).
    engine = VirtualEngine(engine_config())
    prompt = encode(words(256))
    records = engine.run_closed_loop(
        concurrency=8, num_requests=40, make_request=lambda i: ([i, *prompt], 100)
    )
    assert len(records) == 40
    assert all(r.num_output_tokens == 100 for r in records)
    # A closed loop of 8: at every arrival, 8 requests on the server, the new one among them.
    on_server = [sum(o.arrival <= r.arrival < o.finish for o in records) for r in records]
    assert on_server == [8] * 40
    assert max(engine.core.scheduler.num_running, 0) == 0
