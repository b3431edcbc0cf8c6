"""Quantization: serve a pre-quantized variant of the model (a checkpoint, image or args).

Lossy and opt-in: the variants come from ``spec.knobs.quantization.variants``, each with a
``model`` and/or ``image`` and/or ``args``; the change switches to one (its name is the trial's
value). Only from the original model: once a listed variant is served, switching between
variants is left to the user. A variant's kind (``int4``, ``fp8``, ``int8``) is read from its
name, model and args; FP8 needs a GPU that has it. Expected gains (``_variant_gain``): MARLIN
INT4 near 4x kernel speed up to batch 16-32, shrinking by 64-128, no TTFT gain; FP8 ITL -29% at
batch 1, -21% at 64, -9% at 256, TTFT -22%. Against KV-cache pressure the gain is the memory the
smaller weights free for KV blocks (``_memory_gain``), 4-bit the most.

Rendering a variant with a ``model`` also drops an explicit ``--quantization`` left from the
original model (a pre-quantized checkpoint declares its method in config.json) unless the
variant's args set one. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from latency_tuner.api.spec import Knobs, QuantizationVariant
from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Cause
from latency_tuner.core.knobs.base import (
    AppliedChange,
    BaseKnob,
    Change,
    Context,
    KnobClass,
    KnobName,
    Option,
    Pull,
)
from latency_tuner.vllm.args import VllmCommandLine

_INT4 = re.compile(r"awq|gptq|int4|w4a16|4bit|4-bit|marlin|nf4")
_FP8 = re.compile(r"fp8|float8")
_INT8 = re.compile(r"int8|w8a8|w8a16|8bit|8-bit")


def variant_flags(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """A variant's ``args`` as (flag, value) pairs; value None for a bare boolean ``--x`` and
    "" for ``--no-x``. ``["--quantization", "awq", "-tp=2", "--no-enforce-eager"]`` ->
    ``[("quantization", "awq"), ("tp", "2"), ("no-enforce-eager", "")]``."""
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        token = args[i]
        name, eq, value = token.lstrip("-").partition("=")
        if eq:
            pairs.append((name, value))
        elif name.startswith("no-"):
            pairs.append((name, ""))
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            pairs.append((name, args[i + 1]))
            i += 1
        else:
            pairs.append((name, None))
        i += 1
    return pairs


def variant_kind(variant: QuantizationVariant) -> str:
    """ "int4", "fp8", "int8" or "unknown", from the variant's name, model and args."""
    text = " ".join([variant.name, variant.model or "", *variant.args]).lower()
    for kind, pattern in (("int4", _INT4), ("fp8", _FP8), ("int8", _INT8)):
        if pattern.search(text):
            return kind
    return "unknown"


def current_variant(cl: VllmCommandLine, knobs: Knobs) -> QuantizationVariant | None:
    """The listed variant the command line already serves, if any (by model, else by args)."""
    for variant in knobs.quantization.variants if knobs.quantization else []:
        if variant.model is not None:
            if variant.model == cl.model:
                return variant
        elif variant.args and all(
            cl.get(name) == value if value else cl.has(name)
            for name, value in variant_flags(variant.args)
        ):
            return variant
    return None


def _memory_gain(kind: str) -> float:
    """Against KV-cache pressure: the weights shrink (4-bit to a quarter, 8-bit to half) and
    the memory freed holds KV blocks. Priors next to the FP8 KV cache's 0.3 (which doubles
    the KV capacity): a 4-bit checkpoint frees more than the KV cache of most deployments
    holds, an 8-bit one about half of that."""
    return {"int4": 0.3, "fp8": 0.2, "int8": 0.2}.get(kind, 0.1)


def _variant_gain(kind: str, itl_side: bool, running: float | None) -> float:
    batch = running if running is not None else 1.0
    if not itl_side:
        return {"fp8": 0.2, "int8": 0.05}.get(kind, 0.0)
    if kind == "int4":
        return 0.5 if batch <= 16 else 0.35 if batch <= 64 else 0.2
    if kind == "fp8":
        return 0.28 if batch <= 4 else 0.21 if batch <= 64 else 0.09
    return 0.2 if kind == "int8" else 0.15


class Quantization(BaseKnob):
    name = KnobName.QUANTIZATION
    flag = "quantization"  # a variant also sets the model, image or other args
    knob_class = KnobClass.LOSSY
    what = "serve a pre-quantized variant"

    def recorded_from(self, cl: VllmCommandLine) -> str | None:
        return None  # the original model: not a variant

    def effective(self, cv: ConfigView) -> str:
        return cv.model or ""

    def render(self, change: Change, cl: VllmCommandLine) -> AppliedChange:
        variant = change.variant
        if variant is None:
            raise ValueError("a quantization change needs its variant")
        new = cl
        pairs = variant_flags(variant.args)
        if variant.model is not None:
            new = new.with_model(variant.model)
            if all(name.replace("_", "-") not in ("quantization", "q") for name, _ in pairs):
                new = new.without("quantization")
        for name, value in pairs:
            if value is None:
                new = new.with_flag(name, True)
            elif name.startswith("no-") and value == "":
                new = new.with_flag(name[3:], False)
            else:
                new = new.with_value(name, value)
        return AppliedChange(new, image=variant.image)

    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str:
        quantization = ctx.knobs.quantization
        if quantization is None:
            return (
                "quantization is not allowed: list pre-quantized variants (AWQ, FP8) in "
                "spec.knobs.quantization to let the operator try them"
            )
        if current_variant(ctx.cl, ctx.knobs) is not None:
            return []
        options: list[Option] = []
        refused: list[str] = []
        for variant in quantization.variants:
            kind = variant_kind(variant)
            if kind == "fp8" and ctx.hardware.supports_fp8 is False:
                refused.append(
                    f"variant {variant.name!r} needs FP8, which {ctx.hardware.describe()} lacks"
                )
                continue
            gain = (
                _memory_gain(kind)
                if pull.frees_memory
                else _variant_gain(kind, cause.bottleneck.itl_side, ctx.load.running)
            )
            if gain > 0:
                options.append(
                    Option(variant.name, gain, variant, f"variant {variant.name!r} ({kind})")
                )
        if not options and refused:
            return "; ".join(refused)
        return options


KNOB = Quantization()
