"""What every knob module provides, and the values that pass between a knob and the planner.

A knob is one tuning lever (usually one vLLM flag). ``Knob`` is the protocol each module under
``core.knobs`` implements with one object, ``KNOB``:

- ``name``, ``flag``, ``knob_class``, ``what``: how the spec and status spell it, the vLLM flag
  it writes, how risky a change is (``safe`` keeps outputs and GPU count; ``lossy`` may change
  outputs; ``costly`` takes more GPUs), and the change in words for reasons and events;
- ``options(pull, cause, ctx)``: the value(s) one pull of the bottleneck table would set, each
  with its expected gain, or a sentence saying why it cannot (spec, bounds, GPU, interconnect);
- ``prior(load)``: the load-adjusted expected gain, for table entries that leave it to the knob;
- ``render(change, cl)``: the command line (and image, GPU limit) with the change applied;
- ``written(cl)``, ``recorded_from(cl)``, ``number(cv)``, ``effective(cv)``: its value as the
  command line writes it, as a trial records its start, and as the server runs it;
- ``complete(change, cl, knobs)``: the change with the flags that must come with it;
- ``detect(cv)``: for knobs that undo a deployment problem, the problem with its evidence.

``BaseKnob`` gives the common answers (a flag with a value, no prior, no companions, nothing
to detect); a module overrides only what is its own. Which knob a bottleneck pulls, which way
and with what prior, is not here but in the table (``core.knobs.table``). Pure, no I/O.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from latency_tuner.api.spec import IntRange, Knobs, QuantizationVariant
from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Bottleneck, Cause, Evidence, Finding
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.load import Load
from latency_tuner.core.score import ObjectiveName
from latency_tuner.vllm.args import VllmCommandLine


class KnobName(StrEnum):
    """Knob names as the spec and status spell them (camelCase)."""

    CPU_OFFLOAD = "cpuOffloadGb"
    ENFORCE_EAGER = "enforceEager"
    PREFIX_CACHING = "prefixCaching"
    CHUNKED_PREFILL = "chunkedPrefill"
    MAX_NUM_BATCHED_TOKENS = "maxNumBatchedTokens"
    MAX_NUM_SEQS = "maxNumSeqs"
    GPU_MEMORY_UTILIZATION = "gpuMemoryUtilization"
    SPECULATIVE_DECODING = "speculativeDecoding"
    QUANTIZATION = "quantization"
    KV_CACHE_DTYPE = "kvCacheDtype"
    TENSOR_PARALLEL = "tensorParallel"


class KnobClass(StrEnum):
    SAFE = "safe"  # same outputs, same GPUs
    LOSSY = "lossy"  # may change outputs: compare quality before relying on it
    COSTLY = "costly"  # more GPUs per replica

    @property
    def rank(self) -> int:
        return (KnobClass.SAFE, KnobClass.LOSSY, KnobClass.COSTLY).index(self)


def format_number(value: float) -> str:
    """2048 -> "2048", 0.95 -> "0.95": how values appear in args, trials and events."""
    if float(value).is_integer():
        return str(int(value))
    return f"{round(value, 4):g}"


def same_value(a: str | None, b: str | None) -> bool:
    """Equal as numbers when both are numbers ("0.90" == "0.9"), else as text."""
    if a is None or b is None:
        return a is b
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip() == b.strip()


def ladder_in(ladder: Sequence[int], bounds: IntRange) -> tuple[int, ...]:
    """The rungs within ``bounds``, with the bounds themselves as the end rungs."""
    inside = {v for v in ladder if bounds.min <= v <= bounds.max} | {bounds.min, bounds.max}
    return tuple(sorted(inside))


def next_rung(rungs: Sequence[int], current: int, direction: int) -> int | None:
    """The adjacent rung above (direction > 0) or below ``current``; None at the end."""
    if direction > 0:
        return next((v for v in rungs if v > current), None)
    return next((v for v in reversed(rungs) if v < current), None)


FARTHER_RUNGS = 3  # up to 8x (or 1/8) in one trial: the bound on a jump the model asks for


def rungs_beyond(
    ladder: Sequence[int], bounds: IntRange, step: int, direction: int, count: int
) -> tuple[int, ...]:
    """Up to ``count`` rungs of ``ladder`` within ``bounds`` beyond ``step`` in ``direction``,
    nearest first."""
    rungs = ladder_in(ladder, bounds)
    beyond = (
        [v for v in rungs if v > step]
        if direction > 0
        else [v for v in reversed(rungs) if v < step]
    )
    return tuple(beyond[:count])


def boolean_written(cl: VllmCommandLine, flag: str) -> str | None:
    """A boolean flag as written: "true"/"false", None when absent; an unreadable value as is."""
    try:
        enabled = cl.flag_enabled(flag)
    except ValueError:
        return cl.get(flag)
    return None if enabled is None else str(enabled).lower()


def ladder_step(
    name: KnobName, ladder: Sequence[int], bounds: IntRange, current: int, direction: int
) -> int | str:
    """The next rung of ``ladder`` within ``bounds`` from ``current`` in ``direction``, or why
    there is none (a sentence for the advice)."""
    step = next_rung(ladder_in(ladder, bounds), current, direction)
    if step is None:
        end = "upper" if direction > 0 else "lower"
        return f"{name} is at its {end} bound ({current}; bounds {bounds.min}-{bounds.max})"
    return step


def off_limits(name: KnobName) -> str:
    """Why a knob the spec sets to null is not tried."""
    return f"{name} is off-limits (spec.knobs.{name} is null)"


@dataclass(frozen=True)
class Change:
    """The next single change, as the planner proposes it.

    ``from_value`` is the flag as written (None: absent, vLLM's default ``from_effective``
    applies); ``to_value`` None means "remove the flag". ``variant`` carries the quantization
    variant to switch to.
    """

    knob: KnobName
    from_value: str | None
    to_value: str | None
    knob_class: KnobClass
    expected_gain: float  # prior relative latency reduction on the targeted objective
    expected_score_gain: float  # prior reduction of the violation score
    bottleneck: Bottleneck
    reason: str
    from_effective: str = ""
    variant: QuantizationVariant | None = None
    # Per objective the change aims at: the prior relative latency reduction expected there
    # (what the trial's predictions record and its windows then score).
    expected: tuple[tuple[ObjectiveName, float], ...] = ()
    # Flags that belong to this change and are set with it: (vLLM flag, value). Enabling
    # chunked prefill sets the chunk budget too, since chunking with the budget vLLM keeps
    # from the unchunked setting (>= max-model-len) splits nothing.
    companions: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """ "maxNumBatchedTokens 2048 -> 4096"."""
        before = self.from_value if self.from_value is not None else f"{self.from_effective}"
        after = self.to_value if self.to_value is not None else "(removed)"
        extra = "".join(f" with --{flag}={value}" for flag, value in self.companions)
        return f"{self.knob} {before or '(default)'} -> {after}{extra}"


@dataclass(frozen=True)
class AppliedChange:
    """What the Deployment's container becomes: the command line, and the image and GPU limit
    when the change sets them (None: leave as they are)."""

    command_line: VllmCommandLine
    image: str | None = None
    gpu_limit: int | None = None


@dataclass(frozen=True)
class Pull:
    """One entry of the bottleneck table, resolved for a window: the knob, the way it is pulled
    (+1 up, -1 down, 0 for a non-numeric setting), the prior gain and why, in words."""

    knob: KnobName
    direction: int
    gain: float
    why: str
    frees_memory: bool = False  # wanted for the memory it frees (KV blocks), not for speed


@dataclass(frozen=True)
class Option:
    """One value a pull would set, with its expected gain (and the variant, for quantization)."""

    to_value: str | None
    gain: float
    variant: QuantizationVariant | None = None
    note: str = ""  # appended to the pull's why
    # Rungs beyond ``to_value`` the same way, nearest first, that vLLM would accept: the
    # planner jumps to one when the calibrated model expects the first rung to fall short.
    farther: tuple[str, ...] = ()


@dataclass(frozen=True)
class Context:
    """What a knob may look at to pick its value: the command line, its effective values, the
    spec's permissions and bounds, the GPUs and the load."""

    cl: VllmCommandLine
    view: ConfigView
    knobs: Knobs
    hardware: HardwareInfo
    load: Load


