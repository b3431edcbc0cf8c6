"""Prometheus' own arithmetic, for sources that are not Prometheus.

The direct-scrape source and the benchmarks compute signals from raw samples; to give the same
numbers as a Prometheus server would, they use these re-implementations of PromQL's
``rate``/``increase`` (with its extrapolation to the window edges and counter-reset handling),
``histogram_quantile`` (linear interpolation inside a bucket) and the ``*_over_time`` functions,
following Prometheus 2.x semantics (ranges closed at both ends). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Point = tuple[float, float]  # (timestamp seconds, value)


def in_range(points: Sequence[Point], start: float, end: float) -> list[Point]:
    return [p for p in points if start <= p[0] <= end]


def extrapolated_delta(
    points: Sequence[Point], *, start: float, end: float, is_counter: bool, is_rate: bool
) -> float | None:
    """``increase`` (``is_rate=False``) or ``rate`` of one series over ``[start, end]``."""
    pts = in_range(points, start, end)
    if len(pts) < 2:
        return None
    first_t, first_v = pts[0]
    last_t, last_v = pts[-1]
    result = last_v - first_v
    if is_counter:
        prev = first_v
        for _, v in pts[1:]:
            if v < prev:  # a counter reset: the series restarted from zero
                result += prev
            prev = v
    sampled = last_t - first_t
    if sampled <= 0:
        return None
    to_start = first_t - start
    to_end = end - last_t
    average_gap = sampled / (len(pts) - 1)
    if is_counter and result > 0 and first_v >= 0:
        # A counter cannot go below zero: do not extrapolate past where it would hit it.
        to_start = min(to_start, sampled * (first_v / result))
    threshold = average_gap * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average_gap / 2
    interval += to_end if to_end < threshold else average_gap / 2
    result *= interval / sampled
    if is_rate:
        result /= end - start
    return result


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """``histogram_quantile(q, ...)`` over (upper bound, cumulative count) pairs.

    None where Prometheus answers NaN (no observations, no +Inf bucket, fewer than two buckets).
    """
    if math.isnan(q):
        return None
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    merged: dict[float, float] = {}
    for le, count in buckets:
        merged[le] = merged.get(le, 0.0) + count
    ordered = sorted(merged.items())
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]):
        return None
    # Rates of cumulative buckets can be slightly non-monotonic (scrape skew): flatten them.
    fixed: list[tuple[float, float]] = []
    top = 0.0
    for le, count in ordered:
        top = max(top, count)
        fixed.append((le, top))
    return ordered_histogram_quantile(q, fixed)


def ordered_histogram_quantile(q: float, fixed: Sequence[tuple[float, float]]) -> float | None:
    """``histogram_quantile`` over buckets already in order: upper bounds ascending and
    distinct, the last +Inf, cumulative counts never falling (a model's own histogram, read
    hundreds of times a decision). ``q`` within [0, 1]."""
    observations = fixed[-1][1]
    if observations <= 0:
        return None
    rank = q * observations
    b = next(i for i, (_, count) in enumerate(fixed) if count >= rank)
    if b == len(fixed) - 1:
        return fixed[-2][0]
    if b == 0 and fixed[0][0] <= 0:
        return fixed[0][0]
    start, end, count = 0.0, fixed[b][0], fixed[b][1]
    if b > 0:
        start = fixed[b - 1][0]
        count -= fixed[b - 1][1]
        rank -= fixed[b - 1][1]
    if count <= 0:  # only for q = 0 below the first observation (Prometheus gives NaN there)
        return start
    return start + (end - start) * (rank / count)


def avg_over_time(points: Sequence[Point], *, start: float, end: float) -> float | None:
    pts = in_range(points, start, end)
    return sum(v for _, v in pts) / len(pts) if pts else None


def max_over_time(points: Sequence[Point], *, start: float, end: float) -> float | None:
    pts = in_range(points, start, end)
    return max(v for _, v in pts) if pts else None
