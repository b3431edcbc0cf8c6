"""A reconcile that waited for the target's lock while the delete handlers held it (kopf stops
timers on deletion but lets one already running finish) neither patches nor records series."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any, cast

import kopf

from latency_tuner.handlers.operator import _reconcile
from latency_tuner.handlers.slots import ReconcileSlots
from latency_tuner.telemetry import OperatorMetrics


class Reconciler:
    def __init__(self) -> None:
        self.runs = 0

    async def run(self, body: dict[str, Any], *, claims: list[Any]) -> Any:
        self.runs += 1
        raise AssertionError("a target marked for deletion was reconciled")


class Gate:
    async def may_act(self, body: Any) -> bool:
        return True


def target_series(metrics: OperatorMetrics) -> list[str]:
    return [
        s.name
        for family in metrics.registry.collect()
        for s in family.samples
        if s.labels.get("name") == "llama-latency"
    ]


async def test_a_tick_let_in_after_the_deletion_began_neither_reconciles_nor_records() -> None:
    raw: dict[str, Any] = {
        "metadata": {"namespace": "ml", "name": "llama-latency"},
        "spec": {"targetRef": {"name": "llama"}},
    }
    memo = kopf.Memo()
    memo.locks = defaultdict(asyncio.Lock)
    memo.slots = ReconcileSlots(size=2)
    memo.metrics = OperatorMetrics()
    memo.gate = Gate()
    memo.reconciler = Reconciler()
    lock = memo.locks[("ml", "llama-latency")]
    await lock.acquire()  # the restore handler holds it
    tick = asyncio.create_task(_reconcile(kopf.Body(cast(kopf.RawBody, raw)), memo, {}))
    await asyncio.sleep(0.01)
    raw["metadata"]["deletionTimestamp"] = "2026-12-07T10:00:00Z"  # kopf's live body sees it
    lock.release()
    await tick
    assert memo.reconciler.runs == 0
    assert target_series(memo.metrics) == []
