"""The next single change to try, or why there is none.

``plan`` takes the ranked candidates for the diagnosis (``core.candidates``: fixes of deployment
problems first, then safe before lossy before costly, then by expected score reduction) and
removes what history rules out:

- a value recorded incompatible (the rollout failed to start) is never tried again, whatever
  the load; a numeric ladder does not jump past it (larger memory settings fail alike); a
  transient failure (its pods waited for GPUs) is retried after the other candidates, up to
  ``MAX_TRANSIENT`` failures;
- a change already judged (Keep, Revert or Failed) is not repeated under a comparable load
  (``LoadFingerprint.comparable_to``); under a different load it may be tried again, and a
  reverted one also once another knob's change has been kept since (the server it was judged
  on is gone);
- a change that came out Inconclusive ``MAX_INCONCLUSIVE`` times under a comparable load is
  not tried again either: once may be bad luck, twice means its windows cannot be judged and
  another try would spend the same rollouts for the same nothing; nor after
  ``MAX_INCONCLUSIVE_ANY_LOAD`` times under any loads (a load that never holds still);
- one Inconclusive is enough when both of its windows were saturated and the trial drained no
  more than the baseline: that is no bad luck, the same server under the same arrivals
  saturates again. It is open again under a different load, or once another knob's change was
  kept since (the server that saturated is gone), but not after ``MAX_INCONCLUSIVE`` such
  trials under a comparable load (the changes kept as steps on a saturated server would
  otherwise reopen it after each);
- a numeric knob does not step back into the range a kept trial moved it out of (the kept
  trial showed that side is worse under this load), unless another knob's change was kept
  since (the configuration that trial was judged on is gone). A value strictly inside that
  range was not judged, though: a jump from 16384 to 512 batched tokens that fixed ITL can
  overshoot into TTFT, and 1024 may meet both. Such a value is open when the calibrated model
  expects it to at least halve the window's violation (``STEP_BACK_SCORE``), or, when that
  move overshot (it turned a target its baseline met into one its trial missed, and the window
  misses it still: ``_overshot``), when the model expects it to lower the violation at all;
  the start itself stays closed. Each such step narrows the range, so this ends.

A change kept only as a step on a saturated server (``verdict.STEP_ON_SATURATED``: two
saturated windows could not judge it, and it served no fewer) counts as kept (the server is
another one since), but is not continued: it showed no gain of its own. Giving up, ``plan``
names the steps still applied.

The numeric knob the last kept trial moved continues in the same direction first, as long as
the diagnosis still pulls that way and the next rung is open ("continue while it helps"), and
no open candidate is of a cheaper kind (TP 2 -> 4 waits while a larger max-num-seqs, judged
on the one-GPU server and reopened by TP 2, may meet the targets at two GPUs).

A numeric move may go several rungs at once (a knob lists the rungs beyond its first in
``Candidate.farther``): when the calibrated model expects the first rung to leave the targets
missed, the nearest farther rung it expects to meet them is tried instead, or the one it
expects to leave clearly the least violation (``STEP_BACK_SCORE`` of the first's); never past a
rung history rules out. And where it expects a rung to meet them, a farther one it expects to
meet them with the margin ``refine`` would go on for once that one were kept (``_roomier``:
the same bar) is the move itself: one rollout, not two.

Within the order of kinds (fixes of deployment problems, then safe, lossy, costly), the open
candidates are ordered by the score the calibrated performance model (``core.model``) expects
after each: every objective's observed ratio to its threshold times the forecast change of its
latency, or, where the model cannot forecast a latency the candidate aims at, less the knob's
prior gain. A candidate the model expects to leave the score where it is ranks behind one it
expects to lower it, whatever the priors say. The order of kinds yields to the cheapest way the
model expects to meet the targets (``reach.cheapest_way``): where it expects no configuration
reached by safe changes alone to come near them and a lossy one on the running GPUs to meet
them, a lossy move goes first; where it expects nothing on the running GPUs to come near and
some configuration on more GPUs to meet them, a move towards the fewest such GPUs goes first
(a cheaper change judged on GPUs that cannot do is judged again once they change), and a move
along a ladder does not jump past them. A continuation off that way waits too. And a candidate
the model expects (taken as far along its ladder as it would go) to lower the window's
violation by less than its trial could tell from chance (``verdict.chance_gain``: the
sampling noise of a window like this one, as the verdict weighs it) waits behind those it
expects to lower it by more, whatever their kinds, and is not continued: the verdict would
revert it even if the model were right. One it expects to meet the targets always clears that
bar, so this never puts a move to more GPUs ahead of a cheaper one expected to meet them; a
candidate the model cannot forecast (a variant it does not know) keeps its place.

``refine`` is the planner once the targets are met: the one change, if any, of a class the
deployment already pays for (safe, or lossy while a kept lossy change is in effect) and of any
stage bounding an objective, that the model expects to buy a larger margin than a trial could
tell from chance (the sum of
latency/target ratios lower by more than the window's sampling noise, the spec's
minImprovement and the model's recorded error; every objective within 90% of its target) at no
more GPUs, an ITL tail's gain counted where vLLM's bucket edges fall the unlucky way among the
steps (``model.Forecast.cautious``: margin is not worth a coin toss); refining ends at the
first such trial that is not kept.

Before any of that, when the calibrated model expects no configuration the spec allows to
meet the targets (every one at least twice over some target; ``core.reach``) and it has a
record on the target within the error it trusts, ``plan`` says so as
``Exhausted(unreachable=True)`` with the best reachable figures and, where one would do, a
faster GPU the model expects to meet them, instead of trialling on (item 6 of issue 12).

The model is trusted as far as its record on this target goes: once the median absolute error
of its latest forecasts passes ``MODEL_DISTRUST``, neither ``plan`` nor ``refine`` acts on it
(the priors order the candidates again, and it calls nothing unreachable). Pure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace

from latency_tuner.api.spec import Knobs, Objectives
from latency_tuner.api.status import MetricSnapshot, Trial, Verdict
from latency_tuner.core import candidates, model, reach
from latency_tuner.core.candidates import Candidate
from latency_tuner.core.config_view import ConfigView, parse_int, view
from latency_tuner.core.diagnosis import Diagnosis, margins
from latency_tuner.core.evidence import Bottleneck, Cause, Finding
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import (
    CATALOG,
    Change,
    KnobClass,
    KnobName,
    apply,
    class_of,
    same_value,
)
from latency_tuner.core.observation import LoadFingerprint, Observation
from latency_tuner.core.score import ObjectiveName, Score, score
from latency_tuner.core.verdict import (
    BOTH_SATURATED,
    STEP_ON_SATURATED,
    chance_change,
    chance_gain,
    chance_noise,
)
from latency_tuner.perf.config import EngineConfig
from latency_tuner.vllm.args import VllmCommandLine

LOAD_TOLERANCE = 0.25  # relative difference in rate and request shape still "the same load"
MAX_INCONCLUSIVE = 2  # Inconclusive trials of one change under a comparable load, then it rests
# ... and under any load: a load that keeps moving (sparse, bursty traffic) must not let one
# change spend the whole budget on windows that cannot judge it.
MAX_INCONCLUSIVE_ANY_LOAD = 3
# A failed trial's reason starts so when its pods only waited for GPUs: not the value's fault.
TRANSIENT_FAILURE = "rollout failed (transient, to retry later):"
MAX_TRANSIENT = 2  # transient failures of one change, then it rests like a permanent one
# A value inside the range a kept move left is tried when the calibrated model expects it to
# leave at most this share of the window's violation: halving it is beyond the model's
# typical error (a median 24-34 points on the harder suite), so not a coin toss.
STEP_BACK_SCORE = 0.5
# Once the targets are met, a change is tried for margin only with every objective expected at
# most this share of its target (a margin that a window's noise cannot turn into a miss).
REFINE_CEILING = 0.9
# Forecast violations closer than this share of the window's violation rank alike (the
# ranking's order decides): a histogram quantile's interpolation alone moves that much.
MODEL_TIE = 0.02
# The model's own record on this target: the median absolute error of its latest forecasts
# (aimed latencies, measured) once there are two. Beyond MODEL_DISTRUST (twice its median
# error on the harder suite) the planner stops acting on it (priors order, no step back, no
# refining); below, a refinement must be expected to gain more than that error.
# (A refinement's expected gain must also beat what the verdict could tell from chance: the
# window's sampling noise, ``verdict.chance_change``, and the spec's minImprovement.)
MODEL_ERRORS_KEPT = 4
MODEL_DISTRUST = 0.5


@dataclass(frozen=True)
class TrialRecord:
    """A finished trial, as the planner needs it (built from status.trials by the operator).

    ``from_value``/``to_value`` as in the status (None: flag absent / removed); ``load`` is
    the fingerprint of the window the trial was judged on (None if unknown: then the record
    counts as comparable, the conservative choice).
    """

    knob: str
    from_value: str | None
    to_value: str | None
    verdict: Verdict | None
    load: LoadFingerprint | None = None
    before: MetricSnapshot | None = None  # the windows that judged it, at the objectives'
    after: MetricSnapshot | None = None  # percentiles
    transient: bool = False  # a Failed trial whose pods only waited for resources
    saturated: bool = False  # an Inconclusive trial whose windows were both saturated
    step: bool = False  # kept as a step on a saturated server: it showed no gain of its own
    refinement: bool = False  # tried for margin, with the targets met (``refine``)
    model_errors: tuple[float, ...] = ()  # |measured - expected| of its model forecasts

    @classmethod
    def from_trial(cls, trial: Trial) -> TrialRecord:
        """From a status trial; its load is the before-window's (where the decision was made),
        else the after-window's, else unknown."""
        loads = (load_of(s) for s in (trial.before, trial.after) if s is not None)
        load = next((found for found in loads if found is not None), None)
        reason = trial.reason or ""
        transient = trial.verdict is Verdict.FAILED and reason.startswith(TRANSIENT_FAILURE)
        saturated = trial.verdict is Verdict.INCONCLUSIVE and reason.startswith(BOTH_SATURATED)
        step = trial.verdict is Verdict.KEEP and STEP_ON_SATURATED in reason
        return cls(
            trial.knob,
            trial.from_value,
            trial.to_value,
            trial.verdict,
            load,
            trial.before,
            trial.after,
            transient=transient,
            saturated=saturated,
            step=step,
            refinement=trial.refinement,
            model_errors=tuple(
                abs(p.error)
                for p in trial.predictions
                # the status is writable: a NaN or infinite error says nothing of the model
                if p.basis == "model" and p.aimed and p.error is not None and math.isfinite(p.error)
            ),
        )


