"""Conditions change the Kubernetes way: the transition time moves only when status flips."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from latency_tuner.api import (
    Condition,
    ConditionType,
    get_condition,
    is_condition_true,
    set_condition,
)

T0 = datetime(2026, 12, 2, 9, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_condition_types_are_the_documented_camelcase_names() -> None:
    assert [str(t) for t in ConditionType] == [
        "Ready",
        "TargetsMet",
        "Progressing",
        "MetricsAvailable",
        "Degraded",
    ]


def test_a_new_condition_is_appended_with_now_as_its_transition_time() -> None:
    conditions = set_condition([], ConditionType.READY, True, "Found", "ok", T0, 3)
    assert conditions == [
        Condition(
            type="Ready",
            status="True",
            reason="Found",
            message="ok",
            last_transition_time="2026-12-02T09:00:00Z",
            observed_generation=3,
        )
    ]


def test_the_same_status_keeps_the_transition_time_but_updates_reason_and_message() -> None:
    before = set_condition([], ConditionType.TARGETS_MET, False, "TtftHigh", "ttft 900ms", T0, 1)
    after = set_condition(before, ConditionType.TARGETS_MET, False, "ItlHigh", "itl 80ms", T1, 2)
    [condition] = after
    assert condition.last_transition_time == "2026-12-02T09:00:00Z"
    assert (condition.reason, condition.message) == ("ItlHigh", "itl 80ms")
    assert condition.observed_generation == 2


def test_a_flipped_status_moves_the_transition_time() -> None:
    before = set_condition([], ConditionType.TARGETS_MET, False, "TtftHigh", "", T0, 1)
    after = set_condition(before, ConditionType.TARGETS_MET, "True", "Met", "all met", T1, 1)
    assert after[0].status == "True"
    assert after[0].last_transition_time == "2026-12-02T09:05:00Z"


def test_unknown_to_false_is_a_flip_too() -> None:
    before = set_condition([], "MetricsAvailable", "Unknown", "Starting", "", T0, None)
    after = set_condition(before, "MetricsAvailable", False, "NoSeries", "no data", T1, None)
    assert after[0].last_transition_time == "2026-12-02T09:05:00Z"


def test_other_conditions_keep_their_place_and_the_input_is_untouched() -> None:
    first = set_condition([], ConditionType.READY, True, "Found", "", T0, 1)
    both = set_condition(first, ConditionType.DEGRADED, False, "Healthy", "", T0, 1)
    again = set_condition(both, ConditionType.READY, False, "NotVllm", "no vllm", T1, 1)
    assert [c.type for c in again] == ["Ready", "Degraded"]
    assert again[1] is both[1]
    assert len(first) == 1
    assert first[0].status == "True"
    assert both[0].status == "True"


def test_get_and_is_true_read_a_condition_by_type() -> None:
    conditions = set_condition([], ConditionType.PROGRESSING, True, "TrialRunning", "", T0, 1)
    condition = get_condition(conditions, ConditionType.PROGRESSING)
    assert condition is not None
    assert condition.reason == "TrialRunning"
    assert get_condition(conditions, ConditionType.READY) is None
    assert is_condition_true(conditions, "Progressing")
    assert not is_condition_true(conditions, "Ready")


def test_a_reason_that_is_not_camelcase_is_refused() -> None:
    with pytest.raises(ValueError, match="reason"):
        set_condition([], ConditionType.READY, True, "not found!", "", T0, 1)


def test_time_must_carry_a_zone() -> None:
    with pytest.raises(ValueError, match="time zone"):
        set_condition([], ConditionType.READY, True, "Found", "", T0.replace(tzinfo=None), 1)
