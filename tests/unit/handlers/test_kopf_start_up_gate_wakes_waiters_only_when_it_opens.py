"""kopf's start-up gate (a ToggleSet every indexed object adds to and drops from, which every
worker waits on) wakes its waiters only when the set's state changes: the same behaviour, with
wake-ups that no longer grow with the square of the objects watched."""

from __future__ import annotations

import asyncio

from kopf._cogs.aiokits.aiotoggles import ToggleSet

from latency_tuner.handlers import kopf_readiness


async def _start_up(objects: int) -> tuple[int, list[int]]:
    """kopf's pattern: a blocker, then per object a toggle made, dropped once indexed, and a
    wait for the whole set. Returns (notify_all calls, objects whose wait ended)."""
    gate = ToggleSet(all)
    blocker = await gate.make_toggle(name="orchestration blocker")
    wakeups = 0
    notify_all = gate._condition.notify_all

    def counted() -> None:
        nonlocal wakeups
        wakeups += 1
        notify_all()

    gate._condition.notify_all = counted  # type: ignore[method-assign]
    through: list[int] = []

    async def worker(i: int) -> None:
        toggle = await gate.make_toggle(name=str(i))
        await asyncio.sleep(0)
        await gate.drop_toggle(toggle)
        await gate.wait_for(True)
        through.append(i)

    workers = [asyncio.create_task(worker(i)) for i in range(objects)]
    await asyncio.sleep(0.01)
    assert through == []  # held while the blocker is there
    await gate.drop_toggle(blocker)
    await asyncio.wait_for(asyncio.gather(*workers), timeout=10)
    return wakeups, sorted(through)


async def test_the_gate_is_patched_on_this_kopf() -> None:
    assert kopf_readiness.install()
    assert kopf_readiness.install()  # twice is once


async def test_every_object_passes_the_gate_once_it_opens_and_not_before() -> None:
    kopf_readiness.install()
    wakeups, through = await _start_up(300)
    assert through == list(range(300))
    assert wakeups <= 2  # the gate opened once; nothing else changed its state


async def test_a_toggle_turned_on_still_wakes_its_own_waiters() -> None:
    kopf_readiness.install()
    gate = ToggleSet(any)
    toggle = await gate.make_toggle(name="peering")
    waiter = asyncio.create_task(gate.wait_for(True))
    await asyncio.sleep(0)
    assert not waiter.done()
    await toggle.turn_to(True)
    await asyncio.wait_for(waiter, timeout=1)
    await gate.drop_toggle(toggle)
    assert gate.is_off()
