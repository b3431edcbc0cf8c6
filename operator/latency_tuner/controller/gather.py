"""The facts of one round: the Deployment, its container and rollout, the GPUs, the metrics
windows ``core.rollout.windows_needed`` asks for. Read through the ports; decides nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime

from latency_tuner.api.durations import parse_timestamp
from latency_tuner.api.spec import LatencyTargetSpec, QualityMode
from latency_tuner.api.status import LatencyTargetStatus, Phase
from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.errors import (
    ClusterError,
    ContainerNotFound,
    MetricsUnavailable,
    NameTaken,
)
from latency_tuner.controller.ports import (
    LatencyTargets,
    MetricsSource,
    Ports,
    RecentMetricsSource,
)
from latency_tuner.core.canary import Owner, arms, canary_name
from latency_tuner.core.cluster import PodFacts
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.promql import LabelMatcher, default_matchers
from latency_tuner.core.quality.samples import InvalidSamples, parse_samples
from latency_tuner.core.rollout import (
    Blocked,
    Blocker,
    Facts,
    MetricsFailure,
    Ready,
    Window,
    WindowResult,
    Windows,
    windows_needed,
)
from latency_tuner.core.rollout.canary import quality_needed
from latency_tuner.core.rollout.facts import (
    CanaryFacts,
    QualityAnswers,
    QualityFacts,
    QualityFailure,
    is_canary,
)
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

# The LatencyTargets naming one Deployment: (creationTimestamp, name), oldest first wins.
Claims = Sequence[tuple[str, str]]


def gpu_resource(ports: Ports, spec: LatencyTargetSpec) -> str:
    """The GPU's extended resource name: the spec's (``knobs.tensorParallel.gpuResource``)
    when it allows tensor parallelism, else the operator's."""
    tp = spec.knobs.tensor_parallel
    return tp.gpu_resource if tp is not None else ports.gpu_resource


async def gather(
    ports: Ports,
    spec: LatencyTargetSpec,
    status: LatencyTargetStatus,
    namespace: str,
    name: str,
    now: datetime,
    *,
    claims: Claims | None = None,
    owner: Owner | None = None,
) -> Facts:
    """What ``decide`` needs this round. ``claims``: see ``owner_conflict``. ``owner``: the
    LatencyTarget as a canary's owner (None: no canaries)."""
    view = await ports.deployments.get(namespace=namespace, name=spec.target_ref.name)
    if view is None:
        return Blocked(Blocker.DEPLOYMENT_NOT_FOUND)
    try:
        index = view.container_index(spec.target_ref.container)
    except ContainerNotFound as exc:
        return Blocked(Blocker.CONTAINER_NOT_FOUND, str(exc))
    resource = gpu_resource(ports, spec)
    container = view.container_config(spec.target_ref.container, resource)
    pods = await ports.deployments.pods(
        view, container=spec.target_ref.container, gpu_resource=resource
    )
    conflict = await owner_conflict(ports.latencytargets, spec, namespace, name, claims)
    if conflict is not None:
        return Blocked(Blocker.CONFLICT, conflict)
    try:
        command_line = VllmCommandLine.of_container(
            list(container.command) if container.command is not None else None,
            list(container.args) if container.args is not None else None,
            image=container.image,
        )
    except NotVllmError as exc:
        return Blocked(Blocker.NOT_VLLM, str(exc), await hardware(ports, spec, pods))
    if ports.pods_seen is not None:
        ports.pods_seen(namespace, name, pods)
    can_canary = ports.canaries is not None and owner is not None
    canary: CanaryFacts | None = None
    canary_pods: tuple[PodFacts, ...] = ()
    if owner is not None:
        canary, canary_pods = await canary_facts(ports, spec, status, view, owner, resource)
    answers = None
    if quality_due(spec, status, now):
        answers = await quality_answers(ports, spec, namespace, command_line, pods, canary_pods)
    return Ready(
        deployment=view.obj,
        container_index=index,
        container=container,
        command_line=command_line,
        rollout=view.rollout(pods),
        hardware=await hardware(ports, spec, pods),
        controller_owner=view.controller,
        gpu_resource=resource,
        windows=await windows(ports, spec, status, namespace, name, now),
        canary_name=canary_name(view.name, name) if can_canary else None,
        canary=canary,
        quality=answers,
    )