def load_of(snapshot: MetricSnapshot) -> LoadFingerprint | None:
    """The load a status snapshot recorded (None when it recorded no rate)."""
    if snapshot.request_rate is None:
        return None
    return LoadFingerprint(
        request_rate=snapshot.arrival_rate or snapshot.request_rate,
        prompt_tokens_mean=snapshot.prompt_tokens_mean or 0.0,
        generation_tokens_mean=snapshot.generation_tokens_mean or 0.0,
        concurrency_mean=snapshot.concurrency or 0.0,
        requests=snapshot.requests,
    )


@dataclass(frozen=True)
class Exhausted:
    """Nothing left to try: why, and what a person could do instead. ``unreachable``: the
    calibrated model expects no allowed configuration to meet the targets (``core.reach``),
    rather than every candidate having been tried."""

    reason: str
    advice: tuple[str, ...] = ()
    unreachable: bool = False


def plan(
    diagnosis: Diagnosis,
    observation: Observation,
    config: VllmCommandLine,
    knobs: Knobs,
    hardware: HardwareInfo,
    history: Sequence[TrialRecord] = (),
    incompatible: Collection[tuple[str, str | None]] = (),
    *,
    load_tolerance: float = LOAD_TOLERANCE,
    min_improvement: float = 0.0,
) -> Change | Exhausted:
    """The next single change for ``diagnosis``, or ``Exhausted``.

    ``incompatible`` holds (knob, value) pairs that failed to start (status.incompatible).
    Call it only when the targets are missed: with nothing to act on it says so as Exhausted.
    Whether a window is worth acting on (no data, Finding.LOW_TRAFFIC) is the phase machine's
    call, not the planner's.
    """
    if Finding.NOT_VLLM in diagnosis.findings:
        return Exhausted("the container is not a vLLM server", diagnosis.advice)
    if not diagnosis.causes:
        return Exhausted("no objective is over its target: nothing to change", diagnosis.advice)
    # Analysed once: the diagnosis of this same window already ranked the candidates.
    done = diagnosis.ranking_for(observation, config, knobs, hardware)
    if done is not None:
        ranking, cv = done
    else:
        ranking, cv = _rank(diagnosis.causes, diagnosis.findings, observation, config, knobs,
                            hardware)  # fmt: skip
    error = model_error(history)
    forecasts = (
        None
        if _distrusted(error)
        else _Forecasts.of(diagnosis.score, observation, config, cv, knobs, hardware)
    )
    # Only on the model's record: a first window says nothing of how far this server's knob
    # effects stray from the published ranges the model is built on.
    if forecasts is not None and error is not None:
        case = reach.unreachable(forecasts.fitted(observation, diagnosis.causes))
        if case is not None:
            # Giving up before trialling on: each trial would cost a rollout for nothing.
            advice = (*case.elsewhere, *diagnosis.advice, *ranking.blocked)
            return Exhausted(case.describe(), tuple(dict.fromkeys(advice)), unreachable=True)
    now = _violation(diagnosis)

    def may_step_back(record: TrialRecord, candidate: Candidate) -> bool:
        """May ``candidate``, strictly inside the range kept ``record`` moved its knob out of,
        be tried? When the model expects it to halve the violation, or when that move
        overshot (``_overshot``) and the model expects it to lower the violation at all."""
        if forecasts is None:
            return _overshot(record, diagnosis.score)
        expected = forecasts.violation(candidate)
        if now > 0 and expected <= now * STEP_BACK_SCORE:
            return True
        return _overshot(record, diagnosis.score) and expected < now

    ruled_out: list[str] = []
    open_: list[Candidate] = []
    for candidate in ranking.candidates:
        why_not = _ruled_out(
            candidate, history, incompatible, observation.load, load_tolerance, may_step_back
        )
        if why_not is None:
            open_.append(candidate)
        else:
            ruled_out.append(why_not)
    way: reach.Way | None = None
    if forecasts is not None:
        # Within the order of kinds, by the score the model expects (stable: ties keep the
        # ranking's order).
        tier = _tiers([forecasts.violation(c) for c in open_], now * MODEL_TIE)
        order = {id(c): t for c, t in zip(open_, tier, strict=True)}
        open_.sort(key=lambda c: (c.sort_key()[:2], order[id(c)]))
        way = _cheapest_way(open_, forecasts, observation, diagnosis)
        # The way the model expects the targets met at the least cost first: no cheaper kind
        # is worth a rollout where it expects none of them to come near.
        open_.sort(key=lambda c: (c.sort_key()[0], not _on_the_way(c, way, forecasts)))
    destination = way.gpus if way is not None else None

    def open_rung(candidate: Candidate) -> bool:
        return (
            _ruled_out(
                candidate, history, incompatible, observation.load, load_tolerance, may_step_back
            )
            is None
        )

    telling = _telling(diagnosis, observation, forecasts, open_rung, destination)
    # A change whose gain, as the model expects it, its trial could not tell from chance waits
    # behind those it expects to gain beyond that, whatever their kinds (the fixes of the
    # deployment's own problems first still): the verdict would revert it even if the model
    # were right, so its rollout would buy nothing either way.
    open_.sort(key=lambda c: (c.sort_key()[0], not telling(c)))
    # A change whose pods waited for GPUs is retried, but after the others: the cluster may
    # have room by then, and the rest did not have to wait for it.
    open_.sort(key=lambda c: _failed_transiently(c, history))

    # A continuation that leaves the cheapest way waits: the model expects it not to come near;
    # so does one whose expected gain is below chance.
    follow = [
        c
        for c in _continuation(open_, history, config, hardware)
        if _on_the_way(c, way, forecasts) and telling(c)
    ]
    # What a margin refinement after the move would have to be expected to gain (``refine``'s
    # bar, the sampling half read off this window): a farther rung expected to clear it is
    # the move itself, not a second rollout.
    margin = None
    if forecasts is not None and diagnosis.score is not None:
        margin = _MarginBar(
            _margin_gain(min_improvement, chance_change(diagnosis.score, observation), error),
            max(MODEL_TIE, error or 0.0),
        )
    if follow:
        chosen = _farther(follow[0], forecasts, open_rung, destination, margin)
        return _complete(_change(chosen, config, cv, continuing=True), config, knobs)
    if not open_:
        return _exhausted(diagnosis, ranking.blocked, ruled_out, history)
    chosen = _farther(open_[0], forecasts, open_rung, destination, margin)
    return _complete(_change(chosen, config, cv, continuing=False), config, knobs)


