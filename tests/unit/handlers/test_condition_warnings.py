"""A condition that turns bad posts one Warning with its reason and message; one that stays
bad, or whose reason the round's own events already carry, posts nothing more."""

from __future__ import annotations

from datetime import UTC, datetime

from latency_tuner.api.conditions import ConditionType, set_condition
from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.core.rollout import Reason
from latency_tuner.handlers.condition_events import ConditionWarning, condition_warnings

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def status(*conditions: tuple[ConditionType, bool | str, str, str]) -> LatencyTargetStatus:
    found = LatencyTargetStatus()
    for type_, ok, reason, message in conditions:
        found = found.model_copy(
            update={
                "conditions": set_condition(
                    found.conditions,
                    type_,
                    ok,  # type: ignore[arg-type]
                    reason,
                    message,
                    NOW,
                    1,
                )
            }
        )
    return found


HEALTHY = status(
    (ConditionType.READY, True, "Ready", "tuning Deployment llama"),
    (ConditionType.METRICS_AVAILABLE, True, "Measured", "200 requests"),
)
DOWN = "Prometheus at http://prometheus:9090 is unreachable: connection refused"
SOURCE_DOWN = status(
    (ConditionType.READY, False, "MetricsSourceError", DOWN),
    (ConditionType.METRICS_AVAILABLE, False, "MetricsSourceError", DOWN),
)


def test_a_metrics_source_that_fails_posts_one_warning_with_its_cause() -> None:
    assert condition_warnings(HEALTHY, SOURCE_DOWN, []) == [
        ConditionWarning("MetricsSourceError", DOWN)
    ]


def test_a_source_that_stays_down_posts_nothing_more() -> None:
    assert condition_warnings(SOURCE_DOWN, SOURCE_DOWN, []) == []


def test_a_quiet_deployment_is_no_fault() -> None:
    quiet = status(
        (ConditionType.READY, True, "Ready", "tuning Deployment llama"),
        (ConditionType.METRICS_AVAILABLE, False, "NoData", "no requests finished"),
    )
    assert condition_warnings(HEALTHY, quiet, []) == []


def test_a_reason_the_rounds_own_events_carry_is_not_posted_twice() -> None:
    conflict = status((ConditionType.READY, False, "Conflict", "first already targets llama"))
    note = Reason.CONFLICT.note("first already targets llama")
    assert condition_warnings(HEALTHY, conflict, [note]) == []


def test_a_degraded_target_warns_and_a_new_reason_warns_again() -> None:
    refused = status((ConditionType.DEGRADED, True, "RollbackFailing", "old config crashes"))
    assert condition_warnings(HEALTHY, refused, []) == [
        ConditionWarning("RollbackFailing", "old config crashes")
    ]
    blocked = status((ConditionType.READY, False, "DeploymentNotFound", "no llama"))
    conflict = status((ConditionType.READY, False, "Conflict", "first owns llama"))
    assert condition_warnings(blocked, conflict, []) == [
        ConditionWarning("Conflict", "first owns llama")
    ]
