"""The kopf handlers: startup, probes, create/resume/update, a timer per LatencyTarget, and the
finalizer that restores the original arguments on deletion (``onDelete: Restore``).

Each handler is glue: it takes the clients from the memo, calls ``Reconciler.run`` under the
object's lock (timers and change handlers may fire together), posts the events it returns (plus
a Warning for each condition that turned bad: ``condition_events``), logs every decision as one line
naming the target, and records the operator's metrics. Clients live in the ``kopf.Memo``, never
in module globals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl as ssl_
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import kopf
from prometheus_client import start_http_server

from latency_tuner.adapters.inference.probe import PodQualityProbe
from latency_tuner.adapters.kubernetes.canaries import Canaries
from latency_tuner.adapters.kubernetes.client import (
    Calls,
    Conflict,
    KubernetesError,
    make_api_client,
)
from latency_tuner.adapters.kubernetes.configmaps import ConfigMaps
from latency_tuner.adapters.kubernetes.deployments import Deployments
from latency_tuner.adapters.kubernetes.latencytargets import LatencyTargets
from latency_tuner.adapters.kubernetes.nodes import Nodes
from latency_tuner.adapters.kubernetes.shard_claims import ShardClaims
from latency_tuner.adapters.metrics import MetricsError, MetricsSource
from latency_tuner.adapters.metrics.batch import BatchedPrometheus
from latency_tuner.adapters.metrics.pool import ScrapePool
from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.api.conditions import ConditionType, set_condition
from latency_tuner.api.resource import GROUP, PLURAL, VERSION, InvalidLatencyTarget, LatencyTarget
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus, Phase
from latency_tuner.controller.attribution import (
    CHANGE_CAUSE,
    FIELD_MANAGER,
    Action,
    change_annotations,
    changed_arguments,
)
from latency_tuner.controller.ports import MetricsFor, Ports
from latency_tuner.controller.reconciler import Reconciler, owner_of
from latency_tuner.core.rollout import Note, Reason, baseline_container
from latency_tuner.core.sharding.claim import Holder, finalizer_for
from latency_tuner.core.trust import change_refusal, prometheus_url_refusal
from latency_tuner.handlers import caches
from latency_tuner.handlers.caches import CachedNodes, IndexedDeployments
from latency_tuner.handlers.condition_events import ConditionWarning, condition_warnings
from latency_tuner.handlers.sharding import ShardGate, interested
from latency_tuner.handlers.slots import ReconcileSlots, slot_key
from latency_tuner.settings import OperatorSettings
from latency_tuner.telemetry import OperatorMetrics

log = logging.getLogger("latency_tuner.operator")


def build_registry(
    config: OperatorSettings, *, metrics_for: MetricsFor | None = None
) -> kopf.OperatorRegistry:
    """A registry holding every handler, configured by ``config``.

    ``metrics_for`` replaces the metrics sources the settings name (tests, benchmarks).
    """
    registry = kopf.OperatorRegistry()
    resource = (GROUP, VERSION, PLURAL)
    # This process acts only on the targets of its shard, and only once it holds their claim.
    holder = Holder(pod=config.pod_name or socket.gethostname(), sharding=config.sharding)
    mine = interested(holder)

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.AiohttpSession:
        # The same credentials as our own client: in-cluster, else --kubeconfig / KUBECONFIG.
        client = await asyncio.to_thread(make_api_client, config.kubeconfig)
        info = connection_info(client.configuration)
        ssl = await asyncio.to_thread(info.as_ssl_context)  # reads the CA and key files
        return bounded_session(info, ssl, connections=kopf_connections(config.namespaces))

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
        # Progress and diff-base in annotations: .status belongs to the LatencyTarget's users.
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
            prefix="latencytuner.io"
        )
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix="latencytuner.io"
        )
        settings.persistence.finalizer = finalizer_for(config.sharding)
        settings.posting.level = logging.WARNING  # kopf's own log lines do not become Events
        # Events say "From: latency-tuner" (kubectl describe), from this pod.
        settings.posting.reporting_component = FIELD_MANAGER
        settings.posting.reporting_instance = os.environ.get("HOSTNAME") or socket.gethostname()
        settings.posting.event_name_prefix = f"{FIELD_MANAGER}-"
        settings.watching.server_timeout = 300
        selector = config.sharding.label_selector()
        if selector is not None:  # label mode: the API server sends only this shard's targets
            settings.watching.label_selectors[GROUP, PLURAL] = selector
        settings.watching.client_timeout = 330
        api_client = await asyncio.to_thread(make_api_client, config.kubeconfig)
        # The API server's audit log tells the shards apart, and the claims from the work.
        api_client.user_agent = f"{FIELD_MANAGER}/{holder.sharding.label} ({holder.pod})"
        claims_client = await asyncio.to_thread(make_api_client, config.kubeconfig)
        claims_client.user_agent = f"{FIELD_MANAGER}-claims/{holder.sharding.label} ({holder.pod})"
        metrics = OperatorMetrics()
        scrape = ScrapePool() if config.metrics_source == "scrape" else None
        memo.metrics = metrics
        memo.scrape = scrape
        memo.locks = defaultdict(asyncio.Lock)
        memo.slots = ReconcileSlots()
        memo.deployments = Deployments(api_client)
        memo.indexed = IndexedDeployments(memo.deployments)
        memo.latencytargets = LatencyTargets(api_client)
        memo.canaries = Canaries(api_client, memo.deployments)
        memo.gate = ShardGate(
            holder,
            lease_seconds=config.shard_lease_seconds,
            claims=ShardClaims(claims_client),
            targets=LatencyTargets(claims_client, calls=Calls("shard-claims-reads", workers=2)),
        )
        memo.reconciler = Reconciler(
            Ports(
                deployments=memo.indexed,
                nodes=CachedNodes(Nodes(api_client)),
                latencytargets=memo.latencytargets,
                metrics_for=metrics_for or _metrics_factory(config, scrape),
                pods_seen=scrape.pods_seen if scrape is not None else None,
                canaries=memo.canaries,
                quality=PodQualityProbe(ConfigMaps(api_client)),
            ),
            variant_images=config.variant_images,
        )
        memo.variant_images = config.variant_images
        if config.metrics_port:
            start_http_server(
                config.metrics_port, addr=config.metrics_address, registry=metrics.registry
            )

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: kopf.Memo, **_: Any) -> None:
        gate: ShardGate | None = memo.get("gate")
        if gate is not None:  # hand the targets over now rather than when the lease runs out
            await gate.release_all(memo.locks)
        scrape: ScrapePool | None = memo.get("scrape")
        if scrape is not None:
            await scrape.close()

    @kopf.on.probe(id="latencyTargets", registry=registry)
    def probe(memo: kopf.Memo, **_: Any) -> int:
        return len(memo.get("locks") or {})

    caches.register(registry)

    @kopf.index(*resource, id="claims", registry=registry)
    def claims(
        namespace: str | None, name: str, spec: kopf.Spec, meta: kopf.Meta, **_: Any
    ) -> dict[tuple[str | None, str | None], tuple[str, str]] | None:
        # Which targets name which Deployment, kept by kopf from its watch: finding a second
        # target for a Deployment costs no API call (a LIST per reconcile was quadratic).
        if meta.get("deletionTimestamp"):
            return None
        deployment = (spec.get("targetRef") or {}).get("name")
        return {(namespace, deployment): (str(meta.get("creationTimestamp", "")), name)}

    @kopf.on.resume(*resource, registry=registry, when=mine)
    @kopf.on.create(*resource, registry=registry, when=mine)
    @kopf.on.update(*resource, field="spec", registry=registry, when=mine)
    async def changed(body: kopf.Body, memo: kopf.Memo, **kwargs: Any) -> None:
        memo.indexed.attach(kwargs)
        await _reconcile(body, memo, kwargs["claims"])

    @kopf.timer(
        *resource, interval=config.interval_seconds, sharp=False, registry=registry, when=mine
    )
    async def tick(body: kopf.Body, memo: kopf.Memo, **kwargs: Any) -> None:
        memo.indexed.attach(kwargs)
        await _reconcile(body, memo, kwargs["claims"])

    @kopf.on.delete(*resource, registry=registry, when=kopf.all_([mine, _restore_wanted]))
    async def restore(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        await _restore(body, memo)

    @kopf.on.delete(*resource, registry=registry, when=kopf.all_([mine, _canary_in_flight]))
    async def remove_canary(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        async with memo.locks[(namespace, name)]:
            if not await memo.gate.may_act(body):
                raise kopf.TemporaryError("waiting for this shard's claim on the target", delay=10)
            await _remove_canary(body, memo)

    @kopf.on.delete(*resource, registry=registry, optional=True)
    async def forget(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        memo.metrics.forget(namespace, name)
        if memo.get("scrape") is not None:
            await memo.scrape.forget(namespace, name)
        memo.locks.pop((namespace, name), None)
        memo.gate.forget((namespace, name))

    return registry


def connection_info(c: Any) -> kopf.ConnectionInfo:
    """kopf's connection settings from a ``kubernetes.client.Configuration``."""
    header = c.get_api_key_with_prefix("BearerToken") or c.get_api_key_with_prefix("authorization")
    parts = header.split(" ", 1) if header else []
    scheme, token = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0] if parts else None)
    return kopf.ConnectionInfo(
        server=c.host,
        ca_path=c.ssl_ca_cert,
        insecure=not c.verify_ssl,
        scheme=scheme,
        token=token,
        certificate_path=c.cert_file,
        private_key_path=c.key_file,
    )


