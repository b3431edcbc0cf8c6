"""One pod as the runner keeps it (``PodState``), as others see it (``PodInfo``), and the
status the kubelet writes for it (``pod_status``).

Data and a pure rendering (the clock is read for timestamps only); no process is touched here.
"""

from __future__ import annotations

import asyncio
import datetime
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from latency_tuner.sandbox.podrunner._engine import vllm_container

Body = dict[str, Any]


def now_stamp() -> str:
    """The API's timestamp format, second resolution, UTC."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    labels: Mapping[str, str] = field(default_factory=dict)  # the pod template's

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.url}/metrics"


@dataclass(eq=False)
class PodState:
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

    def info(self) -> PodInfo:
        """A snapshot for readers (``pid`` only while the process runs)."""
        process = self.process
        return PodInfo(
            namespace=self.namespace,
            name=self.name,
            deployment=self.deployment,
            template_hash=self.template_hash,
            container=self.container_name,
            port=self.port,
            node=self.node,
            pid=process.pid if process is not None and process.poll() is None else None,
            argv=tuple(self.argv),
            ready=self.ready,
            restart_count=self.restart_count,
            terminating=self.terminating,
            log_path=self.log_path,
            labels=dict((self.template.get("metadata") or {}).get("labels") or {}),
        )

    @property
    def container(self) -> Mapping[str, Any]:
        return vllm_container(self.template)[1]


def pod_status(pod: PodState) -> Body:
    """The status a kubelet reports for ``pod`` now (conditions keep their transition times)."""
    now = now_stamp()
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
