"""The events a decision posts on the LatencyTarget: every reason is a member of ``Reason``
(which also knows its event type), so the handler and the tests name them, never spell them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

EventType = Literal["Normal", "Warning"]


class Reason(StrEnum):
    """The ``reason`` of an Event, as ``kubectl describe`` shows it."""

    # The target cannot be worked on (Warning).
    INVALID_SPEC = "InvalidSpec"
    DEPLOYMENT_NOT_FOUND = "DeploymentNotFound"
    CONTAINER_NOT_FOUND = "ContainerNotFound"
    CONFLICT = "Conflict"
    NOT_VLLM = "NotVllm"
    CHANGE_REFUSED = "ChangeRefused"  # a change the knob catalog could not make (see trust)
    RECONCILE_ERROR = "ReconcileError"  # an unexpected failure of a reconcile
    # The loop.
    RESUMED = "Resumed"
    CONFIGURATION_CHANGED = "ConfigurationChanged"
    DRIFT = "Drift"
    RECOMMENDATION = "Recommendation"
    TARGETS_MET = "TargetsMet"
    TARGETS_MISSED = "TargetsMissed"  # missed again after converging: tuning again
    EXHAUSTED = "Exhausted"
    TRIAL_STARTED = "TrialStarted"
    TRIAL_FAILED = "TrialFailed"
    KEPT = "Kept"
    INCONCLUSIVE = "Inconclusive"
    REVERTING = "Reverting"
    ROLLED_BACK = "RolledBack"
    PROMOTED = "Promoted"  # a kept canary's arguments are on the Deployment
    QUALITY_GATE_FAILED = "QualityGateFailed"  # a lossy change answered worse: not kept
    # The finalizer.
    RESTORED = "Restored"

    @property
    def type(self) -> EventType:
        return "Warning" if self in _WARNINGS else "Normal"

    @property
    def rolls_back(self) -> bool:
        """A trial is being undone (the operator's rollback counter)."""
        return self in (Reason.REVERTING, Reason.TRIAL_FAILED)

    def note(self, message: str) -> Note:
        return Note(self, message)


_WARNINGS = frozenset(
    {
        Reason.INVALID_SPEC,
        Reason.DEPLOYMENT_NOT_FOUND,
        Reason.CONTAINER_NOT_FOUND,
        Reason.CONFLICT,
        Reason.NOT_VLLM,
        Reason.CHANGE_REFUSED,
        Reason.RECONCILE_ERROR,
        Reason.DRIFT,
        Reason.EXHAUSTED,
        Reason.TARGETS_MISSED,
        Reason.TRIAL_FAILED,
        Reason.QUALITY_GATE_FAILED,
    }
)


@dataclass(frozen=True)
class Note:
    """An event to post on the LatencyTarget; its type follows from its reason."""

    reason: Reason
    message: str

    @property
    def type(self) -> EventType:
        return self.reason.type