def refine(
    observation: Observation,
    objectives: Objectives,
    config: VllmCommandLine,
    knobs: Knobs,
    hardware: HardwareInfo,
    history: Sequence[TrialRecord] = (),
    incompatible: Collection[tuple[str, str | None]] = (),
    *,
    min_improvement: float = 0.0,
    load_tolerance: float = LOAD_TOLERANCE,
    subwindows: Sequence[Observation] = (),
) -> Change | None:
    """With the targets met: the change (the GPU count stays) the calibrated model expects to
    buy a clearly larger margin, or None (stop here).

    Candidates are what any stage on each objective's side would pull (``_every_stage`` of
    ``diagnosis.margins``), of a class the deployment already pays for (``_margin_classes``:
    safe, and lossy once a kept lossy change is in effect; a new kind of cost, or more GPUs,
    is never worth it for margin alone), open by the same history rules as ``plan``. One is
    chosen only when the model forecasts it (a latency the model cannot know for it, such as
    TTFT with a prefix cache turned on, takes the knob's prior if the candidate aims at it,
    else stays as it is; an ITL quantile, as ``Forecast.cautious`` reads it) with every
    objective at most
    ``REFINE_CEILING`` of its target and the sum of ratios lower than now by more than the
    trial's verdict could tell from chance (``verdict.chance_change`` of this window and
    ``verdict.chance_noise`` of its ``subwindows``, at least ``min_improvement``) and more than
    the model's recorded error on this target; the lowest
    such sum wins, each knob's rungs beyond its first weighed too (``_best_rung``). An expected
    gain below that is not worth a rollout: the verdict would revert it even if the model were
    right. Refining stops for good once a refinement was not kept (the model was wrong about
    this server once, and margin is not worth more rollouts on its word), and does not start
    while the model's recorded error is beyond ``MODEL_DISTRUST``.
    """
    if any(r.refinement and r.verdict is not Verdict.KEEP for r in history):
        return None
    error = model_error(history)
    if _distrusted(error):
        return None
    now = score(observation, objectives)
    chance = max(chance_change(now, observation), chance_noise(subwindows, objectives))
    gain = _margin_gain(min_improvement, chance, error)
    total = now.tie_break
    if not now.met or total is None or total <= 0:
        return None
    ranking, cv = _rank(_every_stage(margins(observation, objectives, config, hardware)), (),
                        observation, config, knobs, hardware)  # fmt: skip
    forecasts = _Forecasts.of(now, observation, config, cv, knobs, hardware, cautious=True)
    if forecasts is None:
        return None

    def is_open(candidate: Candidate) -> bool:
        why = _ruled_out(
            candidate, history, incompatible, observation.load, load_tolerance, lambda *_: False
        )
        return why is None

    classes = _margin_classes(history)
    best: tuple[float, Candidate] | None = None
    for candidate in ranking.candidates:
        if candidate.knob_class not in classes:
            continue
        found = _best_rung(_rungs(candidate, is_open), forecasts, total * gain)
        if found is None or found[0] > total * (1 - gain):
            continue
        if best is None or found[0] < best[0]:
            best = found
    if best is None:
        return None
    after, chosen = best
    modelled = forecasts.ratios(chosen) or {}
    unknown = [o.label for o in now.objectives if modelled.get(o.name) is None]
    source = "the calibrated model" + (
        f" (the knob's prior for {', '.join(unknown)})" if unknown else ""
    )
    change = _complete(_change(chosen, config, cv, continuing=False), config, knobs)
    return replace(
        change,
        reason=(
            f"targets met; for margin, {source} expects the sum of latency/target ratios "
            f"{total:.2f} -> {after:.2f}, beyond the -{gain:.0%} a trial needs to tell it from "
            f"chance: {change.reason}"
        ),
    )


