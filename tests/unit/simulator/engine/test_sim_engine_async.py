"""The asyncio driver with an injected virtual clock: same engine, no real waiting."""

from __future__ import annotations

import asyncio

import pytest
from tests.unit.simulator.engine.support import engine_config, words

from latency_tuner.perf.cost import CostModel
from latency_tuner.simulator.clock import VirtualClock
from latency_tuner.simulator.engine import AsyncEngine, EngineCore, RequestOutput
from latency_tuner.simulator.tokenizer import encode


async def collect(queue: asyncio.Queue[RequestOutput]) -> list[RequestOutput]:
    outputs = [await queue.get()]
    while not outputs[-1].finished:
        outputs.append(await queue.get())
    return outputs


async def test_outputs_arrive_at_the_modeled_step_end_times() -> None:
    config = engine_config()
    cost = CostModel(config)
    clock = VirtualClock(start=100.0)
    engine = AsyncEngine(EngineCore(config), clock)
    engine.start()
    try:
        outputs = await asyncio.wait_for(collect(engine.add_request("r", encode(words(64)), 4)), 5)
    finally:
        await engine.stop()
    times = [o.time for o in outputs]
    steps = [cost.step_time(decode_contexts=[], prefill_chunks=[(64, 0)])]
    steps += [cost.step_time(decode_contexts=[65 + i], prefill_chunks=[]) for i in range(3)]
    expected = [100.0 + sum(steps[: i + 1]) for i in range(4)]
    assert times == pytest.approx(expected)
    assert [o.count for o in outputs] == [1, 1, 1, 1]
    assert [o.finish_reason for o in outputs] == [None, None, None, "length"]


async def test_an_aborted_request_stops_and_frees_the_engine() -> None:
    config = engine_config()
    core = EngineCore(config)
    engine = AsyncEngine(core, VirtualClock())
    engine.start()
    try:
        queue = engine.add_request("r", encode(words(16)), 100_000)
        await queue.get()
        engine.abort("r")
        await asyncio.sleep(0)
        assert not core.has_unfinished
        assert core.scheduler.kv.usage == 0.0
        # the engine keeps serving afterwards
        again = await asyncio.wait_for(collect(engine.add_request("s", encode(words(8)), 2)), 5)
        assert again[-1].finished
    finally:
        await engine.stop()
