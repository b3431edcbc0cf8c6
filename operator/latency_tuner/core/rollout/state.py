"""One decision in the making: the status being rewritten, the change and the events it
produces (``Round``), and what it hands back (``Decision``). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from latency_tuner.api.conditions import ConditionType, set_condition
from latency_tuner.api.durations import format_timestamp
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus, Phase
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.rollout.events import Note, Reason
from latency_tuner.core.rollout.facts import seconds_since


@dataclass(frozen=True)
class CanaryAction:
    """What a canary trial wants of the canary and of the main Deployment's replica count.
    Each part is idempotent: the shell acts only where the world is not so yet."""

    ensure: ContainerConfig | None = None  # the canary at this configuration, one replica
    remove: bool = False  # no canary
    main_replicas: int | None = None  # the main Deployment's spec.replicas


@dataclass(frozen=True)
class Decision:
    status: LatencyTargetStatus
    apply: ContainerConfig | None = None  # move the container to this configuration
    notes: tuple[Note, ...] = ()
    again: bool = False  # decide again at once (the status now allows the next step)
    reason: str = ""
    transitions: tuple[tuple[Phase, Phase], ...] = ()  # every phase change taken, in order
    canary: CanaryAction | None = None  # a canary trial's action on the Deployments


class Round:
    """The status being rewritten this round, with the notes it produces."""

    def __init__(
        self, spec: LatencyTargetSpec, generation: int, status: LatencyTargetStatus, now: datetime
    ) -> None:
        self.spec = spec
        self.generation = generation
        self.status = status
        self.now = now
        self.notes: list[Note] = []
        self.apply: ContainerConfig | None = None
        self.canary: CanaryAction | None = None
        self.again = False
        self.transitions: list[tuple[Phase, Phase]] = []

    @property
    def stamp(self) -> str:
        return format_timestamp(self.now)

    def update(self, **changes: Any) -> None:
        self.status = self.status.model_copy(update=changes)

    def phase(self, phase: Phase) -> None:
        if phase is not self.status.phase:
            self.transitions.append((self.status.phase, phase))
            self.update(phase=phase, phase_since=self.stamp)

    def condition(self, type_: ConditionType, ok: bool | str, reason: str, message: str) -> None:
        status: bool | Literal["True", "False", "Unknown"] = ok  # type: ignore[assignment]
        self.update(
            conditions=set_condition(
                self.status.conditions, type_, status, reason, message, self.now, self.generation
            )
        )

    def note(self, reason: Reason, message: str) -> None:
        self.notes.append(reason.note(message))

    def since(self, stamp: str | None) -> float:
        """Seconds from ``stamp`` to now (0 when unset)."""
        return seconds_since(stamp, self.now)

    def decision(self, reason: str) -> Decision:
        return Decision(
            self.status,
            self.apply,
            tuple(self.notes),
            self.again,
            reason,
            tuple(self.transitions),
            self.canary,
        )
