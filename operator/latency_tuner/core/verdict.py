"""Did the trial help? Compare its window with the baseline window.

- NoData: either window has nothing to measure. Its own outcome, never a failure: measure again.
  Except a trial window where no request finished while the waiting queue grew beyond chance
  (a stalled server, ``_stalled``): reverted against a baseline that kept up, Inconclusive as
  two saturated windows against one that did not.
- Inconclusive: too few requests (< minRequests), an objective's quantile unknown, or a load
  that is not comparable (arrival rate, prompt or output length beyond the tolerance) in a
  way that could explain the result: a trial better under a heavier load (a faster server's
  closed-loop clients send more) is still kept, one worse under a lighter load reverted.
- Keep: the violation score improved by more than max(minImprovement, noise), where noise is
  the larger of how much the score moves between sub-windows of the baseline with nothing
  changed (A/A) and how much two windows of these request counts differ by sampling alone
  (``_sampling_noise``: a 10% change of a p90 over a few dozen requests is chance), capped at
  ``MAX_REQUIRED`` (three short sub-windows of bursty or sparse traffic can show a "noise" above
  100%, which no change could ever beat). So a trial that meets every target the baseline
  missed (-100%) is always kept: that is the goal, and a later window re-checks it. With every
  target met before and after, the sum of observed/threshold ratios decides instead.
- Revert: otherwise, with the numbers that decided it in the reason; also a would-be Keep
  that made a latency no objective names much worse (``guard_unnamed``). Except once, when the
  caller allows it: a gain short of the bar that a trial window ``LONGER_LOOK`` times as long
  would clear (its noise is lower) is Inconclusive with ``longer`` set, and the caller judges
  the trial again over that longer window (``_near``). Reverting a real effect for want of
  requests costs the rollout back and the rollout again, a longer look only minutes. And once,
  a Revert on a trial window that was not at its steady state after the restart, against a
  steady baseline, is Inconclusive (``_unsteady``): its requests in flight still moving
  beyond chance, or its requests staying longer on the server than the pods had served when
  it began (the restart's wave); the caller measures again, after that wave. And once, a
  verdict the queue decided on a trial window whose arrivals differed from the baseline's
  beyond ``ARRIVAL_LUCK_SIGMAS`` of chance in the direction that explains it (a Revert on more
  arrivals, a Keep on fewer) is Inconclusive (``_arrival_luck``): near capacity the queue
  follows the arrival count steeply, which the quantiles' sampling noise does not hold.
- A saturated arm (``core.saturation``) counts with any number of requests, but its latencies
  are lower bounds: only the direction they can prove is concluded, else Inconclusive
  (``_bounded``), never a failure. Except, when the caller allows it (a safe change expected
  to shorten the queue), two saturated windows where the trial finished no fewer of the same
  arrivals, scored no worse beyond the noise and left ITL (the one latency a queue does not
  bound) not much worse: that change is kept as a step (``STEP_ON_SATURATED``). A server held
  by two limits at once (slots and prefill compute, say) saturates after either change alone,
  so each alone would be Inconclusive and reverted, and the pair that clears the queue never
  reached; kept, the next change is judged on top of it, and the first window that keeps up
  judges them together.

Noise: sub-windows of length W/k give a relative standard deviation s of the metric; a whole
window's estimate varies about s/sqrt(k), and the difference of two windows about
s*sqrt(2/k). That is the relative change the baseline alone would show. Against a trial window
m times as long as the baseline's, the trial's share of that variance is m times smaller:
s*sqrt((1 + 1/m)/k). Pure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from latency_tuner.api.spec import Objectives
from latency_tuner.api.status import Verdict
from latency_tuner.core.noise import count_tolerance, quantile_se
from latency_tuner.core.observation import LoadFingerprint, NoData, Observation, ObservationResult
from latency_tuner.core.saturation import (
    flow,
    in_flight_shift,
    residence,
    saturated,
    steady_wander,
    usable,
)
from latency_tuner.core.score import (
    LABELS,
    OBJECTIVE_NAMES,
    ObjectiveName,
    Score,
    format_seconds,
    score,
    set_objectives,
)

LOAD_TOLERANCE = 0.25
NOISE_SIGMAS = 2.0  # a change smaller than this many standard errors of sampling is noise
# A latency no objective names may rise this much (relative) before a Keep turns Revert: trade-off
# knobs (chunking, batch budgets) routinely move the other latency by tens of percent, which is
# the price of the target; more than doubling it is a different service than the one asked for.
UNNAMED_WORSE = 1.0
# The most improvement the noise gate may demand: a halved score is a real effect whatever
# three 1/3-window sub-windows suggest (their p90s rest on a handful of requests each).
MAX_REQUIRED = 0.5
# A trial window this many times the baseline's: what a gain just short of the bar gets.
LONGER_LOOK = 2
# How an Inconclusive reason starts when both arms were saturated and the trial drained no more
# than the baseline: the planner reads it (a repeat under the same load saturates again).
BOTH_SATURATED = "both windows saturated (their latencies are lower bounds)"
# How the reason of a change kept as a step on a saturated server goes on (``_bounded``).
STEP_ON_SATURATED = "kept as a step: what it adds may wait behind another limit"
# How the reason of a Revert on a window after a restart that held its transient begins.
NOT_STEADY = "the trial window was not at its steady state yet"
# Arrival counts of two windows apart by more than this many standard deviations of chance,
# in the direction that explains a verdict the queue decided: measured again (``_arrival_luck``).
ARRIVAL_LUCK_SIGMAS = 1.0


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
    required: float | None = None  # max(min_improvement, min(the larger noise, MAX_REQUIRED))
    noise: float = 0.0  # from the baseline's sub-windows (an A/A comparison of the baseline)
    sampling_noise: float = 0.0  # from both windows' request counts and quantile spread
    longer: bool = False  # Inconclusive: judge again over a trial window LONGER_LOOK as long
    # Inconclusive on a window still holding the restart's wave of requests: the next window
    # starts no sooner than this many seconds after the trial's pods were ready.
    settle_until: float | None = None


def judge_trial(
    baseline: ObservationResult,
    trial: ObservationResult,
    objectives: Objectives,
    *,
    min_requests: int,
    min_improvement: float,
    baseline_subwindows: Sequence[Observation] = (),
    load_tolerance: float = LOAD_TOLERANCE,
    may_look_longer: bool = False,
    may_step: bool = False,
    settled_for: float | None = None,
) -> Judgement:
    """The verdict on a trial window against the baseline window; with ``may_look_longer``, a
    gain just short of the bar asks for a longer trial window instead (``_near``); with
    ``may_step``, a change that two saturated windows cannot judge and that served no fewer is
    kept as a step (``_bounded``). ``settled_for``: how long the trial's pods had served when
    its window began (``_unsteady``)."""
    if isinstance(baseline, NoData):
        return Judgement(Outcome.NO_DATA, f"no data in the baseline window: {baseline.reason}")
    if isinstance(trial, NoData):
        if saturated(trial) and usable(baseline, min_requests):
            return _stalled(baseline, trial)
        return Judgement(Outcome.NO_DATA, f"no data in the trial window: {trial.reason}")
    sat_before, sat_after = saturated(baseline), saturated(trial)
    for name, obs in (("baseline", baseline), ("trial", trial)):
        # A saturated arm is evidence with any number of requests (its latencies are lower
        # bounds); see ``_bounded`` for what such bounds can decide.
        if not usable(obs, min_requests):
            return Judgement(
                Outcome.INCONCLUSIVE,
                f"too few requests in the {name} window: {obs.requests} < {min_requests}",
            )
    load_change = _load_change(baseline.load, trial.load, load_tolerance)
    heavier = baseline.load.heavier_or_lighter(trial.load, load_tolerance)
    if load_change is not None and heavier == 0:
        return Judgement(Outcome.INCONCLUSIVE, f"load changed: {load_change}")
    before, after = score(baseline, objectives), score(trial, objectives)
    for name, s in (("baseline", before), ("trial", after)):
        if s.unknown:
            labels = ", ".join(o.label for o in s.unknown)
            return Judgement(
                Outcome.INCONCLUSIVE, f"{labels} unknown in the {name} window", before, after
            )
    judged = _compare(
        before, after, objectives, min_improvement, baseline_subwindows, (baseline, trial)
    )
    if may_look_longer and not (sat_before or sat_after or load_change):
        judged = _near(judged, min_improvement, baseline, trial)
    if may_look_longer and not (sat_before or sat_after):
        judged = _unsteady(judged, baseline, trial, settled_for)
    if may_look_longer and not (sat_before or sat_after or load_change):
        judged = _arrival_luck(judged, baseline, trial)
    if sat_before or sat_after:
        judged = _bounded(judged, (baseline, trial), (sat_before, sat_after), objectives, may_step)
    if judged.outcome is Outcome.KEEP:
        worse = guard_unnamed(baseline, trial, objectives)
        if worse is not None:
            judged = replace(
                judged,
                outcome=Outcome.REVERT,
                reason=f"{worse}, though {judged.reason}",
            )
    if load_change is not None:
        return _despite_load(judged, load_change, heavier)
    return judged


def _near(
    judged: Judgement, min_improvement: float, baseline: Observation, trial: Observation
) -> Judgement:
    """A Revert for a gain short of the bar that a trial window ``LONGER_LOOK`` times as long
    would clear becomes Inconclusive with ``longer``: both noise terms shrink by the trial's
    share of their variance, sqrt((1 + 1/m) / 2) for m times the requests."""
    if judged.outcome is not Outcome.REVERT or judged.improvement is None:
        return judged
    if judged.improvement <= 0 or not math.isfinite(judged.improvement):
        return judged
    m = LONGER_LOOK * max(trial.window_seconds, 1e-9) / max(baseline.window_seconds, 1e-9)
    shrink = math.sqrt((1 + 1 / m) / 2)
    bar = _required(min_improvement, max(judged.noise, judged.sampling_noise) * shrink)
    if judged.improvement <= bar:
        return judged
    return replace(
        judged,
        outcome=Outcome.INCONCLUSIVE,
        reason=(
            f"near the bar ({judged.reason}); a trial window {LONGER_LOOK} times as long would "
            f"need better than -{bar:.0%}: measuring over it"
        ),
        longer=True,
    )


def _unsteady(
    judged: Judgement, baseline: Observation, trial: Observation, settled_for: float | None
) -> Judgement:
    """A Revert on a trial window that was not at its steady state, against a baseline window
    that was, is Inconclusive: the window after a restart can still hold the transient, which a
    configuration pays once, not for good. Two signs of it:

    - the requests in flight still filling up or draining (``saturation.in_flight_shift``);
    - requests that stay longer on the server (``saturation.residence``, Little's law) than the
      pods had served when the window began (``settled_for``): the requests it saw finish
      arrived with the restart's wave (a closed loop's clients all at once on a cold server),
      not as the steady load does. The next window starts once a residence time has passed
      since the pods were ready (``settle_until``).

    The next window judges it. Only a Revert: a trial better even in its transient is better.
    """
    if judged.outcome is not Outcome.REVERT or in_flight_shift(baseline) is not None:
        return judged
    shift, stay = in_flight_shift(trial), residence(trial)
    if shift is not None:
        why = (
            f"requests in flight {shift:+.0f} over it, beyond the ±{steady_wander(trial):.0f} "
            "a steady server wanders by"
        )
        wait = None
    elif stay is not None and settled_for is not None and stay > settled_for:
        why = (
            f"its requests stayed {format_seconds(stay)} on the server (Little's law), longer "
            f"than the {format_seconds(settled_for)} its pods had served when it began: they "
            "came with the restart's wave"
        )
        wait = stay
    else:
        return judged
    return replace(
        judged,
        outcome=Outcome.INCONCLUSIVE,
        reason=f"{NOT_STEADY}: {why} ({judged.reason})",
        settle_until=wait,
    )


def _arrival_luck(judged: Judgement, baseline: Observation, trial: Observation) -> Judgement:
    """A verdict the queue decided, on a trial window whose arrivals differed from the
    baseline's beyond ``ARRIVAL_LUCK_SIGMAS`` in the direction that explains it, is
    Inconclusive: a Revert whose TTFT rose, mostly as queue time, over more arrivals; a Keep
    whose TTFT fell, mostly as queue time, over fewer. Two windows of one Poisson rate count
    arrivals that differ by about the square root of their sum, and near a server's capacity
    the queue follows them steeply: the quantiles' sampling noise (requests drawn from one
    load) does not hold that, so one window cannot tell the load's part from the change's.
    The next window judges it (the caller's leave to look again: once)."""
    if judged.outcome not in (Outcome.REVERT, Outcome.KEEP):
        return judged
    moved = _queue_moved(baseline, trial)
    if moved is None:
        return judged
    z, queue, ttft = moved
    sign = 1.0 if judged.outcome is Outcome.REVERT else -1.0
    # Signed so that both cases read as a Revert's: more arrivals, TTFT up, mostly queue.
    z, queue, ttft = sign * z, sign * queue, sign * ttft
    if z <= ARRIVAL_LUCK_SIGMAS or ttft <= 0 or queue < ttft / 2:
        return judged
    more = "more" if sign > 0 else "fewer"
    rates = f"{trial.arrival_rate:.3g}/s against {baseline.arrival_rate:.3g}/s"
    queues = (
        f"{format_seconds(baseline.queue_time_mean or 0.0)} -> "
        f"{format_seconds(trial.queue_time_mean or 0.0)}"
    )
    return replace(
        judged,
        outcome=Outcome.INCONCLUSIVE,
        reason=(
            f"the trial window had {more} arrivals than the baseline's ({rates}, "
            f"{sign * z:+.1f} standard deviations of chance) and most of its TTFT change was "
            f"queue time (mean {queues}), which {more} arrivals make too: one window cannot "
            f"tell their part from the change's ({judged.reason})"
        ),
    )


def _queue_moved(baseline: Observation, trial: Observation) -> tuple[float, float, float] | None:
    """How many standard deviations of chance the trial's arrival rate lies above the
    baseline's, and the mean queue time's and mean TTFT's change (seconds); None when a window
    lacks them."""
    means = (baseline.queue_time_mean, trial.queue_time_mean, baseline.ttft_mean, trial.ttft_mean)
    if any(m is None or not math.isfinite(m) for m in means):
        return None
    qb, qt, tb, tt = (m or 0.0 for m in means)
    spans = (baseline.window_seconds, trial.window_seconds)
    if min(spans) <= 0:
        return None
    # Poisson counts: a rate a / t has variance a / t^2.
    sd = math.sqrt(baseline.arrivals / spans[0] ** 2 + trial.arrivals / spans[1] ** 2)
    if sd <= 0:
        return None
    z = (trial.arrival_rate - baseline.arrival_rate) / sd
    return (z, qt - qb, tt - tb) if math.isfinite(z) else None  # a finished rate that is no rate


def _stalled(baseline: Observation, trial: NoData) -> Judgement:
    """The trial finished no request while its waiting queue grew beyond chance: a stalled
    server. Against a baseline that kept up with its arrivals it is surely worse (Revert);
    against a saturated baseline it drained no more (Inconclusive, as two saturated windows
    where the trial finished fewer)."""
    t, b = flow(trial), flow(baseline)
    stalled = (
        f"the trial finished none of {t.arrivals:.0f} arrivals (its waiting queue grew by "
        f"{t.backlog_growth or 0.0:.0f})"
    )
    if b.saturated:
        return Judgement(
            Outcome.INCONCLUSIVE,
            f"{BOTH_SATURATED}: {stalled}, the baseline {b.finished} of {b.arrivals:.0f}",
        )
    return Judgement(
        Outcome.REVERT, f"{stalled}, while the baseline kept up ({b.finished} finished)"
    )


def _despite_load(judged: Judgement, load_change: str, heavier: int) -> Judgement:
    """The verdict when the load moved one way only: better under a heavier load is kept,
    worse under a lighter one reverted (the load cannot explain either); anything else could
    be the load's doing, so Inconclusive."""
    if (heavier > 0 and judged.outcome is Outcome.KEEP) or (
        heavier < 0 and judged.outcome is Outcome.REVERT
    ):
        which = "heavier" if heavier > 0 else "lighter"
        return replace(judged, reason=f"{judged.reason} under a {which} load ({load_change})")
    return replace(judged, outcome=Outcome.INCONCLUSIVE, reason=f"load changed: {load_change}")


def _bounded(
    judged: Judgement,
    windows: tuple[Observation, Observation],
    saturation: tuple[bool, bool],
    objectives: Objectives,
    may_step: bool,
) -> Judgement:
    """The verdict when an arm is saturated: its finished requests' latencies are lower bounds
    (the requests still waiting will be slower), so only one direction can be concluded.

    - baseline saturated, trial not: a trial better than the baseline's lower bound is surely
      better (Keep); otherwise the true baseline is unknown (Inconclusive, not a Revert).
    - trial saturated, baseline not: a trial worse even at its lower bound is surely worse
      (Revert); otherwise Inconclusive.
    - both saturated: the one that finishes clearly more of the same arrivals drains faster;
      a trial that does, without a worse score, is kept. With ``may_step``, one that finished
      no clearly fewer, scored no worse beyond the noise even at its bounds and made no ITL
      much worse is kept as a step. Otherwise Inconclusive.
    """
    baseline, trial = windows
    sat_before, sat_after = saturation

    def inconclusive(why: str) -> Judgement:
        return replace(judged, outcome=Outcome.INCONCLUSIVE, reason=f"{why}: {judged.reason}")

    if sat_before and not sat_after:
        if judged.outcome is Outcome.KEEP:
            return judged
        return inconclusive("the baseline was saturated (its latencies are lower bounds)")
    if sat_after and not sat_before:
        if judged.outcome is Outcome.REVERT and (judged.improvement or 0.0) < 0:
            return judged
        return inconclusive("the trial was saturated (its latencies are lower bounds)")
    a, b = flow(trial), flow(baseline)
    more = trial.requests - baseline.requests
    tolerance = count_tolerance(trial.requests, baseline.requests)
    counts = (
        f"the trial finished {trial.requests} of {a.arrivals:.0f} arrivals against "
        f"{baseline.requests} of {b.arrivals:.0f}"
    )
    if more > 0 and more / trial.requests > tolerance and (judged.improvement or 0.0) >= 0:
        reason = f"both windows saturated; {counts}: {judged.reason}"
        return replace(judged, outcome=Outcome.KEEP, reason=reason)
    fewer = more < 0 and -more / baseline.requests > tolerance
    worse = (judged.improvement or 0.0) < -(judged.required or 0.0)
    itl_worse = _much_worse(baseline, trial, ("itl",), objectives) is not None
    if may_step and not (fewer or worse or itl_worse):
        reason = f"both windows saturated; {counts}: {STEP_ON_SATURATED} ({judged.reason})"
        return replace(judged, outcome=Outcome.KEEP, reason=reason)
    return inconclusive(BOTH_SATURATED)


def guard_unnamed(baseline: Observation, trial: Observation, objectives: Objectives) -> str | None:
    """A latency no objective names that the trial made much worse, in words; else None.

    The targets say what the user cares about most, not that the rest may be traded away: a
    change that buys TTFT with ITL several times worse is not the improvement asked for. Each
    unnamed latency (TTFT, ITL, E2E) is checked at every percentile the objectives use; it
    must rise by more than ``UNNAMED_WORSE`` and beyond its sampling noise to count.
    """
    named = {name for name, _ in set_objectives(objectives)}
    unnamed = [name for name in OBJECTIVE_NAMES if name not in named]
    return _much_worse(baseline, trial, unnamed, objectives, " (no objective)")


def _much_worse(
    baseline: Observation,
    trial: Observation,
    names: Sequence[ObjectiveName],
    objectives: Objectives,
    note: str = "",
) -> str | None:
    """The first of the latencies ``names`` that the trial made much worse (by more than
    ``UNNAMED_WORSE`` and beyond its sampling noise) at a percentile the objectives use, in
    words; else None."""
    percentiles = sorted({o.percentile for _, o in set_objectives(objectives)})
    for name in names:
        was_q: dict[int, float] = getattr(baseline, name)
        now_q: dict[int, float] = getattr(trial, name)
        for p in percentiles:
            was, now = was_q.get(p), now_q.get(p)
            if was is None or now is None or was <= 0:
                continue
            noise = _difference_se(was_q, now_q, p, baseline.requests, trial.requests)
            if now > was * (1 + UNNAMED_WORSE) and now - was > NOISE_SIGMAS * noise:
                return (
                    f"{LABELS[name]} p{p}{note} {format_seconds(was)} -> "
                    f"{format_seconds(now)} ({(now - was) / was:+.0%}): much worse"
                )
    return None


def _difference_se(
    before: dict[int, float], after: dict[int, float], p: int, n_before: int, n_after: int
) -> float:
    """Standard error of the difference of one quantile between two windows (seconds)."""
    parts = [quantile_se(before, p, n_before), quantile_se(after, p, n_after)]
    return math.sqrt(sum(x * x for x in parts if x is not None))


def _compare(
    before: Score,
    after: Score,
    objectives: Objectives,
    min_improvement: float,
    subwindows: Sequence[Observation],
    windows: tuple[Observation, Observation],
) -> Judgement:
    both_met = before.value == 0.0 and after.value == 0.0
    metric: Callable[[Score], float | None] = (
        (lambda s: s.tie_break) if both_met else (lambda s: s.value)
    )
    # Both known: judge_trial turned unknown quantiles into Inconclusive already.
    b, a = metric(before) or 0.0, metric(after) or 0.0
    baseline, trial = windows
    m = max(trial.window_seconds, 1e-9) / max(baseline.window_seconds, 1e-9)
    noise = _noise([metric(score(w, objectives)) for w in subwindows]) * math.sqrt((1 + 1 / m) / 2)
    sampling = _sampling_noise(before, after, windows, both_met, b)
    required = _required(min_improvement, max(noise, sampling))
    improvement = (b - a) / b if b > 0 else (0.0 if a == 0 else -math.inf)
    what = "sum of latency/target ratios (targets met)" if both_met else "score"
    improvement_text = "worse" if math.isinf(improvement) else f"{-improvement:+.0%}"
    floor = "baseline noise" if noise >= sampling else "sampling noise"
    need = f"needs better than -{required:.0%}" + (
        f" ({floor})" if max(noise, sampling) > min_improvement else ""
    )
    numbers = f"{what} {b:.2f} -> {a:.2f} ({improvement_text}; {need}): {_details(before, after)}"
    outcome = Outcome.KEEP if improvement > required else Outcome.REVERT
    return Judgement(outcome, numbers, before, after, improvement, required, noise, sampling)


def chance_change(now: Score, window: Observation) -> float:
    """The relative change of the sum of latency/target ratios (targets met) that a trial's
    window of the same size and spread as ``window`` would show against it by sampling alone,
    as ``_compare`` computes it (capped as there): what a change must be expected to gain for
    its trial to tell it from chance. 0 when the sum is unknown."""
    total = now.tie_break
    if total is None or total <= 0:
        return 0.0
    return _required(0.0, _sampling_noise(now, now, (window, window), True, total))


def chance_gain(now: Score, window: Observation) -> float:
    """The relative fall of the violation score (``Score.value``) that a trial's window of the
    same size and spread as ``window`` would show against it by sampling alone, as ``_compare``
    computes it (capped as there): what a change that misses the targets now must be expected
    to gain for its trial to tell it from chance. 0 when nothing is missed or the window lacks
    the quantiles to read its spread from."""
    value = now.value
    if value is None or value <= 0:
        return 0.0
    return _required(0.0, _sampling_noise(now, now, (window, window), False, value))


def chance_noise(subwindows: Sequence[Observation], objectives: Objectives) -> float:
    """The relative change of the sum of latency/target ratios that two windows differ by with
    nothing changed, read from ``subwindows`` of one window (an A/A comparison, as
    ``_compare`` reads the baseline's), capped as there: the other half of what a change must
    be expected to gain for its trial to tell it from chance (``chance_change`` is the
    sampling half). 0 with fewer than two sub-windows that have the sum."""
    return _required(0.0, _noise([score(w, objectives).tie_break for w in subwindows]))


def chance_miss(now: Score, window: Observation) -> float:
    """The violation score (``Score.value``) a window of the size and spread of ``window``
    would show by sampling alone on a configuration whose steady state just meets: the missed
    objectives' quantile errors over their thresholds, as ``_sampling_noise`` reads them for
    one window (its two-window noise over the square root of 2), capped as there (a hostile
    spread buys at most ``MAX_REQUIRED``). 0 when nothing is missed or the window lacks the
    quantiles to read its spread from."""
    return _required(0.0, _sampling_noise(now, now, (window, window), False, 1.0) / math.sqrt(2))


def _required(min_improvement: float, noise: float) -> float:
    """The improvement a trial must beat: the noise, capped at ``MAX_REQUIRED``, and never
    below ``min_improvement``."""
    return max(min_improvement, min(noise, MAX_REQUIRED))


def _sampling_noise(
    before: Score,
    after: Score,
    windows: tuple[Observation, Observation],
    both_met: bool,
    b: float,
) -> float:
    """The relative score change the two windows' sample sizes alone would show, at
    ``NOISE_SIGMAS``: each objective's quantile error (``core.noise.quantile_se``), over its
    threshold, for the objectives that move the compared metric (all of them for the ratio sum,
    the missed ones for the violation score)."""
    if b <= 0:
        return 0.0
    baseline, trial = windows
    variance = 0.0
    for old, new in zip(before.objectives, after.objectives, strict=True):
        if not both_met and not (old.violation or new.violation):
            continue  # met in both windows: it adds nothing to the violation score
        quantiles_before: dict[int, float] = getattr(baseline, old.name)
        quantiles_after: dict[int, float] = getattr(trial, old.name)
        se = _difference_se(
            quantiles_before, quantiles_after, old.percentile, baseline.requests, trial.requests
        )
        variance += (se / old.threshold) ** 2
    return NOISE_SIGMAS * math.sqrt(variance) / b


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
    "request_rate": ("arrival rate", "/s"),
    "concurrency_mean": ("requests in flight", ""),
    "prompt_tokens_mean": ("mean prompt", " tokens"),
    "generation_tokens_mean": ("mean output", " tokens"),
}


def _load_change(before: LoadFingerprint, after: LoadFingerprint, tolerance: float) -> str | None:
    """None when comparable, else the dimensions that moved, in numbers."""
    if before.comparable_to(after, tolerance):
        return None
    moved = []
    for key, allowed in before.moved(after, tolerance).items():
        label, unit = _LOAD_LABELS[key]
        old, new = getattr(before, key), getattr(after, key)
        moved.append(f"{label} {old:.4g}{unit} -> {new:.4g}{unit} (beyond ±{allowed:.0%})")
    return "; ".join(moved)
