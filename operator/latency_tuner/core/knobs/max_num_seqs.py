"""``--max-num-seqs``: how many sequences the scheduler runs at once (the slot limit).

Raised, one rung of ``MAX_NUM_SEQS_LADDER`` at a time within the spec's bounds, when running
requests reach it and requests queue; lowered under KV-cache pressure, so that fewer
sequences share the KV blocks and fewer are preempted. The next ``FARTHER_RUNGS`` rungs the
same way come with it, for the planner to jump to when the calibrated model expects one rung
to leave the queue too long (64 clients on 8 slots need 64, not 16). vLLM refuses a value
above max-num-batched-tokens, so a rung above the effective budget is not proposed. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Cause
from latency_tuner.core.knobs.base import (
    FARTHER_RUNGS,
    BaseKnob,
    Context,
    KnobClass,
    KnobName,
    Option,
    Pull,
    ladder_step,
    off_limits,
    rungs_beyond,
)

MAX_NUM_SEQS_LADDER: tuple[int, ...] = tuple(2**i for i in range(4, 13))  # 16 .. 4096


class MaxNumSeqs(BaseKnob):
    name = KnobName.MAX_NUM_SEQS
    flag = "max-num-seqs"
    knob_class = KnobClass.SAFE
    what = "change max-num-seqs"

    def number(self, cv: ConfigView) -> float | None:
        return float(cv.max_num_seqs)

    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str:
        bounds = ctx.knobs.max_num_seqs
        if bounds is None:
            return off_limits(self.name)
        step = ladder_step(
            self.name, MAX_NUM_SEQS_LADDER, bounds, ctx.view.max_num_seqs, pull.direction
        )
        if isinstance(step, str):
            return step
        # An unwritten max-num-seqs follows the budget down by itself; one we write must fit.
        budget = ctx.view.max_num_batched_tokens
        if step > budget:
            return f"{self.name} {step} would exceed max-num-batched-tokens ({budget})"
        farther = rungs_beyond(MAX_NUM_SEQS_LADDER, bounds, step, pull.direction, FARTHER_RUNGS)
        return [Option(str(step), pull.gain, farther=tuple(str(v) for v in farther if v <= budget))]


KNOB = MaxNumSeqs()
