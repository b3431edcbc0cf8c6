"""A window analysed once per decision: what it showed, the diagnosis, and the next change.

``analyse`` diagnoses the window (``core.diagnosis.diagnose``) and keeps the result with the
window; ``propose`` plans the next change from that same diagnosis (``core.planner.plan``),
and ``propose_margin``, once the targets are met, the change for margin (``refine``).
The operator's phases and ``latency-tuner diagnose`` both go through here, so a window is
read the same way wherever it is read. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import Trial
from latency_tuner.core import saturation
from latency_tuner.core.diagnosis import Diagnosis, diagnose
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import Change
from latency_tuner.core.observation import NoData, Observation, ObservationResult
from latency_tuner.core.planner import Exhausted, plan, refine
from latency_tuner.core.rollout.facts import WindowResult
from latency_tuner.core.rollout.values import history
from latency_tuner.vllm.args import VllmCommandLine
from latency_tuner.vllm.defaults import version_from_image


@dataclass(frozen=True)
class Analysis:
    """One window, analysed."""

    window: ObservationResult  # NoData when nothing was measured or the source failed
    usable: Observation | None  # the window, with evaluation.minRequests requests, or busy
    diagnosis: Diagnosis


def analyse(
    spec: LatencyTargetSpec,
    window: WindowResult | None,
    cl: VllmCommandLine,
    hardware: HardwareInfo,
    *,
    image: str | None = None,
) -> Analysis:
    """Diagnose ``window`` of the container running ``cl`` on ``hardware`` (from ``image``,
    whose tag tells the vLLM release the defaults come from)."""
    seen: ObservationResult = (
        window
        if isinstance(window, (Observation, NoData))
        else NoData(reason="the metrics source did not answer", window_seconds=0.0)
    )
    minimum = spec.evaluation.min_requests
    judged = seen if isinstance(seen, Observation) and saturation.usable(seen, minimum) else None
    diagnosis = diagnose(
        seen,
        spec.objectives,
        cl,
        hardware,
        spec.knobs,
        min_requests=minimum,
        version=version_from_image(image),
    )
    return Analysis(seen, judged, diagnosis)


def propose(
    spec: LatencyTargetSpec,
    diagnosis: Diagnosis,
    observation: Observation,
    cl: VllmCommandLine,
    hardware: HardwareInfo,
    trials: Sequence[Trial] = (),
    incompatible: Collection[tuple[str, str | None]] = (),
) -> Change | Exhausted:
    """The next single change for ``diagnosis`` given the trials so far, or ``Exhausted``."""
    return plan(
        diagnosis, observation, cl, spec.knobs, hardware, history(trials), incompatible,
        min_improvement=spec.evaluation.min_improvement,
    )  # fmt: skip


def propose_margin(
    spec: LatencyTargetSpec,
    observation: Observation,
    cl: VllmCommandLine,
    hardware: HardwareInfo,
    trials: Sequence[Trial] = (),
    incompatible: Collection[tuple[str, str | None]] = (),
    subwindows: Sequence[Observation] = (),
) -> Change | None:
    """With the targets met, the change worth a trial for margin (``core.planner.refine``);
    ``subwindows``: the window's parts, for its noise."""
    return refine(
        observation,
        spec.objectives,
        cl,
        spec.knobs,
        hardware,
        history(trials),
        incompatible,
        min_improvement=spec.evaluation.min_improvement,
        subwindows=subwindows,
    )