def _margin_gain(min_improvement: float, chance: float, error: float | None) -> float:
    """The relative fall of the sum of latency/target ratios a change for margin must be
    expected to make: beyond the spec's minImprovement, what its trial could tell from
    ``chance`` and the model's recorded ``error``. ``refine`` asks it; ``plan`` asks it of a
    farther rung it takes at once instead of a refinement after the nearer one."""
    return max(min_improvement, chance, error or 0.0)


def _every_stage(causes: Sequence[Cause]) -> tuple[Cause, ...]:
    """Each cause (the stage its window reading names), then the same objective bound by each
    other stage of its side (TTFT: queueing, long prefill; ITL: decode bandwidth, prefill
    interference; e2e: all four): with the targets met the calibrated model chooses a
    refinement on its forecast, and a met objective is seldom bound by one stage alone (FP8 KV
    halves a long context's decode reads where the window's ITL tail reads as interference).
    KV pressure only where the diagnosis names it: its knobs (fewer sequences) answer
    preemptions the window must show, and cost queueing where there are none."""
    expanded = list(causes)
    for cause in causes:
        for stage in Bottleneck:
            if stage is not cause.bottleneck and _bounds(stage, cause.objective):
                expanded.append(replace(cause, bottleneck=stage))
    return tuple(expanded)


def _bounds(stage: Bottleneck, objective: ObjectiveName) -> bool:
    if stage in (Bottleneck.KV_CACHE_PRESSURE, Bottleneck.NONE):
        return False
    return objective == "e2e" or stage.itl_side == (objective == "itl")


def _margin_classes(history: Sequence[TrialRecord]) -> frozenset[KnobClass]:
    """The knob classes a change for margin may take: safe ones, and lossy ones while a lossy
    change is in effect (the latest kept trial of a lossy knob left it off the value its first
    trial started from): that kind of cost is already accepted on this deployment (and where
    ``spec.quality`` is set, its gate judges the change on a canary: ``observing``). Never
    costly: margin does not buy GPUs."""
    first: dict[str, str | None] = {}
    kept: dict[str, str | None] = {}
    for record in history:
        if class_of(record.knob) is not KnobClass.LOSSY:  # an unknown name is no evidence
            continue
        first.setdefault(record.knob, record.from_value)
        if record.verdict is Verdict.KEEP:
            kept[record.knob] = record.to_value
    if any(not same_value(value, first[knob]) for knob, value in kept.items()):
        return frozenset({KnobClass.SAFE, KnobClass.LOSSY})
    return frozenset({KnobClass.SAFE})


def _best_rung(
    rungs: Sequence[Candidate], forecasts: _Forecasts, noise: float
) -> tuple[float, Candidate] | None:
    """Of one knob's rungs (nearest first), the one to refine with and its expected sum of
    ratios: each forecast with every objective at most ``REFINE_CEILING`` of its target, a
    farther rung only where the model expects it lower by more than ``noise`` (what a trial
    could tell from chance; else the smaller move)."""
    mine: tuple[float, Candidate] | None = None
    for rung in rungs:
        found = forecasts.after(rung)
        expected = forecasts.expected(rung)
        if found is None or found[1] is None or found[1].saturated or expected is None:
            continue  # refused by vLLM, or no forecast at all
        if any(r > REFINE_CEILING for r in expected):
            continue
        after = sum(expected)
        if mine is None or after < mine[0] - noise:
            mine = (after, rung)
    if mine is None or mine[1] is rungs[0]:
        return mine
    first, chosen = rungs[0], mine[1]
    past = f"past {first.to_value}: the calibrated model expects {chosen.to_value} to do better"
    return mine[0], replace(chosen, why=f"{first.why}; {past}")


