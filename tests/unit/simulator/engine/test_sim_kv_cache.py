from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from latency_tuner.simulator.kv_cache import KVCacheManager


@dataclass
class Req:
    token_ids: list[int]
    num_computed_tokens: int = 0
    block_ids: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    num_cached_blocks: int = 0


def prefill(kv: KVCacheManager, req: Req) -> int:
    """Schedule and complete a whole prompt; returns the prefix-cache hit in tokens."""
    blocks, hit = kv.get_computed_blocks(req)
    assert kv.allocate_slots(req, len(req.token_ids) - hit, blocks, hit)
    req.num_computed_tokens = len(req.token_ids)
    return hit


def test_a_shared_prefix_hits_in_whole_blocks_when_caching_is_on() -> None:
    kv = KVCacheManager(num_gpu_blocks=64, block_size=16, enable_caching=True)
    first = Req(list(range(40)))
    prefill(kv, first)
    second = Req([*range(35), 999, 998])
    assert prefill(kv, second) == 32  # two full shared blocks; the third differs


def test_nothing_hits_when_prefix_caching_is_off() -> None:
    kv = KVCacheManager(num_gpu_blocks=64, block_size=16, enable_caching=False)
    prefill(kv, Req(list(range(40))))
    assert prefill(kv, Req(list(range(40)))) == 0


def test_an_identical_prompt_still_recomputes_its_last_token() -> None:
    kv = KVCacheManager(num_gpu_blocks=64, block_size=16, enable_caching=True)
    prefill(kv, Req(list(range(32))))
    assert prefill(kv, Req(list(range(32)))) == 16  # at most len - 1 tokens, in whole blocks


def test_usage_counts_referenced_blocks_and_freed_cached_blocks_stay_hittable() -> None:
    kv = KVCacheManager(num_gpu_blocks=11, block_size=16, enable_caching=True)
    req = Req(list(range(48)))
    prefill(kv, req)
    assert kv.usage == pytest.approx(0.3)
    kv.free(req)
    assert kv.usage == 0.0
    assert prefill(kv, Req(list(range(48)))) == 32


def test_allocation_evicts_the_least_recently_freed_cached_blocks_first() -> None:
    kv = KVCacheManager(num_gpu_blocks=5, block_size=16, enable_caching=True)  # 4 usable
    old, new = Req([1] * 32), Req([2] * 32)
    prefill(kv, old)
    kv.free(old)
    prefill(kv, new)
    kv.free(new)
    # Needs 2 fresh blocks: the two blocks of `old` (freed first) are evicted, `new`'s survive.
    third = Req([3] * 32)
    prefill(kv, third)
    kv.free(third)
    again_new = Req([2] * 33)
    assert prefill(kv, again_new) == 32
    kv.free(again_new)
    assert prefill(kv, Req([1] * 33)) == 0


def test_a_request_that_does_not_fit_changes_nothing() -> None:
    kv = KVCacheManager(num_gpu_blocks=3, block_size=16, enable_caching=True)  # 2 usable
    req = Req(list(range(40)))
    assert not kv.allocate_slots(req, 40)
    assert req.block_ids == []
    assert kv.num_free_blocks == 2


def test_blocks_shared_by_two_running_requests_are_freed_only_by_the_last() -> None:
    kv = KVCacheManager(num_gpu_blocks=20, block_size=16, enable_caching=True)
    a, b = Req(list(range(33))), Req(list(range(33)))
    prefill(kv, a)
    prefill(kv, b)  # shares a's first two blocks
    used = kv.usage
    kv.free(a)
    assert kv.usage < used
    assert kv.usage > 0