# kopf's own requests (progress and status patches, events) in flight to the API server at once,
# per process. kopf's default pool has no limit: at thousands of targets per process against a
# slow API server it held one connection per waiting patch (measured: 5,000-7,000 per shard at
# 2,500 targets each, until the node ran out of ephemeral ports). A real API server queues or
# refuses past its own in-flight limits (400 by default) anyway; waiting here is cheaper.
KOPF_REQUESTS = 64
# Long-lived watch streams per watched namespace (LatencyTargets, Deployments, CRDs, peering,
# and room): they hold their connection, so the limit leaves them this on top.
WATCH_STREAMS = 8


def kopf_connections(namespaces: tuple[str, ...]) -> int:
    """kopf's connection limit for the namespaces it watches (empty: the whole cluster)."""
    return KOPF_REQUESTS + WATCH_STREAMS * max(1, len(namespaces))


def bounded_session(
    info: kopf.ConnectionInfo, ssl: ssl_.SSLContext, *, connections: int
) -> kopf.AiohttpSession:
    """kopf's client session for ``info`` (``ssl``: its ``as_ssl_context()``), as kopf builds
    its own but holding at most ``connections`` connections: requests past them wait for one
    to come free."""
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections, ssl=ssl),
        headers=info.as_http_headers(),
        proxy=info.proxy_url,
        trust_env=info.trust_env,
    )
    return kopf.AiohttpSession(
        aiohttp_session=session,
        server=info.server,
        default_namespace=info.default_namespace,
        expiration=info.expiration,
    )


