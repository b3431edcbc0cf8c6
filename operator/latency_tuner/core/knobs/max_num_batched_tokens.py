"""``--max-num-batched-tokens``: the tokens one scheduler step may carry (the chunk budget).

Moves one rung of ``BATCHED_TOKENS_LADDER`` at a time within the spec's bounds: up to admit
prefills sooner (queueing, long prefill), down so that a prefill chunk stalls the decodes of
its step less (prefill interference). Against prefill interference a move may skip rungs: down
to the budget that brings a chunk's stall under the ITL target in one move, or up to the budget
that prefills a mean prompt in one step. Never lowered without chunked prefill (vLLM then needs
the budget >= max-model-len) and never below a written max-num-seqs (vLLM refuses it). The
next ``FARTHER_RUNGS`` rungs the same way come with a move, for the planner to jump to when the
calibrated model expects one rung to fall short (or, for margin, a farther one to do better).
Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Bottleneck, Cause
from latency_tuner.core.knobs.base import (
    FARTHER_RUNGS,
    BaseKnob,
    Context,
    KnobClass,
    KnobName,
    Option,
    Pull,
    ladder_in,
    ladder_step,
    off_limits,
    rungs_beyond,
)

BATCHED_TOKENS_LADDER: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


class MaxNumBatchedTokens(BaseKnob):
    name = KnobName.MAX_NUM_BATCHED_TOKENS
    flag = "max-num-batched-tokens"
    knob_class = KnobClass.SAFE
    what = "change max-num-batched-tokens"

    def number(self, cv: ConfigView) -> float | None:
        return float(cv.max_num_batched_tokens)

    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str:
        bounds = ctx.knobs.max_num_batched_tokens
        if bounds is None:
            return off_limits(self.name)
        interference = cause.bottleneck is Bottleneck.PREFILL_INTERFERENCE
        if not ctx.view.chunked_prefill and (pull.direction < 0 or interference):
            # Without chunking vLLM needs the budget >= max-model-len (do not lower it), and a
            # prompt is prefilled in one step whatever the budget.
            return []
        current = ctx.view.max_num_batched_tokens
        step = ladder_step(self.name, BATCHED_TOKENS_LADDER, bounds, current, pull.direction)
        if isinstance(step, str):
            return step
        if ctx.cl.get("max-num-seqs") is not None and step < ctx.view.max_num_seqs:
            return f"{self.name} {step} would fall below max-num-seqs ({ctx.view.max_num_seqs})"
        note = ""
        if interference:
            rungs = ladder_in(BATCHED_TOKENS_LADDER, bounds)
            if pull.direction < 0:
                sized = _chunk_sized_from_target(rungs, current, cause, ctx)
                if sized is not None and sized < step:
                    step = sized
                    note = (
                        "a budget sized from the prompt length and the ITL target"
                        if cause.ratio > 1.0
                        else "the largest budget that makes a prompt's chunk smaller"
                    )
            else:
                whole = _whole_prompt_budget(rungs, current, ctx)
                if whole is not None and whole > step:
                    step, note = whole, "a budget that prefills a mean prompt in one step"
        # The rungs beyond, for the planner to jump to when the calibrated model asks for it;
        # down, none below a written max-num-seqs (vLLM refuses those).
        beyond = rungs_beyond(BATCHED_TOKENS_LADDER, bounds, step, pull.direction, FARTHER_RUNGS)
        farther = tuple(str(v) for v in beyond if v >= _floor(ctx))
        return [Option(str(step), pull.gain, note=note, farther=farther)]


def _whole_prompt_budget(rungs: tuple[int, ...], current: int, ctx: Context) -> int | None:
    """The smallest rung above ``current`` that holds a mean prompt in one chunk (else the top
    rung): between the two, a prompt still takes as many stalled steps, each one longer (8000-
    token prompts: 4096 stalls two steps twice as long as 2048's four; 8192 stalls one)."""
    prompt = ctx.load.prompt_tokens
    above = [r for r in rungs if r > current]
    if prompt is None or not above:
        return None
    return next((r for r in above if r >= prompt), above[-1])


def _chunk_sized_from_target(
    rungs: tuple[int, ...], current: int, cause: Cause, ctx: Context
) -> int | None:
    """The batch budget that would bring a prefill stall under the ITL target in one move.

    A decode step that carries a prefill chunk takes about as long as that chunk's prefill, and
    a chunk is min(budget, prompt) tokens: a budget above the prompt length changes nothing
    (16384 -> 8192 with 2500-token prompts), and below it the stall shrinks with the budget. So
    the budget goes to the largest rung under min(current, prompt) / (observed / target), never
    below max-num-seqs when that is written (vLLM refuses it). With the target met (a pull for
    margin) there is no ratio to size from: the budget goes to the largest rung that makes a
    chunk smaller at all, and the calibrated model says whether that is worth a rollout.
    """
    prompt = ctx.load.prompt_tokens
    if prompt is None:
        return None
    chunk = min(float(current), prompt)
    below = [r for r in rungs if r < current and r >= _floor(ctx)]
    if not below:
        return None
    if cause.ratio <= 1.0:
        smaller = [r for r in below if r < chunk]
        return max(smaller) if smaller else None
    fitting = [r for r in below if r <= chunk / cause.ratio]
    return max(fitting) if fitting else min(below)


def _floor(ctx: Context) -> int:
    """The lowest budget vLLM accepts here: a written max-num-seqs (else it follows the budget)."""
    return ctx.view.max_num_seqs if ctx.cl.get("max-num-seqs") is not None else 0


KNOB = MaxNumBatchedTokens()
