"""Output quality of a lossy configuration: score what a candidate answers, and gate on it.

A quantized checkpoint, an FP8 KV cache or a speculative-decoding draft can make a deployment
faster and its answers worse. Before such a change is kept, the operator sends the same prompts
to the candidate and to the baseline (temperature 0) and this package judges the answers:

- ``scoring``: one score per answer, in [0, 1], by the metric the spec names: exact match
  (after whitespace and case folding), normalised text similarity, or the final numeric answer
  of a maths-style reply.
- ``gate``: the verdict over a sample set, against expected answers or against the baseline's
  own outputs (reference mode), within the spec's tolerance; and the acceptance-rate floor of
  speculative decoding.

Pure: texts and counts in, scores and verdicts out. It must never send a request, read a clock
or import a client library; the adapters fetch the outputs.
"""

from latency_tuner.core.quality.gate import (
    AcceptanceVerdict,
    QualityVerdict,
    judge_acceptance,
    judge_against_expected,
    judge_against_reference,
)
from latency_tuner.core.quality.scoring import Metric, extract_answer, score

__all__ = [
    "AcceptanceVerdict",
    "Metric",
    "QualityVerdict",
    "extract_answer",
    "judge_acceptance",
    "judge_against_expected",
    "judge_against_reference",
    "score",
]