def _restore_wanted(spec: kopf.Spec, **_: Any) -> bool:
    return spec.get("onDelete") == "Restore"


def _canary_in_flight(status: kopf.Status, **_: Any) -> bool:
    # A finalizer while a canary runs: its removal and the replica given back must not wait
    # for the garbage collector (the ownerReference), nor depend on one.
    return bool((status.get("currentTrial") or {}).get("canary"))


async def _remove_canary(body: kopf.Body, memo: kopf.Memo) -> None:
    """Remove a canary trial's canary and give the main Deployment its replica back."""
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    fresh = await memo.latencytargets.get(namespace=namespace, name=name)
    status = LatencyTargetStatus.model_validate((fresh or body).get("status") or {})
    trial = status.current_trial
    if trial is None or trial.canary is None:
        return
    ref = (body.get("spec") or {}).get("targetRef") or {}
    deployments: Deployments = memo.deployments
    main = await deployments.get(namespace=namespace, name=ref.get("name", ""))
    if main is None:
        return
    canaries: Canaries = memo.canaries
    try:
        removed = await canaries.remove(main, owner_of(dict(fresh or body)))
        if main.rollout().replicas == trial.canary.main_replicas - 1:
            await canaries.scale(main, trial.canary.main_replicas)
    except Conflict as exc:
        raise kopf.TemporaryError("the Deployment changed while removing the canary", 2) from exc
    if removed:
        log.info("%s/%s: removed canary %s on deletion", namespace, name, trial.canary.name)


