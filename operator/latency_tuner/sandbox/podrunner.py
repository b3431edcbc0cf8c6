"""The Deployment controller and the kubelet of the sandbox: Deployments become simulator processes.

``PodRunner`` watches Deployments in some namespaces of an API server (over HTTP, like any
controller) and, for each, keeps ``spec.replicas`` pods of its current template running. A pod
is one ``latency-tuner sim`` process on a free 127.0.0.1 port, started from the container's
vLLM command line (``--host/--port`` replaced), with the GPU limit (``nvidia.com/gpu``) as
``--sim-gpus`` and the node's GPU product as ``--sim-gpu``. It writes what Kubernetes writes:

- Nodes with NVIDIA GPU feature-discovery labels; pods are scheduled onto them by free GPUs
  (a pod that fits nowhere stays ``Pending`` with ``PodScheduled=False/Unschedulable``).
- ReplicaSets ``<deployment>-<pod-template-hash>`` and Pods
  ``<deployment>-<hash>-<5 chars>`` (template labels + ``pod-template-hash``, ``nodeName``).
- Pod status as the kubelet reports it: ``Pending``/``ContainerCreating``, ``Running``,
  ``Ready`` once ``/health`` answers 200, and on a crash ``restartCount`` + 1,
  ``lastState.terminated`` (exit code, ``Error``) and ``waiting: CrashLoopBackOff`` during an
  exponential back-off (kubelet: 10 s doubling to 5 min; here ``backoff`` scales it down).
- Rolling updates with the controller's arithmetic (``maxSurge``/``maxUnavailable``, 25 % each
  by default: one surge pod and none unavailable for one replica), ``Recreate``, scaling,
  ``minReadySeconds``, ``paused``; Deployment status through the status subresource with
  ``observedGeneration``, replica counts, ``Available`` and ``Progressing`` conditions
  (``NewReplicaSetCreated``, ``ReplicaSetUpdated``, ``NewReplicaSetAvailable``,
  ``ProgressDeadlineExceeded`` after ``progressDeadlineSeconds`` without progress).
- Deleting a Deployment (or a Pod, or the namespace) stops the processes and removes the
  objects. Pods carry a finalizer of ours so that a deleted pod shows ``Terminating`` until its
  process is gone, as with a real kubelet.

Every process runs in its own process group and is stopped on exit (also on errors and
cancellation; an ``atexit`` hook kills what an abandoned event loop left). It never touches
objects it did not create, except Deployments' status and revision annotation.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import copy
import datetime
import hashlib
import json
import logging
import math
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import httpx

from latency_tuner.sandbox.prometheus import Target, free_port
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

__all__ = [
    "FINALIZER",
    "NodeHardware",
    "PodInfo",
    "PodRunner",
    "compute_status",
    "gpu_label_value",
    "resolve_strategy",
    "sim_argv",
    "template_hash",
]

logger = logging.getLogger(__name__)

Body = dict[str, Any]
FINALIZER = "sandbox.latencytuner.io/kubelet"
PORT_ANNOTATION = "sandbox.latencytuner.io/port"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
GPU_RESOURCE = "nvidia.com/gpu"
# Kubernetes' SafeEncodeString alphabet: no vowels, no look-alike digits.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_ENV_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")

# nvidia.com/gpu.product values GPU feature discovery writes for the simulator's GPUs.
_GPU_LABELS = {
    "H200": "NVIDIA-H200",
    "H100-SXM": "NVIDIA-H100-80GB-HBM3",
    "H100-PCIe": "NVIDIA-H100-PCIe",
    "A100-80G": "NVIDIA-A100-SXM4-80GB",
    "A100-80G-PCIe": "NVIDIA-A100-80GB-PCIe",
    "L40S": "NVIDIA-L40S",
    "L4": "NVIDIA-L4",
    "A10G": "NVIDIA-A10G",
}


def gpu_label_value(gpu: str) -> str:
    """The ``nvidia.com/gpu.product`` label value for a simulator GPU name."""
    return _GPU_LABELS.get(gpu, gpu)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str | None) -> float:
    if not text:
        return 0.0
    parsed = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    return parsed.replace(tzinfo=datetime.UTC).timestamp()


def _encode(digest: bytes, length: int) -> str:
    number = int.from_bytes(digest, "big")
    chars = []
    for _ in range(length):
        number, rest = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[rest])
    return "".join(chars)


def template_hash(template: Mapping[str, Any]) -> str:
    """A stable 10-character hash of a pod template (the role of ``pod-template-hash``)."""
    canonical = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return _encode(hashlib.sha256(canonical.encode()).digest(), 10)


# --------------------------------------------------------------------------------------------
# Pure controller arithmetic
# --------------------------------------------------------------------------------------------


def _int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        scaled = int(value[:-1]) * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(value)


def resolve_strategy(spec: Mapping[str, Any]) -> tuple[str, int, int]:
    """(type, maxSurge, maxUnavailable) with the API defaults (RollingUpdate, 25 %, 25 %);
    surge rounds up and unavailability down, and both zero means one unavailable (as in Go)."""
    strategy = spec.get("strategy") or {}
    kind = str(strategy.get("type") or "RollingUpdate")
    if kind == "Recreate":
        return kind, 0, 0
    rolling = strategy.get("rollingUpdate") or {}
    replicas = int(spec.get("replicas", 1))
    surge = _int_or_percent(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = _int_or_percent(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return kind, surge, min(unavailable, replicas)


@dataclass(frozen=True)
class Counts:
    """What the controller counts from the pods: its ``calculateStatus`` inputs."""

    replicas: int  # active (not terminating) pods
    updated: int  # active pods of the current template
    ready: int
    available: int


def _condition(kind: str, status: str, reason: str, message: str, now: str) -> Body:
    return {
        "type": kind,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def set_condition(conditions: list[Body], new: Body) -> list[Body]:
    """``SetDeploymentCondition``: same status and reason changes nothing; same status keeps
    the transition time."""
    current = next((c for c in conditions if c.get("type") == new["type"]), None)
    if current is not None:
        if current.get("status") == new["status"] and current.get("reason") == new["reason"]:
            return conditions
        if current.get("status") == new["status"]:
            new = {**new, "lastTransitionTime": current.get("lastTransitionTime")}
    return [c for c in conditions if c.get("type") != new["type"]] + [new]


def compute_status(
    deployment: Mapping[str, Any],
    counts: Counts,
    *,
    rs_name: str,
    new_rs_created: bool,
    now: float,
) -> Body:
    """The Deployment status the controller would write (``calculateStatus`` followed by
    ``syncRolloutStatus``), given the object as last read and the pods counted now."""
    spec = deployment.get("spec") or {}
    old: Mapping[str, Any] = deployment.get("status") or {}
    desired = int(spec.get("replicas", 1))
    _, _, max_unavailable = resolve_strategy(spec)
    stamp = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions: list[Body] = [dict(c) for c in old.get("conditions") or []]
    deadline = spec.get("progressDeadlineSeconds", 600)
    paused = bool(spec.get("paused"))
    if new_rs_created and deadline is not None:
        msg = f'Created new replica set "{rs_name}"'
        conditions = set_condition(
            conditions, _condition("Progressing", "True", "NewReplicaSetCreated", msg, stamp)
        )
    status: Body = {
        "observedGeneration": int(deployment["metadata"].get("generation", 1)),
        "replicas": counts.replicas,
        "updatedReplicas": counts.updated,
        "readyReplicas": counts.ready,
        "availableReplicas": counts.available,
        "unavailableReplicas": max(counts.replicas - counts.available, 0),
    }
    if counts.available >= desired - max_unavailable:
        available = _condition(
            "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.",
            stamp,
        )  # fmt: skip
    else:
        available = _condition(
            "Available", "False", "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.", stamp,
        )  # fmt: skip
    conditions = set_condition(conditions, available)
    if paused:
        msg = "Deployment is paused"
        conditions = set_condition(
            conditions, _condition("Progressing", "Unknown", "DeploymentPaused", msg, stamp)
        )
    elif deadline is None:
        conditions = [c for c in conditions if c.get("type") != "Progressing"]
    else:
        conditions = _progress(conditions, old, status, desired, rs_name, int(deadline), now, stamp)
    status["conditions"] = conditions
    return status


def _progress(
    conditions: list[Body],
    old: Mapping[str, Any],
    new: Mapping[str, int],
    desired: int,
    rs_name: str,
    deadline: int,
    now: float,
    stamp: str,
) -> list[Body]:
    """``syncRolloutStatus``: complete, progressing (lastUpdateTime moves), or timed out."""
    current = next((c for c in conditions if c.get("type") == "Progressing"), None)
    complete_before = (
        new["replicas"] == new["updatedReplicas"]
        and current is not None
        and current.get("reason") == "NewReplicaSetAvailable"
    )
    if complete_before:
        return conditions
    complete = new["updatedReplicas"] == desired == new["replicas"] == new["availableReplicas"]
    old_old = int(old.get("replicas", 0)) - int(old.get("updatedReplicas", 0))
    progressed = (
        new["updatedReplicas"] > int(old.get("updatedReplicas", 0))
        or new["replicas"] - new["updatedReplicas"] < old_old
        or new["readyReplicas"] > int(old.get("readyReplicas", 0))
        or new["availableReplicas"] > int(old.get("availableReplicas", 0))
    )
    if complete:
        msg = f'ReplicaSet "{rs_name}" has successfully progressed.'
        cond = _condition("Progressing", "True", "NewReplicaSetAvailable", msg, stamp)
        return set_condition(conditions, cond)
    if progressed:
        msg = f'ReplicaSet "{rs_name}" is progressing.'
        cond = _condition("Progressing", "True", "ReplicaSetUpdated", msg, stamp)
        if current is not None and current.get("status") == "True":
            cond["lastTransitionTime"] = current.get("lastTransitionTime")
        # Unlike other conditions, the same reason still moves lastUpdateTime on progress.
        return [c for c in conditions if c.get("type") != "Progressing"] + [cond]
    if current is None or current.get("reason") == "NewReplicaSetAvailable":
        return conditions
    timed_out = current.get("reason") == "ProgressDeadlineExceeded" or (
        _parse_time(current.get("lastUpdateTime")) + deadline < now
    )
    if timed_out:
        msg = f'ReplicaSet "{rs_name}" has timed out progressing.'
        cond = _condition("Progressing", "False", "ProgressDeadlineExceeded", msg, stamp)
        return set_condition(conditions, cond)
    return conditions


# --------------------------------------------------------------------------------------------
# Hardware and the simulator's command line
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeHardware:
    """The sandbox's nodes: ``nodes`` identical machines with ``gpus`` GPUs of type ``gpu``."""

    gpu: str = "H100-SXM"
    gpus: int = 8
    interconnect: Literal["NVLink", "PCIe"] = "NVLink"
    nodes: int = 1

    def node_names(self) -> list[str]:
        return [f"sandbox-gpu-{i}" for i in range(self.nodes)]

    def node_manifest(self, name: str) -> Body:
        capacity = {"cpu": "64", "memory": "1Ti", "pods": "110", GPU_RESOURCE: str(self.gpus)}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": gpu_label_value(self.gpu),
                    "nvidia.com/gpu.count": str(self.gpus),
                    "latencytuner.io/gpu-interconnect": self.interconnect,
                },
            },
            "spec": {},
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": _now(),
                        "lastTransitionTime": _now(),
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "127.0.0.1"},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {"kubeletVersion": "v1.32.0-sandbox", "operatingSystem": "linux"},
            },
        }


