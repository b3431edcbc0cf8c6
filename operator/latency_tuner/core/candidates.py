"""Which knob values could help now, ranked; and which could not be tried, and why.

For each cause (objective + bottleneck) the entries of the bottleneck table
(``core.knobs.table``: DESIGN section 4 as data) pull knobs in a direction with a prior
expected gain, kept when their load condition holds; deployment problems found by the
diagnosis pull the knob that undoes them (``FIXES``). Each knob module then says which value(s)
the pull would set and how much each is expected to help under the observed load, or why it
cannot (spec opt-in and bounds, the GPU, the interconnect). Candidates are ranked: fixes of
deployment problems first, then safe before lossy before costly, then by expected score
reduction. No knob is named here: what a knob means lives in its module. History is the
planner's business, not this module's. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from latency_tuner.api.spec import Knobs, QuantizationVariant
from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Bottleneck, Cause, Finding
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import CATALOG, KnobClass, KnobName
from latency_tuner.core.knobs.base import Context, Pull
from latency_tuner.core.knobs.table import (
    AHEAD,
    FIXES,
    LONG_PROMPT_TOKENS,
    PREFILL_HEAVY_SHARE,
    TABLE,
    Entry,
    When,
)
from latency_tuner.core.load import KV_FULL, Load
from latency_tuner.core.observation import Observation
from latency_tuner.core.score import ObjectiveName
from latency_tuner.vllm.args import VllmCommandLine

__all__ = ["KV_FULL", "Candidate", "Load", "Ranking", "rank"]


@dataclass(frozen=True)
class Candidate:
    """One knob value worth a trial, with why and how much it is expected to help."""

    knob: KnobName
    to_value: str | None
    direction: int  # +1 up, -1 down, 0 for non-numeric
    gain: float  # prior relative latency reduction on the cause's objective
    score_gain: float  # prior reduction of the violation score, summed over causes it helps
    bottleneck: Bottleneck
    objective_label: str
    why: str
    finding: Finding | None = None  # the deployment problem this candidate fixes, if any
    variant: QuantizationVariant | None = None
    # Per objective it was pulled for, the prior gain there (merged candidates keep each).
    expected: tuple[tuple[ObjectiveName, float], ...] = ()
    farther: tuple[str, ...] = ()  # the knob's rungs beyond to_value the same way (Option)

    @property
    def fixes_finding(self) -> bool:
        return self.finding is not None

    @property
    def knob_class(self) -> KnobClass:
        return CATALOG[self.knob].knob_class

    def sort_key(self) -> tuple[int, int, float]:
        return (0 if self.fixes_finding else 1, self.knob_class.rank, -self.score_gain)


@dataclass(frozen=True)
class Ranking:
    candidates: tuple[Candidate, ...]
    blocked: tuple[str, ...]  # knobs that would apply but may not or cannot be tried, in words


_FINDING_OF = {fix.knob: fix.finding for fix in FIXES}


def rank(
    causes: tuple[Cause, ...],
    findings: tuple[Finding, ...],
    *,
    cl: VllmCommandLine,
    view: ConfigView,
    knobs: Knobs,
    hardware: HardwareInfo,
    observation: Observation,
) -> Ranking:
    """Candidates for ``causes`` (and fixes for ``findings``), best first."""
    ctx = Context(cl, view, knobs, hardware, Load.of(observation))
    found: list[Candidate] = []
    blocked: list[str] = []
    for cause in causes:
        for pull in _fix_pulls(cause, findings) + _pulls(cause, ctx):
            options = CATALOG[pull.knob].options(pull, cause, ctx)
            if isinstance(options, str):
                blocked.append(options)
                continue
            for option in options:
                found.append(
                    Candidate(
                        knob=pull.knob,
                        to_value=option.to_value,
                        direction=pull.direction,
                        gain=option.gain,
                        score_gain=min(cause.violation, cause.ratio * option.gain),
                        bottleneck=cause.bottleneck,
                        objective_label=cause.label,
                        why=pull.why + (f"; {option.note}" if option.note else ""),
                        finding=_FINDING_OF.get(pull.knob),
                        variant=option.variant,
                        expected=((cause.objective, option.gain),),
                        farther=option.farther,
                    )
                )
    merged = _merge(_settle_conflicts(found, causes))
    # Stable sort: ties keep the order of causes (most violated first) and of the table rows.
    ordered = sorted(merged, key=Candidate.sort_key)
    return Ranking(tuple(ordered), tuple(dict.fromkeys(blocked)))


def _fix_pulls(cause: Cause, findings: tuple[Finding, ...]) -> list[Pull]:
    side = cause.bottleneck.itl_side
    return [
        Pull(fix.knob, 0, fix.itl_gain if side else fix.ttft_gain, fix.why)
        for fix in FIXES
        if fix.finding in findings
    ]


def _pulls(cause: Cause, ctx: Context) -> list[Pull]:
    """The table's entries for the cause (those placed ahead first) whose load condition holds,
    with their priors resolved and their reasons filled in."""
    ttft_side = cause.objective == "ttft" or not cause.bottleneck.itl_side
    ahead = [a.entry for a in AHEAD if ttft_side and cause.bottleneck not in a.except_rows]
    pulls = []
    for entry in (*ahead, *TABLE.get(cause.bottleneck, ())):
        pull = _resolve(entry, ctx)
        if pull is not None:
            pulls.append(pull)
    return pulls


def _resolve(entry: Entry, ctx: Context) -> Pull | None:
    if not _holds(entry.when, ctx):
        return None
    gain = entry.gain
    if gain is None:
        gain = CATALOG[entry.knob].prior(ctx.load)
        if gain <= 0:
            return None
    load = ctx.load
    why = entry.why.format(
        max_num_seqs=ctx.view.max_num_seqs,
        prompt_tokens=load.prompt_tokens,
        context_tokens=load.context_tokens,
    )
    return Pull(entry.knob, entry.direction, gain, why, frees_memory=entry.frees_memory)


def _holds(when: When, ctx: Context) -> bool:
    load = ctx.load
    match when:
        case When.ALWAYS:
            return True
        case When.AT_MAX_SEQS:
            return load.at_max_seqs(ctx.view.max_num_seqs)
        case When.KV_FULL:
            return load.kv_full
        case When.KV_NOT_FULL:
            return not load.kv_full
        case When.LONG_PROMPTS:
            return load.prompt_tokens is not None and load.prompt_tokens >= LONG_PROMPT_TOKENS
        case When.PREFILL_HEAVY:
            # Measured where known; else long prompts are the prefill-heavy kind.
            share = load.prefill_share
            if share is not None:
                return share >= PREFILL_HEAVY_SHARE
            return load.prompt_tokens is not None and load.prompt_tokens >= LONG_PROMPT_TOKENS


def _settle_conflicts(found: list[Candidate], causes: tuple[Cause, ...]) -> list[Candidate]:
    """A numeric knob pulled both ways by two causes (TTFT wants more batched tokens, ITL
    fewer) moves the way of the cause whose objective is violated more: the score decides.
    One cause may offer both ways (its likelier way first): that is a fallback, not a
    conflict."""
    worst: dict[KnobName, tuple[float, str]] = {}
    ratio_of = {c.label: c.ratio for c in causes}
    for c in found:
        if c.direction != 0 and not c.fixes_finding:
            ratio = ratio_of.get(c.objective_label, 0.0)
            if c.knob not in worst or ratio > worst[c.knob][0]:
                worst[c.knob] = (ratio, c.objective_label)
    ways: dict[KnobName, set[int]] = {}
    for c in found:
        if c.knob in worst and c.objective_label == worst[c.knob][1]:
            ways.setdefault(c.knob, set()).add(c.direction)
    return [
        c
        for c in found
        if c.knob not in worst or c.direction in ways.get(c.knob, set()) or c.fixes_finding
    ]


def _merge(found: list[Candidate]) -> list[Candidate]:
    """One candidate per (knob, value): score gains add up over the causes it helps."""
    merged: dict[tuple[KnobName, str | None], Candidate] = {}
    for c in found:
        key = (c.knob, c.to_value)
        if key not in merged:
            merged[key] = c
            continue
        first = merged[key]
        merged[key] = replace(
            first,
            gain=max(first.gain, c.gain),
            score_gain=first.score_gain + c.score_gain,
            why=first.why if c.why in first.why else f"{first.why}; {c.why}",
            expected=_merged_gains(first.expected, c.expected),
        )
    return list(merged.values())


def _merged_gains(
    a: tuple[tuple[ObjectiveName, float], ...], b: tuple[tuple[ObjectiveName, float], ...]
) -> tuple[tuple[ObjectiveName, float], ...]:
    """Per objective the larger prior, in the order the objectives first appear."""
    gains: dict[ObjectiveName, float] = {}
    for objective, gain in (*a, *b):
        gains[objective] = max(gain, gains.get(objective, gain))
    return tuple(gains.items())
