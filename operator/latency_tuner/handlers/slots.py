"""How many reconciles may be under way at once: a bounded number per metrics origin.

Every target's timer fires on its own; when the API server or Prometheus is slower than the
fleet's interval, reconciles pile up in the I/O pools, each holding its LatencyTarget, models
and facts while it waits (measured: the operator's memory grew with that backlog, not only with
the number of targets). A reconcile takes a slot before reading anything and gives it back when
done, so the backlog waits holding nothing. Slots are counted per metrics origin (the
operator's own Prometheus, or each URL a LatencyTarget names): targets waiting on a slow or
hostile Prometheus of their own fill only their own origin's slots, never the others'. Never
decides anything about a target.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any

# Above the API pools' threads together (latencytargets 4, deployments 4, claims 6): the pools
# stay busy, and a breached target waits behind at most this many others' reconciles.
RECONCILE_SLOTS = 32


class ReconcileSlots:
    """At most ``size`` reconciles at a time per origin, first come first served."""

    def __init__(self, size: int = RECONCILE_SLOTS) -> None:
        if size < 1:
            raise ValueError("at least one reconcile slot is needed")
        self.size = size
        # An origin's semaphore lives while a reconcile holds or awaits it: URLs no target
        # names any more are not kept.
        self._origins: weakref.WeakValueDictionary[str, asyncio.Semaphore] = (
            weakref.WeakValueDictionary()
        )

    @contextlib.asynccontextmanager
    async def slot(self, origin: str) -> AsyncIterator[None]:
        semaphore = self._origins.get(origin)
        if semaphore is None:
            semaphore = self._origins[origin] = asyncio.Semaphore(self.size)
        async with semaphore:
            yield


def origin_of(spec: Mapping[str, Any]) -> str:
    """Which metrics origin a LatencyTarget's spec reads: its own Prometheus URL, or "" for the
    operator's (whatever the spec holds; the reconcile validates it, not this)."""
    metrics = spec.get("metrics")
    url = metrics.get("prometheusUrl") if isinstance(metrics, Mapping) else None
    return url if isinstance(url, str) else ""
