"""The shard gate over an in-memory API server: it takes an unclaimed target and says so on the
status, acts without a write while its claim is fresh, waits for another shard's live claim,
re-reads after losing a race, and on shutdown hands back every claim and acts no more."""

from __future__ import annotations

import asyncio
import copy
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from latency_tuner.adapters.kubernetes.client import Conflict
from latency_tuner.core.sharding.assignment import Sharding, hashed_shard
from latency_tuner.core.sharding.claim import CLAIM_ANNOTATION, Claim, Holder, claim_for
from latency_tuner.handlers.sharding import ShardGate, interested

T0 = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
LEASE = 60.0
NS = "llm"
# Names whose hash puts them on shard 0 and on shard 1 of two.
MINE = next(f"t{i}" for i in range(50) if hashed_shard(NS, f"t{i}", 2) == 0)
THEIRS = next(f"t{i}" for i in range(50) if hashed_shard(NS, f"t{i}", 2) == 1)
ME = Holder("tuner-a", Sharding(0, 2))
OTHER = Holder("tuner-old", Sharding(0, 1))


class FakeServer:
    """LatencyTargets by name with a resourceVersion: the writes check it as the API does."""

    def __init__(self, *names: str) -> None:
        self.objects: dict[str, dict[str, Any]] = {
            n: {"metadata": {"namespace": NS, "name": n, "resourceVersion": "1"}} for n in names
        }
        self.writes: list[tuple[str, Claim | None]] = []
        self.reports: dict[str, str] = {}
        self.meddle: Claim | None = None  # written by "another shard" just before our write

    def claim(self, name: str) -> Claim | None:
        annotations = self.objects[name]["metadata"].get("annotations") or {}
        return Claim.from_annotation(annotations.get(CLAIM_ANNOTATION))

    def body(self, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.objects[name])

    def put(self, name: str, claim: Claim | None) -> None:
        meta = self.objects[name]["metadata"]
        meta["annotations"] = {CLAIM_ANNOTATION: claim.to_annotation()} if claim else {}
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    async def write(
        self,
        *,
        namespace: str,
        name: str,
        claim: Claim | None,
        resource_version: str,
        finalizers: list[str] | None = None,
    ) -> dict[str, Any]:
        if self.meddle is not None:
            self.put(name, self.meddle)
            self.meddle = None
        if resource_version != self.objects[name]["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified", status=409)
        self.put(name, claim)
        if finalizers is not None:
            self.objects[name]["metadata"]["finalizers"] = finalizers
        self.writes.append((name, claim))
        return self.body(name)

    async def report(self, *, namespace: str, name: str, shard: str) -> None:
        self.reports[name] = shard

    async def get(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        return self.body(name) if name in self.objects else None


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def gate(server: FakeServer, clock: Clock) -> ShardGate:
    return ShardGate(ME, lease_seconds=LEASE, claims=server, targets=server, clock=clock)


async def test_an_unclaimed_target_is_taken_reported_on_the_status_and_acted_on() -> None:
    server, clock = FakeServer(MINE), Clock()
    assert await gate(server, clock).may_act(server.body(MINE))
    assert server.claim(MINE) == claim_for(ME, T0, LEASE)
    assert server.reports == {MINE: "0/2"}


async def test_a_fresh_claim_of_its_own_is_acted_on_without_a_write() -> None:
    server, clock = FakeServer(MINE), Clock()
    shard = gate(server, clock)
    await shard.may_act(server.body(MINE))
    clock.now += timedelta(seconds=LEASE / 3 - 1)
    assert await shard.may_act(server.body(MINE))
    assert len(server.writes) == 1
    clock.now += timedelta(seconds=2)  # now a third of the lease old: renewed first
    assert await shard.may_act(server.body(MINE))
    assert server.claim(MINE) == claim_for(ME, clock.now, LEASE)


async def test_another_shards_live_claim_is_waited_for_and_an_expired_one_taken() -> None:
    server, clock = FakeServer(MINE), Clock()
    server.put(MINE, claim_for(OTHER, T0, LEASE))
    shard = gate(server, clock)
    clock.now += timedelta(seconds=LEASE - 1)
    assert not await shard.may_act(server.body(MINE))
    assert server.writes == []
    clock.now += timedelta(seconds=1)
    assert await shard.may_act(server.body(MINE))
    assert server.claim(MINE) == claim_for(ME, clock.now, LEASE)


async def test_a_takeover_removes_the_finalizer_a_gone_shard_left_behind() -> None:
    server, clock = FakeServer(MINE), Clock()
    server.put(MINE, claim_for(OTHER, T0, LEASE))
    server.objects[MINE]["metadata"]["finalizers"] = ["latencytuner.io/restore", "x.io/keep"]
    clock.now += timedelta(seconds=LEASE)
    assert await gate(server, clock).may_act(server.body(MINE))
    assert server.objects[MINE]["metadata"]["finalizers"] == ["x.io/keep"]


async def test_a_lost_race_is_decided_again_on_what_the_winner_wrote() -> None:
    server, clock = FakeServer(MINE), Clock()
    server.meddle = claim_for(OTHER, T0, LEASE)
    assert not await gate(server, clock).may_act(server.body(MINE))
    assert server.claim(MINE) == claim_for(OTHER, T0, LEASE)


async def test_a_stale_body_showing_no_claim_costs_a_conflict_not_a_second_owner() -> None:
    server, clock = FakeServer(MINE), Clock()
    stale = server.body(MINE)
    server.put(MINE, claim_for(OTHER, T0, LEASE))
    assert not await gate(server, clock).may_act(stale)


async def test_a_target_of_another_shard_is_filtered_out_unless_this_shard_still_holds_it() -> None:
    when = interested(ME)
    assert when(namespace=NS, name=MINE, labels={}, annotations={})
    assert not when(namespace=NS, name=THEIRS, labels={}, annotations={})
    held = {CLAIM_ANNOTATION: claim_for(ME, T0, LEASE).to_annotation()}
    assert when(namespace=NS, name=THEIRS, labels={}, annotations=held)


async def test_a_claim_on_a_target_no_longer_assigned_is_released_without_acting() -> None:
    server, clock = FakeServer(THEIRS), Clock()
    server.put(THEIRS, claim_for(ME, T0, LEASE))
    assert not await gate(server, clock).may_act(server.body(THEIRS))
    assert server.claim(THEIRS) is None


async def test_on_shutdown_every_claim_is_released_and_nothing_is_acted_on_after() -> None:
    server, clock = FakeServer(MINE), Clock()
    shard = gate(server, clock)
    before = server.body(MINE)
    await shard.may_act(before)
    locks: defaultdict[tuple[str, str], asyncio.Lock] = defaultdict(asyncio.Lock)
    await shard.release_all(locks)
    assert server.claim(MINE) is None
    assert not await shard.may_act(server.body(MINE))
    assert server.claim(MINE) is None