def _metrics_factory(config: OperatorSettings, scrape: ScrapePool | None) -> MetricsFor:
    sources: dict[str, PrometheusSource | BatchedPrometheus] = {}
    token = config.prometheus_bearer_token

    async def metrics_for(spec: LatencyTargetSpec, namespace: str, name: str) -> MetricsSource:
        if scrape is not None:
            return await scrape.source(spec, namespace, name)
        url = config.prometheus_url
        if spec.metrics.prometheus_url:
            if not config.allow_per_resource_prometheus_url:
                raise MetricsError(
                    "spec.metrics.prometheusUrl is set but this operator does not allow "
                    "per-resource Prometheus URLs (--allow-per-resource-prometheus-url)"
                )
            url = spec.metrics.prometheus_url
            refusal = prometheus_url_refusal(url, allowed_prefixes=config.prometheus_url_prefixes)
            if refusal is not None and url != config.prometheus_url:
                raise MetricsError(f"spec.metrics.prometheusUrl refused: {refusal}")
        if url is None:
            raise MetricsError("no Prometheus URL configured")
        if url not in sources:
            _forget_oldest_tenant_source(sources, keep=config.prometheus_url)
            # The operator's credentials go to the operator's own Prometheus only, never to a
            # URL a LatencyTarget wrote.
            own = url == config.prometheus_url
            bearer = token if own else None
            if own and bearer is None and config.prometheus_bearer_token_file:
                path = Path(config.prometheus_bearer_token_file)
                bearer = (await asyncio.to_thread(path.read_text)).strip()
            settings = PrometheusSettings(
                url=url,
                bearer_token=bearer,
                ca_file=config.prometheus_ca_file if own else None,
                timeout_seconds=config.prometheus_timeout_seconds,
            )
            if own:
                settings = replace(settings, max_response_bytes=BATCH_RESPONSE_BYTES)
            source = PrometheusSource(settings)
            # The operator's own Prometheus answers every target's latest window in one batch
            # per aggregate; a tenant's stays per target, batched with no one.
            sources[url] = (
                BatchedPrometheus(
                    source,
                    max_age=config.interval_seconds / 2,
                    max_targets=config.prometheus_max_targets_per_query,
                )
                if own
                else source
            )
        return sources[url]

    return metrics_for


# Each Prometheus has its own small thread pool; LatencyTargets naming many URLs of their own
# must not make the operator hold a pool for every one of them.
MAX_TENANT_SOURCES = 32
# A batch's grouped answers hold a row per pod (per bucket for quantiles): far more than one
# target's few hundred bytes, from the Prometheus the operator was configured with.
BATCH_RESPONSE_BYTES = 256 * 1024 * 1024


_Source = TypeVar("_Source", bound=PrometheusSource | BatchedPrometheus)


def _forget_oldest_tenant_source(sources: dict[str, _Source], *, keep: str | None) -> None:
    tenants = [url for url in sources if url != keep]
    if len(tenants) >= MAX_TENANT_SOURCES:
        sources.pop(tenants[0]).close()  # a target still using it gets a new one next time


