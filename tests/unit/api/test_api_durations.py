"""Durations read and write the way people and Kubernetes write them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from latency_tuner.api import format_duration, format_timestamp, parse_duration, parse_timestamp


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30.0),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
        ("1.5s", 1.5),
        ("1h0m5s", 3605.0),
        ("0s", 0.0),
        (" 5m ", 300.0),
    ],
)
def test_a_duration_string_reads_as_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("5 minutes", "write 5m"),
        ("250 ms", "write 250ms"),
        ("-1s", "negative"),
        ("5", "with a unit"),
        ("1d", "with a unit"),
        ("30s2m", "with a unit"),
        ("", "with a unit"),
    ],
)
def test_a_bad_duration_is_refused_with_the_fix_in_words(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"is not a duration|is negative") as caught:
        parse_duration(text)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        # What Go's time.Duration.String() prints for the same value (to the decimals kept).
        (0.5, "500ms"),
        (2.425, "2.425s"),
        (405.881, "6m45.881s"),
        (90, "1m30s"),
        (120, "2m0s"),
        (3600, "1h0m0s"),
        (3725.5, "1h2m5.5s"),
        (0, "0s"),
        (0.4123, "412.3ms"),
        (0.0015, "1.5ms"),
        (0.00025, "250µs"),
        (-2, "-2s"),
    ],
)
def test_seconds_are_written_as_go_prints_a_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(2.4253461, "2.425s"), (0.41234567, "412.346ms"), (59.9996, "1m0s")]
)
def test_a_duration_keeps_at_most_three_decimals_and_rounds_across_units(
    seconds: float, text: str
) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=0, max_value=10 * 24 * 3600 * 1000))
def test_a_whole_number_of_milliseconds_survives_format_then_parse(millis: int) -> None:
    assert parse_duration(format_duration(millis / 1000)) == pytest.approx(millis / 1000)


def test_an_infinite_duration_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="cannot format"):
        format_duration(float("inf"))


def test_timestamps_are_rfc3339_in_utc_to_the_second() -> None:
    moment = datetime(2026, 12, 2, 10, 54, 46, 999, tzinfo=timezone(timedelta(hours=2)))
    assert format_timestamp(moment) == "2026-12-02T08:54:46Z"
    assert parse_timestamp("2026-12-02T08:54:46Z") == datetime(2026, 12, 2, 8, 54, 46, tzinfo=UTC)


def test_a_naive_time_is_refused_rather_than_guessed() -> None:
    with pytest.raises(ValueError, match="no time zone"):
        format_timestamp(datetime(2026, 12, 2, 8, 54, 46))
    with pytest.raises(ValueError, match="no time zone"):
        parse_timestamp("2026-12-02T08:54:46")
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_timestamp("yesterday")
