"""kopf really runs in-process against the emulator over HTTP: create, update, delete, timers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import kopf
import pytest
from tests.integration.apiserver.support import WIDGET_CRD, widget

from latency_tuner.sandbox.apiserver import ApiServer

GROUP, VERSION, PLURAL = "tests.example.com", "v1", "widgets"
API_VERSION = f"{GROUP}/{VERSION}"


async def eventually(check: Callable[[], Awaitable[Any]], within: float = 10.0) -> Any:
    """Poll until `check` returns something truthy; fail (not hang) after `within` seconds."""
    async with asyncio.timeout(within):
        while True:
            if result := await check():
                return result
            await asyncio.sleep(0.05)


class Seen:
    """What the handlers saw, for assertions."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.deleted: list[str] = []
        self.ticks = 0

    async def updated(self) -> list[Any]:
        return self.updates

    async def ticked_twice(self) -> bool:
        return self.ticks >= 2


@contextlib.asynccontextmanager
async def kopf_running(
    api: ApiServer, *namespaces: str, initial_streaming: bool = False
) -> AsyncIterator[Seen]:
    """kopf.operator() as a task, with handlers in a registry of its own; stopped by a flag.

    Entered from the test's own task, not from a fixture: when it stops, kopf cancels every task
    spawned while it ran ("hung tasks"), which would include a fixture's teardown task.
    """
    seen = Seen()
    registry = kopf.OperatorRegistry()

    @kopf.on.login(id="emulator", registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=api.url, token="dummy", default_namespace="default")

    @kopf.on.create(GROUP, VERSION, PLURAL, id="created", registry=registry)
    def created(spec: kopf.Spec, body: kopf.Body, **_: Any) -> dict[str, Any]:
        kopf.info(body, reason="Created", message="seen by the test operator")
        return {"size": spec["size"]}

    @kopf.on.update(GROUP, VERSION, PLURAL, id="updated", registry=registry)
    def updated(diff: kopf.Diff, **_: Any) -> None:
        seen.updates.append([(op, field, new) for op, field, _, new in diff])

    @kopf.on.delete(GROUP, VERSION, PLURAL, id="deleted", registry=registry)
    def deleted(name: str, **_: Any) -> None:
        seen.deleted.append(name)

    @kopf.timer(GROUP, VERSION, PLURAL, id="tick", interval=0.2, registry=registry)
    def tick(**_: Any) -> None:
        seen.ticks += 1

    settings = kopf.OperatorSettings()
    settings.networking.request_timeout = 5
    settings.networking.connect_timeout = 5
    settings.watching.connect_timeout = 5
    settings.watching.server_timeout = 10
    settings.watching.initial_streaming = initial_streaming  # watch-list, no LIST first
    stop = asyncio.Event()
    task = asyncio.create_task(
        kopf.operator(
            registry=registry,
            settings=settings,
            standalone=True,
            clusterwide=not namespaces,
            namespaces=namespaces,
            stop_flag=stop,
        )
    )
    try:
        yield seen
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, timeout=15)
        except TimeoutError:
            pytest.fail("kopf did not stop within 15 seconds")


async def test_kopf_handles_creation_update_timers_and_finalized_deletion(api: ApiServer) -> None:
    await api.create(WIDGET_CRD)
    async with kopf_running(api) as seen:
        await api.create({**widget("w", size=1), "metadata": {"name": "w", "namespace": "default"}})

        async def status_created() -> Any:
            obj = await api.get(API_VERSION, "Widget", "w", namespace="default")
            return obj and obj.get("status", {}).get("created")

        assert await eventually(status_created) == {"size": 1}
        stored = await api.get(API_VERSION, "Widget", "w", namespace="default")
        assert stored is not None
        assert stored["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]

        await api.patch(API_VERSION, "Widget", "w", {"spec": {"size": 5}}, namespace="default")
        assert await eventually(seen.updated) == [[("change", ("spec", "size"), 5)]]
        assert await eventually(seen.ticked_twice)

        async def posted() -> list[dict[str, Any]]:
            events = await api.list_objects("v1", "Event", namespace="default")
            return [e for e in events if e["reason"] == "Created"]

        assert (await eventually(posted))[0]["involvedObject"]["name"] == "w"

        await api.delete(API_VERSION, "Widget", "w", namespace="default")

        async def gone() -> bool:
            return await api.get(API_VERSION, "Widget", "w", namespace="default") is None

        assert await eventually(gone)
        assert seen.deleted == ["w"]


async def test_kopf_serves_one_namespace_with_initial_streaming_and_stops_cleanly(
    api: ApiServer,
) -> None:
    await api.create(WIDGET_CRD)
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    async with kopf_running(api, "team", initial_streaming=True) as seen:
        await api.create({**widget("w", size=3), "metadata": {"name": "w", "namespace": "team"}})

        async def status_created() -> Any:
            obj = await api.get(API_VERSION, "Widget", "w", namespace="team")
            return obj and obj.get("status", {}).get("created")

        assert await eventually(status_created) == {"size": 3}
    assert seen.deleted == []
