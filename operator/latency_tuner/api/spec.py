"""The LatencyTarget spec: what the user asks for and what the operator may change.

(Past 500 lines on purpose: the CRD is generated from this module, section by section, and each
field's docstring is its `kubectl explain` text; splitting it would scatter one schema.)

Every check here explains itself in the user's words, and the same facts are mirrored in the
CRD schema (patterns, enums, bounds, CEL rules) so the API server refuses what the operator
would refuse. Field docstrings become the CRD descriptions that ``kubectl explain`` prints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from latency_tuner.api._base import SpecModel
from latency_tuner.api.durations import DURATION_EXAMPLES, DURATION_PATTERN, parse_duration

# ---------------------------------------------------------------------------- reusable types


def _no_bare_number(value: Any) -> Any:
    # YAML turns `window: 300` into an int; say which unit we would have needed.
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError(f"{value} has no unit: write e.g. '{value}s' ({DURATION_EXAMPLES})")
    return value


def _duration(text: str) -> str:
    parse_duration(text)
    return text


def _positive_duration(text: str) -> str:
    if parse_duration(text) <= 0:
        raise ValueError(f"{text!r} must be longer than zero")
    return text


# minLength 2 refuses the empty string, which the pattern (no lookahead in RE2) lets through.
_DURATION_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": DURATION_PATTERN,
    "minLength": 2,
    "maxLength": 32,
}

Duration = Annotated[
    str,
    BeforeValidator(_no_bare_number),
    AfterValidator(_duration),
    WithJsonSchema(_DURATION_SCHEMA),
]
"""A duration such as "500ms", "30s", "2m", "1h" or "1m30s"; zero ("0s") allowed."""

PositiveDuration = Annotated[
    str,
    BeforeValidator(_no_bare_number),
    AfterValidator(_positive_duration),
    WithJsonSchema(
        {
            **_DURATION_SCHEMA,
            "x-kubernetes-validations": [
                {"rule": "duration(self) > duration('0s')", "message": "must be longer than zero"}
            ],
        }
    ),
]
"""A duration longer than zero."""


@dataclass(frozen=True)
class AtMost:
    """Caps a duration field, in the models and in the CRD (a CEL rule), so an absurd value
    ("100000000h") is refused when written instead of overflowing the operator's clock maths."""

    limit: str

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        limit_seconds = parse_duration(self.limit)

        def check(text: str) -> str:
            if parse_duration(text) > limit_seconds:
                raise ValueError(f"{text!r} is longer than {self.limit}, the most allowed here")
            return text

        return core_schema.no_info_after_validator_function(check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = dict(handler(schema))
        rule = {
            "rule": f"duration(self) <= duration('{self.limit}')",
            "message": f"must be at most {self.limit}",
        }
        json_schema["x-kubernetes-validations"] = [
            *json_schema.get("x-kubernetes-validations", []),
            rule,
        ]
        return json_schema


def _matching(pattern: str, explanation: str, max_length: int) -> AfterValidator:
    compiled = re.compile(pattern)

    def check(text: str) -> str:
        if len(text) > max_length or not compiled.fullmatch(text):
            raise ValueError(f"{text!r} is not {explanation}")
        return text

    return AfterValidator(check)


def _string(pattern: str, max_length: int) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "pattern": pattern, "maxLength": max_length})


_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_PROM_LABEL = r"^[a-zA-Z_][a-zA-Z0-9_]*$"
_RESOURCE_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_HTTP_URL = r"^https?://[^\s]+$"

DnsSubdomain = Annotated[
    str,
    _matching(_DNS_SUBDOMAIN, "a Kubernetes name (lowercase letters, digits, '-', '.')", 253),
    _string(_DNS_SUBDOMAIN, 253),
]
DnsLabel = Annotated[
    str,
    _matching(_DNS_LABEL, "a lowercase name of letters, digits and '-' (at most 63)", 63),
    _string(_DNS_LABEL, 63),
]
PromLabel = Annotated[
    str,
    _matching(_PROM_LABEL, "a Prometheus label name (letters, digits and '_')", 128),
    _string(_PROM_LABEL, 128),
]
ResourceName = Annotated[
    str,
    _matching(_RESOURCE_NAME, "an extended resource name such as nvidia.com/gpu", 253),
    _string(_RESOURCE_NAME, 253),
]
HttpUrl = Annotated[
    str,
    _matching(_HTTP_URL, "an http:// or https:// URL", 2048),
    _string(_HTTP_URL, 2048),
]

