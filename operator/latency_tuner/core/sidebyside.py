"""Side-by-side verdict of a canary: its pod against the baseline pods over the same window.

A rollout trial compares two different stretches of time, so load drift between them reads as
an effect. A canary runs beside the baseline, and each arm yields one sample per interval (a
latency quantile of that interval, per pod); this module decides whether the canary's samples
are lower, higher or not distinguishable from the baseline's, with the Mann-Whitney U test
(Kayenta's choice for canary metrics: no normality assumed, robust to the skew of latency
quantiles) and the Hodges-Lehmann shift as the effect size.

The arms are comparable only if they served comparable load from comparable states:
``load_balanced`` checks that the canary received the per-pod share of the requests the
baseline pods received (arrivals, not completions: a saturated pod finishes fewer than it
receives), within the Poisson noise of the counts; ``steady_backlogs`` that neither arm's
latency comes from a queue it is draining or that both are piling up (a canary starts with an
empty queue, so beside a baseline that still carries a backlog it looks faster than it is).
What differs beyond that (prompt mix under cache-aware routing) is the caller's to
stratify: compare per stratum and combine.

Pure: samples in, verdict out. Lower is better for every latency this is used on.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

TEST_NAME = "Mann-Whitney U"
# The exact permutation distribution while it is cheap (N = 30: about 0.1 s of dynamic
# programming); beyond, the normal approximation with tie correction, accurate at that size.
_EXACT_MAX_TOTAL = 30


class Outcome(enum.StrEnum):
    BETTER = "Better"
    WORSE = "Worse"
    NO_DIFFERENCE = "NoDifference"
    INCONCLUSIVE = "Inconclusive"


@dataclass(frozen=True)
class ArmComparison:
    outcome: Outcome
    u: float
    """The canary's U statistic: how many (canary, baseline) pairs have the canary higher,
    ties counting one half."""
    p_value: float
    """Two-sided."""
    shift: float
    """Hodges-Lehmann estimate of canary minus baseline (the median of pairwise differences)."""
    relative_shift: float | None
    """``shift`` over the baseline's median; None when that median is 0."""
    baseline_samples: int
    canary_samples: int
    reason: str

    @property
    def confidence(self) -> float:
        return 1.0 - self.p_value


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Mid-ranks (ties share the mean of their ranks) and the sizes of the tie groups."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties: list[int] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _p_exact(ranks: Sequence[float], m: int) -> float:
    """Two-sided p over every way to split the pooled mid-ranks into arms of m and N - m:
    the permutation distribution itself, ties included (they are common when quantiles are
    read from histogram buckets), counted by subset-sum dynamic programming, not enumerated."""
    doubled = [round(2 * r) for r in ranks]  # mid-ranks are multiples of 1/2
    ways: list[dict[int, int]] = [{0: 1}] + [{} for _ in range(m)]
    for seen, rank in enumerate(doubled):
        for k in range(min(m, seen + 1), 0, -1):
            into = ways[k]
            for total, count in ways[k - 1].items():
                into[total + rank] = into.get(total + rank, 0) + count
    centre = m * (len(ranks) + 1)  # twice the expected rank sum of the first arm
    observed = abs(sum(doubled[:m]) - centre)
    extreme = sum(count for total, count in ways[m].items() if abs(total - centre) >= observed)
    return min(1.0, extreme / math.comb(len(ranks), m))


def _p_normal(u: float, m: int, n: int, ties: Sequence[int]) -> float:
    big = m + n
    tie_term = sum(t**3 - t for t in ties) / (big * (big - 1))
    variance = m * n / 12.0 * ((big + 1) - tie_term)
    if variance <= 0.0:
        return 1.0  # every value equal: no evidence of any difference
    deviation = max(abs(u - m * n / 2.0) - 0.5, 0.0)  # continuity correction
    return min(1.0, math.erfc(deviation / math.sqrt(2.0 * variance)))


def mann_whitney(canary: Sequence[float], baseline: Sequence[float]) -> tuple[float, float]:
    """The canary's U and the two-sided p-value of the hypothesis that both arms are drawn
    from one distribution: exact up to 30 samples in all, normal with tie correction beyond."""
    m, n = len(canary), len(baseline)
    if m == 0 or n == 0:
        raise ValueError("both arms need at least one sample")
    ranks, ties = _ranks([*canary, *baseline])
    u = sum(ranks[:m]) - m * (m + 1) / 2.0
    if m + n <= _EXACT_MAX_TOTAL:
        return u, _p_exact(ranks, m)
    return u, _p_normal(u, m, n, ties)


def hodges_lehmann(canary: Sequence[float], baseline: Sequence[float]) -> float:
    """The median of all pairwise differences canary - baseline: the shift the test detects."""
    return statistics.median(c - b for c in canary for b in baseline)