@dataclass(frozen=True)
class Detected:
    """A deployment problem a knob undoes, with the evidence and the advice that go with it."""

    finding: Finding
    evidence: Evidence
    advice: tuple[str, ...] = ()
    advice_when_met: str = ""  # said even when the targets are met


@runtime_checkable
class Knob(Protocol):
    """The protocol of a knob module's ``KNOB`` (see the module docstring)."""

    @property
    def name(self) -> KnobName: ...
    @property
    def flag(self) -> str: ...
    @property
    def knob_class(self) -> KnobClass: ...
    @property
    def what(self) -> str: ...

    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str: ...
    def prior(self, load: Load) -> float: ...
    def render(self, change: Change, cl: VllmCommandLine) -> AppliedChange: ...
    def written(self, cl: VllmCommandLine) -> str | None: ...
    def recorded_from(self, cl: VllmCommandLine) -> str | None: ...
    def number(self, cv: ConfigView) -> float | None: ...
    def effective(self, cv: ConfigView) -> str: ...
    def complete(self, change: Change, cl: VllmCommandLine, knobs: Knobs) -> Change: ...
    def detect(self, cv: ConfigView) -> Detected | None: ...


class BaseKnob(ABC):
    """The common answers: a flag that takes a value, set or removed as the change says."""

    name: KnobName
    flag: str
    knob_class: KnobClass
    what: str

    @abstractmethod
    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str:
        """The value(s) ``pull`` would set, or why it cannot (a sentence for the advice)."""

    def prior(self, load: Load) -> float:
        """The expected gain under ``load`` for a table entry without its own; 0: not worth it."""
        return 0.0

    def render(self, change: Change, cl: VllmCommandLine) -> AppliedChange:
        """``cl`` with ``change`` applied (its companions excluded). Raises ValueError for a
        change the knob cannot apply."""
        if change.to_value is None:
            return AppliedChange(cl.without(self.flag))
        return AppliedChange(cl.with_value(self.flag, change.to_value))

    def written(self, cl: VllmCommandLine) -> str | None:
        """The value as the command line writes it; None when absent."""
        return cl.get(self.flag)

    def recorded_from(self, cl: VllmCommandLine) -> str | None:
        """The starting value a trial of this knob records (None: vLLM's default)."""
        return self.written(cl)

    def number(self, cv: ConfigView) -> float | None:
        """The effective value as a number, for knobs that step along a ladder; else None."""
        return None

    def effective(self, cv: ConfigView) -> str:
        """The effective value in words ("2048", "true", "auto")."""
        number = self.number(cv)
        return "" if number is None else format_number(number)

    def complete(self, change: Change, cl: VllmCommandLine, knobs: Knobs) -> Change:
        """``change`` with the flags that must be set with it (none by default)."""
        return change

    def detect(self, cv: ConfigView) -> Detected | None:
        """The deployment problem this knob undoes, if ``cv`` has it (none by default)."""
        return None