# ------------------------------------------------------------------------------------ spec


class Mode(StrEnum):
    """What the operator does with what it learns: Auto applies trials to the Deployment,
    Recommend publishes the next patch in status.recommendation and applies nothing (GitOps),
    Off observes and diagnoses only."""

    AUTO = "Auto"
    RECOMMEND = "Recommend"
    OFF = "Off"


def _quoted_off(value: Any) -> Any:
    # YAML 1.1 (PyYAML, and kubectl's parser) reads a bare `mode: Off` as the boolean false.
    if value is False:
        raise ValueError('got the boolean false: YAML reads a bare Off as false; write mode: "Off"')
    return value


class TargetRef(SpecModel):
    """The apps/v1 Deployment, in the same namespace, that serves the model with vLLM."""

    name: DnsSubdomain
    """Name of the Deployment."""
    container: DnsLabel | None = None
    """Container that runs vLLM; default: the only container, or the one whose command runs vLLM."""


class Objective(SpecModel):
    """A latency target: the chosen percentile must stay at or below the threshold."""

    percentile: Literal[50, 90, 95, 99]
    """Percentile of the latency distribution to hold to the threshold: 50, 90, 95 or 99."""
    threshold: Annotated[PositiveDuration, AtMost("1h")]
    """Highest acceptable latency at that percentile, e.g. "500ms" or "1.5s"; at most 1h."""

    @property
    def threshold_seconds(self) -> float:
        return parse_duration(self.threshold)


class Objectives(SpecModel):
    """Latency targets; at least one of ttft, itl and e2e."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    ttft: Objective | None = None
    """Time to first token: queueing plus prefill, what a chat user waits before text appears."""
    itl: Objective | None = None
    """Inter-token latency: time between streamed tokens (decode speed as a user feels it)."""
    e2e: Objective | None = None
    """End-to-end request latency, from arrival to the last token."""

    @model_validator(mode="after")
    def _at_least_one(self) -> Objectives:
        if self.ttft is None and self.itl is None and self.e2e is None:
            raise ValueError("at least one objective is required: ttft, itl or e2e")
        return self


class Evaluation(SpecModel):
    """How trials are measured and judged."""

    window: Annotated[PositiveDuration, AtMost("24h")] = "5m"
    """Length of the measurement window before and after a change; at most 24h."""
    settle: Annotated[Duration, AtMost("24h")] = "2m"
    """Time ignored after a rollout is ready (cold prefix cache, CUDA graph capture); at most
    24h."""
    min_requests: int = Field(default=100, ge=1, le=10_000_000)
    """Fewest finished requests a window needs to be judged; fewer means "inconclusive"."""
    min_improvement: float = Field(default=0.05, ge=0, lt=1)
    """Relative improvement a change must bring to be kept (0.05 = 5%)."""
    max_trials: int = Field(default=10, ge=1, le=100)
    """Most trials before giving up (phase Exhausted)."""
    progress_deadline: Annotated[PositiveDuration, AtMost("24h")] = "10m"
    """Longest a rollout may take to become ready before the trial is rolled back as failed; at
    most 24h."""
    cooldown: Annotated[Duration, AtMost("168h")] = "30m"
    """Wait after convergence or exhaustion before checking the targets again; at most 168h (a
    week)."""

    @property
    def window_seconds(self) -> float:
        return parse_duration(self.window)

    @property
    def settle_seconds(self) -> float:
        return parse_duration(self.settle)

    @property
    def progress_deadline_seconds(self) -> float:
        return parse_duration(self.progress_deadline)

    @property
    def cooldown_seconds(self) -> float:
        return parse_duration(self.cooldown)


# Larger than any max-num-seqs or max-num-batched-tokens a GPU can hold (2^24 tokens).
MAX_ARGUMENT = 16_777_216


class IntRange(SpecModel):
    """Bounds for an integer vLLM argument; the operator stays within them."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not be greater than max"}
            ]
        }
    )

    min: int = Field(ge=1, le=MAX_ARGUMENT)
    """Lowest value the operator may set."""
    max: int = Field(ge=1, le=MAX_ARGUMENT)
    """Highest value the operator may set."""

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not be greater than max ({self.max})")
        return self


class FloatMax(SpecModel):
    """An upper bound for a fractional vLLM argument."""

    max: float = Field(gt=0, le=1)
    """Highest value the operator may set, a fraction in (0, 1]."""


