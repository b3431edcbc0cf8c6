"""The emulator's memory: served resources, stored objects, the resourceVersion, watch events.

`ObjectStore` is kmock's `KubernetesEmulator` with its objects kept in kmock's `objects` store
(so `emulator.objects[...]` assertions work) under one cluster-wide resourceVersion counter.
It records every write as an event and hands them to open watches; it decides nothing about
whether a write is allowed (that is `_writes`) and speaks no HTTP (that is `_http`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs
import kmock

from latency_tuner.sandbox.apiserver._errors import error
from latency_tuner.sandbox.apiserver._resources import (
    ALL_VERBS,
    BUILTIN_RESOURCES,
    Body,
    ResourceDef,
    StoreKey,
)
from latency_tuner.sandbox.apiserver._selectors import matches


@dataclasses.dataclass(frozen=True)
class Event:
    """One write as watches see it (the object as stored after the write)."""

    rv: int
    type: str
    store: StoreKey
    namespace: str | None
    obj: Body


@attrs.define(kw_only=True)
class ObjectStore(kmock.KubernetesEmulator):
    """Registry, objects and event history; kmock's own fallbacks are not used."""

    bookmark_interval: float = 30.0  # seconds between BOOKMARKs on quiet watches
    history_size: int = 10_000  # watch events kept for replays from a resourceVersion
    versions_kept: int = 50  # past versions per object in kmock's `objects[...].history`
    requests_kept: int = 10_000  # requests kept in kmock's `requests` (for assertions)

    _defs: dict[tuple[str, str, str], ResourceDef] = attrs.field(factory=dict, init=False)
    _rv: int = attrs.field(default=1, init=False)
    _events: collections.deque[Event] = attrs.field(init=False)
    _compacted_rv: int = attrs.field(default=0, init=False)  # replays from before it get 410
    _watchers: set[asyncio.Queue[Event | None]] = attrs.field(factory=set, init=False)
    # The store keys of each group/plural by namespace (None: cluster-scoped), as an API
    # server's cache indexes by namespace: a namespaced list walks its namespace, not the store.
    _keys: dict[StoreKey, dict[str | None, set[Any]]] = attrs.field(factory=dict, init=False)
    _closing: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        # Deliberately not calling kmock's: its fallbacks are what we replace.
        self._events = collections.deque(maxlen=self.history_size)
        for rdef in BUILTIN_RESOURCES:
            self.register(rdef)

    # -- resource registry -------------------------------------------------------------------------

    def register(self, rdef: ResourceDef) -> None:
        """Serve a resource (and list it in discovery)."""
        self._defs[rdef.group, rdef.version, rdef.plural] = rdef
        info = self.resources[rdef.kmock_resource]  # kmock's view, for its users
        info.kind, info.namespaced, info.singular = rdef.kind, rdef.namespaced, rdef.singular
        info.shortnames, info.subresources = set(rdef.short_names), set(rdef.subresources)
        info.verbs, info.categories = set(ALL_VERBS), set(rdef.categories)

    def unregister(self, group: str, plural: str) -> None:
        for key in [k for k in self._defs if (k[0], k[2]) == (group, plural)]:
            rdef = self._defs.pop(key)
            with contextlib.suppress(KeyError):
                del self.resources[rdef.kmock_resource]

    def resource_for(self, api_version: str, kind_or_plural: str) -> ResourceDef:
        group, _, version = api_version.rpartition("/")
        for rdef in self._defs.values():
            if (rdef.group, rdef.version) == (group, version) and kind_or_plural in (
                rdef.kind,
                rdef.plural,
            ):
                return rdef
        raise error(404, "NotFound", f"the server doesn't have a resource type {kind_or_plural!r}")

    def served(self) -> list[ResourceDef]:
        """Every served resource version, in registration order (builtins first)."""
        return list(self._defs.values())

    def served_resource(self, group: str, version: str, plural: str) -> ResourceDef | None:
        return self._defs.get((group, version, plural))

    # -- the store ---------------------------------------------------------------------------------

    def _store_key(self, rdef: ResourceDef, namespace: str | None, name: str) -> Any:
        # One store per group/plural: every served version of a CRD sees the same objects.
        first = next(d for d in self._defs.values() if d.store_key == rdef.store_key)
        return (first.kmock_resource, namespace if rdef.namespaced else None, name)

    def _load(self, rdef: ResourceDef, namespace: str | None, name: str) -> Body | None:
        key = self._store_key(rdef, namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        obj: Body = copy.deepcopy(self.objects[key].raw)
        obj["apiVersion"] = rdef.api_version  # no conversion: one body under every version
        return obj

    def _selected(
        self, rdef: ResourceDef, namespace: str | None, selectors: Mapping[str, str] | None = None
    ) -> list[Body]:
        """The objects of `rdef` in `namespace` (or all) that pass `selectors`
        (``labelSelector``, ``fieldSelector``), sorted by namespace/name, as top-level copies
        whose nested values are the store's own: callers copy what they may change."""
        labels, fields = (
            (selectors or {}).get("labelSelector"),
            (selectors or {}).get("fieldSelector"),
        )
        found = []
        by_namespace = self._keys.get(rdef.store_key, {})
        if namespace is not None:
            keys: Iterable[Any] = by_namespace.get(namespace, ())
        else:
            keys = (key for ns_keys in by_namespace.values() for key in ns_keys)
        for key in keys:
            stored = self.objects[key]
            # The newest version by index (kmock's ``raw`` searches for it); None: deleted.
            newest = stored.history[-1] if stored.history else None
            if newest is None:
                continue
            body: Body = {**newest.raw, "apiVersion": rdef.api_version}
            if matches(body, labels, fields):
                found.append(body)
        return sorted(
            found, key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"])
        )

    def _items(
        self, rdef: ResourceDef, namespace: str | None, selectors: Mapping[str, str] | None = None
    ) -> list[Body]:
        """Deep copies of ``_selected``: selected before they are copied, so a list that
        matches one pod of thousands copies one."""
        return [copy.deepcopy(body) for body in self._selected(rdef, namespace, selectors)]

    def _save(self, rdef: ResourceDef, obj: Body, event: str) -> Body:
        self._rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self._rv)
        key = self._store_key(rdef, meta.get("namespace"), meta["name"])
        if event == "DELETED":
            self.objects[key].delete()
        elif key in self.objects:
            history = self.objects[key].history
            history.append(copy.deepcopy(obj))  # a new version in kmock's history
            del history[: -self.versions_kept]  # bounded, for long demos
        else:
            self.objects[key] = copy.deepcopy(obj)
            self._keys.setdefault(rdef.store_key, {}).setdefault(key[1], set()).add(key)
        self._emit(
            Event(self._rv, event, rdef.store_key, meta.get("namespace"), copy.deepcopy(obj))
        )
        return obj

    def stored_items(
        self, rdef: ResourceDef, namespace: str | None, selectors: Mapping[str, str] | None = None
    ) -> list[Body]:
        """Copies of the objects of `rdef` (in `namespace`, or all) that pass `selectors`,
        sorted by namespace/name."""
        return self._items(rdef, namespace, selectors)

    # -- events and watches ------------------------------------------------------------------------

    @property
    def current_rv(self) -> int:
        """The resourceVersion of the last write (lists and bookmarks carry it)."""
        return self._rv

    @property
    def compacted_rv(self) -> int:
        """Replays from before this resourceVersion answer 410 Gone: their events are dropped."""
        return self._compacted_rv

    @property
    def closing(self) -> bool:
        return self._closing

    def events_after(self, rv: int) -> list[Event]:
        return [e for e in self._events if e.rv > rv]

    @contextlib.contextmanager
    def subscription(self) -> Iterator[asyncio.Queue[Event | None]]:
        """A queue that gets every later event, and None when the server closes the watches."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            yield queue
        finally:
            self._watchers.discard(queue)

    def _emit(self, event: Event) -> None:
        if len(self._events) == self._events.maxlen and self._events:
            self._compacted_rv = self._events[0].rv
        self._events.append(event)
        for queue in self._watchers:
            queue.put_nowait(event)

    def close_watches(self) -> None:
        """End every open watch (before the HTTP server stops)."""
        self._closing = True
        for queue in self._watchers:
            queue.put_nowait(None)
