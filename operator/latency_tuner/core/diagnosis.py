"""Which stage is slow and why, with the evidence: the troubleshooting guide's method.

First rule out deployment problems (not a vLLM server; ``--cpu-offload-gb`` > 0;
``--enforce-eager``; no metrics; too little traffic to trust the numbers). Then, for each
objective over its target, find the bottleneck (DESIGN section 4):

- TTFT: KV-cache pressure (preemptions), else queueing (queue time the larger part of TTFT,
  requests waiting, running at max-num-seqs or KV full), else long prefill.
- ITL: KV-cache pressure, else prefill interference (the median meets the target but the tail
  does not, long prompts arriving under concurrency), else decode bandwidth.
- E2E: whichever of TTFT and decode time is the larger part of it.

The most violated objective names the bottleneck; the knobs worth trying come ranked from
``core.candidates``; advice (``core.advice``) lists what only a person can do. Pure: values in,
a value out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from latency_tuner.api.spec import Knobs, Objectives
from latency_tuner.core import candidates
from latency_tuner.core.advice import advice_for
from latency_tuner.core.config_view import ConfigView, defaults_hardware, view
from latency_tuner.core.evidence import Bottleneck, Cause, Comparison, Evidence, Finding
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import CATALOG, KnobName
from latency_tuner.core.knobs.base import Detected
from latency_tuner.core.knobs.table import FIXES, TABLE
from latency_tuner.core.load import KV_FULL, Load
from latency_tuner.core.observation import NoData, Observation, ObservationResult
from latency_tuner.core.saturation import BUSY_IN_FLIGHT, busy, flow, queue_delay
from latency_tuner.core.score import ObjectiveScore, Score, format_seconds, score
from latency_tuner.core.signals import lowest_bucket_warning
from latency_tuner.vllm import defaults
from latency_tuner.vllm.args import VllmCommandLine
from latency_tuner.vllm.defaults import VllmVersion

QUEUE_SHARE = 0.5  # queue time at least half of TTFT: waiting, not computing, dominates
WAITING = 0.5  # mean waiting requests per pod above which requests visibly queue
PREEMPTION_SHARE = 0.01  # preemptions per finished request: 1 in 100 already hurts the tail
KV_SATURATED = 0.95  # mean KV usage this high with requests waiting: KV blocks bind admission
ITL_TAIL_RATIO = 2.5  # ITL p99 / p50: decode steps stalled by something other than decoding
LONG_PROMPT = 1024  # tokens: prompts whose prefill takes a decode-stalling step (or more)
INTERFERENCE_PROMPT = 512  # tokens: long enough for a prefill chunk to stall decodes
CONCURRENT = 1.5  # running requests per pod: there are decodes for a prefill to interrupt
LOW_CONCURRENCY = 8  # running requests per pod: decode is bandwidth-bound, not batch-bound


@dataclass(frozen=True)
class NotVllm:
    """The container does not run vLLM's server (``NotVllmError``'s message in ``reason``)."""

    reason: str


@dataclass(frozen=True)
class Diagnosis:
    """The diagnosis of one window. ``bottleneck`` is that of the most violated objective."""

    bottleneck: Bottleneck
    findings: tuple[Finding, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    knobs: tuple[KnobName, ...] = ()  # worth trying, in the order the planner would
    advice: tuple[str, ...] = ()  # what the operator cannot do
    causes: tuple[Cause, ...] = ()  # per breached objective, the most violated first
    score: Score | None = None
    blocked: tuple[str, ...] = ()  # knobs that would help but may not or cannot be tried
    # The analysis behind ``knobs``, kept so the planner does not redo it for the same window:
    # the ranking, the config view, and the inputs they were made from.
    ranking: candidates.Ranking | None = field(default=None, compare=False, repr=False)
    view: ConfigView | None = field(default=None, compare=False, repr=False)
    ranked_with: tuple[object, ...] = field(default=(), compare=False, repr=False)

    def ranking_for(
        self,
        observation: Observation,
        config: VllmCommandLine,
        knobs: Knobs,
        hardware: HardwareInfo,
    ) -> tuple[candidates.Ranking, ConfigView] | None:
        """The ranking made while diagnosing, when it was made from these same inputs."""
        if self.ranking is None or self.view is None:
            return None
        if self.ranked_with != (observation, config, knobs, hardware):
            return None
        return self.ranking, self.view

    @property
    def conclusions(self) -> tuple[str, ...]:
        """Findings and causes in words, most important first (for status.diagnosis)."""
        lines = [FINDING_TEXT[f] for f in self.findings]
        for cause in self.causes:
            lines.append(f"{cause.label} is {cause.ratio - 1:.0%} over target: {cause.bottleneck}")
        if not lines and self.score is not None and self.score.met:
            lines.append("targets met")
        return tuple(lines)


def _explain_defaults(
    causes: tuple[Cause, ...],
    config: VllmCommandLine,
    hardware: HardwareInfo,
    version: VllmVersion | None,
    notes: _Notes,
) -> None:
    """Which vLLM default applies to each flag the diagnosed bottlenecks' knobs touch, and why
    (the release and the GPU's memory decide some): the numbers the planner starts from."""
    wanted = tuple(CATALOG[e.knob].flag for c in causes for e in TABLE.get(c.bottleneck, ()))
    gpu = defaults_hardware(hardware)
    memory = gpu.memory_gib()
    where = f"{gpu.gpu_product or 'an unknown GPU'}" + (f" ({memory:g} GiB)" if memory else "")
    release = f"vLLM {version}" if version is not None else "vLLM (release unknown)"
    for resolved in defaults.applied_defaults(config, wanted, hardware=gpu, version=version):
        if resolved.value is not None:
            number = resolved.value if isinstance(resolved.value, int | float) else None
            notes.fact(
                Evidence(
                    f"default_{resolved.flag.replace('-', '_')}",
                    float(number) if number is not None else None,
                    f"not on the command line: {release} on {where} runs {resolved.describe()}",
                )
            )


FINDING_TEXT: dict[Finding, str] = {
    Finding.NOT_VLLM: "the container is not a vLLM server: nothing to tune",
    Finding.CPU_OFFLOAD: "weights are offloaded to CPU memory (--cpu-offload-gb)",
    Finding.EAGER_MODE: "CUDA graphs are off (--enforce-eager)",
    Finding.NO_METRICS: "no metrics in the window",
    Finding.LOW_TRAFFIC: "too few requests in the window to judge",
}


class _Notes:
    """Evidence and advice collected while diagnosing, in order, without repeats."""

    def __init__(self) -> None:
        self.evidence: list[Evidence] = []
        self.advice: list[str] = []

    def fact(self, evidence: Evidence) -> None:
        if evidence not in self.evidence:
            self.evidence.append(evidence)

    def advise(self, text: str) -> None:
        if text not in self.advice:
            self.advice.append(text)


def diagnose(
    observation: ObservationResult,
    objectives: Objectives,
    config: VllmCommandLine | NotVllm,
    hardware: HardwareInfo,
    knobs: Knobs,
    *,
    min_requests: int = 0,
    version: VllmVersion | None = None,
) -> Diagnosis:
    """The diagnosis of ``observation`` for a server running ``config`` (of vLLM ``version``,
    when the image tells it) on ``hardware``."""
    notes = _Notes()
    if isinstance(config, NotVllm):
        notes.fact(Evidence("container", None, f"not a vLLM server: {config.reason}"))
        notes.advise(f"serve the model with vLLM ({config.reason})")
        return Diagnosis(
            Bottleneck.NONE, (Finding.NOT_VLLM,), tuple(notes.evidence), advice=tuple(notes.advice)
        )
    echo = observation.cache_config if isinstance(observation, Observation) else None
    cv = view(config, hardware, echo)
    detected = _deployment_findings(cv, notes)
    findings = tuple(d.finding for d, _ in detected)
    fixes = tuple(knob for _, knob in detected)
    if isinstance(observation, NoData):
        stalled = flow(observation)
        if stalled.saturated:
            # Requests piled up and none finished: a stalled server, not a quiet one.
            notes.fact(stalled.evidence())
            notes.advise(
                "the server finished no request while requests piled up: read the vLLM pods' "
                "logs (a hung engine, requests longer than evaluation.window), and add "
                "replicas if it is overloaded"
            )
        else:
            notes.fact(
                Evidence(
                    "requests",
                    float(observation.requests),
                    f"no data in the window: {observation.reason}",
                )
            )
            notes.advise(
                "check that Prometheus scrapes the vLLM pods, that spec.metrics selects their "
                f"series, and that requests arrive ({observation.reason})"
            )
        return Diagnosis(
            Bottleneck.NONE,
            (*findings, Finding.NO_METRICS),
            tuple(notes.evidence),
            fixes,
            tuple(notes.advice),
        )
    inflow = flow(observation)
    if inflow.saturated:
        # Falling behind is evidence however few requests finished: the finished requests'
        # latencies are lower bounds, and waiting for minRequests may wait forever.
        notes.fact(inflow.evidence())
    elif observation.requests < min_requests and busy(observation):
        # Slow, not quiet: the few finished requests are measurements of a server that never
        # idled, and waiting for more may wait forever (a fixed set of clients cannot send more).
        notes.fact(
            Evidence(
                "in_flight",
                (observation.running_mean or 0.0) + (observation.waiting_mean or 0.0),
                f"busy: {observation.requests} requests finished, fewer than minRequests "
                f"{min_requests}, with requests in flight all the window",
                BUSY_IN_FLIGHT,
                ">=",
                "requests",
            )
        )
    elif observation.requests < min_requests:
        findings = (*findings, Finding.LOW_TRAFFIC)
        notes.fact(
            Evidence(
                "requests",
                float(observation.requests),
                f"{observation.requests} requests in the window, fewer than "
                f"minRequests {min_requests}: quantiles are noisy",
                float(min_requests),
                "<",
                "requests",
            )
        )
    s = score(observation, objectives)
    for part in s.objectives:
        notes.fact(_objective_evidence(part))
    coarse = lowest_bucket_warning(observation, objectives, any_percentile=True)
    if coarse is not None:
        notes.fact(Evidence("lowest_bucket_quantiles", None, f"warning: {coarse}"))
    load = Load.of(observation)
    causes = tuple(
        Cause(
            part.name,
            _bottleneck(part, observation, cv, load, hardware, notes),
            part.ratio or 0.0,
            part.percentile,
        )
        for part in s.breached
    )
    if not causes:
        for found, _ in detected:
            if found.advice_when_met:
                notes.advise(f"targets are met; still, {found.advice_when_met}")
        return Diagnosis(
            Bottleneck.NONE, findings, tuple(notes.evidence), (), tuple(notes.advice), (), s
        )
    ranking = candidates.rank(
        causes,
        findings,
        cl=config,
        view=cv,
        knobs=knobs,
        hardware=hardware,
        observation=observation,
    )
    for cause in causes:
        for text in advice_for(cause.bottleneck, observation, cv, load, hardware):
            notes.advise(text)
    _explain_defaults(causes, config, hardware, version, notes)
    return Diagnosis(
        bottleneck=causes[0].bottleneck,
        findings=findings,
        evidence=tuple(notes.evidence),
        knobs=tuple(dict.fromkeys(c.knob for c in ranking.candidates)),
        advice=tuple(notes.advice),
        causes=causes,
        score=s,
        blocked=ranking.blocked,
        ranking=ranking,
        view=cv,
        ranked_with=(observation, config, knobs, hardware),
    )


def margins(
    observation: Observation,
    objectives: Objectives,
    config: VllmCommandLine,
    hardware: HardwareInfo,
) -> tuple[Cause, ...]:
    """Every measured objective as a cause, met ones too (ratio below 1), the tightest first,
    each with the stage that bounds it: what a larger margin would have to speed up (the
    planner's ``refine``, once the targets are met)."""
    cv = view(config, hardware, observation.cache_config)
    load = Load.of(observation)
    notes = _Notes()  # the diagnosis of the window says why; this only asks which stage
    parts = sorted(
        (p for p in score(observation, objectives).objectives if p.ratio is not None),
        key=lambda p: -(p.ratio or 0.0),
    )
    return tuple(
        Cause(p.name, _bottleneck(p, observation, cv, load, hardware, notes), p.ratio or 0.0,
              p.percentile)
        for p in parts
    )  # fmt: skip


def _deployment_findings(cv: ConfigView, notes: _Notes) -> list[tuple[Detected, KnobName]]:
    """The deployment problems the fix knobs detect (``FIXES``, in order), with their knob."""
    found: list[tuple[Detected, KnobName]] = []
    for fix in FIXES:
        detected = CATALOG[fix.knob].detect(cv)
        if detected is None:
            continue
        found.append((detected, fix.knob))
        notes.fact(detected.evidence)
        for text in detected.advice:
            notes.advise(text)
    return found


def _compared(value: float, threshold: float) -> Comparison:
    return ">=" if value >= threshold else "<"


def _objective_evidence(part: ObjectiveScore) -> Evidence:
    signal = f"{part.name}_p{part.percentile}"
    if part.observed is None:
        return Evidence(
            signal,
            None,
            f"{part.label} unknown: no samples at that percentile in the window",
            part.threshold,
            "<=",
            "s",
        )
    over = part.observed > part.threshold
    relation = "above" if over else "within"
    return Evidence(
        signal,
        part.observed,
        f"{part.label} {format_seconds(part.observed)} is {relation} the target "
        f"{format_seconds(part.threshold)}",
        part.threshold,
        ">" if over else "<=",
        "s",
    )


def _bottleneck(
    part: ObjectiveScore,
    obs: Observation,
    cv: ConfigView,
    load: Load,
    hardware: HardwareInfo,
    notes: _Notes,
) -> Bottleneck:
    if _kv_pressure(obs, cv, load, notes):
        return Bottleneck.KV_CACHE_PRESSURE
    if part.name == "ttft":
        return _ttft_bottleneck(obs, cv, load, notes)
    if part.name == "itl":
        return _itl_bottleneck(obs, load, hardware, part.threshold, notes)
    return _e2e_bottleneck(obs, cv, load, hardware, notes)


def _kv_pressure(obs: Observation, cv: ConfigView, load: Load, notes: _Notes) -> bool:
    preemptions = obs.preemptions or 0.0
    if obs.requests > 0 and preemptions / obs.requests >= PREEMPTION_SHARE:
        share = preemptions / obs.requests
        notes.fact(
            Evidence(
                "preemptions_per_request",
                share,
                f"{preemptions:.0f} preemptions in {obs.requests} requests "
                f"({share:.1%}): each one recomputes a prefill",
                PREEMPTION_SHARE,
                ">=",
                "ratio",
            )
        )
        return True
    usage = obs.kv_cache_usage_mean
    waiting = load.waiting or 0.0
    if (
        usage is not None
        and usage >= KV_SATURATED
        and waiting > WAITING
        and not load.at_max_seqs(cv.max_num_seqs)
    ):
        notes.fact(
            Evidence(
                "kv_cache_usage",
                usage,
                f"KV cache {usage:.0%} full on average while {waiting:.1f} requests "
                f"wait per pod, below max-num-seqs {cv.max_num_seqs}",
                KV_SATURATED,
                ">=",
                "ratio",
            )
        )
        return True
    return False


def _ttft_bottleneck(obs: Observation, cv: ConfigView, load: Load, notes: _Notes) -> Bottleneck:
    prefill = obs.prefill_time_mean
    queue, source = queue_delay(obs)
    ttft = obs.ttft_mean or ((queue or 0.0) + (prefill or 0.0))
    if queue is not None and ttft > 0:
        # Little's law can exceed the finished requests' TTFT (the longest waits have not
        # produced a token yet): the share is then capped at all of it.
        share = min(queue / ttft, 1.0)
        notes.fact(
            Evidence(
                "queue_time_share",
                share,
                f"queue time is {share:.0%} of TTFT ({format_seconds(queue)}{source} of "
                f"{format_seconds(ttft)} mean)",
                QUEUE_SHARE,
                _compared(share, QUEUE_SHARE),
                "ratio",
            )
        )
        # A backlog that grows is queueing whatever the share so far: its wait has no bound.
        queueing = share >= QUEUE_SHARE or flow(obs).saturated
    else:
        queueing = (load.waiting or 0.0) > WAITING
    if queueing:
        if load.waiting is not None:
            notes.fact(
                Evidence(
                    "waiting_requests",
                    load.waiting,
                    f"{load.waiting:.1f} requests wait per pod on average",
                    WAITING,
                    ">" if load.waiting > WAITING else "<=",
                    "requests",
                )
            )
        if load.at_max_seqs(cv.max_num_seqs) and load.running_peak is not None:
            reached = load.running_peak >= cv.max_num_seqs
            in_flight = (load.running or 0.0) + (load.waiting or 0.0)
            notes.fact(
                Evidence(
                    "running_requests_peak" if reached else "requests_in_flight",
                    load.running_peak if reached else in_flight,
                    f"running requests reach {load.running_peak:.0f} per pod, at "
                    f"max-num-seqs {cv.max_num_seqs}"
                    if reached
                    else f"{in_flight:.1f} requests in flight per pod (running and waiting) "
                    f"for max-num-seqs {cv.max_num_seqs} slots",
                    float(cv.max_num_seqs),
                    ">=",
                    "requests",
                )
            )
        if load.kv_full and load.kv_usage_peak is not None:
            notes.fact(
                Evidence(
                    "kv_cache_usage_peak",
                    load.kv_usage_peak,
                    f"KV cache peaks at {load.kv_usage_peak:.0%}",
                    KV_FULL,
                    ">=",
                    "ratio",
                )
            )
        return Bottleneck.QUEUEING
    if prefill is not None and ttft > 0:
        notes.fact(
            Evidence(
                "prefill_time_share",
                prefill / ttft,
                f"prefill is {prefill / ttft:.0%} of TTFT ({format_seconds(prefill)}"
                f" of {format_seconds(ttft)} mean)",
                QUEUE_SHARE,
                _compared(prefill / ttft, QUEUE_SHARE),
                "ratio",
            )
        )
    if load.prompt_tokens is not None:
        long = load.prompt_tokens >= LONG_PROMPT
        notes.fact(
            Evidence(
                "prompt_tokens_mean",
                load.prompt_tokens,
                f"mean prompt {load.prompt_tokens:.0f} tokens" + (" (long)" if long else ""),
                float(LONG_PROMPT),
                ">=" if long else "<",
                "tokens",
            )
        )
    return Bottleneck.LONG_PREFILL


def _itl_bottleneck(
    obs: Observation,
    load: Load,
    hardware: HardwareInfo,
    threshold: float | None,
    notes: _Notes,
) -> Bottleneck:
    median, tail = obs.itl.get(50), obs.itl.get(99)
    prompt = load.prompt_tokens or 0.0
    running = load.running or 0.0
    if median is not None and tail is not None and median > 0:
        ratio = tail / median
        median_ok = threshold is None or median <= threshold
        if (
            ratio >= ITL_TAIL_RATIO
            and median_ok
            and prompt >= INTERFERENCE_PROMPT
            and running >= CONCURRENT
        ):
            notes.fact(
                Evidence(
                    "itl_tail_ratio",
                    ratio,
                    f"ITL p99 is {ratio:.1f}x p50 ({format_seconds(tail)} vs "
                    f"{format_seconds(median)}): decode steps stall",
                    ITL_TAIL_RATIO,
                    ">=",
                    "ratio",
                )
            )
            notes.fact(
                Evidence(
                    "prompt_tokens_mean",
                    prompt,
                    f"mean prompt {prompt:.0f} tokens arriving while {running:.1f} "
                    "requests decode per pod",
                    float(INTERFERENCE_PROMPT),
                    ">=",
                    "tokens",
                )
            )
            return Bottleneck.PREFILL_INTERFERENCE
    itl = median if median is not None else obs.itl_mean
    if itl is not None:
        label = "ITL p50" if median is not None else "mean ITL"
        notes.fact(
            Evidence(
                label.lower().replace(" ", "_").replace("mean_itl", "itl_mean"),
                itl,
                f"{label} {format_seconds(itl)} on {hardware.describe()}",
                unit="s",
            )
        )
    if load.running is not None:
        low = load.running <= LOW_CONCURRENCY
        notes.fact(
            Evidence(
                "running_requests",
                load.running,
                f"{load.running:.1f} running requests per pod: "
                + (
                    "decode is slow even at low concurrency, memory-bandwidth bound"
                    if low
                    else "large decode batches read weights and much KV cache every step"
                ),
                float(LOW_CONCURRENCY),
                "<=" if low else ">",
                "requests",
            )
        )
    return Bottleneck.DECODE_BANDWIDTH


def _e2e_bottleneck(
    obs: Observation,
    cv: ConfigView,
    load: Load,
    hardware: HardwareInfo,
    notes: _Notes,
) -> Bottleneck:
    ttft = obs.ttft_mean
    decode = obs.decode_time_mean
    if decode is None and obs.itl_mean is not None and load.generation_tokens is not None:
        decode = max(load.generation_tokens - 1, 0.0) * obs.itl_mean
    if ttft is not None and decode is not None and ttft + decode > 0:
        share = decode / (ttft + decode)
        notes.fact(
            Evidence(
                "decode_share_of_e2e",
                share,
                f"decode is {share:.0%} of end-to-end time ({format_seconds(decode)}"
                f" of {format_seconds(ttft + decode)})",
                0.5,
                _compared(share, 0.5),
                "ratio",
            )
        )
        if share < 0.5:
            return _ttft_bottleneck(obs, cv, load, notes)
    return _itl_bottleneck(obs, load, hardware, None, notes)
