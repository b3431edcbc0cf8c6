"""Watches as the API server streams them: one JSON event per line, replays and bookmarks.

A watch replays from `resourceVersion` (410 Gone once that is older than the kept history),
sends the initial objects for `resourceVersion=0` (with the initial-events-end BOOKMARK when
asked), periodic BOOKMARKs when `allowWatchBookmarks`, and ends at `timeoutSeconds` or when the
server closes. A MODIFIED object that leaves a selector is not turned into DELETED (a real
server does that). Reads the store, never writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping

import aiohttp.web

from latency_tuner.sandbox.apiserver._errors import bad_request, status_body
from latency_tuner.sandbox.apiserver._resources import Body, ResourceDef
from latency_tuner.sandbox.apiserver._selectors import matches
from latency_tuner.sandbox.apiserver._store import Event, ObjectStore
from latency_tuner.sandbox.apiserver._writes import Target


async def stream_watch(
    store: ObjectStore, target: Target, params: Mapping[str, str], raw: aiohttp.web.BaseRequest
) -> aiohttp.web.StreamResponse:
    """Stream the watch of `target` to `raw`'s client until it ends (see the module doc)."""
    rdef = target.rdef
    labels, fields = params.get("labelSelector"), params.get("fieldSelector")
    if target.name:
        fields = ",".join(f for f in (fields, f"metadata.name={target.name}") if f)
    bookmarks = params.get("allowWatchBookmarks") in ("true", "1")
    since = params.get("resourceVersion") or "0"
    timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
    if not since.isdigit():
        raise bad_request(f"invalid resource version: {since!r}")

    def wanted(event: Event) -> bool:
        return (
            event.store == rdef.store_key
            and (target.namespace is None or event.namespace == target.namespace)
            and matches(event.obj, labels, fields)
        )

    def shown(event_type: str, obj: Body) -> bytes:
        obj = dict(obj, apiVersion=rdef.api_version)
        return json.dumps({"type": event_type, "object": obj}).encode() + b"\n"

    # Registration and the snapshot happen in one synchronous step: no write can slip between.
    response = aiohttp.web.StreamResponse()
    with store.subscription() as queue:
        try:
            initial: list[bytes] = []
            if int(since) == 0:
                items = store.stored_items(
                    rdef,
                    target.namespace,
                    {"labelSelector": labels or "", "fieldSelector": fields or ""},
                )
                initial = [shown("ADDED", item) for item in items]
                if params.get("sendInitialEvents") == "true" and bookmarks:
                    initial.append(_bookmark(store, rdef, initial_end=True))
            elif int(since) < store.compacted_rv:
                gone = status_body(
                    410, "Expired", f"too old resource version: {since} ({store.compacted_rv})", {}
                )
                initial = [json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n"]
                queue.put_nowait(None)
            else:
                replay = [e for e in store.events_after(int(since)) if wanted(e)]
                initial = [shown(e.type, e.obj) for e in replay]
            sent_rv = store.current_rv
            response.headers["Content-Type"] = "application/json"
            await response.prepare(raw)
            for chunk in initial:
                await response.write(chunk)
            loop = asyncio.get_running_loop()
            deadline = None if timeout is None else loop.time() + timeout
            while not store.closing:
                wait = store.bookmark_interval if bookmarks else None
                if deadline is not None:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    wait = left if wait is None else min(wait, left)
                try:
                    event = await asyncio.wait_for(queue.get(), timeout=wait)
                except TimeoutError:
                    if bookmarks and (deadline is None or loop.time() < deadline):
                        await response.write(_bookmark(store, rdef))
                    continue
                if event is None:
                    break
                if event.rv > sent_rv and wanted(event):
                    await response.write(shown(event.type, event.obj))
            with contextlib.suppress(ConnectionError):
                await response.write_eof()
            return response
        except ConnectionError:
            return response  # the client went away; nothing left to say


def _bookmark(store: ObjectStore, rdef: ResourceDef, *, initial_end: bool = False) -> bytes:
    meta: Body = {"resourceVersion": str(store.current_rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj = {"kind": rdef.kind, "apiVersion": rdef.api_version, "metadata": meta}
    return json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"
