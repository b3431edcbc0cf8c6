"""A backlog of reconciles waits for a slot holding nothing; a target whose Prometheus of its
own hangs fills only that origin's slots, never the operator's own."""

from __future__ import annotations

import asyncio

import pytest

from latency_tuner.handlers.slots import ReconcileSlots, origin_of


async def test_no_more_reconciles_than_slots_run_at_once_and_all_of_them_run() -> None:
    slots = ReconcileSlots(size=3)
    running, most, done = 0, 0, []

    async def reconcile(i: int) -> None:
        nonlocal running, most
        async with slots.slot(""):
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)
            running -= 1
            done.append(i)

    await asyncio.gather(*(reconcile(i) for i in range(20)))
    assert most == 3
    assert sorted(done) == list(range(20))


async def test_targets_stuck_on_their_own_prometheus_do_not_take_the_operators_slots() -> None:
    slots = ReconcileSlots(size=2)
    hang = asyncio.Event()

    async def stuck() -> None:
        async with slots.slot("http://tenant-prometheus:9090"):
            await hang.wait()

    hostile = [asyncio.create_task(stuck()) for _ in range(5)]
    await asyncio.sleep(0)

    async def healthy() -> str:
        async with slots.slot(""):
            return "reconciled"

    assert await asyncio.wait_for(healthy(), timeout=1) == "reconciled"
    hang.set()
    await asyncio.gather(*hostile)


async def test_a_reconcile_that_fails_gives_its_slot_back() -> None:
    slots = ReconcileSlots(size=1)
    with pytest.raises(RuntimeError):
        async with slots.slot(""):
            raise RuntimeError("boom")
    async with asyncio.timeout(1), slots.slot(""):
        pass


def test_the_origin_is_the_specs_own_prometheus_url_or_the_operators() -> None:
    assert origin_of({"metrics": {"prometheusUrl": "http://p:9090"}}) == "http://p:9090"
    assert origin_of({"metrics": {}}) == ""
    assert origin_of({}) == ""
    assert origin_of({"metrics": "not a mapping"}) == ""
    assert origin_of({"metrics": {"prometheusUrl": ["a", "list"]}}) == ""


def test_a_slot_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ReconcileSlots(size=0)
