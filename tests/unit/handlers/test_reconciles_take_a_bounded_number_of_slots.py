"""A backlog of reconciles waits for a slot holding nothing; targets stuck on a slow input of
their tenant's (a Prometheus they name, their own scraped pods) fill only their tenant's slots,
never another namespace's nor the operator's own Prometheus's."""

from __future__ import annotations

import asyncio

import pytest

from latency_tuner.handlers.slots import ReconcileSlots, slot_key


async def test_no_more_reconciles_than_slots_run_at_once_and_all_of_them_run() -> None:
    slots = ReconcileSlots(size=3)
    running, most, done = 0, 0, []

    async def reconcile(i: int) -> None:
        nonlocal running, most
        async with slots.slot(slot_key("ml", f"lt-{i}", {}, scraped=False)):
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)
            running -= 1
            done.append(i)

    await asyncio.gather(*(reconcile(i) for i in range(20)))
    assert most == 3
    assert sorted(done) == list(range(20))


async def _stuck_then(slots: ReconcileSlots, stuck: list[str], healthy: str) -> str:
    """Hold every slot of the ``stuck`` keys (twice their size), then reconcile ``healthy``."""
    hang = asyncio.Event()

    async def hold(key: str) -> None:
        async with slots.slot(key):
            await hang.wait()

    holders = [asyncio.create_task(hold(k)) for k in stuck for _ in range(2 * slots.size)]
    await asyncio.sleep(0)

    async def reconcile() -> str:
        async with slots.slot(healthy):
            return "reconciled"

    try:
        return await asyncio.wait_for(reconcile(), timeout=1)
    finally:
        hang.set()
        await asyncio.gather(*holders)


async def test_targets_stuck_on_a_prometheus_they_name_do_not_take_the_operators_slots() -> None:
    tenant = {"metrics": {"prometheusUrl": "http://tenant-prometheus:9090"}}
    stuck = slot_key("ml", "hostile", tenant, scraped=False)
    healthy = slot_key("ml", "healthy", {}, scraped=False)
    assert await _stuck_then(ReconcileSlots(size=2), [stuck], healthy) == "reconciled"


async def test_a_namespace_stuck_on_the_operators_prometheus_does_not_hold_another_namespace() -> (
    None
):
    stuck = slot_key("team-a", "lt", {}, scraped=False)
    healthy = slot_key("team-b", "lt", {}, scraped=False)
    assert await _stuck_then(ReconcileSlots(size=2), [stuck], healthy) == "reconciled"


async def test_scraped_targets_whose_pods_hang_hold_no_other_targets_slot() -> None:
    stuck = [slot_key("ml", f"hostile-{i}", {}, scraped=True) for i in range(3)]
    healthy = slot_key("ml", "healthy", {}, scraped=True)
    assert await _stuck_then(ReconcileSlots(size=2), stuck, healthy) == "reconciled"


async def test_targets_of_one_namespace_and_origin_share_its_slots() -> None:
    stuck = slot_key("ml", "hostile", {}, scraped=False)
    same = slot_key("ml", "other", {}, scraped=False)
    with pytest.raises(TimeoutError):
        await _stuck_then(ReconcileSlots(size=2), [stuck], same)


async def test_a_reconcile_that_fails_gives_its_slot_back() -> None:
    slots = ReconcileSlots(size=1)
    with pytest.raises(RuntimeError):
        async with slots.slot(""):
            raise RuntimeError("boom")
    async with asyncio.timeout(1), slots.slot(""):
        pass


def test_the_key_ignores_what_a_spec_holds_where_a_url_belongs() -> None:
    assert slot_key("ml", "lt", {"metrics": "not a mapping"}, scraped=False) == slot_key(
        "ml", "lt", {}, scraped=False
    )
    assert slot_key("ml", "lt", {"metrics": {"prometheusUrl": ["a"]}}, scraped=False) == (
        slot_key("ml", "lt", {}, scraped=False)
    )


def test_a_slot_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ReconcileSlots(size=0)