async def _reconcile(body: kopf.Body, memo: kopf.Memo, claims: Any) -> None:
    """``claims``: the kopf index of targets by (namespace, Deployment)."""
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    metrics: OperatorMetrics = memo.metrics
    key = slot_key(namespace, name, body.get("spec") or {}, scraped=memo.get("scrape") is not None)
    async with memo.locks[(namespace, name)], memo.slots.slot(key):
        if body["metadata"].get("deletionTimestamp"):
            # A timer that waited for the lock behind the delete handlers (kopf stops timers
            # on deletion but lets a running one finish): after the restore it must not patch
            # the Deployment again, nor record series that ``forget`` removes.
            return
        try:
            if not await memo.gate.may_act(body):
                return  # another shard's target, or its claim is still live
        except KubernetesError as exc:
            raise kopf.TemporaryError(f"shard claim: {exc}", delay=10) from exc
        with metrics.reconcile_seconds.labels(namespace, name).time():
            try:
                deployment = (body.get("spec") or {}).get("targetRef", {}).get("name")
                same = list(claims.get((namespace, deployment), []))
                outcome = await memo.reconciler.run(dict(body), claims=same)
            except KubernetesError as exc:
                metrics.errors.labels(namespace, name, "kubernetes").inc()
                log.warning(
                    "%s/%s: Kubernetes API failed, retrying in 10s: %s", namespace, name, exc
                )
                raise kopf.TemporaryError(f"Kubernetes API: {exc}", delay=10) from exc
            except Exception as exc:
                # A bug or an input nothing foresaw: never silence. The target says so on its
                # Ready condition and in a Warning event, and kopf retries later.
                metrics.errors.labels(namespace, name, "unexpected").inc()
                log.exception("reconcile of %s/%s failed", namespace, name)
                await _report_failure(body, memo, exc)
                raise kopf.TemporaryError(f"reconcile failed: {exc!r}", delay=30) from exc
    # kopf's body is a live view: compare with the status the reconcile itself started from.
    before = outcome.initial or LatencyTargetStatus()
    after = outcome.status
    warnings = condition_warnings(before, after, outcome.notes) if after is not None else []
    for note in [*outcome.notes, *warnings]:
        metrics.events.labels(namespace, name, note.reason).inc()
        kopf.event(body, type=note.type, reason=note.reason, message=note.message)
    _log_decisions(namespace, name, outcome.transitions, [*outcome.notes, *warnings])
    for cause in outcome.changes:
        log.info("%s/%s: patched the Deployment: %s", namespace, name, cause)
    metrics.patches.labels(namespace, name).inc(outcome.patched)
    if after is None:
        return
    finished = {t.id for t in after.trials} - {t.id for t in before.trials}
    for trial in after.trials:
        if trial.id in finished and trial.verdict is not None:
            metrics.trials.labels(namespace, name, trial.verdict.value).inc()
    if any(n.reason.rolls_back for n in outcome.notes):
        metrics.rollbacks.labels(namespace, name).inc()
    try:
        spec = LatencyTarget.from_manifest(dict(body)).spec
    except InvalidLatencyTarget:
        return
    metrics.record_status(namespace, name, spec, after)


def _log_decisions(
    namespace: str,
    name: str,
    transitions: list[tuple[Phase, Phase]],
    notes: list[Note | ConditionWarning],
) -> None:
    """One line per phase change and per event: what the operator decided, and on which target."""
    for old, new in transitions:
        log.info("%s/%s: phase %s -> %s", namespace, name, old.value, new.value)
    for note in notes:
        level = logging.WARNING if note.type == "Warning" else logging.INFO
        log.log(level, "%s/%s: %s: %s", namespace, name, note.reason, note.message)


