"""The LatencyTarget status: everything the operator decided, visible on the resource.

Written only by the operator, read back after a restart to resume a trial where it stood, so
every field a resumption needs is here (phase and since when, and the trial's containers before
and after, recognised by fingerprint). Models ignore unknown keys: a status written by
another operator version must still load. Times are RFC 3339 strings in UTC.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, computed_field, field_validator

from latency_tuner.api._base import StatusModel
from latency_tuner.api.durations import format_duration, parse_timestamp
from latency_tuner.api.spec import Strategy

TRIAL_HISTORY_LIMIT = 20
"""Most trials kept in status.trials (oldest dropped first); status.trialCount counts them all."""


def _rfc3339(text: str) -> str:
    parse_timestamp(text)
    return text


Timestamp = Annotated[
    str, AfterValidator(_rfc3339), Field(json_schema_extra={"format": "date-time"})
]


class Phase(StrEnum):
    """Where the tuning loop stands."""

    OBSERVING = "Observing"  # collecting a window of metrics to judge the targets
    ROLLING_OUT = "RollingOut"  # a trial's change is rolling out to the Deployment
    SETTLING = "Settling"  # rollout ready; ignoring warm-up time (prefix cache, CUDA graphs)
    MEASURING = "Measuring"  # collecting the trial's after-window
    ROLLING_BACK = "RollingBack"  # the trial did not help (or failed): restoring its before
    PROMOTING = "Promoting"  # a canary was kept: the Deployment takes its arguments
    CONVERGED = "Converged"  # targets met; re-checked after the cooldown
    PAUSED = "Paused"  # spec.paused, or mode Off / Recommend with nothing to apply
    EXHAUSTED = "Exhausted"  # targets missed and nothing safe left to try (or maxTrials hit)
    FAILED = "Failed"  # cannot work on this target (no Deployment, not vLLM, ...)


class Verdict(StrEnum):
    """What a trial's measurements said."""

    KEEP = "Keep"  # improved enough: the change stays
    REVERT = "Revert"  # no or too little improvement: rolled back
    INCONCLUSIVE = "Inconclusive"  # load changed or too few requests to compare: rolled back
    FAILED = "Failed"  # rollout failed or missed its progress deadline: rolled back


class Condition(StatusModel):
    """A Kubernetes condition (the metav1.Condition schema)."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    """Condition type in CamelCase: Ready, TargetsMet, Progressing, MetricsAvailable, Degraded."""
    status: Literal["True", "False", "Unknown"]
    """True, False or Unknown."""
    reason: str = Field(
        min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    )
    """Why the condition has its status, in CamelCase (for machines)."""
    message: str = Field(default="", max_length=32768)
    """Why the condition has its status, in words (for people)."""
    last_transition_time: Timestamp
    """When status last changed (RFC 3339)."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation the condition was set from."""


