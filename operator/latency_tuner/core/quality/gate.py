"""The quality verdict over a sample set, and speculative decoding's acceptance-rate floor."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from latency_tuner.core.quality.scoring import Metric, score


@dataclass(frozen=True)
class QualityVerdict:
    """Whether a candidate's answers are good enough to keep its configuration."""

    passed: bool
    metric: Metric
    samples: int
    candidate_score: float
    """The candidate's mean score: against the expected answers, or against the baseline's own
    outputs in reference mode."""
    baseline_score: float | None
    """The baseline's mean score against the expected answers; None in reference mode."""
    tolerance: float
    reason: str


def _mean_score(metric: Metric, wanted: Sequence[str], answers: Sequence[str | None]) -> float:
    # A request that failed (None) answered nothing: it scores 0, never skipped, so a
    # configuration cannot pass by failing the hard prompts.
    total = sum(score(metric, w, a) for w, a in zip(wanted, answers, strict=True) if a is not None)
    return total / len(wanted)


def _check(tolerance: float, *sets: Sequence[object]) -> int:
    if not 0.0 <= tolerance <= 1.0:
        raise ValueError(f"quality tolerance must be within [0, 1], got {tolerance}")
    sizes = {len(s) for s in sets}
    if len(sizes) != 1:
        raise ValueError(f"every answer set needs one answer per prompt, got sizes {sorted(sizes)}")
    (n,) = sizes
    if n == 0:
        raise ValueError("a quality gate needs at least one prompt")
    return n


def judge_against_expected(
    metric: Metric,
    expected: Sequence[str],
    candidate: Sequence[str | None],
    baseline: Sequence[str | None],
    tolerance: float,
) -> QualityVerdict:
    """Pass when the candidate scores at most ``tolerance`` below the baseline.

    Both arms are scored on the same prompts against the same expected answers, so what the
    baseline itself gets wrong does not count against the candidate (vLLM's own CI gates a
    quantized model the same way: accuracy within a per-model tolerance of the reference).
    """
    n = _check(tolerance, expected, candidate, baseline)
    got = _mean_score(metric, expected, candidate)
    reference = _mean_score(metric, expected, baseline)
    passed = got >= reference - tolerance
    relation = "within" if passed else "more than"
    reason = (
        f"{metric.value} {got:.3f} against the baseline's {reference:.3f} on {n} prompts: "
        f"{relation} the {tolerance:.3f} tolerance"
    )
    return QualityVerdict(passed, metric, n, got, reference, tolerance, reason)


def judge_against_reference(
    metric: Metric,
    baseline: Sequence[str | None],
    candidate: Sequence[str | None],
    tolerance: float,
) -> QualityVerdict:
    """Pass when the candidate's answers agree with the baseline's to ``1 - tolerance``.

    Reference mode, for prompts without expected answers: the baseline's outputs at temperature
    0 are the truth. A prompt the baseline did not answer cannot be judged and is left out; if
    none is left, the gate fails rather than pass on no evidence.
    """
    n = _check(tolerance, baseline, candidate)
    pairs = [(b, c) for b, c in zip(baseline, candidate, strict=True) if b is not None]
    if not pairs:
        reason = f"the baseline answered none of the {n} prompts: nothing to compare with"
        return QualityVerdict(False, metric, 0, 0.0, None, tolerance, reason)
    wanted = [b for b, _ in pairs]
    got = _mean_score(metric, wanted, [c for _, c in pairs])
    passed = got >= 1.0 - tolerance
    relation = "within" if passed else "more than"
    reason = (
        f"{metric.value} agreement with the baseline {got:.3f} on {len(pairs)} prompts: "
        f"{relation} the {tolerance:.3f} tolerance"
    )
    return QualityVerdict(passed, metric, len(pairs), got, None, tolerance, reason)


@dataclass(frozen=True)
class AcceptanceVerdict:
    """Whether speculative decoding's drafts are accepted often enough to be worth it."""

    passed: bool | None
    """None when the window proposed no draft tokens: nothing to judge yet."""
    rate: float | None
    floor: float
    reason: str


def judge_acceptance(accepted: float, drafted: float, floor: float) -> AcceptanceVerdict:
    """Accepted over drafted tokens in a window (increases of vLLM's
    ``spec_decode_num_accepted_tokens_total`` and ``spec_decode_num_draft_tokens_total``)
    against the spec's floor. A low rate means the draft mostly wastes verification work."""
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"acceptance floor must be within [0, 1], got {floor}")
    if drafted <= 0.0 or accepted < 0.0:
        reason = "no draft tokens were proposed in the window: acceptance cannot be judged yet"
        return AcceptanceVerdict(None, None, floor, reason)
    rate = min(accepted / drafted, 1.0)
    passed = rate >= floor
    relation = "at or above" if passed else "below"
    reason = (
        f"draft acceptance {rate:.1%} ({accepted:g} of {drafted:g}): "
        f"{relation} the {floor:.0%} floor"
    )
    return AcceptanceVerdict(passed, rate, floor, reason)
