"""How many reconciles may be under way at once: a bounded number per tenant and origin.

Every target's timer fires on its own; when the API server or Prometheus is slower than the
fleet's interval, reconciles pile up in the I/O pools, each holding its LatencyTarget, models
and facts while it waits (measured: the operator's memory grew with that backlog, not only with
the number of targets). A reconcile takes a slot before reading anything and gives it back when
done, so the backlog waits holding nothing. A slot is shared only by targets of one namespace
(the tenancy boundary of LatencyTarget RBAC) reading one metrics origin (the operator's own
Prometheus, or a URL the spec names), so a tenant's slow or hostile inputs fill its own slots,
never another namespace's; where the slow input is the target's own pods (scraped directly),
each target has its own. Never decides anything about a target.
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
    """At most ``size`` reconciles at a time per key, first come first served."""

    def __init__(self, size: int = RECONCILE_SLOTS) -> None:
        if size < 1:
            raise ValueError("at least one reconcile slot is needed")
        self.size = size
        # A key's semaphore lives while a reconcile holds or awaits it: keys no target uses
        # any more are not kept.
        self._keys: weakref.WeakValueDictionary[str, asyncio.Semaphore] = (
            weakref.WeakValueDictionary()
        )

    @contextlib.asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[None]:
        semaphore = self._keys.get(key)
        if semaphore is None:
            semaphore = self._keys[key] = asyncio.Semaphore(self.size)
        async with semaphore:
            yield


def slot_key(namespace: str, name: str, spec: Mapping[str, Any], *, scraped: bool) -> str:
    """Whose slots a LatencyTarget's reconcile takes (whatever the spec holds: the reconcile
    validates it, not this): its namespace's for the metrics origin it names, or its own when
    its metrics are scraped from its own pods."""
    if scraped:
        return f"{namespace}/{name}"
    metrics = spec.get("metrics")
    url = metrics.get("prometheusUrl") if isinstance(metrics, Mapping) else None
    return f"{namespace} {url if isinstance(url, str) else ''}"