class MetricSnapshot(StatusModel):
    """Latencies (at the objectives' percentiles) and load over one measurement window."""

    ttft_seconds: float | None = Field(default=None, ge=0)
    """Time to first token at the ttft objective's percentile (p95 if none), in seconds."""
    itl_seconds: float | None = Field(default=None, ge=0)
    """Inter-token latency at the itl objective's percentile (p95 if none), in seconds."""
    e2e_seconds: float | None = Field(default=None, ge=0)
    """End-to-end latency at the e2e objective's percentile (p95 if none), in seconds."""
    request_rate: float | None = Field(default=None, ge=0)
    """Finished requests per second."""
    arrival_rate: float | None = Field(default=None, ge=0)
    """Requests per second that arrived: the finished ones plus the growth of those in flight
    (above requestRate when the server falls behind); the offered load trials are compared
    by."""
    prompt_tokens_mean: float | None = Field(default=None, ge=0)
    """Mean prompt length in tokens."""
    generation_tokens_mean: float | None = Field(default=None, ge=0)
    """Mean generated length in tokens."""
    concurrency: float | None = Field(default=None, ge=0)
    """Mean number of requests in flight (running and waiting)."""
    window: str | None = None
    """Length of the window, e.g. "5m"."""
    requests: int | None = Field(default=None, ge=0)
    """Requests finished in the window."""
    observed_at: Timestamp | None = None
    """End of the window (RFC 3339)."""

    @field_validator("ttft_seconds", "itl_seconds", "e2e_seconds", mode="after")
    @classmethod
    def _to_the_microsecond(cls, value: float | None) -> float | None:
        # A window's quantile carries float noise (0.06327950310559012) no reader needs.
        return None if value is None else round(value, 6)

    @field_validator(
        "request_rate", "prompt_tokens_mean", "generation_tokens_mean", "concurrency", mode="after"
    )
    @classmethod
    def _to_three_decimals(cls, value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    def latency(self, objective: str) -> float | None:
        """The latency of ``objective`` ("ttft", "itl" or "e2e") in seconds; None if not
        recorded."""
        return {"ttft": self.ttft_seconds, "itl": self.itl_seconds, "e2e": self.e2e_seconds}.get(
            objective
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ttft(self) -> str | None:
        """TTFT as a duration string, for printer columns."""
        return None if self.ttft_seconds is None else format_duration(self.ttft_seconds)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def itl(self) -> str | None:
        """ITL as a duration string, for printer columns."""
        return None if self.itl_seconds is None else format_duration(self.itl_seconds)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def e2e(self) -> str | None:
        """End-to-end latency as a duration string, for printer columns."""
        return None if self.e2e_seconds is None else format_duration(self.e2e_seconds)


class Evidence(StatusModel):
    """One measured fact behind the diagnosis."""

    signal: str
    """What was measured, e.g. "queue_time_p95" or "kv_cache_usage"."""
    value: float | None = None
    """The measured value (null when unknown)."""
    unit: str | None = None
    """Unit of the value, e.g. "s", "ratio", "tokens"."""
    text: str
    """The fact in words, e.g. "requests wait 1.2s in queue at p95"."""

    @field_validator("value", mode="after")
    @classmethod
    def _without_float_noise(cls, value: float | None) -> float | None:
        return None if value is None else round(value, 6)


class Diagnosis(StatusModel):
    """Which stage is slow, why, and what could help."""

    bottleneck: str
    """The slow stage, e.g. Queueing, Prefill, Decode, or None when targets are met."""
    findings: list[str] = Field(default_factory=list)
    """Conclusions, most important first."""
    evidence: list[Evidence] = Field(default_factory=list)
    """The measurements the findings rest on."""
    knobs: list[str] = Field(default_factory=list)
    """Knobs that could help, in the order they will be tried."""
    advice: list[str] = Field(default_factory=list)
    """What the operator cannot do for you, e.g. add replicas, trim prompts, faster GPUs."""


class Baseline(StatusModel):
    """The container as it was before the first change, saved to restore it."""

    container: str | None = None
    """Name of the vLLM container."""
    command: list[str] | None = None
    """The container's command, as it was (null if unset)."""
    args: list[str] | None = None
    """The container's args, as they were (null if unset)."""
    image: str
    """The container's image."""
    gpu_limit: str | None = None
    """The container's GPU limit (a quantity), if any."""
    config_hash: str
    """Hash of the effective vLLM configuration."""
    captured_at: Timestamp
    """When the baseline was saved (RFC 3339)."""


class JsonPatchOperation(StatusModel):
    """One RFC 6902 JSON patch operation on the Deployment."""

    op: Literal["add", "remove", "replace", "test", "move", "copy"]
    """Operation."""
    path: str
    """JSON pointer to the target location."""
    value: Any = Field(
        default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    """Value for add, replace and test."""
    from_path: str | None = Field(default=None, alias="from")
    """Source location for move and copy."""


class ContainerSnapshot(StatusModel):
    """The vLLM container's launch configuration at one moment: enough to put it back."""

    command: list[str] | None = None
    """The container's command (null if unset)."""
    args: list[str] | None = None
    """The container's args (null if unset)."""
    image: str
    """The container's image."""
    gpu_limit: int | None = Field(default=None, ge=0)
    """The container's GPU limit, if any."""
    fingerprint: str
    """Hash of command, args, image and GPU limit: tells this configuration apart."""


class CanaryState(StatusModel):
    """The canary of a trial run with strategy Canary: enough for a restarted operator to find
    it and to give the Deployment its replica back."""

    name: str
    """Name of the canary Deployment (owned by the LatencyTarget)."""
    main_replicas: int = Field(ge=0)
    """The Deployment's spec.replicas when the trial started; one less while the canary runs."""


class QualityScore(StatusModel):
    """The quality gate's result on a trial: the candidate's answers scored."""

    metric: str
    """ExactMatch, Similarity or NumericAnswer."""
    mode: str
    """Expected or Reference."""
    score: float
    """The canary's mean score (Reference: its agreement with the baseline's answers)."""
    baseline_score: float | None = None
    """The baseline's mean score against the expected answers (mode Expected)."""
    tolerance: float
    """The spec's tolerance."""
    samples: int = Field(ge=0)
    """Prompts scored."""
    passed: bool
    """Whether the change may be kept as far as quality goes."""
    reason: str
    """The gate's result in words."""

    @field_validator("score", "baseline_score", mode="after")
    @classmethod
    def _to_four_decimals(cls, value: float | None) -> float | None:
        return None if value is None else round(value, 4)


class AppliedStrategy(StatusModel):
    """The strategy trials use, and why."""

    name: Strategy
    """Rollout or Canary."""
    reason: str
    """Why: the spec names it, or the Deployment's replica count chose it."""


class Prediction(StatusModel):
    """What the planner expected a trial to do to one latency, and what the trial's windows
    then showed. The expectation is the performance model's, calibrated on the window before
    the trial (``basis: model``), where the model knows the served model and GPU and fits the
    window; else the knob's prior effect size for the diagnosed bottleneck (``basis: prior``,
    the bottleneck table of published effect sizes). Recording it is how its error is known."""

    objective: Literal["ttft", "itl", "e2e"]
    """The latency, read at its percentile like the trial's snapshots."""
    basis: Literal["model", "prior"] = "prior"
    """Where the expectation comes from: the calibrated performance model or the prior."""
    aimed: bool = True
    """Whether the change was chosen for this latency (false: a latency the model expects it to
    move along the way)."""
    expected_change: float = Field(ge=-1)
    """Expected relative change of that latency: -0.3 is 30% lower."""
    expected_seconds: float | None = Field(default=None, ge=0)
    """The window before the trial times (1 + expectedChange); null if it had no value."""
    measured_change: float | None = Field(default=None, ge=-1)
    """after / before - 1 over the windows that judged the trial; null until measured."""
    error: float | None = None
    """measuredChange - expectedChange: negative is better than expected."""

    def describe(self) -> str:
        """ "TTFT expected -30%, measured -55%" ("TTFT modelled ..." for the model's)."""
        verb = "modelled" if self.basis == "model" else "expected"
        text = f"{self.objective.upper()} {verb} {self.expected_change:+.0%}"
        if self.measured_change is not None:
            text += f", measured {self.measured_change:+.0%}"
        return text

    @field_validator("expected_change", "measured_change", "error", mode="after")
    @classmethod
    def _to_three_decimals(cls, value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    @field_validator("expected_seconds", mode="after")
    @classmethod
    def _to_the_microsecond(cls, value: float | None) -> float | None:
        return None if value is None else round(value, 6)


class Trial(StatusModel):
    """One change tried: what, from which value to which, measured how, and the verdict."""

    id: int = Field(ge=1)
    """Sequence number of the trial (1 for the first)."""
    knob: str
    """Knob changed, e.g. maxNumBatchedTokens."""
    from_value: str | None = Field(default=None, alias="from")
    """Value before the change (null: the argument was absent, vLLM's default)."""
    to_value: str | None = Field(default=None, alias="to")
    """Value tried (null: the argument removed)."""
    changes: list[str] = Field(default_factory=list)
    """Every container argument the trial changes, e.g. "--max-num-batched-tokens: (absent) ->
    2048": a knob may set companion flags with it, and each one is listed."""
    started_at: Timestamp
    """When the change was applied (RFC 3339)."""
    ready_at: Timestamp | None = None
    """When the rollout became ready (RFC 3339)."""
    finished_at: Timestamp | None = None
    """When the verdict was reached (RFC 3339)."""
    before: MetricSnapshot | None = None
    """Metrics before the change (a canary trial, once measured: the baseline pods over the
    window that judged it; rates as the whole Deployment's)."""
    after: MetricSnapshot | None = None
    """Metrics after the change (a canary trial: the canary's pod over that same window)."""
    verdict: Verdict | None = None
    """Keep, Revert, Inconclusive or Failed; null while running."""
    reason: str | None = None
    """The verdict explained."""
    config_hash: str | None = None
    """Hash of the vLLM configuration the trial rolled out (to recognise it after a restart)."""
    previous_config_hash: str | None = None
    """Hash of the configuration before the trial (what a rollback restores)."""
    from_container: ContainerSnapshot | None = None
    """The container before the trial: what a rollback restores (dropped from finished trials,
    whose ``changes`` say what differed)."""
    to_container: ContainerSnapshot | None = None
    """The container the trial rolls out (dropped from finished trials)."""
    measure_started_at: Timestamp | None = None
    """Start of the trial's measurement window (RFC 3339)."""
    measurements: int = Field(default=0, ge=0)
    """Measurement windows taken so far (an inconclusive window is measured again)."""
    longer: bool = False
    """The first window measured a gain just short of the noise bar that a window twice as
    long would clear: the trial is judged again over twice evaluation.window from
    measureStartedAt."""
    strategy: Strategy | None = None
    """How the trial runs: Rollout (null in statuses older than strategies) or Canary."""
    canary: CanaryState | None = None
    """The trial's canary, with strategy Canary."""
    quality: QualityScore | None = None
    """The quality gate's result, for a lossy change with spec.quality set."""
    refinement: bool = False
    """The targets were met when it started: tried for the larger margin the calibrated model
    expected. Once one is not kept, the operator stops refining."""
    predictions: list[Prediction] = Field(default_factory=list, max_length=3)
    """Per latency (TTFT, ITL, e2e) the change aimed at, and those the calibrated model expects it
    to move along the way: the expected and the measured effect."""


class IncompatibleValue(StatusModel):
    """A knob value that failed (crash, OOM, unsupported); never tried again."""

    knob: str
    """The knob."""
    value: str | None = None
    """The value that failed."""
    reason: str
    """What happened."""


class Recommendation(StatusModel):
    """The next change (mode Recommend): apply the patch yourself, e.g. through GitOps."""

    knob: str
    """Knob to change."""
    from_value: str | None = Field(default=None, alias="from")
    """Current value (null: absent)."""
    to_value: str | None = Field(default=None, alias="to")
    """Recommended value (null: remove the argument)."""
    patch: list[JsonPatchOperation] = Field(default_factory=list)
    """RFC 6902 JSON patch for the Deployment."""
    container: str | None = None
    """Name of the vLLM container the change is for."""
    args: list[str] | None = None
    """The container's whole new args list (for a Helm chart's values)."""
    command: list[str] | None = None
    """The container's new command, when it has one."""
    kustomize_patch: str | None = None
    """The change as a kustomize strategic-merge patch of the Deployment (YAML)."""
    reason: str
    """Why this change."""


class LatencyTargetStatus(StatusModel):
    """What the operator observed, concluded and did."""

    phase: Phase = Phase.OBSERVING
    """Where the tuning loop stands."""
    phase_since: Timestamp | None = None
    """When the current phase began (RFC 3339)."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation of the spec last acted on."""
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Ready, TargetsMet, Progressing, MetricsAvailable and Degraded."""
    observed: MetricSnapshot | None = None
    """Latest measurement window."""
    diagnosis: Diagnosis | None = None
    """Latest diagnosis."""
    baseline: Baseline | None = None
    """The original container, saved before the first change."""
    current_trial: Trial | None = None
    """The trial in progress, if any."""
    trials: list[Trial] = Field(default_factory=list)
    """Finished trials, oldest first; only the most recent ones are kept."""
    trial_count: int = Field(default=0, ge=0)
    """Trials started since the spec last changed, including those no longer listed."""
    recommendation: Recommendation | None = None
    """The next change, in mode Recommend."""
    incompatible: list[IncompatibleValue] = Field(default_factory=list)
    """Knob values that failed and are not tried again."""
    stable_since: Timestamp | None = None
    """When the current configuration finished warming up: windows start no earlier."""
    expected_container: str | None = None
    """Fingerprint of the container as the operator last left it (to notice outside changes)."""
    drift_generation: int | None = Field(default=None, ge=0)
    """The spec generation at which tuning stopped for an outside change; a newer spec resumes."""
    strategy: AppliedStrategy | None = None
    """The strategy the next trial uses, and why (spec.strategy, or the replica count)."""
    gave_up_on: MetricSnapshot | None = None
    """The window the operator last gave up on (phase Exhausted): once the load is no longer
    comparable to it and the targets are missed, planning opens again before the cooldown."""
    near_miss_at: Timestamp | None = None
    """When a window missed the targets by a little with nothing left to try: one more window
    is measured before giving up (cleared by a trial or by targets met)."""
    shard: str | None = Field(default=None, max_length=32)
    """The operator shard that owns this target, as index/count (e.g. 1/2)."""

    @field_validator("trials", mode="after")
    @classmethod
    def _bounded(cls, trials: list[Trial]) -> list[Trial]:
        # A history longer than the limit (older operator, hand edit) is trimmed, not refused:
        # refusing would leave the operator unable to read its own status.
        return trials[-TRIAL_HISTORY_LIMIT:]


def with_trial(trials: list[Trial], trial: Trial) -> list[Trial]:
    """``trials`` plus ``trial`` at the end, keeping only the newest TRIAL_HISTORY_LIMIT.

    A finished trial keeps what a reader needs (the change, its ``changes``, the windows, the
    verdict) and drops what only its running needed: the two full containers, which would
    repeat the whole command line twice per trial in ``kubectl describe``, and their hashes.
    """
    internal = ("from_container", "to_container", "config_hash", "previous_config_hash")
    finished = trial.model_copy(update=dict.fromkeys(internal))
    return [*trials, finished][-TRIAL_HISTORY_LIMIT:]
