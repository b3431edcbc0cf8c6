"""The paged KV cache of vLLM's V1 engine: fixed-size blocks, reference counts, and an automatic
prefix cache keyed by chained hashes of full blocks with LRU eviction of unreferenced blocks.

Semantics copied from ``vllm/v1/core/{kv_cache_manager,block_pool}.py``:
- ``num_gpu_blocks`` blocks of which one is vLLM's reserved null block, so ``num_gpu_blocks - 1``
  are usable; usage = 1 - free / usable (cached but unreferenced blocks count as free);
- a block's hash chains its parent's hash with its token ids, so a hit means the whole prefix
  matches; only *full* blocks are cached, and at most ``num_tokens - 1`` prompt tokens can hit
  (the last token is always recomputed to produce logits);
- freed blocks join the free queue tail-block first, so a request's last blocks are evicted
  before its first ones; allocating a block evicts the least recently freed cached block.

Pure bookkeeping: no clock, no I/O. The scheduler owns the requests; this module only reads
their token ids and keeps their block lists.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["CachedRequest", "KVCacheManager", "PrefixCacheStats"]


class CachedRequest(Protocol):
    """What the KV cache needs of a request (the scheduler's ``Request`` provides it)."""

    token_ids: list[int]
    num_computed_tokens: int
    block_ids: list[int]
    block_hashes: list[int]
    num_cached_blocks: int


@dataclass
class PrefixCacheStats:
    """Cumulative prefix-cache lookups, in tokens (as vLLM's ``prefix_cache_*`` counters)."""

    requests: int = 0
    queries: int = 0
    hits: int = 0


@dataclass
class KVCacheManager:
    num_gpu_blocks: int
    block_size: int = 16
    enable_caching: bool = True
    stats: PrefixCacheStats = field(default_factory=PrefixCacheStats)

    def __post_init__(self) -> None:
        if self.num_gpu_blocks < 2:
            raise ValueError("the KV cache needs at least 2 blocks (one is the null block)")
        usable = self.num_gpu_blocks - 1
        self.usable_blocks = usable
        self._ref = [0] * usable
        self._hash: list[int | None] = [None] * usable
        # Free blocks in eviction order (first = evicted first). Values unused.
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(usable))
        self._cached: dict[int, int] = {}  # block hash -> block id

    # --- queries --------------------------------------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def usage(self) -> float:
        """Fraction of usable blocks referenced by running requests (vLLM's kv_cache_usage)."""
        return 1.0 - len(self._free) / self.usable_blocks

    @property
    def num_cached_blocks(self) -> int:
        return len(self._cached)

    def _hashes(self, request: CachedRequest, num_blocks: int) -> list[int]:
        """The request's chained full-block hashes, computed lazily up to ``num_blocks``."""
        hashes = request.block_hashes
        size = self.block_size
        tokens = request.token_ids
        while len(hashes) < num_blocks:
            i = len(hashes)
            parent = hashes[-1] if hashes else 0
            hashes.append(hash((parent, *tokens[i * size : (i + 1) * size])))
        return hashes

    def get_computed_blocks(self, request: CachedRequest) -> tuple[list[int], int]:
        """The longest cached prefix of a request not yet computed: (block ids, tokens)."""
        if not self.enable_caching:
            return [], 0
        max_blocks = (len(request.token_ids) - 1) // self.block_size
        hits: list[int] = []
        cached = self._cached
        for block_hash in self._hashes(request, max_blocks)[:max_blocks]:
            block = cached.get(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits, len(hits) * self.block_size

    def record_lookup(self, num_tokens: int, num_hit_tokens: int) -> None:
        if self.enable_caching:
            self.stats.requests += 1
            self.stats.queries += num_tokens
            self.stats.hits += num_hit_tokens

    # --- changes -------------------------------------------------------------------------------

    def allocate_slots(
        self,
        request: CachedRequest,
        num_new_tokens: int,
        new_computed_blocks: list[int] | None = None,
        num_new_computed_tokens: int = 0,
        num_lookahead_tokens: int = 0,
    ) -> bool:
        """Room for ``num_new_tokens`` more tokens (after any prefix hit); False if it does not
        fit, in which case nothing changed."""
        size = self.block_size
        total = request.num_computed_tokens + num_new_computed_tokens + num_new_tokens
        needed_blocks = -(-(total + num_lookahead_tokens) // size)
        if not new_computed_blocks and needed_blocks <= len(request.block_ids):
            # Fast path (most decodes): the slots exist; maybe a block just became full.
            if self.enable_caching:
                full = min(total, len(request.token_ids)) // size
                if full > request.num_cached_blocks:
                    self._cache_full_blocks(request, full)
            return True
        hit = new_computed_blocks or []
        need = needed_blocks - len(request.block_ids) - len(hit)
        ref = self._ref
        touched_free = sum(1 for b in hit if ref[b] == 0)
        if need > len(self._free) - touched_free:
            return False
        free = self._free
        for b in hit:
            if ref[b] == 0:
                del free[b]
            ref[b] += 1
        blocks = request.block_ids
        blocks.extend(hit)
        if hit:
            request.num_cached_blocks = len(blocks)
        for _ in range(need):
            b, _unused = free.popitem(last=False)
            old = self._hash[b]
            if old is not None:
                if self._cached.get(old) == b:
                    del self._cached[old]
                self._hash[b] = None
            ref[b] = 1
            blocks.append(b)
        if self.enable_caching:
            self._cache_full_blocks(request, min(total, len(request.token_ids)) // size)
        return True

    def _cache_full_blocks(self, request: CachedRequest, num_full: int) -> None:
        start = request.num_cached_blocks
        if num_full <= start:
            return
        hashes = self._hashes(request, num_full)
        cached, block_hash_of, blocks = self._cached, self._hash, request.block_ids
        for i in range(start, num_full):
            h, b = hashes[i], blocks[i]
            if h not in cached and block_hash_of[b] is None:
                cached[h] = b
                block_hash_of[b] = h
        request.num_cached_blocks = num_full

    def free(self, request: CachedRequest) -> None:
        """Release a finished or preempted request's blocks (tail first, for LRU order)."""
        ref, free = self._ref, self._free
        for b in reversed(request.block_ids):
            ref[b] -= 1
            if ref[b] == 0:
                free[b] = None
        request.block_ids = []
        request.num_cached_blocks = 0

    def reset_prefix_cache(self) -> None:
        for b in self._cached.values():
            self._hash[b] = None
        self._cached.clear()
