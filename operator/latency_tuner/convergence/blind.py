"""The blind planner: the operator's own loop with a planner that ignores the diagnosis.

A good planner must clearly beat it; a suite on which it scores like the operator cannot tell a
good planner from a blind one. It proposes the changes the scenario's space allows from the
running configuration -- every other rung of a numeric knob, a toggle or fix switched, each
quantization variant, KV-cache dtype, speculative config and larger tensor-parallel size -- in
an order shuffled once per run (seeded), skipping what a trial already tried and what failed to
start; nothing left: ``Exhausted``. Everything else is the production loop: the same
Reconciler, phases, verdict, rollbacks and budget (``operator_run`` swaps only the one call
that turns a diagnosis into a change, ``core.rollout.observing.propose``, for the length of a
blind run). Pure apart from that swap.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import Trial
from latency_tuner.convergence.scenario import Scenario
from latency_tuner.convergence.space import ORIGINAL, dimensions
from latency_tuner.core.config_view import view
from latency_tuner.core.diagnosis import Diagnosis
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import CATALOG, Change, KnobName
from latency_tuner.core.observation import Observation
from latency_tuner.core.planner import Exhausted
from latency_tuner.core.rollout import observing
from latency_tuner.vllm.args import VllmCommandLine

Propose = Callable[..., Change | Exhausted]
_SWAPPED = "propose"  # the loop's one call from a diagnosis to a change
_START_ONLY = {"kept", "none", "auto", ORIGINAL, "false"}  # the start's value of a switch


def moves(scenario: Scenario, seed: int) -> list[tuple[str, str]]:
    """Every (knob, value) the space allows, in the run's shuffled order."""
    out = [
        (d.knob, v)
        for d in dimensions(scenario)
        for v in d.values
        if not (v in _START_ONLY and v == d.values[0])
    ]
    random.Random(f"blind:{scenario.name}:{seed}").shuffle(out)
    return out


def blind_planner(scenario: Scenario, seed: int) -> Propose:
    """A ``propose`` with the production signature that ignores the diagnosis."""
    order = moves(scenario, seed)
    variants = {v.name: v for v in (scenario.knobs.quantization.variants
                                    if scenario.knobs.quantization else ())}  # fmt: skip

    def propose(
        spec: LatencyTargetSpec,
        diagnosis: Diagnosis,
        observation: Observation,
        cl: VllmCommandLine,
        hardware: HardwareInfo,
        trials: Sequence[Trial] = (),
        incompatible: Collection[tuple[str, str | None]] = (),
    ) -> Change | Exhausted:
        tried = {(t.knob, t.to_value) for t in trials} | set(incompatible)
        cv = view(cl, hardware)
        for knob_text, value in order:
            name = KnobName(knob_text)
            knob = CATALOG[name]
            to_value: str | None = None if value == "removed" else value
            if name is KnobName.QUANTIZATION:
                if variants[value].model is not None and cv.model == variants[value].model:
                    continue  # already this checkpoint
            elif to_value is None:
                if knob.written(cl) is None:
                    continue  # already removed
            elif knob.effective(cv) == value:
                continue
            if (name.value, to_value) in tried:
                continue
            change = Change(
                knob=name,
                from_value=knob.recorded_from(cl),
                to_value=to_value,
                knob_class=knob.knob_class,
                expected_gain=0.0,
                expected_score_gain=0.0,
                bottleneck=diagnosis.bottleneck,
                reason="blind: the next allowed change in a shuffled order",
                from_effective=knob.effective(cv),
                variant=variants.get(value) if name is KnobName.QUANTIZATION else None,
            )
            return knob.complete(change, cl, spec.knobs)
        return Exhausted("blind planner: every allowed change was tried")

    return propose


@contextmanager
def planning_with(propose: Propose) -> Iterator[None]:
    """The production loop with ``propose`` in place of its planner, for the block's length."""
    saved: Any = getattr(observing, _SWAPPED)
    setattr(observing, _SWAPPED, propose)
    try:
        yield
    finally:
        setattr(observing, _SWAPPED, saved)