def compare_arms(
    canary: Sequence[float],
    baseline: Sequence[float],
    *,
    what: str = "latency",
    alpha: float = 0.05,
    min_samples: int = 5,
) -> ArmComparison:
    """Is the canary's ``what`` lower (Better), higher (Worse) or indistinguishable from the
    baseline's? Fewer than ``min_samples`` in an arm is Inconclusive: with 4 against 4 even a
    complete separation has p = 0.029, and one noisy interval would decide."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be within (0, 1), got {alpha}")
    m, n = len(canary), len(baseline)
    if min(m, n) < max(min_samples, 1):
        reason = (
            f"{TEST_NAME} needs {min_samples} samples per arm, got {m} (canary) and "
            f"{n} (baseline): wait for more intervals"
        )
        return ArmComparison(Outcome.INCONCLUSIVE, math.nan, 1.0, math.nan, None, n, m, reason)
    u, p = mann_whitney(canary, baseline)
    shift = hodges_lehmann(canary, baseline)
    centre = statistics.median(baseline)
    relative = shift / centre if centre else None
    if p >= alpha:
        outcome = Outcome.NO_DIFFERENCE
    else:
        outcome = Outcome.BETTER if shift < 0 or (shift == 0 and u < m * n / 2) else Outcome.WORSE
    size = f"{relative:+.1%}" if relative is not None else f"{shift:+.4g}"
    reason = (
        f"{TEST_NAME} U={u:g}, two-sided p={p:.3g} (n={m} canary, {n} baseline): canary "
        f"{what} shifted {size} (Hodges-Lehmann {shift:+.4g}), confidence {1 - p:.1%}"
    )
    return ArmComparison(outcome, u, p, shift, relative, n, m, reason)


@dataclass(frozen=True)
class LoadBalance:
    balanced: bool
    canary_requests: float
    expected_requests: float
    reason: str


def load_balanced(
    canary_requests: float, baseline_requests: float, baseline_pods: int, *, z: float = 3.0
) -> LoadBalance:
    """Did the canary receive one baseline pod's share of the window's requests?

    Under Poisson arrivals the difference between the canary's count and a baseline pod's mean
    count has variance ``c + b / k`` (k baseline pods); beyond ``z`` standard deviations the
    arms saw different load (a router that avoids the new pod, a cold prefix cache draining
    traffic elsewhere) and their latencies are not comparable.
    """
    if baseline_pods < 1:
        raise ValueError(f"the baseline needs at least one pod, got {baseline_pods}")
    if canary_requests < 0 or baseline_requests < 0:
        raise ValueError("request counts cannot be negative")
    expected = baseline_requests / baseline_pods
    sigma = math.sqrt(canary_requests + baseline_requests / baseline_pods)
    balanced = abs(canary_requests - expected) <= z * max(sigma, 1.0)
    relation = "within" if balanced else "beyond"
    reason = (
        f"canary received {canary_requests:g} requests against {expected:g} per baseline pod: "
        f"{relation} {z:g} standard deviations of Poisson noise"
    )
    return LoadBalance(balanced, canary_requests, expected, reason)


@dataclass(frozen=True)
class Backlogs:
    steady: bool
    reason: str


def steady_backlogs(
    canary_growth: float,
    canary_arrivals: float,
    baseline_growth: float,
    baseline_arrivals: float,
    baseline_pods: int,
) -> Backlogs:
    """Can the arms' latencies be compared given how their waiting queues moved over the
    window (``*_growth``: the change of the waiting gauge, summed over the arm's pods)?

    Not while the baseline drains a backlog (it built it before the canary took its share: its
    latency is history, not configuration), nor while both queues grow alike (an overloaded
    configuration on both sides: the canary, started empty, is only behind). A canary whose queue
    stays flat beside a growing baseline serves more: that is comparable, and better. A change
    counts beyond ``max(3, 5%)`` of the arrivals per pod: gauges sampled at two instants
    move by a few requests on their own.
    """
    if baseline_pods < 1:
        raise ValueError(f"the baseline needs at least one pod, got {baseline_pods}")
    per_pod = baseline_growth / baseline_pods
    slack = max(3.0, 0.05 * max(canary_arrivals, baseline_arrivals / baseline_pods))
    if per_pod < -slack:
        return Backlogs(
            False,
            f"the baseline pods' queue drained by {-per_pod:.3g} requests per pod over the "
            "window (a backlog from before the canary took its share): not yet comparable",
        )
    if per_pod > slack and canary_growth > per_pod / 2:
        return Backlogs(
            False,
            f"both arms' queues grew ({canary_growth:.3g} canary, {per_pod:.3g} per baseline "
            "pod): both overloaded, and the canary started empty",
        )
    return Backlogs(
        True, f"queues moved {canary_growth:+.3g} (canary), {per_pod:+.3g} per baseline pod"
    )