async def _report_failure(body: kopf.Body, memo: kopf.Memo, exc: Exception) -> None:
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    first = (str(exc).strip().splitlines() or [""])[0][:300]  # one line, never a dump
    message = f"the reconcile failed ({type(exc).__name__}: {first}); retrying"
    note = Reason.RECONCILE_ERROR.note(message)
    memo.metrics.events.labels(namespace, name, note.reason).inc()
    kopf.event(body, type=note.type, reason=note.reason, message=note.message)
    with contextlib.suppress(Exception):  # the status write may be what fails
        fresh = await memo.latencytargets.get(namespace=namespace, name=name)
        status = LatencyTargetStatus.model_validate((fresh or {}).get("status") or {})
        generation = int(((fresh or {}).get("metadata") or {}).get("generation") or 1)
        conditions = set_condition(
            status.conditions,
            ConditionType.READY,
            False,
            note.reason.value,
            message,
            datetime.now(UTC),
            generation,
        )
        await memo.latencytargets.write_status(
            namespace=namespace,
            name=name,
            status=status.model_copy(update={"conditions": conditions}),
        )


async def _restore(body: kopf.Body, memo: kopf.Memo) -> None:
    """Put the container back as it was before the first change, then let the object go."""
    status = LatencyTargetStatus.model_validate(body.get("status") or {})
    spec = body.get("spec") or {}
    ref = spec.get("targetRef") or {}
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    # Under the object's lock: a reconcile in flight must not patch after the restore.
    async with memo.locks[(namespace, name)]:
        if not await memo.gate.may_act(body):
            # Another shard still holds the target: it restores, or we do once it lets go.
            raise kopf.TemporaryError("waiting for this shard's claim on the target", delay=10)
        await _remove_canary(body, memo)  # a canary in flight goes first
        fresh = await memo.latencytargets.get(namespace=namespace, name=name)
        if fresh is not None:
            status = LatencyTargetStatus.model_validate(fresh.get("status") or {})
        await _restore_locked(body, memo, status, ref, namespace)


async def _restore_locked(
    body: kopf.Body,
    memo: kopf.Memo,
    status: LatencyTargetStatus,
    ref: dict[str, Any],
    namespace: str,
) -> None:
    if status.baseline is None:
        return
    deployments: Deployments = memo.deployments
    view = await deployments.get(namespace=namespace, name=ref.get("name", ""))
    if view is None:
        return
    original = baseline_container(status.baseline)
    container = ref.get("container")
    current = view.container_config(container)
    if current.fingerprint() == original.fingerprint():
        return
    # The baseline is read from the status, which others than the operator can write: restore
    # only what the knob catalog could have changed, never a container the status invents.
    try:
        spec = LatencyTarget.from_manifest(dict(body)).spec
        refusal = change_refusal(
            current, original, spec, allowed_images=memo.get("variant_images") or ()
        )
    except InvalidLatencyTarget as exc:
        refusal = f"the LatencyTarget is invalid ({exc})"
    if refusal is not None:
        note = Reason.CHANGE_REFUSED.note(f"restore refused, Deployment left as is: {refusal}")
        kopf.event(body, type=note.type, reason=note.reason, message=note.message)
        return
    annotations = change_annotations(
        namespace=str(body["metadata"]["namespace"]),
        name=str(body["metadata"]["name"]),
        action=Action.RESTORE,
        before=current,
        after=original,
    )
    try:
        await deployments.patch_container(
            view, container=container, config=original, annotations=annotations
        )
    except Conflict as exc:
        raise kopf.TemporaryError("the Deployment changed while restoring", delay=2) from exc
    # kopf.event, not kopf.info: info is filtered by settings.posting.level (WARNING here).
    changes = "; ".join(changed_arguments(current, original))
    note = Reason.RESTORED.note(
        f"restored the original arguments of Deployment {view.name}: {changes}"
    )
    kopf.event(body, type=note.type, reason=note.reason, message=note.message)
    log.info(
        "%s/%s: patched the Deployment: %s",
        namespace,
        body["metadata"]["name"],
        annotations[CHANGE_CAUSE],
    )
