"""The LatencyTarget API: spec and status as pydantic models, and the CRD generated from them.

What it is: the one description of ``tuning.latencytuner.io/v1alpha1`` LatencyTarget objects.
``LatencyTarget.from_manifest`` turns a dict into validated values (or an error naming each bad
field); ``set_condition`` updates conditions the Kubernetes way; ``build_crd`` derives the
CustomResourceDefinition, so the API server and the operator refuse the same things.

What it must never do: I/O of any kind (files, network, Kubernetes), read a clock (time
arrives as a ``now`` parameter), or import anything but the standard library and pydantic
(``latency-tuner crd``, which prints the CRD as YAML, is ``latency_tuner.cli.crd``).
"""

from latency_tuner.api.conditions import (
    ConditionStatus,
    ConditionType,
    get_condition,
    is_condition_true,
    set_condition,
)
from latency_tuner.api.crd import build_crd
from latency_tuner.api.durations import (
    format_duration,
    format_timestamp,
    parse_duration,
    parse_timestamp,
)
from latency_tuner.api.resource import (
    API_VERSION,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    InvalidLatencyTarget,
    LatencyTarget,
)
from latency_tuner.api.spec import (
    Evaluation,
    FloatMax,
    Hardware,
    IntRange,
    Knobs,
    LabelMatcher,
    LatencyTargetSpec,
    MetricsSelector,
    Mode,
    Objective,
    Objectives,
    Quantization,
    QuantizationVariant,
    SpeculativeDecoding,
    TargetRef,
    TensorParallel,
)
from latency_tuner.api.status import (
    TRIAL_HISTORY_LIMIT,
    Baseline,
    Condition,
    ContainerSnapshot,
    Diagnosis,
    Evidence,
    IncompatibleValue,
    JsonPatchOperation,
    LatencyTargetStatus,
    MetricSnapshot,
    Phase,
    Recommendation,
    Trial,
    Verdict,
    with_trial,
)

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "TRIAL_HISTORY_LIMIT",
    "VERSION",
    "Baseline",
    "Condition",
    "ConditionStatus",
    "ConditionType",
    "ContainerSnapshot",
    "Diagnosis",
    "Evaluation",
    "Evidence",
    "FloatMax",
    "Hardware",
    "IncompatibleValue",
    "IntRange",
    "InvalidLatencyTarget",
    "JsonPatchOperation",
    "Knobs",
    "LabelMatcher",
    "LatencyTarget",
    "LatencyTargetSpec",
    "LatencyTargetStatus",
    "MetricSnapshot",
    "MetricsSelector",
    "Mode",
    "Objective",
    "Objectives",
    "Phase",
    "Quantization",
    "QuantizationVariant",
    "Recommendation",
    "SpeculativeDecoding",
    "TargetRef",
    "TensorParallel",
    "Trial",
    "Verdict",
    "build_crd",
    "format_duration",
    "format_timestamp",
    "get_condition",
    "is_condition_true",
    "parse_duration",
    "parse_timestamp",
    "set_condition",
    "with_trial",
]