class ToggleKnob(BaseKnob):
    """A boolean flag (``--x`` / ``--no-x``), written as "true"/"false"."""

    def render(self, change: Change, cl: VllmCommandLine) -> AppliedChange:
        return AppliedChange(cl.with_flag(self.flag, change.to_value == "true"))

    def written(self, cl: VllmCommandLine) -> str | None:
        return boolean_written(cl, self.flag)

    @abstractmethod
    def enabled(self, cv: ConfigView) -> bool:
        """Whether the server runs with it on."""

    @abstractmethod
    def allowed(self, knobs: Knobs) -> bool:
        """Whether the spec lets the operator switch it on."""

    def effective(self, cv: ConfigView) -> str:
        return str(self.enabled(cv)).lower()

    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str:
        if self.enabled(ctx.view):
            return []
        if not self.allowed(ctx.knobs):
            return (
                f"{self.name} is off ({self.flag} not enabled), and "
                f"spec.knobs.{self.name} forbids changing it"
            )
        return [Option("true", pull.gain)]


class FixKnob(BaseKnob):
    """A flag whose presence is a deployment problem: the change removes it."""

    def render(self, change: Change, cl: VllmCommandLine) -> AppliedChange:
        return AppliedChange(cl.without(self.flag))

    def options(self, pull: Pull, cause: Cause, ctx: Context) -> Sequence[Option] | str:
        return [Option(None, pull.gain)]
