"""The Warning events a reconcile owes beyond the decision's own: one for each condition that
turned bad (Ready False, MetricsAvailable False for a failing source, Degraded True) with a
reason no event of the round already carries. A condition that stays bad posts nothing again,
so a Prometheus down for an hour is one Warning, not one per reconcile. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from latency_tuner.api.conditions import ConditionType
from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.core.rollout import Note

# (condition, status) pairs that mean something is wrong; MetricsAvailable only for a source
# that fails (NoData or too few requests is a quiet Deployment, not a fault).
_BAD = {
    ConditionType.READY.value: ("False", None),
    ConditionType.METRICS_AVAILABLE.value: ("False", "MetricsSourceError"),
    ConditionType.DEGRADED.value: ("True", None),
}


@dataclass(frozen=True)
class ConditionWarning:
    """A Warning event for a condition that turned bad; posted like a ``Note``."""

    reason: str
    message: str
    type: Literal["Warning"] = "Warning"


def condition_warnings(
    before: LatencyTargetStatus, after: LatencyTargetStatus, notes: Sequence[Note]
) -> list[ConditionWarning]:
    """The Warnings for conditions of ``after`` that are bad and were not, or were bad for
    another reason, in ``before``; none whose reason an event in ``notes`` already gives."""
    old = {c.type: (c.status, c.reason) for c in before.conditions}
    posted = {str(n.reason) for n in notes}
    found: list[ConditionWarning] = []
    for condition in after.conditions:
        bad = _BAD.get(condition.type)
        if bad is None or condition.status != bad[0] or bad[1] not in (None, condition.reason):
            continue
        if old.get(condition.type) == (condition.status, condition.reason):
            continue
        if condition.reason in posted:
            continue
        posted.add(condition.reason)
        found.append(ConditionWarning(condition.reason, condition.message))
    return found