async def canary_facts(
    ports: Ports,
    spec: LatencyTargetSpec,
    status: LatencyTargetStatus,
    main: DeploymentView,
    owner: Owner,
    resource: str,
) -> tuple[CanaryFacts | None, tuple[PodFacts, ...]]:
    """The trial's canary and its pods, while a canary trial is in flight."""
    if not is_canary(status.current_trial) or ports.canaries is None:
        return None, ()
    try:
        found = await ports.canaries.get(main, owner)
    except NameTaken as exc:
        return CanaryFacts(exists=False, taken=str(exc)), ()
    if found is None:
        return CanaryFacts(exists=False), ()
    pods = await ports.deployments.pods(
        found, container=spec.target_ref.container, gpu_resource=resource
    )
    config = found.container_config(spec.target_ref.container, resource)
    rollout = found.rollout(pods)
    facts = CanaryFacts(
        exists=True, fingerprint=config.fingerprint(), replicas=rollout.replicas, rollout=rollout
    )
    return facts, pods


def quality_due(spec: LatencyTargetSpec, status: LatencyTargetStatus, now: datetime) -> bool:
    """The quality gate's answers are wanted: asked for by the phase, and warm-up over."""
    trial = status.current_trial
    if not quality_needed(spec, status) or trial is None or trial.ready_at is None:
        return False
    ready = parse_timestamp(trial.ready_at).timestamp()
    return now.timestamp() - ready >= spec.evaluation.settle_seconds


def _url(pod: PodFacts) -> str | None:
    if not pod.ready or pod.ip is None or pod.metrics_port is None:
        return None
    host = f"[{pod.ip}]" if ":" in pod.ip else pod.ip
    return f"http://{host}:{pod.metrics_port}"


async def quality_answers(
    ports: Ports,
    spec: LatencyTargetSpec,
    namespace: str,
    command_line: VllmCommandLine,
    main_pods: Sequence[PodFacts],
    canary_pods: Sequence[PodFacts],
) -> QualityFacts:
    """The samples of ``spec.quality``'s ConfigMap (in the target's own namespace) answered by
    a ready canary pod and a ready baseline pod, one prompt at a time, at temperature 0. A
    ConfigMap the probe refuses (not opted in, missing, too large, not samples) is a failure
    before any pod is asked."""
    gate = spec.quality
    if gate is None or ports.quality is None:
        return QualityFailure("this operator cannot run the quality gate")
    try:
        text = await ports.quality.samples(namespace=namespace, name=gate.config_map, key=gate.key)
        samples = parse_samples(text, need_expected=gate.mode is QualityMode.EXPECTED)
    except InvalidSamples as exc:
        return QualityFailure(str(exc))
    except ClusterError as exc:
        return QualityFailure(f"reading ConfigMap {gate.config_map}: {exc}")
    canary_url = next((u for p in canary_pods if (u := _url(p))), None)
    baseline_url = next((u for p in main_pods if (u := _url(p))), None)
    if canary_url is None or baseline_url is None:
        return QualityFailure("no ready canary or baseline pod to ask")
    model = command_line.served_model_name or command_line.model or ""
    prompts = [s.prompt for s in samples]
    (canary, canary_errors), (baseline, baseline_errors) = await asyncio.gather(
        ports.quality.answers(canary_url, model, prompts, max_tokens=gate.max_tokens),
        ports.quality.answers(baseline_url, model, prompts, max_tokens=gate.max_tokens),
    )
    errors = [f"canary {e}" for e in canary_errors] + [f"baseline {e}" for e in baseline_errors]
    return QualityAnswers(
        expected=tuple(s.expected for s in samples),
        canary=tuple(canary),
        baseline=tuple(baseline),
        errors=tuple(errors),
    )


async def owner_conflict(
    latencytargets: LatencyTargets,
    spec: LatencyTargetSpec,
    namespace: str,
    name: str,
    claims: Claims | None,
) -> str | None:
    """The older LatencyTarget that owns the Deployment, or None when this one does.
    ``claims``: the targets naming the Deployment as (creationTimestamp, name) pairs from the
    handlers' index; None lists the namespace's targets instead (tools, tests)."""
    if claims is None:
        try:
            items = await latencytargets.list(namespace=namespace)
        except ClusterError:
            return None
        claims = [
            (str(i["metadata"].get("creationTimestamp", "")), str(i["metadata"]["name"]))
            for i in items
            if ((i.get("spec") or {}).get("targetRef") or {}).get("name") == spec.target_ref.name
            and not i["metadata"].get("deletionTimestamp")
        ]
    if not claims:
        return None
    owner = min(claims)[1]
    return None if owner == name else owner