# What a quantized variant may change besides the model and image: how the checkpoint is read.
# Never --trust-remote-code (runs the checkpoint's code), --api-key, --served-model-name or any
# other server flag: a LatencyTarget may tune vLLM, not reconfigure or take over the server.
VARIANT_FLAGS = (
    "quantization",
    "dtype",
    "revision",
    "tokenizer",
    "tokenizer-revision",
    "load-format",
    "max-model-len",
)
_VARIANT_FLAG = re.compile(
    r"^(-q|--(" + "|".join(f.replace("-", "[-_]") for f in VARIANT_FLAGS) + r"))(=.*)?$"
)
# A Hugging Face id ("org/name") or an absolute path; never an option.
MODEL_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+|/[^\s]*)$"
# registry/repository[:tag][@digest], lower-case repository as Docker requires.
IMAGE_PATTERN = (
    r"^([a-zA-Z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)


class QuantizationVariant(SpecModel):
    """A pre-quantized checkpoint or image (AWQ, FP8...) that you vouch for."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.model) || has(self.image) || "
                    "(has(self.args) && size(self.args) > 0)",
                    "message": "a variant needs at least one of model, image or args",
                },
                {
                    "rule": "!has(self.args) || self.args.all(a, !a.startsWith('-') || "
                    f"a.matches('{_VARIANT_FLAG.pattern}'))",
                    "message": "a variant's args may set only " + ", ".join(VARIANT_FLAGS),
                },
            ]
        }
    )

    name: DnsLabel
    """Short unique name of the variant, used in trials and events (e.g. "awq")."""
    model: str | None = Field(default=None, max_length=1024, pattern=MODEL_PATTERN)
    """Model to serve instead: a Hugging Face id ("org/model-AWQ") or an absolute path."""
    image: str | None = Field(default=None, max_length=1024, pattern=IMAGE_PATTERN)
    """Container image to run instead (the operator accepts only images its configuration
    allows: by default the same repository as the running one)."""
    args: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        default_factory=list, max_length=16
    )
    """vLLM arguments to add, e.g. ["--quantization", "awq_marlin"]; only --quantization (-q),
    --dtype, --revision, --tokenizer, --tokenizer-revision, --load-format, --max-model-len."""

    @model_validator(mode="after")
    def _changes_something(self) -> QuantizationVariant:
        if self.model is None and self.image is None and not self.args:
            raise ValueError(f"variant {self.name!r} needs at least one of model, image or args")
        refused = [a for a in self.args if a.startswith("-") and not _VARIANT_FLAG.match(a)]
        if refused:
            raise ValueError(
                f"variant {self.name!r} may not set {', '.join(refused)}: a variant's args may "
                f"set only --{', --'.join(VARIANT_FLAGS)} (and -q)"
            )
        return self


class Quantization(SpecModel):
    """Lossy, opt-in: variants the operator may switch to when compute or memory is the limit."""

    variants: list[QuantizationVariant] = Field(
        min_length=1,
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Variants to try, in order of preference; names must be unique."""

    @model_validator(mode="after")
    def _unique_names(self) -> Quantization:
        names = [variant.name for variant in self.variants]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"variant names must be unique; repeated: {', '.join(twice)}")
        return self


def _speculative_config(value: dict[str, Any]) -> dict[str, Any]:
    if not (isinstance(value.get("method"), str) or isinstance(value.get("model"), str)):
        raise ValueError(
            'a speculative config needs a "method" (e.g. "ngram", "eagle") or a draft "model"'
        )
    return value


SpeculativeConfig = Annotated[
    dict[str, Any],
    AfterValidator(_speculative_config),
    WithJsonSchema(
        {
            "type": "object",
            "description": "A vLLM --speculative-config JSON object, passed through as written.",
            "properties": {
                "method": {
                    "type": "string",
                    "description": 'Speculation method, e.g. "ngram", "eagle", "eagle3", "mtp".',
                },
                "model": {"type": "string", "description": "Draft model, for draft methods."},
                "num_speculative_tokens": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Tokens proposed per step.",
                },
            },
            "x-kubernetes-preserve-unknown-fields": True,
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.method) || has(self.model)",
                    "message": 'needs a "method" or a draft "model"',
                }
            ],
        }
    ),
]


