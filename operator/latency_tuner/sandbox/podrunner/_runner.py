"""``PodRunner``: the sandbox's Deployment controller and scheduler, driving the kubelet.

It watches Deployments of some namespaces over HTTP (a list every ``resync_seconds``, sooner
when something changes) and does what the deployment controller, the ReplicaSet controller and
the scheduler do: ReplicaSets per template with revisions, pods created and stopped as
``_rollout.plan_scale`` says, pods bound to nodes by free GPUs (``_rollout.first_fit``), the
status of Deployments and ReplicaSets (``_rollout.compute_status``). Starting, probing and
stopping the processes is the kubelet's (``_kubelet``); what process runs is the engine's.

It never touches objects it did not create, except Deployments' status and revision annotation.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import copy
import logging
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from latency_tuner.sandbox.podrunner._api import ApiClient, Body
from latency_tuner.sandbox.podrunner._engine import (
    PodEngine,
    SimulatorEngine,
    gpu_limit,
    vllm_container,
)
from latency_tuner.sandbox.podrunner._kubelet import Kubelet
from latency_tuner.sandbox.podrunner._nodes import GPU_RESOURCE, NodeHardware
from latency_tuner.sandbox.podrunner._objects import (
    REVISION_ANNOTATION,
    deployment_path,
    key_of,
    owner,
    pod_body,
    replicaset_annotations,
    replicaset_body,
)
from latency_tuner.sandbox.podrunner._pod import PodInfo, PodState
from latency_tuner.sandbox.podrunner._rollout import (
    ALPHABET,
    Counts,
    compute_status,
    first_fit,
    plan_scale,
    template_hash,
    unschedulable_message,
)
from latency_tuner.sandbox.prometheus import Target, free_port

logger = logging.getLogger("latency_tuner.sandbox.podrunner")
CLOSE_SECONDS = 30.0  # each step of a close; then what is left is killed


async def _bounded(what: str, step: asyncio.Future[Any]) -> None:
    try:
        await asyncio.wait_for(step, CLOSE_SECONDS)
    except TimeoutError:
        pending = [t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        logger.warning("close: %s still running after %gs: %s", what, CLOSE_SECONDS, pending)


@dataclass
class _DeploymentState:
    uid: str
    revisions: dict[str, int] = field(default_factory=dict)  # template hash -> revision
    rs_uids: dict[str, str] = field(default_factory=dict)  # RS name -> uid
    rs_written: dict[str, Body] = field(default_factory=dict)
    pods: dict[str, PodState] = field(default_factory=dict)
    current_hash: str | None = None


class PodRunner:
    """Runs Deployments of ``namespaces`` as processes (an async context manager).

    ::

        async with PodRunner(api.url, namespaces=["llm"], hardware=NodeHardware("H100-SXM")):
            ...  # create Deployments through the API; pods appear and run

    ``targets()`` lists the ready pods for Prometheus (address + namespace/pod/container labels);
    ``add_listener(fn)`` calls ``fn()`` whenever that list changes. ``backoff`` is the crash
    back-off (first, cap) in seconds; ``drain_seconds`` the wait between taking a ready pod out of
    ``endpoints()``/``targets()`` and stopping it (what a preStop sleep gives a Service).
    ``engine`` chooses what runs a container; by default the simulator
    (``SimulatorEngine(python, sim_seed, sim_options)``).
    """

    def __init__(
        self,
        api_url: str,
        *,
        namespaces: Sequence[str] = ("default",),
        hardware: NodeHardware | None = None,
        python: str = sys.executable,
        log_dir: str | Path | None = None,
        resync_seconds: float = 0.2,
        backoff: tuple[float, float] = (1.0, 10.0),
        drain_seconds: float = 0.5,
        grace_seconds: float = 5.0,
        sim_seed: int = 0,
        sim_options: Sequence[str] = (),
        engine: PodEngine | None = None,
    ) -> None:
        self.api_url = api_url
        self.namespaces = list(namespaces)
        self.hardware = hardware or NodeHardware()
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="lt-pods-"))
        self.resync_seconds = resync_seconds
        self.drain_seconds = drain_seconds
        self._api = ApiClient(api_url)
        self.kubelet = Kubelet(
            self._api,
            engine or SimulatorEngine(python=python, seed=sim_seed, options=tuple(sim_options)),
            gpu=self.hardware.gpu,
            backoff=backoff,
            grace_seconds=grace_seconds,
            on_ready_change=self._notify,
            on_published=self._wake_up,
        )
        self._deployments: dict[tuple[str, str], _DeploymentState] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False  # the control loop's own stop: a cancel alone can be lost
        self._background: set[asyncio.Task[Any]] = set()
        self._listeners: list[Callable[[], None]] = []
        self._last_targets: list[Target] = []
        self.errors: list[str] = []  # reconcile errors, newest last (also logged)

    # -- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._api.open()
        self.kubelet.open()
        atexit.register(self.kubelet.kill_all_now)
        try:
            for name in self.hardware.node_names():
                await self._ensure_node(name)
            self._loop_task = asyncio.create_task(self._run(), name="podrunner")
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop the control loop and every process (TERM to each process group, then KILL)."""
        if self._loop_task is not None:
            # Python 3.11's wait_for can swallow a cancel that lands as its wait ends (the
            # loop's resync wait ends every resync_seconds): the flag ends the loop then, and
            # the wait is bounded either way (a 300 s teardown hang in CI, 2026-12-05).
            self._closing = True
            self._loop_task.cancel()
            await _bounded("control loop", asyncio.gather(self._loop_task, return_exceptions=True))
            self._loop_task = None
        pods = [p for s in self._deployments.values() for p in s.pods.values()]
        for pod in pods:
            if pod.task is not None:
                pod.task.cancel()
        tasks = [p.task for p in pods if p.task is not None] + list(self._background)
        for task in self._background:
            task.cancel()
        # Bounded: a task that does not end (a hang seen once in CI under load, cause unknown)
        # must not hold the teardown; what is still alive is killed below, and named.
        await _bounded("pod tasks", asyncio.gather(*tasks, return_exceptions=True))
        await _bounded(
            "pod stops",
            asyncio.gather(*(self.kubelet.stop(p) for p in pods), return_exceptions=True),
        )
        self.kubelet.kill_all_now()
        # Like a node that goes away: the Pods stay, but nothing may block their deletion.
        for pod in pods:
            path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
            with contextlib.suppress(httpx.HTTPError, RuntimeError):
                await self._api.request("PATCH", path, {"metadata": {"finalizers": None}})
        self._deployments.clear()
        self._notify()
        await self._api.aclose()
        await self.kubelet.aclose()
        atexit.unregister(self.kubelet.kill_all_now)

    # -- what others read ----------------------------------------------------------------------

    @property
    def client(self) -> httpx.AsyncClient:
        return self._api.client

    def pods(self) -> list[PodInfo]:
        """Every pod the runner manages now (terminating ones included)."""
        out = [pod.info() for state in self._deployments.values() for pod in state.pods.values()]
        return sorted(out, key=lambda p: (p.namespace, p.name))

    def targets(self) -> list[Target]:
        """Ready pods as scrape targets: ``127.0.0.1:PORT`` with namespace/pod/container."""
        return [
            Target(
                f"127.0.0.1:{p.port}",
                {"namespace": p.namespace, "pod": p.name, "container": p.container},
            )
            for p in self.pods()
            if p.ready
        ]

    def endpoints(
        self,
        namespace: str | None = None,
        deployment: str | None = None,
        *,
        labels: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Base URLs of ready pods (what a Service would route to): of one Deployment, or,
        given ``labels`` (a Service's selector), of every pod carrying them (a canary's
        pods carry the main Deployment's pod labels, so a Service reaches them too)."""
        return [
            p.url
            for p in self.pods()
            if p.ready
            and (namespace is None or p.namespace == namespace)
            and (deployment is None or p.deployment == deployment)
            and (labels is None or labels.items() <= p.labels.items())
        ]

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (on the event loop) whenever ``targets()`` changes."""
        self._listeners.append(listener)

    def _wake_up(self) -> None:
        self._wake.set()

    def _notify(self) -> None:
        self._wake.set()
        current = self.targets()
        if current == self._last_targets:
            return
        self._last_targets = current
        for listener in self._listeners:
            try:
                listener()
            except Exception:
                logger.exception("a PodRunner listener failed")

    async def _ensure_node(self, name: str) -> None:
        manifest = self.hardware.node_manifest(name)
        existing = await self._api.request("GET", f"/api/v1/nodes/{name}")
        if existing is None:
            await self._api.request(
                "POST", "/api/v1/nodes", manifest, content_type="application/json"
            )
        else:
            patch = {"metadata": {"labels": manifest["metadata"]["labels"]}}
            await self._api.request("PATCH", f"/api/v1/nodes/{name}", patch)

    # -- the control loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closing:
            self._wake.clear()
            try:
                await self._reconcile_all()
            except Exception as exc:  # the control loop outlives any one bad request
                self._record(exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.resync_seconds)

    def _record(self, exc: Exception, where: str = "") -> None:
        message = f"{where}{type(exc).__name__}: {exc}"
        if not self.errors or self.errors[-1] != message:
            logger.warning("pod runner: %s", message)
            self.errors.append(message)
            del self.errors[:-50]

    async def _reconcile_all(self) -> None:
        seen: set[tuple[str, str]] = set()
        for namespace in self.namespaces:
            path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
            listing = await self._api.request("GET", path) or {}
            for deployment in listing.get("items", []):
                key = (namespace, str(deployment["metadata"]["name"]))
                seen.add(key)
                try:
                    await self._sync(deployment)
                except Exception as exc:  # one bad Deployment must not stall the others
                    self._record(exc, f"deployment {key[0]}/{key[1]}: ")
            await self._reap_deleted_pods(namespace)
        for key in [k for k in self._deployments if k not in seen]:
            state = self._deployments[key]
            if not state.pods:
                await self._delete_replicasets(key, state)
                del self._deployments[key]
                continue
            for pod in list(state.pods.values()):
                self._start_termination(state, pod)

    async def _reap_deleted_pods(self, namespace: str) -> None:
        """Pods someone deleted (kubectl, a namespace deletion): stop them like a kubelet."""
        listing = await self._api.request("GET", f"/api/v1/namespaces/{namespace}/pods") or {}
        deleted = {
            p["metadata"]["name"]
            for p in listing.get("items", [])
            if p["metadata"].get("deletionTimestamp")
        }
        present = {p["metadata"]["name"] for p in listing.get("items", [])}
        for (ns, _), state in self._deployments.items():
            if ns != namespace:
                continue
            for pod in list(state.pods.values()):
                if pod.published is not None and pod.name not in present and not pod.terminating:
                    self._start_termination(state, pod)  # deleted without our finalizer
                elif pod.name in deleted and not pod.terminating:
                    self._start_termination(state, pod)

    async def _sync(self, deployment: Body) -> None:
        meta, spec = deployment["metadata"], deployment.get("spec") or {}
        key = (str(meta["namespace"]), str(meta["name"]))
        state = self._deployments.get(key)
        if state is not None and state.uid != meta.get("uid"):  # deleted and created again
            for pod in list(state.pods.values()):
                self._start_termination(state, pod)
            if state.pods:
                return
            await self._delete_replicasets(key, state)
            state = None
        if state is None:
            state = self._deployments[key] = _DeploymentState(uid=str(meta.get("uid")))
        template: Body = copy.deepcopy(spec.get("template") or {})
        thash = template_hash(template)
        paused = bool(spec.get("paused"))
        new_rs_created = False
        if not paused and state.current_hash != thash:
            # A template seen before (a rollback) takes its ReplicaSet back with a new revision.
            new_rs_created = thash not in state.revisions
            revision = max(state.revisions.values(), default=0) + 1
            await self._ensure_replicaset(deployment, state, thash, template, revision)
            patch = {"metadata": {"annotations": {REVISION_ANNOTATION: str(revision)}}}
            await self._api.request("PATCH", f"{deployment_path(*key)}", patch)
            state.revisions[thash], state.current_hash = revision, thash
        current = state.current_hash or thash
        if not paused:
            await self._scale(deployment, state, current, template)
        self._schedule(state)
        await self._write_status(deployment, state, current, new_rs_created)

    async def _scale(
        self, deployment: Body, state: _DeploymentState, thash: str, template: Body
    ) -> None:
        spec = deployment.get("spec") or {}
        plan = plan_scale(spec, list(state.pods.values()), thash, time.monotonic())
        for _ in range(plan.create):
            await self._create_pod(deployment, state, thash, template)
        for pod in plan.stop:
            self._start_termination(state, pod)

    def _schedule(self, state: _DeploymentState) -> None:
        """Bind pending pods to a node with enough free GPUs (first fit, in creation order)."""
        used: dict[str, int] = dict.fromkeys(self.hardware.node_names(), 0)
        for other in self._deployments.values():
            for pod in other.pods.values():
                if pod.node is not None:
                    used[pod.node] = used.get(pod.node, 0) + pod.gpus
        for pod in sorted(state.pods.values(), key=lambda p: p.created):
            if pod.node is not None or pod.terminating:
                continue
            node = first_fit(used, pod.gpus, self.hardware.gpus)
            if node is None:
                message = unschedulable_message(len(used), GPU_RESOURCE)
                if pod.unschedulable != message:
                    pod.unschedulable = message
                    self._spawn(self.kubelet.publish(pod))
                continue
            used[node] += pod.gpus
            pod.node, pod.unschedulable = node, None
            pod.task = asyncio.create_task(self.kubelet.supervise(pod), name=f"pod {pod.name}")

    # -- objects ---------------------------------------------------------------------------------

    async def _ensure_replicaset(
        self, deployment: Body, state: _DeploymentState, thash: str, template: Body, number: int
    ) -> None:
        meta = deployment["metadata"]
        name = f"{meta['name']}-{thash}"
        path = f"/apis/apps/v1/namespaces/{meta['namespace']}/replicasets"
        if name in state.rs_uids:
            patch = {"metadata": {"annotations": replicaset_annotations(deployment, number)}}
            await self._api.request("PATCH", f"{path}/{name}", patch)
            return
        body = replicaset_body(deployment, thash, template, number)
        existing = await self._api.request("GET", f"{path}/{name}")
        if existing is not None:  # left by an earlier Deployment of that name: adopt it
            await self._api.request("PUT", f"{path}/{name}", body, content_type="application/json")
            state.rs_uids[name] = str(existing["metadata"]["uid"])
            return
        created = await self._api.request("POST", path, body, content_type="application/json")
        if created is not None:
            state.rs_uids[name] = str(created["metadata"]["uid"])

    async def _delete_replicasets(self, key: tuple[str, str], state: _DeploymentState) -> None:
        for name in state.rs_uids:
            await self._api.request(
                "DELETE", f"/apis/apps/v1/namespaces/{key[0]}/replicasets/{name}"
            )

    async def _create_pod(
        self, deployment: Body, state: _DeploymentState, thash: str, template: Body
    ) -> None:
        meta = deployment["metadata"]
        namespace, dname = str(meta["namespace"]), str(meta["name"])
        rs = f"{dname}-{thash}"
        name = f"{rs}-{''.join(secrets.choice(ALPHABET) for _ in range(5))}"
        _, container = vllm_container(template)
        pod = PodState(
            namespace=namespace,
            name=name,
            deployment=dname,
            template_hash=thash,
            template=template,
            container_name=str(container.get("name", "")),
            rs=rs,
            gpus=gpu_limit(container),
            port=free_port(),
            log_path=self.log_dir / f"{namespace}_{name}.log",
        )
        owners = (
            [owner("apps/v1", "ReplicaSet", {"name": rs, "uid": state.rs_uids[rs]})]
            if rs in state.rs_uids
            else []
        )
        body = pod_body(namespace, name, template, thash, pod.port, owners)
        state.pods[name] = pod  # before the await: the next pass must count it
        try:
            await self._api.request(
                "POST",
                f"/api/v1/namespaces/{namespace}/pods",
                body,
                content_type="application/json",
            )
        except BaseException:
            del state.pods[name]
            raise
        pod.published = {}

    async def _write_status(
        self, deployment: Body, state: _DeploymentState, thash: str, new_rs_created: bool
    ) -> None:
        spec = deployment.get("spec") or {}
        min_ready = float(spec.get("minReadySeconds", 0))
        now = time.monotonic()
        counts = Counts.of(list(state.pods.values()), thash, min_ready, now)
        rs_name = f"{deployment['metadata']['name']}-{thash}"
        status = compute_status(
            deployment, counts, rs_name=rs_name, new_rs_created=new_rs_created, now=time.time()
        )
        # The API omits zero counts (omitempty); null deletes them in a merge patch.
        patch = {k: (v if v != 0 else None) for k, v in status.items()}
        current = deployment.get("status") or {}
        wanted = {k: v for k, v in patch.items() if v is not None}
        if wanted != current:
            path = f"{deployment_path(*key_of(deployment))}/status"
            await self._api.request("PATCH", path, {"status": patch})
        await self._write_replicaset_status(deployment, state, min_ready, now)

    async def _write_replicaset_status(
        self, deployment: Body, state: _DeploymentState, min_ready: float, now: float
    ) -> None:
        namespace = deployment["metadata"]["namespace"]
        for rs in state.rs_uids:
            pods = [p for p in state.pods.values() if p.rs == rs and not p.terminating]
            counts = {
                "replicas": len(pods),
                "fullyLabeledReplicas": len(pods),
                "readyReplicas": sum(1 for p in pods if p.ready),
                "availableReplicas": sum(1 for p in pods if p.available(min_ready, now)),
            }
            wanted = {"spec": {"replicas": len(pods)}, "status": counts}
            if state.rs_written.get(rs) == wanted:
                continue
            path = f"/apis/apps/v1/namespaces/{namespace}/replicasets/{rs}"
            patched = await self._api.request("PATCH", path, {"spec": wanted["spec"]}) or {}
            generation = (patched.get("metadata") or {}).get("generation", 1)
            status = {k: (v or None) for k, v in counts.items()}
            status["observedGeneration"] = generation
            await self._api.request("PATCH", f"{path}/status", {"status": status})
            state.rs_written[rs] = wanted

    def _start_termination(self, state: _DeploymentState, pod: PodState) -> None:
        if pod.terminating:
            return
        was_ready = pod.ready
        pod.terminating = True
        self._notify()
        self._spawn(self._terminate(state, pod, drain=was_ready))

    async def _terminate(self, state: _DeploymentState, pod: PodState, *, drain: bool) -> None:
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        try:
            await self._api.request("DELETE", path)
            if drain and self.drain_seconds > 0:
                await asyncio.sleep(self.drain_seconds)
            if pod.task is not None:
                pod.task.cancel()
                await asyncio.gather(pod.task, return_exceptions=True)
            await self.kubelet.stop(pod)
            await self._api.request("PATCH", path, {"metadata": {"finalizers": None}})
        finally:
            state.pods.pop(pod.name, None)
            self._notify()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