def _expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion in command and args (unknown names stay as written)."""
    return _ENV_REF.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def sim_argv(container: Mapping[str, Any], *, port: int, gpu: str, gpus: int) -> list[str]:
    """``latency-tuner sim`` arguments for a vLLM container; raises NotVllmError otherwise."""
    env = {
        str(e["name"]): str(e["value"])
        for e in container.get("env") or []
        if isinstance(e, Mapping) and "name" in e and isinstance(e.get("value"), str)
    }
    command = container.get("command")
    args = container.get("args")
    cl = VllmCommandLine.parse(
        None if command is None else [_expand(str(w), env) for w in command],
        None if args is None else [_expand(str(w), env) for w in args],
    )
    if not cl.model:
        raise NotVllmError("the vLLM command line names no model")
    words: list[str] = ["serve", cl.model]
    for key, value in cl.without("host").without("port").flags():
        if value is None:
            words.append(f"--{key}")
        elif key == "served-model-name":
            words += [f"--{key}", *value.split()]
        else:
            words.append(f"--{key}={value}")
    words += ["--host", "127.0.0.1", "--port", str(port), "--sim-gpu", gpu, "--sim-gpus", str(gpus)]
    return words


def _gpu_limit(container: Mapping[str, Any]) -> int:
    resources = container.get("resources") or {}
    value = (resources.get("limits") or {}).get(GPU_RESOURCE)
    if value is None:
        value = (resources.get("requests") or {}).get(GPU_RESOURCE, 0)
    return int(value)


def _vllm_container(template: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]]:
    """The index and body of the container that runs vLLM (the first that parses as it)."""
    containers = (template.get("spec") or {}).get("containers") or []
    for i, container in enumerate(containers):
        with contextlib.suppress(NotVllmError, ValueError):
            VllmCommandLine.parse(container.get("command"), container.get("args"))
            return i, container
    return 0, containers[0] if containers else {}


# --------------------------------------------------------------------------------------------
# Pods
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodInfo:
    """A snapshot of one pod the runner manages (for tests and the demo)."""

    namespace: str
    name: str
    deployment: str
    template_hash: str
    container: str
    port: int
    node: str | None
    pid: int | None
    argv: tuple[str, ...]
    ready: bool
    restart_count: int
    terminating: bool
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.url}/metrics"


@dataclass(eq=False)
class _Pod:
    namespace: str
    name: str
    deployment: str
    template_hash: str
    template: Body
    container_name: str
    rs: str
    gpus: int
    port: int
    log_path: Path
    created: float = field(default_factory=time.monotonic)
    node: str | None = None
    process: subprocess.Popen[bytes] | None = None
    argv: list[str] = field(default_factory=list)
    restart_count: int = 0
    started_at: str | None = None  # the current container's start
    first_start: str | None = None
    ready_since: float | None = None  # monotonic
    waiting: tuple[str, str] | None = ("ContainerCreating", "")
    last_terminated: Body | None = None
    unschedulable: str | None = None
    terminating: bool = False
    task: asyncio.Task[None] | None = None
    published: Body | None = None  # the status last written; None until the Pod exists
    bound: bool = False  # spec.nodeName written

    @property
    def ready(self) -> bool:
        return self.ready_since is not None and not self.terminating

    def available(self, min_ready_seconds: float, now: float) -> bool:
        return self.ready_since is not None and now - self.ready_since >= min_ready_seconds

    @property
    def container(self) -> Mapping[str, Any]:
        return _vllm_container(self.template)[1]


@dataclass
class _DeploymentState:
    uid: str
    revisions: dict[str, int] = field(default_factory=dict)  # template hash -> revision
    rs_uids: dict[str, str] = field(default_factory=dict)  # RS name -> uid
    rs_written: dict[str, Body] = field(default_factory=dict)
    pods: dict[str, _Pod] = field(default_factory=dict)
    current_hash: str | None = None


class PodRunner:
    """Runs Deployments of ``namespaces`` as simulator processes (an async context manager).

    ::

        async with PodRunner(api.url, namespaces=["llm"], hardware=NodeHardware("H100-SXM")):
            ...  # create Deployments through the API; pods appear and run

    ``targets()`` lists the ready pods for Prometheus (address + namespace/pod/container labels);
    ``add_listener(fn)`` calls ``fn()`` whenever that list changes. ``backoff`` is the crash
    back-off (first, cap) in seconds; ``drain_seconds`` the wait between taking a ready pod out of
    ``endpoints()``/``targets()`` and stopping it (what a preStop sleep gives a Service).
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
    ) -> None:
        self.api_url = api_url
        self.namespaces = list(namespaces)
        self.hardware = hardware or NodeHardware()
        self.python = python
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="lt-pods-"))
        self.resync_seconds = resync_seconds
        self.backoff = backoff
        self.drain_seconds = drain_seconds
        self.grace_seconds = grace_seconds
        self.sim_seed = sim_seed
        self.sim_options = list(sim_options)
        self._client: httpx.AsyncClient | None = None
        self._probe: httpx.AsyncClient | None = None
        self._deployments: dict[tuple[str, str], _DeploymentState] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._listeners: list[Callable[[], None]] = []
        self._last_targets: list[Target] = []
        self._processes: set[subprocess.Popen[bytes]] = set()
        self.errors: list[str] = []  # reconcile errors, newest last (also logged)

    # -- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._client = httpx.AsyncClient(base_url=self.api_url, timeout=10.0)
        self._probe = httpx.AsyncClient(timeout=1.0)
        atexit.register(self._kill_all_now)
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
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
            self._loop_task = None
        pods = [p for s in self._deployments.values() for p in s.pods.values()]
        for pod in pods:
            if pod.task is not None:
                pod.task.cancel()
        tasks = [p.task for p in pods if p.task is not None] + list(self._background)
        for task in self._background:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(self._stop_process(p) for p in pods), return_exceptions=True)
        self._kill_all_now()
        # Like a node that goes away: the Pods stay, but nothing may block their deletion.
        for pod in pods:
            path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
            with contextlib.suppress(httpx.HTTPError, RuntimeError):
                await self._request("PATCH", path, {"metadata": {"finalizers": None}})
        self._deployments.clear()
        self._notify()
        for client in (self._client, self._probe):
            if client is not None:
                await client.aclose()
        self._client = self._probe = None
        atexit.unregister(self._kill_all_now)

    def _kill_all_now(self) -> None:
        """Last resort, synchronous: SIGKILL every process group still alive."""
        for process in list(self._processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=5)
            self._processes.discard(process)

    # -- what others read ----------------------------------------------------------------------

    def pods(self) -> list[PodInfo]:
        """Every pod the runner manages now (terminating ones included)."""
        out = []
        for state in self._deployments.values():
            for pod in state.pods.values():
                process = pod.process
                out.append(
                    PodInfo(
                        namespace=pod.namespace,
                        name=pod.name,
                        deployment=pod.deployment,
                        template_hash=pod.template_hash,
                        container=pod.container_name,
                        port=pod.port,
                        node=pod.node,
                        pid=process.pid if process is not None and process.poll() is None else None,
                        argv=tuple(pod.argv),
                        ready=pod.ready,
                        restart_count=pod.restart_count,
                        terminating=pod.terminating,
                        log_path=pod.log_path,
                    )
                )
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

    def endpoints(self, namespace: str | None = None, deployment: str | None = None) -> list[str]:
        """Base URLs of ready pods (what a Service would route to)."""
        return [
            p.url
            for p in self.pods()
            if p.ready
            and (namespace is None or p.namespace == namespace)
            and (deployment is None or p.deployment == deployment)
        ]

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (on the event loop) whenever ``targets()`` changes."""
        self._listeners.append(listener)

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

    # -- API helpers -----------------------------------------------------------------------------

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("the PodRunner is not running")
        return self._client

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/merge-patch+json",
        ok_missing: bool = True,
    ) -> Body | None:
        response = await self.client.request(
            method,
            path,
            content=None if body is None else json.dumps(body),
            headers={"Content-Type": content_type} if body is not None else {},
        )
        if response.status_code == 404 and ok_missing:
            return None
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        result: Body = response.json()
        return result

    async def _ensure_node(self, name: str) -> None:
        manifest = self.hardware.node_manifest(name)
        existing = await self._request("GET", f"/api/v1/nodes/{name}")
        if existing is None:
            await self._request("POST", "/api/v1/nodes", manifest, content_type="application/json")
        else:
            patch = {"metadata": {"labels": manifest["metadata"]["labels"]}}
            await self._request("PATCH", f"/api/v1/nodes/{name}", patch)

    # -- the control loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
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
            listing = await self._request("GET", path) or {}
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
        listing = await self._request("GET", f"/api/v1/namespaces/{namespace}/pods") or {}
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
            await self._request("PATCH", f"{_deployment_path(*key)}", patch)
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
        desired = int(spec.get("replicas", 1))
        kind, surge, max_unavailable = resolve_strategy(spec)
        min_ready = float(spec.get("minReadySeconds", 0))
        now = time.monotonic()
        active = [p for p in state.pods.values() if not p.terminating]
        new = [p for p in active if p.template_hash == thash]
        old = [p for p in active if p.template_hash != thash]
        if kind == "Recreate":
            if old:
                for pod in old:
                    self._start_termination(state, pod)
                return
            if any(p.terminating for p in state.pods.values()):
                return  # Recreate: the new pods wait until every old one is gone
            surge = 0
        if not old:
            for _ in range(desired - len(new)):
                await self._create_pod(deployment, state, thash, template)
            for pod in _removal_order(new, min_ready, now)[: max(len(new) - desired, 0)]:
                self._start_termination(state, pod)
            return
        total = len(active)
        room = min(desired - len(new), desired + surge - total)
        for _ in range(max(room, 0)):
            await self._create_pod(deployment, state, thash, template)
        active = [p for p in state.pods.values() if not p.terminating]
        new = [p for p in active if p.template_hash == thash]
        old = [p for p in active if p.template_hash != thash]
        min_available = desired - max_unavailable
        new_unavailable = sum(1 for p in new if not p.available(min_ready, now))
        budget = len(active) - min_available - new_unavailable
        if budget <= 0:
            return
        # First the old pods that serve nothing, then available ones down to minAvailable.
        unhealthy = [p for p in old if not p.available(min_ready, now)]
        for pod in _removal_order(unhealthy, min_ready, now)[:budget]:
            self._start_termination(state, pod)
            budget -= 1
        available = sum(1 for p in active if p.available(min_ready, now) and not p.terminating)
        can_remove = min(budget, available - min_available)
        healthy = [p for p in old if not p.terminating]
        for pod in _removal_order(healthy, min_ready, now)[: max(can_remove, 0)]:
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
            node = next((n for n, u in used.items() if u + pod.gpus <= self.hardware.gpus), None)
            if node is None:
                n = len(used)
                message = (
                    f"0/{n} nodes are available: {n} Insufficient {GPU_RESOURCE}. preemption: "
                    f"0/{n} nodes are available: {n} No preemption victims found for incoming pod."
                )
                if pod.unschedulable != message:
                    pod.unschedulable = message
                    self._spawn(self._publish(pod))
                continue
            used[node] += pod.gpus
            pod.node, pod.unschedulable = node, None
            pod.task = asyncio.create_task(self._supervise(pod), name=f"pod {pod.name}")

    # -- objects ---------------------------------------------------------------------------------

    async def _ensure_replicaset(
        self, deployment: Body, state: _DeploymentState, thash: str, template: Body, number: int
    ) -> None:
        meta = deployment["metadata"]
        name = f"{meta['name']}-{thash}"
        labels = {**(template.get("metadata") or {}).get("labels", {}), "pod-template-hash": thash}
        revision = str(number)
        path = f"/apis/apps/v1/namespaces/{meta['namespace']}/replicasets"
        if name in state.rs_uids:
            patch = {"metadata": {"annotations": {REVISION_ANNOTATION: revision}}}
            await self._request("PATCH", f"{path}/{name}", patch)
            return
        selector = copy.deepcopy((deployment.get("spec") or {}).get("selector") or {})
        selector.setdefault("matchLabels", {})["pod-template-hash"] = thash
        rs_template = copy.deepcopy(template)
        rs_template.setdefault("metadata", {})["labels"] = labels
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": labels,
                "annotations": {REVISION_ANNOTATION: revision},
                "ownerReferences": [_owner("apps/v1", "Deployment", meta)],
            },
            "spec": {"replicas": 0, "selector": selector, "template": rs_template},
        }
        existing = await self._request("GET", f"{path}/{name}")
        if existing is not None:  # left by an earlier Deployment of that name: adopt it
            await self._request("PUT", f"{path}/{name}", body, content_type="application/json")
            state.rs_uids[name] = str(existing["metadata"]["uid"])
            return
        created = await self._request("POST", path, body, content_type="application/json")
        if created is not None:
            state.rs_uids[name] = str(created["metadata"]["uid"])

    async def _delete_replicasets(self, key: tuple[str, str], state: _DeploymentState) -> None:
        for name in state.rs_uids:
            await self._request("DELETE", f"/apis/apps/v1/namespaces/{key[0]}/replicasets/{name}")

    async def _create_pod(
        self, deployment: Body, state: _DeploymentState, thash: str, template: Body
    ) -> None:
        meta = deployment["metadata"]
        namespace, dname = str(meta["namespace"]), str(meta["name"])
        rs = f"{dname}-{thash}"
        name = f"{rs}-{''.join(secrets.choice(_ALPHABET) for _ in range(5))}"
        tmeta = template.get("metadata") or {}
        _, container = _vllm_container(template)
        pod = _Pod(
            namespace=namespace,
            name=name,
            deployment=dname,
            template_hash=thash,
            template=template,
            container_name=str(container.get("name", "")),
            rs=rs,
            gpus=_gpu_limit(container),
            port=free_port(),
            log_path=self.log_dir / f"{namespace}_{name}.log",
        )
        owner = (
            [_owner("apps/v1", "ReplicaSet", {"name": rs, "uid": state.rs_uids[rs]})]
            if rs in state.rs_uids
            else []
        )
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {**tmeta.get("labels", {}), "pod-template-hash": thash},
                "annotations": {
                    **tmeta.get("annotations", {}),
                    PORT_ANNOTATION: str(pod.port),
                    # Where a scraper (Prometheus' pod discovery, the operator's direct
                    # scrape) finds /metrics: every sandbox pod listens on its own port.
                    "prometheus.io/scrape": "true",
                    "prometheus.io/port": str(pod.port),
                },
                "ownerReferences": owner,
                "finalizers": [FINALIZER],
            },
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
        state.pods[name] = pod  # before the await: the next pass must count it
        try:
            await self._request(
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
        active = [p for p in state.pods.values() if not p.terminating]
        counts = Counts(
            replicas=len(active),
            updated=sum(1 for p in active if p.template_hash == thash),
            ready=sum(1 for p in active if p.ready),
            available=sum(1 for p in active if p.available(min_ready, now)),
        )
        rs_name = f"{deployment['metadata']['name']}-{thash}"
        status = compute_status(
            deployment, counts, rs_name=rs_name, new_rs_created=new_rs_created, now=time.time()
        )
        # The API omits zero counts (omitempty); null deletes them in a merge patch.
        patch = {k: (v if v != 0 else None) for k, v in status.items()}
        current = deployment.get("status") or {}
        wanted = {k: v for k, v in patch.items() if v is not None}
        if wanted != current:
            path = f"{_deployment_path(*_key(deployment))}/status"
            await self._request("PATCH", path, {"status": patch})
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
            patched = await self._request("PATCH", path, {"spec": wanted["spec"]}) or {}
            generation = (patched.get("metadata") or {}).get("generation", 1)
            status = {k: (v or None) for k, v in counts.items()}
            status["observedGeneration"] = generation
            await self._request("PATCH", f"{path}/status", {"status": status})
            state.rs_written[rs] = wanted

    # -- the kubelet -----------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _supervise(self, pod: _Pod) -> None:
        """Start the container, probe it, restart it with back-off when it exits."""
        try:
            _, container = _vllm_container(pod.template)
            try:
                pod.argv = sim_argv(
                    container, port=pod.port, gpu=self.hardware.gpu, gpus=max(pod.gpus, 1)
                )
            except (NotVllmError, ValueError) as exc:
                pod.waiting = ("CreateContainerError", f"the sandbox runs only vLLM: {exc}")
                await self._publish(pod)
                return
            pod.argv += ["--sim-seed", str(self.sim_seed), *self.sim_options]
            while not pod.terminating:
                if pod.restart_count:
                    delay = min(self.backoff[0] * 2 ** (pod.restart_count - 1), self.backoff[1])
                    await asyncio.sleep(delay)
                code = await self._run_container(pod)
                if pod.terminating:
                    return
                finished = _now()
                pod.restart_count += 1
                pod.ready_since = None
                pod.last_terminated = {
                    "exitCode": code,
                    "reason": "Completed" if code == 0 else "Error",
                    "startedAt": pod.started_at,
                    "finishedAt": finished,
                    "containerID": f"sandbox://{pod.process.pid if pod.process else 0}",
                }
                delay = min(self.backoff[0] * 2 ** (pod.restart_count - 1), self.backoff[1])
                message = (
                    f"back-off {delay:g}s restarting failed container={container.get('name')} "
                    f"pod={pod.name}_{pod.namespace}({pod.name})"
                )
                pod.waiting = ("CrashLoopBackOff", message)
                pod.started_at = None
                self._notify()
                await self._publish(pod)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("pod %s: supervisor failed", pod.name)

    async def _run_container(self, pod: _Pod) -> int:
        with pod.log_path.open("ab") as log:
            log.write(f"--- start {_now()}: sim {' '.join(pod.argv)}\n".encode())
            log.flush()
            pod.process = subprocess.Popen(  # noqa: ASYNC220 - fork+exec, not a wait
                [self.python, "-m", "latency_tuner.cli", "sim", *pod.argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopped as a whole
            )
        self._processes.add(pod.process)
        pod.started_at = _now()
        pod.first_start = pod.first_start or pod.started_at
        pod.waiting = None
        await self._publish(pod)
        assert self._probe is not None
        health = f"http://127.0.0.1:{pod.port}/health"
        while (code := pod.process.poll()) is None:
            if pod.ready_since is None:
                with contextlib.suppress(httpx.HTTPError):
                    if (await self._probe.get(health)).status_code == 200:
                        pod.ready_since = time.monotonic()
                        self._notify()
                        await self._publish(pod)
                        continue
            await asyncio.sleep(0.1)
        self._processes.discard(pod.process)
        return code

    def _start_termination(self, state: _DeploymentState, pod: _Pod) -> None:
        if pod.terminating:
            return
        was_ready = pod.ready
        pod.terminating = True
        self._notify()
        self._spawn(self._terminate(state, pod, drain=was_ready))

    async def _terminate(self, state: _DeploymentState, pod: _Pod, *, drain: bool) -> None:
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        try:
            await self._request("DELETE", path)
            if drain and self.drain_seconds > 0:
                await asyncio.sleep(self.drain_seconds)
            if pod.task is not None:
                pod.task.cancel()
                await asyncio.gather(pod.task, return_exceptions=True)
            await self._stop_process(pod)
            await self._request("PATCH", path, {"metadata": {"finalizers": None}})
        finally:
            state.pods.pop(pod.name, None)
            self._notify()

    async def _stop_process(self, pod: _Pod) -> None:
        process = pod.process
        if process is None or process.poll() is not None:
            if process is not None:
                self._processes.discard(process)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, self.grace_seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await asyncio.to_thread(process.wait)
        self._processes.discard(process)

    async def _publish(self, pod: _Pod) -> None:
        """Write the pod's status (and, once, its node) as the kubelet would."""
        if pod.published is None:
            return  # not created yet
        status = _pod_status(pod)
        if status == pod.published:
            return
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        try:
            if pod.node is not None and not pod.bound:
                await self._request("PATCH", path, {"spec": {"nodeName": pod.node}})
                pod.bound = True
            await self._request("PATCH", f"{path}/status", {"status": status})
        except (httpx.HTTPError, RuntimeError) as exc:
            logger.warning("pod %s: status not written: %s", pod.name, exc)
            return
        pod.published = status
        self._wake.set()