def _rungs(candidate: Candidate, is_open: Callable[[Candidate], bool]) -> list[Candidate]:
    """The candidate and its knob's rungs beyond it the same way (``Candidate.farther``),
    nearest first, up to the first that history rules out (``is_open`` false): each a move of
    its own for the model to weigh (2048 -> 1024 may barely shorten the longest step where 512
    halves it)."""
    rungs = []
    for rung in (
        candidate,
        *(replace(candidate, to_value=v, farther=()) for v in candidate.farther),
    ):
        if not is_open(rung):
            break
        rungs.append(rung)
    return rungs


def model_error(history: Sequence[TrialRecord]) -> float | None:
    """The median absolute error of the calibrated model's latest forecasts on this target
    (``MODEL_ERRORS_KEPT`` of them, aimed latencies, once measured); None with fewer than two."""
    errors = [e for r in history for e in r.model_errors][-MODEL_ERRORS_KEPT:]
    return statistics.median(errors) if len(errors) >= 2 else None


def _distrusted(error: float | None) -> bool:
    return error is not None and error > MODEL_DISTRUST


@dataclass
class _Forecasts:
    """What the calibrated model (``core.model``) expects after each candidate of one window,
    each worked out once."""

    score: Score
    calibration: model.Calibration
    running: EngineConfig
    config: VllmCommandLine
    cv: ConfigView
    knobs: Knobs
    hardware: HardwareInfo
    # Refining: ITL forecasts at the unlucky side of the bucket edges (``Forecast.cautious``).
    cautious: bool = False
    # By (knob, value, variant): what the candidate's change is, whatever object carries it.
    known: dict[
        tuple[str, str | None, str | None], tuple[EngineConfig, model.Forecast | None] | None
    ] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        score: Score | None,
        observation: Observation,
        config: VllmCommandLine,
        cv: ConfigView,
        knobs: Knobs,
        hardware: HardwareInfo,
        *,
        cautious: bool = False,
    ) -> _Forecasts | None:
        """None when the model cannot calibrate on this window (then only the ranking
        orders)."""
        running = model.engine_config(config, None, hardware)
        itl = score.get("itl") if score is not None else None
        percentile = itl.percentile if itl is not None else None
        calibration = model.calibrate(observation, running, percentile) if running else None
        if score is None or running is None or calibration is None or not calibration.trusted:
            return None
        return cls(score, calibration, running, config, cv, knobs, hardware, cautious)

    def after(self, candidate: Candidate) -> tuple[EngineConfig, model.Forecast | None] | None:
        """The candidate's engine and the model's forecast for it (None: no forecast); None
        when vLLM would refuse it (out of memory, TP over the heads)."""
        key = (
            candidate.knob.value,
            candidate.to_value,
            candidate.variant.name if candidate.variant is not None else None,
        )
        if key not in self.known:
            change = _complete(
                _change(candidate, self.config, self.cv, continuing=False), self.config, self.knobs
            )
            try:
                applied = apply(change, self.config)
            except ValueError:
                self.known[key] = None
                return None
            engine = model.engine_config(applied.command_line, applied.gpu_limit, self.hardware)
            self.known[key] = (
                None
                if engine is None
                else (engine, model.forecast(self.calibration, self.running, engine))
            )
        return self.known[key]

    def gpus(self, candidate: Candidate) -> int | None:
        """The GPUs the candidate's engine runs on; None when vLLM would refuse it."""
        found = self.after(candidate)
        return None if found is None else found[0].num_gpus

    def fitted(self, observation: Observation, causes: Sequence[Cause]) -> reach.Fitted:
        """The window and its calibration, as ``reach`` judges the space on them."""
        return reach.Fitted(
            observation, causes, self.score, self.calibration, self.running, self.config,
            self.knobs, self.hardware,
        )  # fmt: skip

    def ratios(self, candidate: Candidate) -> dict[ObjectiveName, float | None] | None:
        """Per objective, the ratio to its threshold the model expects after the candidate
        (None where it cannot say); None when vLLM would refuse the candidate."""
        found = self.after(candidate)
        if found is None:
            return None
        _, forecast = found
        if forecast is not None and self.cautious:
            forecast = forecast.cautious()
        return {
            o.name: forecast.ratio(o) if forecast is not None else None
            for o in self.score.objectives
        }

    def expected(self, candidate: Candidate) -> list[float] | None:
        """Each objective's expected ratio to its threshold after the candidate: the model's
        where it has one; where it has none (the share a prefix cache will find is unknown
        until the cache is on), less the knob's prior gain for a latency the candidate aims
        at, else as it is now. None when vLLM would refuse the candidate."""
        ratios = self.ratios(candidate)
        if ratios is None:
            return None
        aimed = dict(candidate.expected)
        return [
            modelled
            if (modelled := ratios[o.name]) is not None
            else (o.ratio or 0.0) * (1.0 - aimed.get(o.name, 0.0))
            for o in self.score.objectives
        ]

    def violation(self, candidate: Candidate) -> float:
        """The violation score (``_violation``) expected after the candidate."""
        expected = self.expected(candidate)
        return math.inf if expected is None else sum(max(r - 1.0, 0.0) for r in expected)


def _cheapest_way(
    open_: Sequence[Candidate],
    forecasts: _Forecasts,
    observation: Observation,
    diagnosis: Diagnosis,
) -> reach.Way | None:
    """``reach.cheapest_way``, worked out only where it can change the choice: a costlier kind
    of move (more GPUs, or a lossy change on these) is open behind a cheaper first one. (126
    forecasts of a closed-loop window took 95 ms.)"""
    if not open_:
        return None
    gpus = forecasts.running.num_gpus

    def cost(candidate: Candidate) -> int:
        more = (forecasts.gpus(candidate) or 0) > gpus
        return KnobClass.COSTLY.rank if more else min(candidate.knob_class.rank, 1)

    first = cost(open_[0])
    if not any(cost(c) > first for c in open_[1:]):
        return None
    return reach.cheapest_way(forecasts.fitted(observation, diagnosis.causes))