async def hardware(ports: Ports, spec: LatencyTargetSpec, pods: Sequence[PodFacts]) -> HardwareInfo:
    """The GPUs of the pods' node: its labels, under the spec's ``hardware`` overrides. The
    node is read even when the spec names product and interconnect: only it knows the count."""
    override = spec.hardware
    product = interconnect = None
    count = None
    if ports.nodes is not None:
        with contextlib.suppress(ClusterError):
            for node in await ports.nodes.gpus(p.node for p in pods if p.node):
                if node.product:
                    product, count = node.product, node.count
                    if node.interconnect in ("NVLink", "PCIe"):
                        interconnect = node.interconnect
                    break
    return HardwareInfo.from_labels(
        product,
        interconnect=interconnect,  # type: ignore[arg-type]
        gpus_per_node=count,
        override_product=override.gpu_product if override else None,
        override_interconnect=override.interconnect if override else None,
    )


def percentiles(spec: LatencyTargetSpec) -> list[int]:
    """The percentiles the objectives name."""
    objectives = (spec.objectives.ttft, spec.objectives.itl, spec.objectives.e2e)
    return [int(o.percentile) for o in objectives if o is not None]


def selector(spec: LatencyTargetSpec, namespace: str) -> list[LabelMatcher]:
    """The label matchers of the Deployment's series: the spec's, else the default ones.

    Always scoped to the LatencyTarget's own namespace: a spec's matchers can narrow the
    selection, never replace the namespace (a tenant must not read another namespace's series
    or send queries across the cluster)."""
    scope = LabelMatcher("namespace", "=", namespace)
    if spec.metrics.matchers:
        own = [
            LabelMatcher(m.label, m.op, m.value)
            for m in spec.metrics.matchers
            if m.label != "namespace"
        ]
        return [scope, *own]
    return list(default_matchers(namespace, spec.target_ref.name))


async def windows(
    ports: Ports,
    spec: LatencyTargetSpec,
    status: LatencyTargetStatus,
    namespace: str,
    name: str,
    now: datetime,
) -> Windows[WindowResult]:
    """Every window ``windows_needed`` names, observed in turn."""
    try:
        source = await ports.metrics_for(spec, namespace, name)
    except MetricsUnavailable as exc:
        return Windows(current=MetricsFailure(str(exc)))
    matchers = selector(spec, namespace)
    by_arm = {"main": tuple(matchers)}
    trial = status.current_trial
    if is_canary(trial) and trial is not None and trial.canary is not None:
        by_arm["canary"], by_arm["baseline"] = arms(matchers, trial.canary.name)
    wanted = windows_needed(spec, status, now)
    shared = shares_instant(source, status, now, spec.evaluation.window_seconds)

    async def one(window: Window) -> WindowResult:
        observe = source.observe
        if window is wanted.current and shared is not None:
            observe = shared.observe_recent
        try:
            return await observe(
                matchers=by_arm.get(window.arm, by_arm["main"]),
                window_seconds=window.seconds,
                percentiles=percentiles(spec),
                end=window.end,
            )
        except MetricsUnavailable as exc:
            return MetricsFailure(str(exc))

    # One after the other: a source may bound the observations it answers at once (the
    # Prometheus source fails the ones over its cap as busy), and judging a trial needs all six.
    return wanted.fill([await one(w) for w in wanted.all()])


# Phases that only watch the latest window: no trial of theirs depends on where it ends.
_WATCHING = frozenset({Phase.OBSERVING, Phase.CONVERGED, Phase.EXHAUSTED})


def shares_instant(
    source: MetricsSource, status: LatencyTargetStatus, now: datetime, window: float
) -> RecentMetricsSource | None:
    """The source, when this round's latest window may come from a batch shared with other
    targets: a batching source, a watching phase, and a Deployment unchanged for the window
    and the batch's age (a window moved back by that age still holds only the current
    configuration, as ``decide``'s "clean window" checks assume)."""
    if not isinstance(source, RecentMetricsSource) or status.phase not in _WATCHING:
        return None
    if status.stable_since is not None:
        quiet = now.timestamp() - parse_timestamp(status.stable_since).timestamp()
        if quiet < window + source.max_age:
            return None
    return source