def _key(deployment: Mapping[str, Any]) -> tuple[str, str]:
    return str(deployment["metadata"]["namespace"]), str(deployment["metadata"]["name"])


def _deployment_path(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"


def _owner(api_version: str, kind: str, meta: Mapping[str, Any]) -> Body:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _removal_order(pods: Iterable[_Pod], min_ready: float, now: float) -> list[_Pod]:
    """Which pods go first on scale-down: unscheduled, not ready, not available, newest."""
    return sorted(
        pods,
        key=lambda p: (
            p.node is not None,
            p.ready,
            p.available(min_ready, now),
            -p.created,
        ),
    )


def _pod_status(pod: _Pod) -> Body:
    now = _now()
    container = pod.container
    ready = pod.ready
    if pod.node is None:
        reason = "Unschedulable" if pod.unschedulable else None
        return {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": reason,
                    "message": pod.unschedulable,
                    "lastTransitionTime": now,
                }
            ],
            "qosClass": "BestEffort",
        }
    state: Body
    if pod.waiting is not None:
        state = {"waiting": {"reason": pod.waiting[0]}}
        if pod.waiting[1]:
            state["waiting"]["message"] = pod.waiting[1]
    else:
        state = {"running": {"startedAt": pod.started_at}}
    status_entry: Body = {
        "name": container.get("name", ""),
        "image": container.get("image", ""),
        "imageID": "",
        "ready": ready,
        "started": pod.waiting is None,
        "restartCount": pod.restart_count,
        "state": state,
        "lastState": {"terminated": pod.last_terminated} if pod.last_terminated else {},
    }
    if pod.process is not None:
        status_entry["containerID"] = f"sandbox://{pod.process.pid}"
    others = [
        {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "imageID": "",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": pod.first_start or now}},
            "lastState": {},
        }
        for c in (pod.template.get("spec") or {}).get("containers") or []
        if c.get("name") != container.get("name")
    ]
    flag = "True" if ready else "False"
    unready = None if ready else "ContainersNotReady"
    unready_msg = None if ready else f"containers with unready status: [{container.get('name')}]"

    def cond(kind: str, value: str, reason: str | None = None, msg: str | None = None) -> Body:
        entry: Body = {"type": kind, "status": value, "lastTransitionTime": now}
        if reason:
            entry["reason"], entry["message"] = reason, msg
        return entry

    # Transition times would churn every write: keep them only where status flips (cheaply: the
    # previous publication's value when the status is the same).
    conditions = [
        cond("PodReadyToStartContainers", "True"),
        cond("Initialized", "True"),
        cond("Ready", flag, unready, unready_msg),
        cond("ContainersReady", flag, unready, unready_msg),
        cond("PodScheduled", "True"),
    ]
    previous = {c["type"]: c for c in (pod.published or {}).get("conditions") or []}
    for c in conditions:
        before = previous.get(c["type"])
        if before is not None and before.get("status") == c["status"]:
            c["lastTransitionTime"] = before.get("lastTransitionTime")
    return {
        "phase": "Pending" if pod.first_start is None else "Running",
        "conditions": conditions,
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": pod.first_start or now,
        "containerStatuses": sorted([status_entry, *others], key=lambda s: str(s["name"])),
        "qosClass": "BestEffort",
    }
