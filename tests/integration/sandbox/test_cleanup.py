"""Nothing the sandbox started outlives it: no simulator, no Prometheus, no zombie."""

from __future__ import annotations

import asyncio

import pytest
from tests.integration.sandbox.support import NAMESPACE, alive, child_pids, deployment, eventually

from latency_tuner.sandbox.cluster import Sandbox
from latency_tuner.sandbox.podrunner import NodeHardware


async def test_leaving_the_sandbox_stops_every_process_it_started() -> None:
    before = child_pids()
    async with Sandbox(namespace=NAMESPACE, hardware=NodeHardware(gpus=4)) as sandbox:
        await sandbox.apply(deployment(replicas=3))
        await eventually(lambda: asyncio.sleep(0, sum(p.ready for p in sandbox.pods()) == 3))
        pids = [p.pid for p in sandbox.pods()]
        assert len(child_pids() - before) >= 3

    assert not any(alive(pid or 0) for pid in pids)
    assert child_pids() - before == set()


async def test_an_error_inside_the_sandbox_still_stops_its_processes() -> None:
    before = child_pids()
    pids: list[int | None] = []

    async def fail_inside() -> None:
        async with Sandbox(namespace=NAMESPACE, prometheus=False) as sandbox:
            await sandbox.apply(deployment())
            await eventually(lambda: asyncio.sleep(0, any(p.ready for p in sandbox.pods())))
            pids.extend(p.pid for p in sandbox.pods())
            raise RuntimeError("boom")

    # Bounded below pytest-timeout: a teardown that hangs (seen once under heavy load) then
    # fails with the traceback of the await it hung in, not a dump of idle threads.
    with pytest.raises(RuntimeError, match="boom"):
        async with asyncio.timeout(200):
            await fail_inside()

    assert pids
    assert not any(alive(pid or 0) for pid in pids)
    assert child_pids() - before == set()


async def test_a_cancelled_sandbox_stops_its_processes() -> None:
    before = child_pids()
    started = asyncio.Event()
    pids: list[int | None] = []

    async def run() -> None:
        async with Sandbox(namespace=NAMESPACE, prometheus=False) as sandbox:
            await sandbox.apply(deployment())
            await eventually(lambda: asyncio.sleep(0, any(p.ready for p in sandbox.pods())))
            pids.extend(p.pid for p in sandbox.pods())
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(run())
    await asyncio.wait_for(started.wait(), 20)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    assert pids
    assert not any(alive(pid or 0) for pid in pids)
    assert child_pids() - before == set()


async def test_leaving_ends_the_pod_runners_control_loop_even_if_its_cancel_is_lost() -> None:
    # Python 3.11's wait_for can swallow a cancel that lands as its wait ends; the loop waits
    # that way every resync. Here every cancel of the loop is lost: leaving must still end it.
    async with Sandbox(namespace=NAMESPACE, hardware=NodeHardware(gpus=1)) as sandbox:
        runner = sandbox.runner
        assert runner is not None
        task = runner._loop_task
        assert task is not None
        task.cancel = lambda *_: False  # type: ignore[method-assign]
        started = asyncio.get_running_loop().time()
    assert task.done()
    assert asyncio.get_running_loop().time() - started < 10
