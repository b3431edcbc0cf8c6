"""The violation score: how far a window is from the latency targets, as one number.

score = sum over objectives of max(0, observed / threshold - 1), each observed at the
objective's percentile. Targets are met at 0; 0.25 means "25% over" on one objective (or two
objectives 10% and 15% over). A quantile the window could not compute makes its objective, and
the total, unknown (None) — never 0, which would read as "met". Pure functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from latency_tuner.api.durations import format_duration
from latency_tuner.api.spec import Objective, Objectives
from latency_tuner.core.observation import Observation

ObjectiveName = Literal["ttft", "itl", "e2e"]
OBJECTIVE_NAMES: tuple[ObjectiveName, ...] = ("ttft", "itl", "e2e")
LABELS: dict[ObjectiveName, str] = {"ttft": "TTFT", "itl": "ITL", "e2e": "E2E"}


def set_objectives(objectives: Objectives) -> list[tuple[ObjectiveName, Objective]]:
    """The objectives the user set, in a fixed order (ttft, itl, e2e)."""
    found = [(name, getattr(objectives, name)) for name in OBJECTIVE_NAMES]
    return [(name, obj) for name, obj in found if obj is not None]


def format_seconds(seconds: float) -> str:
    """0.82 -> "820ms", 2.425 -> "2.425s": a latency in the one duration style users read
    everywhere (``api.durations.format_duration``, Go's)."""
    return format_duration(seconds)


@dataclass(frozen=True)
class ObjectiveScore:
    """One objective's part of the score."""

    name: ObjectiveName
    percentile: int
    threshold: float
    observed: float | None

    @property
    def label(self) -> str:
        """ "TTFT p90"."""
        return f"{LABELS[self.name]} p{self.percentile}"

    @property
    def ratio(self) -> float | None:
        """observed / threshold; None when the quantile is unknown."""
        return None if self.observed is None else self.observed / self.threshold

    @property
    def violation(self) -> float | None:
        ratio = self.ratio
        return None if ratio is None else max(0.0, ratio - 1.0)

    @property
    def met(self) -> bool | None:
        violation = self.violation
        return None if violation is None else violation == 0.0

    def describe(self) -> str:
        """ "TTFT p90 0.85 s (target 0.50 s, +70%)"."""
        target = format_seconds(self.threshold)
        if self.observed is None or self.ratio is None:
            return f"{self.label} unknown (target {target})"
        return (
            f"{self.label} {format_seconds(self.observed)} (target {target}, {self.ratio - 1:+.0%})"
        )


@dataclass(frozen=True)
class Score:
    """The score of one window with its per-objective breakdown."""

    objectives: tuple[ObjectiveScore, ...]

    @property
    def value(self) -> float | None:
        """The violation score; None when any objective's quantile is unknown."""
        violations = [o.violation for o in self.objectives]
        if any(v is None for v in violations):
            return None
        return sum(v for v in violations if v is not None)

    @property
    def known_value(self) -> float:
        """The sum over objectives whose quantile is known (a lower bound of the score)."""
        return sum(v for o in self.objectives if (v := o.violation) is not None)

    @property
    def tie_break(self) -> float | None:
        """Sum of observed / threshold: lower is better even when every target is met."""
        ratios = [o.ratio for o in self.objectives]
        if any(r is None for r in ratios):
            return None
        return sum(r for r in ratios if r is not None)

    @property
    def met(self) -> bool | None:
        """True when every target is met, False when one is missed, None if unknown."""
        if any(o.met is False for o in self.objectives):
            return False
        value = self.value
        return None if value is None else value == 0.0

    @property
    def breached(self) -> tuple[ObjectiveScore, ...]:
        """Objectives over their threshold, the most violated first."""
        over = [o for o in self.objectives if (o.violation or 0.0) > 0.0]
        return tuple(sorted(over, key=lambda o: -(o.violation or 0.0)))

    @property
    def unknown(self) -> tuple[ObjectiveScore, ...]:
        return tuple(o for o in self.objectives if o.observed is None)

    def get(self, name: ObjectiveName) -> ObjectiveScore | None:
        return next((o for o in self.objectives if o.name == name), None)

    def describe(self) -> str:
        value = self.value
        head = "score unknown" if value is None else f"score {value:.2f}"
        return f"{head}: " + "; ".join(o.describe() for o in self.objectives)


def _finite(value: float | None) -> float | None:
    # histogram_quantile answers NaN over an empty window: that is "unknown", not a number.
    return value if value is not None and math.isfinite(value) else None


def score(observation: Observation, objectives: Objectives) -> Score:
    """The violation score of ``observation`` against ``objectives``."""
    parts = []
    for name, objective in set_objectives(objectives):
        quantiles: dict[int, float] = getattr(observation, name)
        parts.append(
            ObjectiveScore(
                name=name,
                percentile=objective.percentile,
                threshold=objective.threshold_seconds,
                observed=_finite(quantiles.get(objective.percentile)),
            )
        )
    return Score(tuple(parts))