def _on_the_way(candidate: Candidate, way: reach.Way | None, forecasts: _Forecasts | None) -> bool:
    """Whether ``candidate`` moves along ``way`` (any does where there is none): a lossy change
    on the running GPUs, or a move to more GPUs, at most the way's."""
    if way is None or forecasts is None:
        return True
    gpus, after = forecasts.running.num_gpus, forecasts.gpus(candidate) or 0
    if way.knob_class is KnobClass.LOSSY:
        return candidate.knob_class is KnobClass.LOSSY and after <= gpus
    return gpus < after <= way.gpus


def _telling(
    diagnosis: Diagnosis,
    observation: Observation,
    forecasts: _Forecasts | None,
    open_rung: Callable[[Candidate], bool],
    most_gpus: int | None,
) -> Callable[[Candidate], bool]:
    """Whether the calibrated model expects a candidate, taken as far as the planner would
    take it (``_farther``), to lower the window's violation by more than its trial could tell
    from chance (``verdict.chance_gain`` of this window). Every candidate is, where the model
    cannot say (for the window, or for the candidate) or the window has no such bar."""
    if forecasts is None or diagnosis.score is None:
        return lambda _: True
    violation = _violation(diagnosis)
    chance = chance_gain(diagnosis.score, observation)
    if violation <= 0 or chance <= 0:
        return lambda _: True
    bar = violation * (1.0 - chance)

    def telling(candidate: Candidate) -> bool:
        farthest = _farther(candidate, forecasts, open_rung, most_gpus)
        # No forecast (a variant the model does not know): nothing says its gain is small.
        return forecasts.expected(farthest) is None or forecasts.violation(farthest) < bar

    return telling


def _farther(
    candidate: Candidate,
    forecasts: _Forecasts | None,
    open_rung: Callable[[Candidate], bool],
    most_gpus: int | None = None,
    margin: _MarginBar | None = None,
) -> Candidate:
    """The candidate's move taken farther along its knob's ladder (``Candidate.farther``) when
    the calibrated model expects its first rung to leave the targets missed: the nearest rung
    it expects to meet them, else the one it expects to leave the least violation if that is
    at most ``STEP_BACK_SCORE`` of the first rung's (beyond the model's typical error); never
    past a rung history rules out, nor past ``most_gpus`` (the fewest GPUs the model expects
    the targets met on). One rung a trial is the priors' pace: 64 clients queueing on
    8 slots would otherwise take three rollouts to reach 64. With ``margin`` (what a
    refinement must be expected to gain), a rung expected to meet gives way to a farther one
    ``_roomier`` finds: ``refine`` would try it next (16384 -> 2048 batched tokens meets ITL,
    and 1024 halves the sum of ratios again)."""
    if forecasts is None or not candidate.farther:
        return candidate
    first = forecasts.violation(candidate)
    if math.isinf(first):
        return candidate
    rungs = _rungs(candidate, open_rung)
    if most_gpus is not None:
        # Not past the fewest GPUs the model expects the targets met on.
        beyond = (n for n, r in enumerate(rungs) if n and (forecasts.gpus(r) or 0) > most_gpus)
        rungs = rungs[: next(beyond, len(rungs))]
    best, least = candidate, first
    for rung in rungs[1:] if first > 0 else ():
        violation = forecasts.violation(rung)
        if violation < least:
            best, least = rung, violation
        if violation <= 0:
            break
    if least > 0 and least > first * STEP_BACK_SCORE:
        best, least = candidate, first
    if least <= 0 and margin is not None:
        roomier = _roomier(rungs[rungs.index(best) :], forecasts, margin)
        if roomier is not None:
            return replace(
                roomier[1],
                why=(
                    f"{candidate.why}; past {best.to_value}: the calibrated model expects "
                    f"{best.to_value} to meet the targets and {roomier[1].to_value} to meet "
                    f"them with a clearly larger margin (sum of latency/target ratios "
                    f"{roomier[0]:.2f} -> {roomier[2]:.2f}), the refinement a second rollout "
                    f"would make"
                ),
            )
    if best is candidate:
        return candidate
    outcome = "to meet the targets" if least <= 0 else f"to leave less ({least:.2f})"
    return replace(
        best,
        why=(
            f"{candidate.why}; past {candidate.to_value}: the calibrated model expects "
            f"{candidate.to_value} to leave the targets missed (violation {first:.2f}) and "
            f"{best.to_value} {outcome}"
        ),
    )


@dataclass(frozen=True)
class _MarginBar:
    """What a farther rung must be expected to gain over a nearer one that meets the targets to
    be worth going to at once: ``gain``, the relative fall of the sum of latency/target ratios
    ``refine`` would ask of it once the nearer one were kept; and beyond ``spread`` of the sum
    the window measured, since both rungs are forecast off it (the model's recorded error, at
    least ``MODEL_TIE``)."""

    gain: float
    spread: float


def _roomier(
    rungs: Sequence[Candidate], forecasts: _Forecasts, bar: _MarginBar
) -> tuple[float, Candidate, float] | None:
    """Past ``rungs[0]``, a move the model expects to meet the targets: the farther rung
    ``refine`` would take for margin once it were kept (every objective within
    ``REFINE_CEILING``, the sum of ratios lower by more than ``bar``, ITL tails read
    cautiously; the knobs with rungs beyond, batch sizes, leave the GPUs as they are), with
    the first's and its expected sums; None when no rung is worth it."""
    if len(rungs) < 2:
        return None
    cautious = replace(forecasts, cautious=True)
    first = cautious.expected(rungs[0])
    if first is None:
        return None
    total = sum(first)
    # A queue of 64 clients cleared by 64 slots or by 128: 0.07 -> 0.06 of a target missed
    # 8-fold is the model's rounding, not margin.
    noise = max(bar.gain * total, bar.spread * (forecasts.score.tie_break or 0.0))
    found = _best_rung(rungs[1:], cautious, noise)
    if found is None or found[0] > total - noise:
        return None
    return total, found[1], found[0]


