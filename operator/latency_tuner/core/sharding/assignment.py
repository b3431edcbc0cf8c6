"""Which shard a LatencyTarget belongs to: by a stable hash of namespace/name, of the
namespace alone, or by a label.

The hash is sha256, never Python's ``hash()`` (salted per process: two shards would disagree).
In namespace mode every target of a namespace has one shard, so that shard's batched metrics
queries (one per aggregate, scoped by namespace) carry only its own namespaces' pods; in hash
mode a large namespace is asked for by every shard. In label mode a target's
``latencytuner.io/shard`` label names its shard, the way Flux shards controllers; shard 0 also
takes every target whose label is missing or names no shard, so no target is left without an
owner.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

SHARD_LABEL = "latencytuner.io/shard"

ShardMode = Literal["hash", "namespace", "label"]


@dataclass(frozen=True)
class Sharding:
    """One shard's place in the fleet: shard ``index`` of ``shards``."""

    index: int = 0
    shards: int = 1
    mode: ShardMode = "hash"

    def __post_init__(self) -> None:
        if self.shards < 1 or not 0 <= self.index < self.shards:
            raise ValueError(f"shard {self.index} of {self.shards} does not exist")

    @property
    def label(self) -> str:
        """How the status and the logs name this shard: ``index/shards``."""
        return f"{self.index}/{self.shards}"

    def owns(self, namespace: str, name: str, labels: Mapping[str, str] | None = None) -> bool:
        """Whether this shard is the one the target is assigned to."""
        if self.shards == 1:
            return True
        if self.mode == "label":
            return labelled_shard(labels or {}, self.shards) == self.index
        if self.mode == "namespace":
            return namespace_shard(namespace, self.shards) == self.index
        return hashed_shard(namespace, name, self.shards) == self.index

    def label_selector(self) -> str | None:
        """The server-side label selector of this shard's targets (label mode), so its watch
        never even receives another shard's; None when every target must be seen."""
        if self.mode != "label" or self.shards == 1:
            return None
        if self.index == 0:
            # `notin` also matches a missing label: shard 0 takes the unlabelled targets.
            others = ",".join(str(i) for i in range(1, self.shards))
            return f"{SHARD_LABEL} notin ({others})"
        return f"{SHARD_LABEL}={self.index}"


def hashed_shard(namespace: str, name: str, shards: int) -> int:
    """The shard of ``namespace/name`` among ``shards``: the same in every process and release."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def namespace_shard(namespace: str, shards: int) -> int:
    """The shard of every target in ``namespace`` among ``shards`` (the same in every process)."""
    digest = hashlib.sha256(namespace.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def labelled_shard(labels: Mapping[str, str], shards: int) -> int:
    """The shard the label names; 0 when it is missing or names no shard of ``shards``."""
    value = labels.get(SHARD_LABEL, "")
    if value.isdigit() and int(value) < shards:
        return int(value)
    return 0


def ordinal(hostname: str) -> int | None:
    """A StatefulSet pod's ordinal from its hostname (``latency-tuner-2`` -> 2), else None."""
    _, _, tail = hostname.rpartition("-")
    return int(tail) if tail.isdigit() else None