class SpeculativeDecoding(SpecModel):
    """Opt-in: speculative decoding, tried only while observed concurrency is low."""

    configs: list[SpeculativeConfig] = Field(min_length=1, max_length=16)
    """vLLM --speculative-config objects to try, in order of preference."""
    max_concurrency: float = Field(default=4, gt=0, le=100_000)
    """Tried only when the mean number of running requests is at or below this."""


class TensorParallel(SpecModel):
    """Costly, opt-in: raise tensor parallelism, which also raises the container's GPU limit."""

    max_size: Literal[1, 2, 4, 8]
    """Largest tensor-parallel size (GPUs per replica): 1, 2, 4 or 8."""
    gpu_resource: ResourceName = "nvidia.com/gpu"
    """Extended resource name of the GPU in the container's limits."""
    force: bool = False
    """Allow it without an NVLink-class interconnect (PCIe all-reduce is often slower)."""


KvCacheDtype = Literal["fp8", "fp8_e4m3", "fp8_e5m2"]


class Knobs(SpecModel):
    """What the operator may change, with bounds. Safe knobs are on by default; set one to
    false or null to keep the operator's hands off it. Lossy or costly knobs act only when
    listed."""

    prefix_caching: bool = True
    """Safe: may toggle --enable-prefix-caching."""
    chunked_prefill: bool = True
    """Safe: may toggle --enable-chunked-prefill."""
    max_num_batched_tokens: IntRange | None = IntRange(min=512, max=16384)
    """Safe: bounds for --max-num-batched-tokens (tokens scheduled per step); null: leave as is."""
    max_num_seqs: IntRange | None = IntRange(min=16, max=1024)
    """Safe: bounds for --max-num-seqs (concurrent sequences per step); null: leave as is."""
    gpu_memory_utilization: FloatMax | None = FloatMax(max=0.95)
    """Safe: ceiling for --gpu-memory-utilization (more KV cache); null: leave as is."""
    quantization: Quantization | None = None
    """Lossy, opt-in: pre-quantized variants to switch to."""
    kv_cache_dtype: list[KvCacheDtype] = Field(
        default_factory=list, max_length=3, json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """Lossy, opt-in: --kv-cache-dtype values to try (fp8, fp8_e4m3, fp8_e5m2), on GPUs that
    support them."""
    speculative_decoding: SpeculativeDecoding | None = None
    """Opt-in: speculative decoding configs, for low concurrency."""
    tensor_parallel: TensorParallel | None = None
    """Costly, opt-in: larger --tensor-parallel-size, with more GPUs per replica."""

    @model_validator(mode="after")
    def _unique_kv_cache_dtypes(self) -> Knobs:
        if len(set(self.kv_cache_dtype)) != len(self.kv_cache_dtype):
            raise ValueError("kvCacheDtype lists a value twice")
        return self


class LabelMatcher(SpecModel):
    """One Prometheus label matcher, e.g. {label: model_name, op: "=", value: llama}."""

    label: PromLabel
    """Label name."""
    op: Literal["=", "!=", "=~", "!~"] = "="
    """Match operator: =, !=, =~ (regex) or !~ (negated regex)."""
    value: str = Field(max_length=1024)
    """Value, or a regular expression for =~ and !~ (anchored, as in PromQL)."""

    @model_validator(mode="after")
    def _regex_compiles(self) -> LabelMatcher:
        if self.op in ("=~", "!~"):
            try:
                re.compile(self.value)
            except re.error as exc:
                raise ValueError(f"{self.value!r} is not a regular expression: {exc}") from None
        return self


class MetricsSelector(SpecModel):
    """Which Prometheus series belong to the Deployment (structured matchers, never raw PromQL)."""

    matchers: list[LabelMatcher] = Field(default_factory=list, max_length=32)
    """Label matchers; empty means namespace="<namespace>", pod=~"<deployment>-.*"."""
    prometheus_url: HttpUrl | None = None
    """Prometheus to query for this target; honoured only when the operator allows
    per-resource URLs (otherwise its configured Prometheus is used)."""


class Hardware(SpecModel):
    """Overrides what node labels say about the GPUs."""

    gpu_product: str | None = Field(default=None, min_length=1, max_length=253)
    """GPU product as in the nvidia.com/gpu.product node label, e.g. "NVIDIA-H100-80GB-HBM3"."""
    interconnect: Literal["NVLink", "PCIe"] | None = None
    """GPU-to-GPU interconnect: NVLink or PCIe."""


class Strategy(StrEnum):
    """How a trial is run: Rollout changes every pod of the Deployment and compares the window
    before with the window after; Canary runs the change on one extra pod beside the unchanged
    ones and compares both over the same window."""

    ROLLOUT = "Rollout"
    CANARY = "Canary"


class QualityMode(StrEnum):
    """What the candidate's answers are compared with: Expected (the ConfigMap's expected
    answers, the baseline scored the same way) or Reference (the baseline's own answers at
    temperature 0; the ConfigMap needs prompts only)."""

    EXPECTED = "Expected"
    REFERENCE = "Reference"


class QualityMetric(StrEnum):
    """How one answer is scored: ExactMatch (equal after case and whitespace folding),
    Similarity (share of matching words) or NumericAnswer (the final number, for maths)."""

    EXACT_MATCH = "ExactMatch"
    SIMILARITY = "Similarity"
    NUMERIC_ANSWER = "NumericAnswer"


class QualityGate(SpecModel):
    """Output quality a lossy change (quantized variant, FP8 KV cache, speculative decoding)
    must keep before it is kept: the same prompts go to the canary and to a baseline pod at
    temperature 0, and the candidate's score must stay within the tolerance. Runs on canary
    trials only."""

    config_map: DnsSubdomain
    """ConfigMap in the LatencyTarget's namespace holding the prompts: key ``samples.json``, a
    JSON list of {"prompt": "...", "expected": "..."} (expected answers are needed in mode
    Expected only); at most 256 KiB and 200 prompts. It must carry the label
    latencytuner.io/quality-samples: "true", set by someone who may edit it (the operator can
    read every ConfigMap and must not lend that to a LatencyTarget's author); without it the
    gate fails and the change is not kept."""
    key: Annotated[
        str,
        _matching(r"^[-._a-zA-Z0-9]+$", "a ConfigMap key", 253),
        _string(r"^[-._a-zA-Z0-9]+$", 253),
    ] = "samples.json"
    """Key of the ConfigMap holding the samples."""
    mode: QualityMode = QualityMode.EXPECTED
    """Expected (against the expected answers) or Reference (against the baseline's outputs)."""
    metric: QualityMetric = QualityMetric.SIMILARITY
    """ExactMatch, Similarity or NumericAnswer."""
    tolerance: float = Field(default=0.02, ge=0, le=1)
    """How far below the baseline (Expected) or below full agreement (Reference) the
    candidate's mean score may be, in [0, 1]."""
    min_draft_acceptance: float | None = Field(default=None, ge=0, le=1)
    """Speculative decoding only: the lowest share of draft tokens the canary must accept."""
    max_tokens: int = Field(default=64, ge=1, le=1024)
    """Tokens generated per prompt."""


class LatencyTargetSpec(SpecModel):
    """Latency targets for a vLLM Deployment and what the operator may change to meet them."""

    target_ref: TargetRef
    """The Deployment to tune."""
    objectives: Objectives
    """Latency targets: ttft and/or itl (and optionally e2e); at least one."""
    mode: Annotated[Mode, BeforeValidator(_quoted_off)] = Mode.AUTO
    """Auto (apply trials, the default), Recommend (publish the next patch, apply nothing) or
    Off (observe and diagnose only)."""
    evaluation: Evaluation = Evaluation()
    """Measurement windows and trial budget."""
    knobs: Knobs = Knobs()
    """What the operator may change, with bounds."""
    metrics: MetricsSelector = MetricsSelector()
    """How to find the Deployment's series in Prometheus."""
    hardware: Hardware | None = None
    """Overrides of what node labels say about the GPUs."""
    paused: bool = False
    """Stop starting trials (a running trial is finished or rolled back first)."""
    on_delete: Literal["Keep", "Restore"] = "Keep"
    """On deletion, Keep the tuned arguments or Restore the original ones."""
    strategy: Strategy | None = None
    """Rollout or Canary; unset: Canary when the Deployment has 2 replicas or more, else
    Rollout (status.strategy says which applied and why). A canary is a sibling Deployment
    owned by this LatencyTarget with one pod at the trial's arguments and the same pod labels,
    so the Service sends it one pod's share; the Deployment is one replica smaller while it
    runs (GPUs are not over-committed) and gets that replica back after. An HPA scaling the
    Deployment may undo the one-replica reduction (the canary is then one pod extra), and a
    replica count changed by anyone during the trial is left as they set it."""
    quality: QualityGate | None = None
    """Quality gate for lossy changes on canary trials (unset: no gate)."""