def _rank(
    causes: tuple[Cause, ...],
    findings: tuple[Finding, ...],
    observation: Observation,
    config: VllmCommandLine,
    knobs: Knobs,
    hardware: HardwareInfo,
) -> tuple[candidates.Ranking, ConfigView]:
    """The ranked candidates for ``causes`` and the config view they were ranked on."""
    cv = view(config, hardware, observation.cache_config)
    ranking = candidates.rank(
        causes, findings, cl=config, view=cv, knobs=knobs, hardware=hardware,
        observation=observation,
    )  # fmt: skip
    return ranking, cv


def _tiers(values: Sequence[float], tolerance: float) -> list[int]:
    """Each value's tier: values sorted, and a new tier wherever one is not within
    ``tolerance`` of the first of the current tier (infinite ones share the last)."""
    tiers = [0] * len(values)
    tier, first = -1, 0.0
    for n, i in enumerate(sorted(range(len(values)), key=values.__getitem__)):
        if n == 0 or not values[i] <= first + tolerance:
            tier, first = tier + 1, values[i]
        tiers[i] = tier
    return tiers


def _violation(diagnosis: Diagnosis) -> float:
    """How far the window misses its targets: the sum of each objective's ratio to its
    threshold beyond 1 (0 when all are met), the scale ``_Forecasts.violation`` scores on."""
    if diagnosis.score is None:
        return 0.0
    return sum(max(o.ratio - 1.0, 0.0) for o in diagnosis.score.objectives if o.ratio is not None)


def _complete(change: Change, config: VllmCommandLine, knobs: Knobs) -> Change:
    """The change with the flags its knob sets along with it (``Knob.complete``)."""
    return CATALOG[change.knob].complete(change, config, knobs)


def _ruled_out(
    candidate: Candidate,
    history: Sequence[TrialRecord],
    incompatible: Collection[tuple[str, str | None]],
    load: LoadFingerprint,
    tolerance: float,
    may_step_back: Callable[[TrialRecord, Candidate], bool],
) -> str | None:
    name = candidate.knob.value
    label = f"{name} -> {candidate.to_value if candidate.to_value is not None else '(removed)'}"
    for knob, value in incompatible:
        if knob == name and same_value(value, candidate.to_value):
            return f"{label} failed to start before"
    inconclusive = comparable_inconclusive = transient = saturated = 0
    for index, record in enumerate(history):
        if record.knob != name:
            continue
        comparable = record.load is None or record.load.comparable_to(load, tolerance)
        if (
            record.verdict is Verdict.KEEP
            and comparable
            and _steps_back(record, candidate.to_value)
            and not _reconfigured_since(history, index)
            and not (_inside(record, candidate.to_value) and may_step_back(record, candidate))
        ):
            return (
                f"{label} goes back towards {record.from_value}, which trial "
                f"{record.from_value} -> {record.to_value} left for the better (Keep)"
            )
        if not same_value(record.to_value, candidate.to_value):
            continue
        if record.verdict is Verdict.FAILED and record.transient:
            transient += 1
            if transient >= MAX_TRANSIENT:
                return f"{label} could not be scheduled {transient} times"
            continue
        if record.verdict is Verdict.FAILED:
            return f"{label} failed to start before"
        if record.verdict is Verdict.INCONCLUSIVE:
            if record.saturated and comparable:
                saturated += 1
            if saturated >= MAX_INCONCLUSIVE:
                return f"{label} could not be judged on {saturated} saturated servers"
            if record.saturated and _reconfigured_since(history, index):
                continue  # the server that saturated is gone
            if record.saturated and comparable:
                return (
                    f"{label} could not be judged under a comparable load: both windows were "
                    "saturated and it drained no more requests"
                )
            inconclusive += 1
            comparable_inconclusive += comparable
            if comparable_inconclusive >= MAX_INCONCLUSIVE:
                return (
                    f"{label} was Inconclusive {comparable_inconclusive} times under a "
                    "comparable load"
                )
            if inconclusive >= MAX_INCONCLUSIVE_ANY_LOAD:
                return f"{label} was Inconclusive {inconclusive} times"
        if record.verdict not in (Verdict.KEEP, Verdict.REVERT):
            continue  # Inconclusive or unfinished: nothing was learned (yet)
        if record.verdict is Verdict.REVERT and _reconfigured_since(history, index):
            continue  # judged on a server that is gone (TP2 since can make it help)
        if record.verdict is Verdict.REVERT and record.refinement:
            # Judged for margin with the targets met: its gain was not beyond the noise of met
            # latencies, which says nothing of whether it fixes a miss (refining itself stops
            # after it; a revert as a fix rules the value out as usual).
            continue
        if comparable:
            return f"{label} was tried under a comparable load ({record.verdict.value})"
    return None


def measured_meeting(
    history: Sequence[TrialRecord],
    now: Score,
    load: LoadFingerprint,
    tolerance: float = LOAD_TOLERANCE,
) -> bool:
    """Whether the configuration now running met every objective of ``now`` in the last
    trial's window of it (the trial's own window when it was kept, else the window before it)
    under a load comparable to ``load``: then a window that misses (right after a rollback, a
    closed loop's restart) is not the configuration's measure on its own."""
    if not history:
        return False
    last = history[-1]
    window = last.after if last.verdict is Verdict.KEEP else last.before
    if window is None or not (last.load is None or last.load.comparable_to(load, tolerance)):
        return False
    return all(
        (latency := window.latency(o.name)) is not None and latency <= o.threshold
        for o in now.objectives
    )


def _failed_transiently(candidate: Candidate, history: Sequence[TrialRecord]) -> bool:
    return any(
        r.transient
        and r.knob == candidate.knob.value
        and same_value(r.to_value, candidate.to_value)
        for r in history
    )


def _reconfigured_since(history: Sequence[TrialRecord], index: int) -> bool:
    """Another knob's change was kept after ``history[index]``: the server that trial was
    judged on is gone, so what it showed no longer holds (FP8 KV after a lower max-num-seqs can
    make the higher one the better again; a larger max-num-seqs reverted on one GPU can help
    once tensor parallelism doubled the KV cache)."""
    knob = history[index].knob
    return any(r.verdict is Verdict.KEEP and r.knob != knob for r in history[index + 1 :])


