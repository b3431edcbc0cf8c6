from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from latency_tuner.loadgen.stats import percentile, summarize

samples = st.lists(
    st.floats(min_value=0.0, max_value=1e4, allow_nan=False, allow_infinity=False),
    min_size=2,
    max_size=200,
)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0], 90, 3.7),  # numpy.percentile([1, 2, 3, 4], 90)
        ([1.0, 2.0, 3.0, 4.0], 99, 3.97),
        ([1.0, 2.0, 3.0, 4.0], 0, 1.0),
        ([1.0, 2.0, 3.0, 4.0], 100, 4.0),
        ([10.0, 20.0, 30.0, 40.0, 50.0], 95, 48.0),
        ([7.0], 99, 7.0),
    ],
)
def test_percentiles_interpolate_linearly_like_numpy(
    values: list[float], q: float, expected: float
) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_a_summary_of_no_values_is_none_rather_than_zeros() -> None:
    assert summarize([]) is None


def test_a_summary_sorts_its_input_and_carries_every_percentile() -> None:
    summary = summarize([4.0, 1.0, 3.0, 2.0])
    assert summary is not None
    assert (summary.count, summary.minimum, summary.maximum, summary.mean) == (4, 1.0, 4.0, 2.5)
    assert (summary.p50, summary.p90, summary.p95, summary.p99) == pytest.approx(
        (2.5, 3.7, 3.85, 3.97)
    )
    assert summary.scaled(1000).p50 == pytest.approx(2500.0)


def test_percentile_outside_0_to_100_is_rejected() -> None:
    with pytest.raises(ValueError, match="outside"):
        percentile([1.0], 101)


@given(samples, st.integers(min_value=1, max_value=99))
def test_percentiles_agree_with_the_standard_library_inclusive_method(
    values: list[float], q: int
) -> None:
    expected = statistics.quantiles(values, n=100, method="inclusive")[q - 1]
    assert percentile(sorted(values), q) == pytest.approx(expected, rel=1e-9, abs=1e-9)


@given(samples, st.data())
def test_a_percentile_at_an_exact_rank_is_that_element_of_the_sorted_list(
    values: list[float], data: st.DataObject
) -> None:
    ordered = sorted(values)
    rank = data.draw(st.integers(min_value=0, max_value=len(ordered) - 1))
    q = 100.0 * rank / (len(ordered) - 1)
    assert percentile(ordered, q) == pytest.approx(ordered[rank], rel=1e-9, abs=1e-9)


@given(samples)
def test_percentiles_are_ordered_and_inside_the_sample_range(values: list[float]) -> None:
    summary = summarize(values)
    assert summary is not None
    assert (
        summary.minimum
        <= summary.p50
        <= summary.p90
        <= summary.p95
        <= summary.p99
        <= summary.maximum
    )
