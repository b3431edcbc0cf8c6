"""Watch streams: JSON lines, replays from a resourceVersion, bookmarks, 410 Gone, timeouts."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from tests.integration.apiserver.support import deployment

from latency_tuner.sandbox.apiserver import ApiServer

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


async def read_events(client: httpx.AsyncClient, count: int, **params: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(5):
        params = {"watch": "true", **params}
        async with client.stream("GET", DEPLOYMENTS, params=params) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/json"  # kmock 0.8: octet-stream
            async for line in response.aiter_lines():
                if line:
                    events.append(json.loads(line))
                if len(events) == count:
                    break
    return events


async def test_a_watch_replays_what_happened_after_its_resource_version(
    client: httpx.AsyncClient,
) -> None:
    created = (await client.post(DEPLOYMENTS, json=deployment("d", "a"))).json()
    headers = {"Content-Type": "application/merge-patch+json"}
    await client.patch(f"{DEPLOYMENTS}/d", json={"spec": {"replicas": 2}}, headers=headers)
    await client.delete(f"{DEPLOYMENTS}/d")
    since = created["metadata"]["resourceVersion"]
    events = await read_events(client, 2, resourceVersion=since)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert events[0]["object"]["spec"]["replicas"] == 2


async def test_a_watch_without_a_resource_version_starts_with_the_current_objects_then_goes_live(
    client: httpx.AsyncClient,
) -> None:
    await client.post(DEPLOYMENTS, json=deployment("old", "a"))

    async def later() -> None:
        await asyncio.sleep(0.1)
        await client.post(DEPLOYMENTS, json=deployment("new", "a"))

    task = asyncio.create_task(later())
    events = await read_events(client, 2)
    await task
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "old"),
        ("ADDED", "new"),
    ]


async def test_initial_events_end_with_a_bookmark_and_quiet_watches_get_bookmarks(
    client: httpx.AsyncClient,
) -> None:
    await client.post(DEPLOYMENTS, json=deployment("d", "a"))
    params = {
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
    }
    events = await read_events(client, 3, **params)
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert events[2]["object"]["metadata"]["resourceVersion"]


async def test_a_watch_ends_after_its_timeout_seconds(client: httpx.AsyncClient) -> None:
    async with asyncio.timeout(5):
        response = await client.get(DEPLOYMENTS, params={"watch": "true", "timeoutSeconds": "1"})
    assert response.status_code == 200
    assert response.text == ""


async def test_a_watch_from_a_forgotten_resource_version_gets_410_gone() -> None:
    async with (
        ApiServer(history_size=2) as api,
        httpx.AsyncClient(base_url=api.url, timeout=5) as client,
    ):
        first = (await client.post(DEPLOYMENTS, json=deployment("a", "a"))).json()
        for name in ("b", "c", "d"):
            await client.post(DEPLOYMENTS, json=deployment(name, "a"))
        since = first["metadata"]["resourceVersion"]
        events = await read_events(client, 1, resourceVersion=since)
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410
