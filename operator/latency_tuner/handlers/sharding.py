"""The shard gate: a reconcile runs only on a target this shard has claimed (core/sharding).

``interested`` is kopf's ``when=`` filter: a shard runs no timer and no handler for a target
that is neither assigned to it nor claimed by it (in label mode the watch's label selector
already keeps the others' targets out). ``ShardGate.may_act`` takes, renews or releases the
claim as the rules say; ``release_all`` hands every claim back on shutdown, so the next owner
need not wait for the lease to run out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any, Protocol

from latency_tuner.adapters.kubernetes.client import Conflict, KubernetesError
from latency_tuner.core.sharding.claim import (
    CLAIM_ANNOTATION,
    Claim,
    Holder,
    Step,
    decide,
    stale_finalizers,
)

log = logging.getLogger("latency_tuner.shards")

Key = tuple[str, str]


class ClaimWrites(Protocol):
    """adapters.kubernetes.shard_claims.ShardClaims: Conflict when the object moved on."""

    async def write(
        self,
        *,
        namespace: str,
        name: str,
        claim: Claim | None,
        resource_version: str,
        finalizers: list[str] | None = None,
    ) -> dict[str, Any]: ...

    async def report(self, *, namespace: str, name: str, shard: str) -> None: ...


class TargetReads(Protocol):
    """adapters.kubernetes.latencytargets.LatencyTargets: the object now, None when gone."""

    async def get(self, *, namespace: str, name: str) -> dict[str, Any] | None: ...


def interested(holder: Holder) -> Callable[..., bool]:
    """kopf's ``when=``: the target is assigned to this shard, or this shard still holds it
    (so it can release what a label change moved away)."""

    def when(
        namespace: str | None, name: str | None, labels: Mapping[str, str],
        annotations: Mapping[str, str], **_: Any,
    ) -> bool:  # fmt: skip
        if holder.sharding.owns(namespace or "", name or "", labels):
            return True
        claim = Claim.from_annotation(annotations.get(CLAIM_ANNOTATION))
        return claim is not None and claim.held_by(holder)

    return when


def _now() -> datetime:
    return datetime.now(UTC)


class ShardGate:
    def __init__(
        self,
        holder: Holder,
        *,
        lease_seconds: float,
        claims: ClaimWrites,
        targets: TargetReads,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.holder = holder
        self.lease_seconds = lease_seconds
        self._claims = claims
        self._targets = targets
        self._clock = clock
        self.held: set[Key] = set()
        self._waiting: dict[Key, str] = {}  # the holder we last said we wait for, per target
        self._closed = False

    async def may_act(self, body: Mapping[str, Any]) -> bool:
        """Whether this shard may reconcile the target now; takes or renews its claim first
        when the rules say so. Call it under the target's lock."""
        obj: Mapping[str, Any] | None = body
        for _ in range(3):  # a Conflict means someone wrote first: decide again on what they wrote
            if self._closed or obj is None:
                return False
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            current = Claim.from_annotation((meta.get("annotations") or {}).get(CLAIM_ANNOTATION))
            decision = decide(
                current,
                self.holder,
                assigned=self.holder.sharding.owns(*key, meta.get("labels") or {}),
                now=self._clock(),
                lease_seconds=self.lease_seconds,
            )
            if decision.step in (Step.WAIT, Step.IGNORE):
                self.held.discard(key)
                if decision.step is Step.WAIT and current is not None:
                    self._log_wait(key, current)
                return False
            self._waiting.pop(key, None)
            if decision.step is not Step.ACT:
                if not meta.get("resourceVersion"):  # a write without one would be blind
                    obj = await self._targets.get(namespace=key[0], name=key[1])
                    continue
                finalizers = list(meta.get("finalizers") or [])
                kept = stale_finalizers(finalizers, self.holder.sharding)
                try:
                    await self._claims.write(
                        namespace=key[0], name=key[1], claim=decision.write,
                        resource_version=str(meta.get("resourceVersion", "")),
                        finalizers=kept if decision.step is Step.TAKE and kept != finalizers
                        else None,
                    )  # fmt: skip
                except Conflict:
                    obj = await self._targets.get(namespace=key[0], name=key[1])
                    continue
                self._log(key, decision.step, current)
            if decision.step is Step.RELEASE:
                self.held.discard(key)
                return False
            if decision.step is Step.TAKE:
                await self._claims.report(
                    namespace=key[0], name=key[1], shard=self.holder.sharding.label
                )
            self.held.add(key)
            log.debug("%s/%s: acting as %s", *key, self.holder)
            return True
        return False

    def _log_wait(self, key: Key, claim: Claim) -> None:
        """Once per holder: the target is ours by assignment but another shard still holds it."""
        if self._waiting.get(key) != claim.pod:
            self._waiting[key] = claim.pod
            log.info(
                "%s/%s: %s waits for the claim of shard %d/%d (%s) to be released or to "
                "expire (%s)", *key, self.holder, claim.shard, claim.shards, claim.pod,
                claim.expires.isoformat(),
            )  # fmt: skip

    def _log(self, key: Key, step: Step, previous: Claim | None) -> None:
        if step is Step.TAKE:
            before = (
                "no claim"
                if previous is None
                else f"the claim of shard {previous.shard}/{previous.shards} ({previous.pod}), "
                f"expired {previous.expires.isoformat()}"
            )
            log.info("%s/%s: %s took the target (%s)", *key, self.holder, before)
        elif step is Step.RELEASE:
            log.info("%s/%s: %s released the target", *key, self.holder)

    async def release_all(self, locks: MutableMapping[Key, asyncio.Lock]) -> None:
        """On shutdown: stop acting, then remove every claim this shard still holds."""
        self._closed = True
        for key in sorted(self.held):
            async with locks[key]:  # a reconcile in flight finishes first
                try:
                    await self._release(key)
                except KubernetesError as exc:  # the lease will run out instead
                    log.warning("%s/%s: could not release the claim: %s", *key, exc)
        self.held.clear()

    async def _release(self, key: Key) -> None:
        for _ in range(3):
            fresh = await self._targets.get(namespace=key[0], name=key[1])
            meta = (fresh or {}).get("metadata") or {}
            claim = Claim.from_annotation((meta.get("annotations") or {}).get(CLAIM_ANNOTATION))
            if claim is None or not claim.held_by(self.holder):
                return
            try:
                await self._claims.write(
                    namespace=key[0], name=key[1], claim=None,
                    resource_version=str(meta.get("resourceVersion", "")),
                )  # fmt: skip
            except Conflict:
                continue
            log.info("%s/%s: %s released the target", *key, self.holder)
            return

    def forget(self, key: Key) -> None:
        self.held.discard(key)
        self._waiting.pop(key, None)