def _steps_back(record: TrialRecord, value: str | None) -> bool:
    """``value`` lies in the range a kept numeric move came from: at its starting value or
    between it and where it went. Written starting values only: an unwritten default has no
    number here (the candidates never step back to "absent")."""
    start, end, to = _number(record.from_value), _number(record.to_value), _number(value)
    if start is None or end is None or to is None or start == end:
        return False
    low, high = min(start, end), max(start, end)
    return low <= to <= high and to != end


def _overshot(record: TrialRecord, now: Score | None) -> bool:
    """The kept move turned an objective that its baseline window met into one its trial window
    missed, and this window misses it still: it traded one target for another, so the balance
    of the two, if any, lies inside the range it jumped (a trade-off knob, such as the batched
    tokens per step between TTFT and ITL, moves both latencies monotonically)."""
    if now is None or record.before is None or record.after is None:
        return False
    for objective in now.objectives:
        if not objective.violation:
            continue
        was, then = record.before.latency(objective.name), record.after.latency(objective.name)
        if was is not None and then is not None and was <= objective.threshold < then:
            return True
    return False


def _inside(record: TrialRecord, value: str | None) -> bool:
    """``value`` lies strictly between where a kept numeric move started and where it went:
    a value that trial did not judge (it showed the start worse, not every value between)."""
    start, end, to = _number(record.from_value), _number(record.to_value), _number(value)
    if start is None or end is None or to is None:
        return False
    return min(start, end) < to < max(start, end)


def _continuation(
    open_: list[Candidate],
    history: Sequence[TrialRecord],
    config: VllmCommandLine,
    hardware: HardwareInfo,
) -> list[Candidate]:
    """Open candidates that continue the last kept trial, if it moved a numeric knob and was
    not kept only as a step on a saturated server: the same knob, one more rung the same way,
    as long as that is the way the diagnosis ranks first for the knob now (a cause may offer
    the other way as a fallback; that is not "still pulling").
    (A step that was reverted or failed beyond it is not open any more: history ruled it out
    under this load.)"""
    kept = [r for r in history if r.verdict is Verdict.KEEP]
    if not kept or kept[-1].step:
        return []  # a step kept on a saturated server showed no gain to continue
    last = kept[-1]
    direction = _direction(last, config, hardware)
    if direction == 0:
        return []
    same_knob = [c for c in open_ if c.knob.value == last.knob]
    if not same_knob or same_knob[0].direction != direction:
        return []
    if same_knob[0].knob_class.rank > open_[0].knob_class.rank:
        # A costlier knob does not go on while a cheaper kind is open again (the change just
        # kept reopens what was judged on the server before it): fewest GPUs first.
        return []
    return [c for c in same_knob if c.direction == direction]


def _direction(record: TrialRecord, config: VllmCommandLine, hardware: HardwareInfo) -> int:
    """+1 / -1 when the record moved a numeric knob up / down; 0 otherwise."""
    try:
        knob = CATALOG[KnobName(record.knob)]
    except ValueError:
        return 0
    after = _number(record.to_value)
    before = _number(record.from_value)
    if before is None and record.from_value is None:
        # The flag was absent: it ran with vLLM's default on this hardware.
        before = knob.number(view(config.without(knob.flag), hardware))
    if after is None or before is None or after == before:
        return 0
    return 1 if after > before else -1


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        size = parse_int(text)
        return None if size is None else float(size)


def effective_text(knob: KnobName, cv: ConfigView) -> str:
    """The knob's current effective value in words ("2048", "true", "auto")."""
    return CATALOG[knob].effective(cv)


def _change(
    best: Candidate, config: VllmCommandLine, cv: ConfigView, *, continuing: bool
) -> Change:
    knob = CATALOG[best.knob]
    from_effective = knob.effective(cv)
    to_text = best.to_value if best.to_value is not None else "(removed)"
    written = knob.recorded_from(config)
    default_note = "" if written is not None else " (vLLM default)"
    lead = "continuing the kept direction: " if continuing else ""
    subject = (
        f"{best.finding} (a deployment problem) slows {best.objective_label}"
        if best.finding is not None
        else f"{best.bottleneck} on {best.objective_label}"
    )
    reason = (
        f"{lead}{subject}: {knob.what}, "
        f"{from_effective}{default_note} -> {to_text}; {best.why}; "
        f"expected ~{best.gain:.0%} lower {best.objective_label.split()[0]} "
        f"({knob.knob_class} change)"
    )
    return Change(
        knob=best.knob,
        from_value=written,
        to_value=best.to_value,
        knob_class=best.knob_class,
        expected_gain=round(best.gain, 4),
        expected_score_gain=round(best.score_gain, 4),
        bottleneck=best.bottleneck,
        reason=reason,
        from_effective=from_effective,
        variant=best.variant,
        expected=best.expected,
    )


def _exhausted(
    diagnosis: Diagnosis,
    blocked: tuple[str, ...],
    ruled_out: list[str],
    history: Sequence[TrialRecord],
) -> Exhausted:
    bottleneck = diagnosis.bottleneck
    if ruled_out:
        reason = f"every knob for {bottleneck} was tried: " + "; ".join(ruled_out)
    else:
        reason = f"no knob the spec allows can help with {bottleneck}"
    steps = _unproven_steps(history)
    if steps:
        # Said where a person reads why tuning stopped: these stay on the Deployment.
        reason += (
            "; kept as steps on a saturated server and never measured on their own: "
            + ", ".join(steps)
        )
    return Exhausted(reason, tuple(dict.fromkeys((*diagnosis.advice, *blocked))))


def _unproven_steps(history: Sequence[TrialRecord]) -> list[str]:
    """The changes kept as steps on a saturated server (``TrialRecord.step``) that no later
    Keep of the same knob moved on from, as "knob -> value"."""
    steps = []
    for index, record in enumerate(history):
        later = history[index + 1 :]
        if record.step and not any(
            r.verdict is Verdict.KEEP and r.knob == record.knob for r in later
        ):
            value = record.to_value if record.to_value is not None else "(removed)"
            steps.append(f"{record.knob} -> {value}")
    return steps
