"""The claim rules: a shard acts only on a target whose claim it holds and has renewed lately;
another takes over only once the claim is released or a whole lease old. Checked rule by rule,
then on generated histories of shards (old and new shard counts at once, as in a re-shard)
reading stale copies and racing their writes through a resourceVersion check."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from latency_tuner.core.sharding.assignment import Sharding
from latency_tuner.core.sharding.claim import (
    FINALIZER,
    Claim,
    Holder,
    Step,
    claim_for,
    decide,
    finalizer_for,
    stale_finalizers,
)

T0 = datetime(2026, 12, 3, 2, 0, tzinfo=UTC)
LEASE = 90.0
OLD = Holder("tuner-0", Sharding(0, 1))  # the one shard before the re-shard
NEW = Holder("tuner-1", Sharding(1, 2))  # a shard of the new count


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def held(holder: Holder, renewed: float) -> Claim:
    return claim_for(holder, at(renewed), LEASE)


def test_a_fresh_claim_of_ones_own_means_act_without_a_write() -> None:
    d = decide(held(OLD, 0), OLD, assigned=True, now=at(29), lease_seconds=LEASE)
    assert d.step is Step.ACT
    assert d.write is None


def test_an_ageing_claim_is_renewed_before_acting() -> None:
    d = decide(held(OLD, 0), OLD, assigned=True, now=at(30), lease_seconds=LEASE)
    assert d.step is Step.RENEW
    assert d.write == held(OLD, 30)


def test_a_claim_dated_in_the_future_is_renewed_rather_than_trusted() -> None:
    d = decide(held(OLD, 60), OLD, assigned=True, now=at(0), lease_seconds=LEASE)
    assert d.step is Step.RENEW


def test_an_unclaimed_target_is_taken_by_its_assigned_shard_only() -> None:
    assert decide(None, NEW, assigned=True, now=at(0), lease_seconds=LEASE).write == held(NEW, 0)
    assert decide(None, NEW, assigned=False, now=at(0), lease_seconds=LEASE).step is Step.IGNORE


def test_a_live_claim_of_another_shard_is_waited_for_even_by_the_assigned_shard() -> None:
    d = decide(held(OLD, 0), NEW, assigned=True, now=at(LEASE - 0.001), lease_seconds=LEASE)
    assert d.step is Step.WAIT
    assert not d.acts


def test_an_expired_claim_is_taken_over() -> None:
    d = decide(held(OLD, 0), NEW, assigned=True, now=at(LEASE), lease_seconds=LEASE)
    assert d.step is Step.TAKE
    assert d.previous == held(OLD, 0)


def test_a_shard_no_longer_assigned_a_target_releases_it_without_acting() -> None:
    d = decide(held(NEW, 0), NEW, assigned=False, now=at(1), lease_seconds=LEASE)
    assert d.step is Step.RELEASE
    assert not d.acts


def test_the_same_pod_under_another_shard_count_is_another_holder() -> None:
    restarted = Holder("tuner-0", Sharding(0, 2))
    d = decide(held(OLD, 0), restarted, assigned=True, now=at(1), lease_seconds=LEASE)
    assert d.step is Step.WAIT


def test_a_claim_reads_back_as_written_and_garbage_reads_as_no_claim() -> None:
    claim = held(NEW, 12.5)
    assert Claim.from_annotation(claim.to_annotation()) == claim
    for text in (None, "", "{", '{"pod": "x"}', '{"pod":"x","shard":0,"shards":1,'
                 '"renewed":"2026-12-03T02:00:00","leaseSeconds":9}'):  # fmt: skip
        assert Claim.from_annotation(text) is None


def test_each_shard_count_and_index_has_its_own_finalizer_and_one_shard_keeps_todays() -> None:
    assert finalizer_for(Sharding()) == FINALIZER == "latencytuner.io/restore"
    names = {finalizer_for(Sharding(i, n)) for n in (1, 2, 3) for i in range(n)}
    assert len(names) == 6
    assert finalizer_for(Sharding(1, 2)) == "latencytuner.io/restore-shard-1-of-2"


def test_taking_over_drops_other_shards_restore_finalizers_and_keeps_everyone_elses() -> None:
    present = [FINALIZER, "latencytuner.io/restore-shard-1-of-2", "example.com/keep",
               "latencytuner.io/restore-shard-0-of-2"]  # fmt: skip
    assert stale_finalizers(present, Sharding(0, 2)) == [
        "example.com/keep",
        "latencytuner.io/restore-shard-0-of-2",
    ]


# --- generated histories ----------------------------------------------------------------------

# Shards of an old count and of a new one run at once; each has its fixed view of whether the
# target is its own (two may both think so, as during a re-shard).
HOLDERS = [OLD, Holder("tuner-0b", Sharding(0, 2)), NEW, Holder("tuner-1b", Sharding(1, 2))]


@dataclass
class Store:
    """The API server's copy of the target: the claim and its resourceVersion."""

    claim: Claim | None = None
    version: int = 0
    history: list[tuple[int, Claim | None]] = field(default_factory=lambda: [(0, None)])

    def write(self, claim: Claim | None, read_at: int) -> bool:
        if read_at != self.version:
            return False  # 409 Conflict
        self.version += 1
        self.claim = claim
        self.history.append((self.version, claim))
        return True


step = st.tuples(
    st.integers(0, len(HOLDERS) - 1),  # who
    # seconds since the previous step: around the renewal age and the lease, and anything
    st.one_of(
        st.sampled_from([0.0, 1.0, 29.9, 30.0, 45.0, 59.9, 60.0, 89.9, 90.0]),
        st.floats(0, 120, allow_nan=False),
    ),
    st.integers(0, 5),  # how many versions stale the copy it reads is
)


@settings(max_examples=500)
@given(
    steps=st.lists(step, min_size=1, max_size=60),
    assigned=st.lists(st.booleans(), min_size=len(HOLDERS), max_size=len(HOLDERS)),
)
def test_whoever_acts_holds_the_claim_on_the_server_at_that_moment(
    steps: list[tuple[int, float, int]], assigned: list[bool]
) -> None:
    store, now = Store(), 0.0
    for who, gap, stale in steps:
        now += gap
        holder = HOLDERS[who]
        version, copy = store.history[max(0, len(store.history) - 1 - stale)]
        d = decide(copy, holder, assigned=assigned[who], now=at(now), lease_seconds=LEASE)
        writes = d.step in (Step.RENEW, Step.TAKE, Step.RELEASE)
        if writes and not store.write(d.write, version):
            continue  # lost the race: decides again next time
        if d.acts:
            # The server's claim is this holder's: no other shard can be acting now.
            assert store.claim is not None
            assert store.claim.held_by(holder)
            assert at(now) < store.claim.expires


@given(gaps=st.lists(st.floats(0, LEASE / 3 - 0.01, allow_nan=False), max_size=40))
def test_a_holder_that_keeps_ticking_is_never_taken_over(gaps: list[float]) -> None:
    store, now = Store(), 0.0
    for gap in gaps:
        now += gap
        for holder in (OLD, NEW):  # the old holder ticks first, the newcomer right after
            d = decide(store.claim, holder, assigned=True, now=at(now), lease_seconds=LEASE)
            if d.write is not None:
                store.write(d.write, store.version)
    assert store.claim is None or store.claim.held_by(OLD)
