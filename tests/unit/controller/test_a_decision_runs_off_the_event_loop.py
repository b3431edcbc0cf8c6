"""The pure decision (``core.rollout.decide``) runs in a worker thread, so one target's long
decision (a model forecasting a wide space) leaves the event loop free for every other
target's reads and writes. Proven without timing: the decision waits for an event that only
another task on the loop can set once the decision has started."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from tests.unit.controller.test_a_recheck_gathers_once import (
    DEPLOYMENT,
    CountingDeployments,
    converged_target,
    met_window,
    pods,
    ports_for,
)

from latency_tuner.controller import reconciler
from latency_tuner.controller.reconciler import Reconciler
from latency_tuner.core.rollout import decide


async def test_another_task_runs_on_the_loop_while_a_decision_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    deciding, released = asyncio.Event(), threading.Event()
    freed: list[bool] = []
    real = decide

    def slow_decide(*args: Any) -> Any:
        loop.call_soon_threadsafe(deciding.set)  # runs only when the loop is free
        freed.append(released.wait(timeout=5.0))  # False: nothing on the loop could run
        return real(*args)

    async def release_once_deciding() -> None:
        await deciding.wait()
        released.set()

    monkeypatch.setattr(reconciler, "decide", slow_decide)
    target = converged_target([])
    ports, _, _ = ports_for(
        target, CountingDeployments({"llama": DEPLOYMENT}, pods()), met_window()
    )
    outcome, _ = await asyncio.gather(
        Reconciler(ports).run(target, claims=[("2026-01-01T00:00:00Z", "lt")]),
        release_once_deciding(),
    )
    assert freed
    assert freed[0] is True
    assert outcome.reasons[0] == "cooldown over: checking again"
