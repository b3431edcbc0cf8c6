"""Did the trial help? Compare its window with the baseline window.

- NoData: either window has nothing to measure. Its own outcome, never a failure: measure again.
- Inconclusive: too few requests (< minRequests), an objective's quantile unknown, or a load
  that is not comparable (request rate, prompt or output length beyond the tolerance).
- Keep: the violation score improved by more than max(minImprovement, noise), where noise is
  how much the score moves between sub-windows of the baseline with nothing changed, capped at
  ``MAX_REQUIRED`` (three short sub-windows of bursty or sparse traffic can show a "noise" above
  100%, which no change could ever beat). So a trial that meets every target the baseline
  missed (-100%) is always kept: that is the goal, and a later window re-checks it. With every
  target met before and after, the sum of observed/threshold ratios decides instead.
- Revert: otherwise, with the numbers that decided it in the reason.

Noise: sub-windows of length W/k give a relative standard deviation s of the metric; a whole
window's estimate varies about s/sqrt(k), and the difference of two windows about
s*sqrt(2/k). That is the relative change the baseline alone would show. Pure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from latency_tuner.api.spec import Objectives
from latency_tuner.api.status import Verdict
from latency_tuner.core.observation import LoadFingerprint, NoData, Observation, ObservationResult
from latency_tuner.core.score import Score, format_seconds, score

LOAD_TOLERANCE = 0.25
# The most improvement the noise gate may demand: a halved score is a real effect whatever
# three 1/3-window sub-windows suggest (their p90s rest on a handful of requests each).
MAX_REQUIRED = 0.5


class Outcome(StrEnum):
    KEEP = "Keep"
    REVERT = "Revert"
    INCONCLUSIVE = "Inconclusive"
    NO_DATA = "NoData"

    @property
    def status_verdict(self) -> Verdict:
        """The status' verdict: no data is recorded as Inconclusive (nothing was learned)."""
        return Verdict.INCONCLUSIVE if self is Outcome.NO_DATA else Verdict(self.value)


@dataclass(frozen=True)
class Judgement:
    outcome: Outcome
    reason: str
    before: Score | None = None
    after: Score | None = None
    improvement: float | None = None  # relative reduction of the compared metric
    required: float | None = None  # max(min_improvement, min(noise, MAX_REQUIRED))
    noise: float = 0.0


def judge_trial(
    baseline: ObservationResult,
    trial: ObservationResult,
    objectives: Objectives,
    *,
    min_requests: int,
    min_improvement: float,
    baseline_subwindows: Sequence[Observation] = (),
    load_tolerance: float = LOAD_TOLERANCE,
) -> Judgement:
    """The verdict on a trial window against the baseline window."""
    if isinstance(baseline, NoData):
        return Judgement(Outcome.NO_DATA, f"no data in the baseline window: {baseline.reason}")
    if isinstance(trial, NoData):
        return Judgement(Outcome.NO_DATA, f"no data in the trial window: {trial.reason}")
    for name, obs in (("baseline", baseline), ("trial", trial)):
        if obs.requests < min_requests:
            return Judgement(
                Outcome.INCONCLUSIVE,
                f"too few requests in the {name} window: {obs.requests} < {min_requests}",
            )
    load_change = _load_change(baseline.load, trial.load, load_tolerance)
    if load_change is not None:
        return Judgement(Outcome.INCONCLUSIVE, f"load changed: {load_change}")
    before, after = score(baseline, objectives), score(trial, objectives)
    for name, s in (("baseline", before), ("trial", after)):
        if s.unknown:
            labels = ", ".join(o.label for o in s.unknown)
            return Judgement(
                Outcome.INCONCLUSIVE, f"{labels} unknown in the {name} window", before, after
            )
    return _compare(before, after, objectives, min_improvement, baseline_subwindows)


def _compare(
    before: Score,
    after: Score,
    objectives: Objectives,
    min_improvement: float,
    subwindows: Sequence[Observation],
) -> Judgement:
    both_met = before.value == 0.0 and after.value == 0.0
    metric: Callable[[Score], float | None] = (
        (lambda s: s.tie_break) if both_met else (lambda s: s.value)
    )
    # Both known: judge_trial turned unknown quantiles into Inconclusive already.
    b, a = metric(before) or 0.0, metric(after) or 0.0
    noise = _noise([metric(score(w, objectives)) for w in subwindows])
    required = max(min_improvement, min(noise, MAX_REQUIRED))
    improvement = (b - a) / b if b > 0 else (0.0 if a == 0 else -math.inf)
    what = "sum of latency/target ratios (targets met)" if both_met else "score"
    improvement_text = "worse" if math.isinf(improvement) else f"{-improvement:+.0%}"
    need = f"needs better than -{required:.0%}" + (
        " (baseline noise)" if noise > min_improvement else ""
    )
    numbers = f"{what} {b:.2f} -> {a:.2f} ({improvement_text}; {need}): {_details(before, after)}"
    outcome = Outcome.KEEP if improvement > required else Outcome.REVERT
    return Judgement(outcome, numbers, before, after, improvement, required, noise)


def _noise(values: Sequence[float | None]) -> float:
    known = [v for v in values if v is not None]
    if len(known) < 2:
        return 0.0
    mean = statistics.fmean(known)
    if mean <= 0:
        return 0.0
    return statistics.stdev(known) / mean * math.sqrt(2 / len(known))


def _details(before: Score, after: Score) -> str:
    parts = []
    for old, new in zip(before.objectives, after.objectives, strict=True):
        was, now = old.observed or 0.0, new.observed or 0.0  # known past judge_trial's checks
        change = (now - was) / was if was > 0 else 0.0
        parts.append(f"{old.label} {format_seconds(was)} -> {format_seconds(now)} ({change:+.0%})")
    return "; ".join(parts)


_LOAD_LABELS = {
    "request_rate": ("request rate", "/s"),
    "concurrency_mean": ("requests in flight", ""),
    "prompt_tokens_mean": ("mean prompt", " tokens"),
    "generation_tokens_mean": ("mean output", " tokens"),
}


def _load_change(before: LoadFingerprint, after: LoadFingerprint, tolerance: float) -> str | None:
    """None when comparable, else the dimensions that moved, in numbers."""
    if before.comparable_to(after, tolerance):
        return None
    moved = []
    for key, diff in before.relative_differences(after).items():
        if diff > tolerance:
            label, unit = _LOAD_LABELS[key]
            old, new = getattr(before, key), getattr(after, key)
            moved.append(f"{label} {old:.4g}{unit} -> {new:.4g}{unit} (beyond ±{tolerance:.0%})")
    return "; ".join(moved)
