"""The canary's per-interval latencies are judged against the baseline's with Mann-Whitney U."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from latency_tuner.core.sidebyside import (
    Outcome,
    compare_arms,
    load_balanced,
    mann_whitney,
    steady_backlogs,
)


def u_of(first: list[float], second: list[float]) -> float:
    """U by its definition: pairs where the first arm is higher, ties counting one half."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in first for b in second)


def _permutation_p(canary: list[float], baseline: list[float]) -> float:
    """Two-sided p by enumerating every split of the pooled samples: the test's definition."""
    pooled = [*canary, *baseline]
    m = len(canary)
    centre = m * len(baseline) / 2
    observed = abs(u_of(canary, baseline) - centre)
    hits = total = 0
    for chosen in itertools.combinations(range(len(pooled)), m):
        first = [pooled[i] for i in chosen]
        second = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        total += 1
        hits += abs(u_of(first, second) - centre) >= observed - 1e-12
    return hits / total


@pytest.mark.parametrize("seed", range(6))
def test_the_exact_p_value_equals_the_permutation_test(seed: int) -> None:
    rng = random.Random(seed)
    canary = [rng.gauss(0.9, 0.2) for _ in range(6)]
    baseline = [rng.gauss(1.0, 0.2) for _ in range(7)]
    _, p = mann_whitney(canary, baseline)
    assert p == pytest.approx(_permutation_p(canary, baseline))


def test_ties_from_histogram_buckets_get_the_exact_permutation_p_value() -> None:
    # Quantiles read from histogram buckets tie often: the tie correction must hold.
    canary = [0.3] * 6 + [0.5] * 3
    baseline = [0.5] * 6 + [0.3] * 2 + [0.7]
    _, p = mann_whitney(canary, baseline)
    assert p == pytest.approx(_permutation_p(canary, baseline))


def test_large_arms_use_the_normal_approximation_with_tie_correction() -> None:
    # Quantiles on bucket bounds half a unit apart: heavy ties, where the correction matters.
    rng = random.Random(10)
    canary = [round(rng.gauss(1.0, 0.3) * 2) / 2 for _ in range(20)]
    baseline = [round(rng.gauss(1.2, 0.3) * 2) / 2 for _ in range(20)]
    _, p = mann_whitney(canary, baseline)
    # The reference: a Monte Carlo permutation test over 4,000 random splits (sd ~0.003).
    pooled = [*canary, *baseline]
    observed = abs(u_of(canary, baseline) - 200)
    hits = 0
    for _ in range(4_000):
        rng.shuffle(pooled)
        hits += abs(u_of(pooled[:20], pooled[20:]) - 200) >= observed - 1e-12
    assert 0.001 < p < 0.5  # a case where the approximation matters, not a trivial extreme
    assert p == pytest.approx(hits / 4_000, abs=0.01)


@given(
    st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=12),
    st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=12),
)
def test_u_of_both_arms_adds_up_and_p_is_symmetric(
    canary: list[float], baseline: list[float]
) -> None:
    u_canary, p_forward = mann_whitney(canary, baseline)
    u_baseline, p_backward = mann_whitney(baseline, canary)
    assert u_canary + u_baseline == pytest.approx(len(canary) * len(baseline))
    assert p_forward == pytest.approx(p_backward)
    assert 0.0 <= p_forward <= 1.0


def test_a_clearly_faster_canary_is_better_with_its_effect_named() -> None:
    rng = random.Random(1)
    baseline = [rng.gauss(0.200, 0.01) for _ in range(12)]
    canary = [rng.gauss(0.150, 0.01) for _ in range(12)]
    verdict = compare_arms(canary, baseline, what="TTFT p95")
    assert verdict.outcome is Outcome.BETTER
    assert verdict.relative_shift == pytest.approx(-0.25, abs=0.05)
    assert verdict.confidence > 0.99
    assert "Mann-Whitney U" in verdict.reason
    assert "TTFT p95" in verdict.reason


def test_a_slower_canary_is_worse() -> None:
    rng = random.Random(2)
    baseline = [rng.gauss(0.030, 0.002) for _ in range(10)]
    canary = [rng.gauss(0.040, 0.002) for _ in range(10)]
    assert compare_arms(canary, baseline).outcome is Outcome.WORSE


def test_noise_alone_is_rarely_called_a_difference() -> None:
    rng = random.Random(3)
    calls = 0
    for _ in range(200):
        arms = [[rng.lognormvariate(0, 0.5) for _ in range(10)] for _ in range(2)]
        calls += compare_arms(arms[0], arms[1]).outcome is not Outcome.NO_DIFFERENCE
    assert calls / 200 <= 0.08  # alpha 0.05, with sampling slack


def test_too_few_intervals_are_inconclusive() -> None:
    verdict = compare_arms([0.1, 0.1, 0.1, 0.1], [1.0, 1.0, 1.0, 1.0, 1.0])
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "needs 5 samples per arm" in verdict.reason


def test_the_shift_is_the_median_pairwise_difference() -> None:
    verdict = compare_arms([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0, 6.0])
    pairwise = [c - b for c in [1.0, 2.0, 3.0, 4.0, 5.0] for b in [2.0, 3.0, 4.0, 5.0, 6.0]]
    assert verdict.shift == statistics.median(pairwise) == -1.0


def test_a_canary_the_router_starves_is_not_comparable() -> None:
    assert load_balanced(canary_requests=95, baseline_requests=300, baseline_pods=3).balanced
    starved = load_balanced(canary_requests=20, baseline_requests=300, baseline_pods=3)
    assert not starved.balanced
    assert "beyond 3 standard deviations" in starved.reason


def test_a_baseline_draining_a_backlog_is_not_in_a_state_to_compare() -> None:
    # Two baseline pods drained 60 queued requests between them while each received 300.
    drained = steady_backlogs(0.0, 300.0, -60.0, 600.0, baseline_pods=2)
    assert not drained.steady
    assert "drained by 30 requests per pod" in drained.reason


def test_queues_that_both_grow_are_not_compared() -> None:
    piling = steady_backlogs(40.0, 300.0, 100.0, 600.0, baseline_pods=2)
    assert not piling.steady
    assert "both arms' queues grew" in piling.reason


def test_a_canary_that_keeps_up_beside_a_growing_baseline_is_compared() -> None:
    assert steady_backlogs(2.0, 300.0, 100.0, 600.0, baseline_pods=2).steady


def test_a_few_requests_of_gauge_noise_leave_both_arms_comparable() -> None:
    # Closed-loop users make the waiting gauge wobble by a few requests between two instants.
    assert steady_backlogs(-2.0, 40.0, 5.0, 80.0, baseline_pods=2).steady
    assert steady_backlogs(14.0, 300.0, -28.0, 600.0, baseline_pods=2).steady
