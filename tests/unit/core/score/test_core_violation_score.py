"""The violation score: 0 when every target is met, the sum of relative overshoots otherwise."""

from __future__ import annotations

import math

import pytest
from tests.unit.core.builders import healthy, objectives

from latency_tuner.core.score import format_seconds, score


def test_targets_met_score_zero_with_a_breakdown_per_objective() -> None:
    s = score(healthy(), objectives(ttft="500ms", itl="50ms"))
    assert s.value == 0.0
    assert s.met is True
    assert [(o.name, o.percentile, o.observed) for o in s.objectives] == [
        ("ttft", 90, 0.20),
        ("itl", 90, 0.025),
    ]
    assert s.breached == ()


def test_each_objective_adds_its_relative_overshoot() -> None:
    window = healthy(ttft={90: 0.75}, itl={90: 0.055})
    s = score(window, objectives(ttft="500ms", itl="50ms"))
    assert s.value == pytest.approx(0.5 + 0.1)
    assert s.met is False
    assert [o.name for o in s.breached] == ["ttft", "itl"]  # most violated first
    assert s.get("ttft") is not None
    assert s.get("e2e") is None


def test_the_objectives_percentile_is_the_quantile_scored() -> None:
    window = healthy(ttft={50: 0.2, 99: 0.9})
    assert score(window, objectives(ttft="500ms", percentile=99)).value == pytest.approx(0.8)
    assert score(window, objectives(ttft="500ms", percentile=50)).value == 0.0


def test_a_missing_quantile_is_unknown_not_zero() -> None:
    s = score(healthy(ttft={50: 0.1}), objectives(ttft="500ms", itl="50ms"))
    assert s.value is None
    assert s.met is None
    assert s.tie_break is None
    assert [o.label for o in s.unknown] == ["TTFT p90"]
    assert s.known_value == 0.0
    assert "unknown" in s.describe()


def test_a_nan_quantile_from_an_empty_histogram_is_unknown() -> None:
    s = score(healthy(itl={90: math.nan}), objectives(itl="50ms"))
    assert s.value is None


def test_a_known_miss_is_reported_even_when_another_objective_is_unknown() -> None:
    s = score(healthy(ttft={90: 1.0}, itl={}), objectives(ttft="500ms", itl="50ms"))
    assert s.met is False
    assert s.value is None
    assert s.known_value == pytest.approx(1.0)


def test_tie_break_sums_latency_to_target_ratios_even_when_targets_are_met() -> None:
    s = score(healthy(), objectives(ttft="500ms", itl="50ms"))
    assert s.tie_break == pytest.approx(0.2 / 0.5 + 0.025 / 0.05)


def test_descriptions_name_the_numbers() -> None:
    s = score(healthy(ttft={90: 0.85}), objectives(ttft="500ms"))
    assert s.describe() == "score 0.70: TTFT p90 850ms (target 500ms, +70%)"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.82, "820ms"), (0.035, "35ms"), (0.0042, "4.2ms"), (12.5, "12.5s")],
)
def test_latencies_are_written_in_the_one_go_duration_style(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text
