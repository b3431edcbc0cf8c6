"""Every LatencyTarget belongs to exactly one shard, the same one in every process: by a sha256
of namespace/name, of its namespace alone (a namespace's targets together), or by its
latencytuner.io/shard label (with a server-side selector that lets exactly that shard's watch
see it)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from latency_tuner.core.sharding.assignment import (
    SHARD_LABEL,
    Sharding,
    hashed_shard,
    labelled_shard,
    namespace_shard,
    ordinal,
)
from latency_tuner.sandbox.apiserver import label_selector_matches

names = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)
counts = st.integers(min_value=1, max_value=12)
label_values = st.one_of(st.none(), st.integers(0, 15).map(str), st.sampled_from(["x", "", "-1"]))


def test_the_hash_is_sha256_of_namespace_slash_name_so_every_process_agrees() -> None:
    digest = hashlib.sha256(b"team-a/chat").digest()
    assert hashed_shard("team-a", "chat", 7) == int.from_bytes(digest[:8], "big") % 7
    # Pinned: a change here would move targets between shards on upgrade.
    assert [hashed_shard("llm", n, 2) for n in ("a", "b")] == [0, 0]
    assert hashed_shard("team-a", "chat", 3) == 1


@given(namespace=names, name=names, shards=counts)
def test_in_hash_mode_exactly_one_shard_owns_each_target(
    namespace: str, name: str, shards: int
) -> None:
    owners = [i for i in range(shards) if Sharding(i, shards).owns(namespace, name)]
    assert owners == [hashed_shard(namespace, name, shards)]


@given(namespace=names, names_in_it=st.lists(names, min_size=1, max_size=5), shards=counts)
def test_in_namespace_mode_one_shard_owns_every_target_of_a_namespace(
    namespace: str, names_in_it: list[str], shards: int
) -> None:
    for name in names_in_it:
        owners = [
            i for i in range(shards) if Sharding(i, shards, "namespace").owns(namespace, name)
        ]
        assert owners == [namespace_shard(namespace, shards)]


def test_namespace_mode_spreads_namespaces_over_every_shard_and_is_pinned() -> None:
    digest = hashlib.sha256(b"team-a").digest()
    assert namespace_shard("team-a", 5) == int.from_bytes(digest[:8], "big") % 5
    spread = [namespace_shard(f"team-{i}", 4) for i in range(400)]
    assert all(80 <= spread.count(shard) <= 120 for shard in range(4))  # ~100 each
    assert Sharding(0, 4, "namespace").label_selector() is None  # a client-side filter


@given(value=label_values, shards=counts)
def test_in_label_mode_exactly_one_shard_owns_each_target_and_only_its_watch_sees_it(
    value: str | None, shards: int
) -> None:
    labels = {} if value is None else {SHARD_LABEL: value}
    owners = [i for i in range(shards) if Sharding(i, shards, "label").owns("ns", "t", labels)]
    assert owners == [labelled_shard(labels, shards)]
    watching = [
        i
        for i in range(shards)
        if (selector := Sharding(i, shards, "label").label_selector()) is None
        or label_selector_matches(selector, labels)
    ]
    assert watching == owners


def test_a_label_naming_a_shard_picks_it_and_anything_else_falls_to_shard_zero() -> None:
    assert labelled_shard({SHARD_LABEL: "2"}, 3) == 2
    assert labelled_shard({SHARD_LABEL: "3"}, 3) == 0
    assert labelled_shard({SHARD_LABEL: "blue"}, 3) == 0
    assert labelled_shard({}, 3) == 0


def test_one_shard_owns_everything_and_filters_nothing() -> None:
    only = Sharding()
    assert only.owns("any", "target")
    assert only.label_selector() is None
    assert Sharding(mode="label").label_selector() is None
    assert Sharding(0, 4).label_selector() is None  # hash mode: a client-side filter


def test_a_shard_that_does_not_exist_is_refused() -> None:
    with pytest.raises(ValueError, match="shard 2 of 2"):
        Sharding(2, 2)
    with pytest.raises(ValueError, match="shard 0 of 0"):
        Sharding(0, 0)


def test_a_statefulset_pods_ordinal_is_read_from_its_hostname() -> None:
    assert ordinal("latency-tuner-2") == 2
    assert ordinal("latency-tuner-shard-10") == 10
    assert ordinal("latency-tuner-7d9f-abcde") is None
    assert ordinal("localhost") is None
