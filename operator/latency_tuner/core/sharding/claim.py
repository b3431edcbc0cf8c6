"""The claim: a shard acts on a LatencyTarget only while it holds the target's claim.

A claim names its holder (the operator pod), the shard and shard count it was taken under, when
it was last renewed and for how long it holds. It lives on the target (an annotation) and is only
ever written with the resourceVersion it was read at, so of two shards racing for it one wins.

The rules, with times passed in (no clock here):

- The holder acts only while its claim is younger than a third of the lease; older, it renews the
  claim first (and acts only if that write succeeds). A shard no longer assigned the target
  releases it.
- Another shard takes the claim only when it is released (absent) or has not been renewed for a
  whole lease. The holder stopped acting two thirds of a lease before that, which is the margin
  for a slow reconcile and for clocks that disagree.

So during a re-shard (the shard count changes, or a shard's pods roll) an old shard keeps its
targets until it releases them on shutdown or its lease runs out, and the new owner waits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from latency_tuner.core.sharding.assignment import Sharding

CLAIM_ANNOTATION = "latencytuner.io/shard-claim"
FINALIZER = "latencytuner.io/restore"
RENEW_FRACTION = 3
"""The holder renews once its claim is older than lease / RENEW_FRACTION."""


@dataclass(frozen=True)
class Holder:
    """Who claims: the operator pod, and the shard it runs as."""

    pod: str
    sharding: Sharding

    def __str__(self) -> str:
        return f"shard {self.sharding.label} ({self.pod})"


@dataclass(frozen=True)
class Claim:
    pod: str
    shard: int
    shards: int
    renewed: datetime
    lease_seconds: float

    @property
    def expires(self) -> datetime:
        return self.renewed + timedelta(seconds=self.lease_seconds)

    def held_by(self, holder: Holder) -> bool:
        """The claim is this very holder's: same pod, same shard, same shard count. A pod that
        restarts with another shard count is a new holder and waits like any other."""
        s = holder.sharding
        return (self.pod, self.shard, self.shards) == (holder.pod, s.index, s.shards)

    def to_annotation(self) -> str:
        return json.dumps(
            {
                "pod": self.pod,
                "shard": self.shard,
                "shards": self.shards,
                "renewed": self.renewed.isoformat(),
                "leaseSeconds": self.lease_seconds,
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_annotation(cls, text: str | None) -> Claim | None:
        """The claim an annotation holds; None when there is none or it cannot be read (a
        claim no shard can read is no claim: left alone, the target would have no owner)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            renewed = datetime.fromisoformat(str(data["renewed"]))
            if renewed.tzinfo is None:
                return None
            return cls(
                pod=str(data["pod"]),
                shard=int(data["shard"]),
                shards=int(data["shards"]),
                renewed=renewed,
                lease_seconds=float(data["leaseSeconds"]),
            )
        except (ValueError, TypeError, KeyError):
            return None


def claim_for(holder: Holder, now: datetime, lease_seconds: float) -> Claim:
    return Claim(
        pod=holder.pod,
        shard=holder.sharding.index,
        shards=holder.sharding.shards,
        renewed=now,
        lease_seconds=lease_seconds,
    )


def finalizer_for(sharding: Sharding) -> str:
    """kopf's finalizer for this shard. Each shard count and index has its own: kopf removes
    its finalizer from any object none of its handlers wants, so two shards sharing one name
    would take turns adding and removing it on every target, forever."""
    if sharding.shards == 1:
        return FINALIZER
    return f"{FINALIZER}-shard-{sharding.index}-of-{sharding.shards}"


def stale_finalizers(finalizers: list[str], sharding: Sharding) -> list[str]:
    """The finalizers to keep when this shard takes a target over: other shards' restore
    finalizers go (their holder released the claim or let it expire, and a shard that no
    longer runs would otherwise block the target's deletion forever); every other stays."""
    mine = finalizer_for(sharding)
    return [f for f in finalizers if f == mine or not f.startswith(FINALIZER)]


class Step(StrEnum):
    ACT = "Act"  # the claim is ours and fresh: act
    RENEW = "Renew"  # ours but ageing: write it renewed, then act if the write succeeded
    TAKE = "Take"  # released or expired, and ours by assignment: write ours, then act
    RELEASE = "Release"  # ours but no longer assigned to us: remove it, do not act
    WAIT = "Wait"  # assigned to us but another holder's claim is live: do not act
    IGNORE = "Ignore"  # not ours by assignment nor by claim


@dataclass(frozen=True)
class Decision:
    step: Step
    write: Claim | None = None  # what to write for Renew and Take
    previous: Claim | None = None  # the claim as read

    @property
    def acts(self) -> bool:
        """Whether the shard acts (for Renew and Take: once the write succeeded)."""
        return self.step in (Step.ACT, Step.RENEW, Step.TAKE)


def decide(
    current: Claim | None,
    holder: Holder,
    *,
    assigned: bool,
    now: datetime,
    lease_seconds: float,
) -> Decision:
    """What ``holder`` does about a target whose claim reads ``current``, at ``now``."""
    if current is not None and current.held_by(holder):
        if not assigned:
            return Decision(Step.RELEASE, previous=current)
        age = now - current.renewed
        # A claim "from the future" (the clock went back) is renewed too: its age is unknown.
        if age < timedelta(0) or age >= timedelta(seconds=lease_seconds / RENEW_FRACTION):
            return Decision(Step.RENEW, claim_for(holder, now, lease_seconds), current)
        return Decision(Step.ACT, previous=current)
    if not assigned:
        return Decision(Step.IGNORE, previous=current)
    if current is None or now >= current.expires:
        return Decision(Step.TAKE, claim_for(holder, now, lease_seconds), current)
    return Decision(Step.WAIT, previous=current)
