"""Setting and reading Kubernetes conditions as pure values.

``lastTransitionTime`` moves only when a condition's status flips: that is what lets
``kubectl describe`` say "TargetsMet: False for 3h" rather than "since the last reconcile".
Time arrives as a parameter; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Literal

from latency_tuner.api.durations import format_timestamp
from latency_tuner.api.status import Condition

ConditionStatus = Literal["True", "False", "Unknown"]


class ConditionType(StrEnum):
    """The condition types a LatencyTarget carries (positive polarity: True is good,
    except Degraded and Progressing, which say what is happening)."""

    READY = "Ready"  # the operator can work on the target (Deployment found, vLLM, metrics)
    TARGETS_MET = "TargetsMet"  # every objective was met in the latest window
    PROGRESSING = "Progressing"  # a trial or rollback is under way
    METRICS_AVAILABLE = "MetricsAvailable"  # the latest window had enough data to judge
    DEGRADED = "Degraded"  # something needs a person (failed rollout, restore failed, ...)


def _status_text(status: bool | ConditionStatus) -> ConditionStatus:
    if isinstance(status, bool):
        return "True" if status else "False"
    return status


def set_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: bool | ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    observed_generation: int | None,
) -> list[Condition]:
    """A new list with the condition ``type_`` set; the input is left untouched.

    An existing condition keeps its place and its ``lastTransitionTime`` unless ``status``
    differs; reason, message and observedGeneration are updated either way. A new one is
    appended with ``lastTransitionTime = now``.
    """
    text = _status_text(status)
    result: list[Condition] = []
    found = False
    for condition in conditions:
        if condition.type != type_:
            result.append(condition)
            continue
        found = True
        flipped = condition.status != text
        result.append(
            Condition(
                type=type_,
                status=text,
                reason=reason,
                message=message,
                last_transition_time=(
                    format_timestamp(now) if flipped else condition.last_transition_time
                ),
                observed_generation=observed_generation,
            )
        )
    if not found:
        result.append(
            Condition(
                type=type_,
                status=text,
                reason=reason,
                message=message,
                last_transition_time=format_timestamp(now),
                observed_generation=observed_generation,
            )
        )
    return result


def get_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    """The condition of type ``type_``, or None."""
    return next((c for c in conditions if c.type == type_), None)


def is_condition_true(conditions: Sequence[Condition], type_: str) -> bool:
    """True only when the condition exists and its status is "True"."""
    condition = get_condition(conditions, type_)
    return condition is not None and condition.status == "True"
