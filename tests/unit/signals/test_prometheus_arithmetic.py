"""The re-implemented PromQL functions give Prometheus' answers (worked by hand from its code)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from latency_tuner.core.prommath import (
    avg_over_time,
    extrapolated_delta,
    histogram_quantile,
    max_over_time,
)


def test_rate_of_a_steady_counter_sampled_at_the_window_edges_is_its_slope() -> None:
    points = [(float(t), 2.0 * t) for t in range(0, 61, 15)]
    assert extrapolated_delta(points, start=0, end=60, is_counter=True, is_rate=True) == 2.0


def test_increase_extrapolates_to_the_window_edges_like_prometheus() -> None:
    # Samples at 5..55 every 10 s in a 60 s window: 5 s gaps at each edge (< 1.1 x 10 s),
    # so the 50 s sampled increase is stretched to 60 s.
    points = [(float(t), float(t)) for t in range(5, 56, 10)]
    assert extrapolated_delta(points, start=0, end=60, is_counter=True, is_rate=False) == (
        pytest.approx(60.0)
    )


def test_a_counter_is_not_extrapolated_below_zero() -> None:
    # The counter starts at 1 at t=10 and grows 1/s: it was zero at t=9, not at t=0.
    points = [(10.0, 1.0), (20.0, 11.0), (30.0, 21.0)]
    got = extrapolated_delta(points, start=0, end=30, is_counter=True, is_rate=False)
    assert got == pytest.approx(21.0)


def test_a_counter_reset_is_counted_as_a_restart_from_zero() -> None:
    points = [(0.0, 10.0), (10.0, 20.0), (20.0, 5.0), (30.0, 15.0)]
    assert extrapolated_delta(points, start=0, end=30, is_counter=True, is_rate=False) == 25.0


def test_fewer_than_two_samples_give_no_rate() -> None:
    assert extrapolated_delta([(1.0, 1.0)], start=0, end=10, is_counter=True, is_rate=True) is None


def test_a_quantile_interpolates_linearly_inside_its_bucket() -> None:
    buckets = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (math.inf, 40.0)]
    # rank 20 of 40 lies halfway through the (0.1, 0.5] bucket's 20 observations.
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.3)


def test_a_quantile_in_the_first_bucket_starts_from_zero() -> None:
    assert histogram_quantile(0.25, [(0.2, 4.0), (math.inf, 4.0)]) == pytest.approx(0.05)


def test_a_quantile_in_the_infinite_bucket_answers_the_last_finite_bound() -> None:
    assert histogram_quantile(0.99, [(0.1, 1.0), (1.0, 2.0), (math.inf, 10.0)]) == 1.0


def test_a_histogram_without_observations_or_an_inf_bucket_has_no_quantile() -> None:
    assert histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None
    assert histogram_quantile(0.5, [(0.1, 1.0), (1.0, 2.0)]) is None


def test_non_monotonic_bucket_rates_are_flattened() -> None:
    buckets = [(0.1, 5.0), (0.2, 4.0), (math.inf, 10.0)]
    assert histogram_quantile(0.45, buckets) == pytest.approx(0.1 * 4.5 / 5)


def test_gauge_windows_average_and_maximise_the_samples_inside() -> None:
    points = [(0.0, 1.0), (10.0, 3.0), (20.0, 8.0), (99.0, 100.0)]
    assert avg_over_time(points, start=0, end=20) == 4.0
    assert max_over_time(points, start=0, end=20) == 8.0
    assert avg_over_time(points, start=30, end=40) is None


@given(
    st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=20),
    st.floats(0, 1, allow_nan=False),
)
def test_a_quantile_lies_within_the_bucket_bounds(observations: list[float], q: float) -> None:
    bounds = [0.5, 1, 2.5, 5, 10, 50, math.inf]
    buckets = [(b, float(sum(1 for o in observations if o <= b))) for b in bounds]
    got = histogram_quantile(q, buckets)
    assert got is not None
    assert 0 <= got <= 50
