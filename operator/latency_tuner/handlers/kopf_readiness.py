"""kopf's start-up gate for indexed resources, made linear in the number of watched objects.

kopf holds every object's handlers until all indexes are filled: each object of an indexed
kind adds a toggle to one ``ToggleSet`` when it is listed and drops it once indexed, and its
worker then waits until the set is on. ``make_toggle`` and ``drop_toggle`` wake every waiter
each time, whether or not the set's state changed, so a start with N indexed objects costs
O(N^2) wake-ups: measured with kopf 1.45.2's own ToggleSet, 0.7 / 3.3 / 13.7 s of CPU for
500 / 1,000 / 2,000 objects, and an operator shard watching 10,000 Deployments had not left
that gate after 6 CPU-minutes (benchmarks/scale/README.md). Waiters wait only for the set's
state (``ToggleSet.wait_for``) or a toggle's own (``Toggle.wait_for``), and adding or dropping a
toggle changes neither unless the set's state flips, so waking them only then is the same
behaviour, linear. Installed once, before kopf starts; a kopf whose ToggleSet differs from the
one this was written against is left alone (with a log line) rather than patched blindly.
Never changes anything else of kopf.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("latency_tuner.kopf")

_PATCHED = "_latency_tuner_wakes_on_change"


def install() -> bool:
    """Make kopf's ToggleSet wake its waiters only when its state changes; True if it does."""
    from kopf._cogs.aiokits import aiotoggles

    toggle_set: Any = aiotoggles.ToggleSet
    if getattr(toggle_set, _PATCHED, False):
        return True
    probe = toggle_set(all)
    if not all(hasattr(probe, a) for a in ("_condition", "_toggles", "is_on")) or not isinstance(
        probe._toggles, set
    ):
        log.warning("kopf's ToggleSet is not the one expected: its start-up gate stays O(N^2)")
        return False

    async def make_toggle(
        self: Any, __val: bool = False, *, name: str | None = None
    ) -> aiotoggles.Toggle:
        toggle = aiotoggles.Toggle(__val, name=name, condition=self._condition)
        async with self._condition:
            before = self.is_on()
            self._toggles.add(toggle)
            if self.is_on() != before:
                self._condition.notify_all()
        return toggle

    async def drop_toggle(self: Any, toggle: aiotoggles.Toggle) -> None:
        async with self._condition:
            before = self.is_on()
            self._toggles.discard(toggle)
            if self.is_on() != before:
                self._condition.notify_all()

    async def drop_toggles(self: Any, toggles: Any) -> None:
        async with self._condition:
            before = self.is_on()
            self._toggles.difference_update(toggles)
            if self.is_on() != before:
                self._condition.notify_all()

    toggle_set.make_toggle = make_toggle
    toggle_set.drop_toggle = drop_toggle
    toggle_set.drop_toggles = drop_toggles
    setattr(toggle_set, _PATCHED, True)
    return True
