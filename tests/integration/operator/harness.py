"""A world for the operator: the API emulator, a stand-in Deployment controller, a scripted
vLLM whose latency is a function of its arguments, and kopf running the real handlers.

The controller makes rollouts complete (or crash, for configurations the world says cannot
start) the way the Deployment controller and kubelet report them; the metrics source answers a
window with the latency of the configuration that was serving during it. Everything else, the
operator's handlers, reconcile, adapters and decisions, is the real code over real HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from latency_tuner.adapters.metrics import SourceUnreachable
from latency_tuner.api.crd import build_crd
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.observation import NoData, Observation, ObservationResult
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.handlers.cli import run_operator
from latency_tuner.sandbox.apiserver import ApiServer
from latency_tuner.settings import OperatorSettings
from latency_tuner.vllm.args import VllmCommandLine

NAMESPACE = "ml"
DEPLOYMENT = "llama"
APPS = "apps/v1"
LT_API = "tuning.latencytuner.io/v1alpha1"

Profile = Callable[[VllmCommandLine], dict[str, Any]]


def deployment(args: Sequence[str], *, name: str = DEPLOYMENT, **meta: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": APPS,
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, **meta},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeName": "gpu-node-1",
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.11.0",
                            "args": list(args),
                            "ports": [{"name": "http", "containerPort": 8000}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


def latency_target(name: str = "llama-latency", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "targetRef": {"name": DEPLOYMENT, "container": "vllm"},
        "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
        "evaluation": {
            "window": "3s",
            "settle": "1s",
            "minRequests": 10,
            "progressDeadline": "4s",
            "cooldown": "1h",
            "maxTrials": 6,
        },
    }
    body.update(spec)
    return {
        "apiVersion": LT_API,
        "kind": "LatencyTarget",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": body,
    }


def observation(window: float, **signals: Any) -> Observation:
    """An Observation with plausible defaults for a steady 20 req/s load."""
    values: dict[str, Any] = {
        "window_seconds": window,
        "requests": 200,
        "request_rate": 20.0,
        "prompt_tokens_mean": 512.0,
        "generation_tokens_mean": 128.0,
        "running_mean": 8.0,
        "running_max": 10.0,
        "waiting_mean": 0.0,
        "waiting_max": 0.0,
        "kv_cache_usage_mean": 0.3,
        "kv_cache_usage_max": 0.4,
        "preemptions": 0.0,
        "itl": {50: 0.02, 90: 0.025, 95: 0.027, 99: 0.03},
        "itl_mean": 0.021,
    }
    values.update(signals)
    return Observation(**values)


@dataclass
class World:
    """The scripted cluster: which configuration served when, and how it performs."""

    api: ApiServer
    profile: Profile
    crashes: Callable[[VllmCommandLine], bool] = lambda _cl: False
    # (since, container fingerprint, command line) of what served, oldest first
    served: list[tuple[float, str, VllmCommandLine]] = field(default_factory=list)
    metrics_down: bool = False
    observe_calls: int = 0

    def serving_at(self, moment: float) -> VllmCommandLine | None:
        current = None
        for since, _, cl in self.served:
            if since <= moment:
                current = cl
        return current

    async def metrics_for(self, spec: LatencyTargetSpec, namespace: str, name: str) -> Any:
        return _ScriptedSource(self)

    async def deployment(self) -> dict[str, Any]:
        obj = await self.api.get(APPS, "Deployment", DEPLOYMENT, namespace=NAMESPACE)
        assert obj is not None
        return obj

    async def args(self) -> list[str]:
        return list((await self.deployment())["spec"]["template"]["spec"]["containers"][0]["args"])

    async def target(self, name: str = "llama-latency") -> dict[str, Any]:
        obj = await self.api.get(LT_API, "LatencyTarget", name, namespace=NAMESPACE)
        assert obj is not None
        return obj

    async def status(self, name: str = "llama-latency") -> dict[str, Any]:
        return dict((await self.target(name)).get("status") or {})

    async def events(self) -> list[dict[str, Any]]:
        return await self.api.list_objects("v1", "Event", namespace=NAMESPACE)


class _ScriptedSource:
    def __init__(self, world: World) -> None:
        self.world = world

    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        self.world.observe_calls += 1
        if self.world.metrics_down:
            raise SourceUnreachable("Prometheus at http://prometheus:9090 is unreachable")
        stop = time.time() if end is None else end
        cl = self.world.serving_at(stop - window_seconds / 2)
        if cl is None:
            return NoData(
                reason="no requests finished in the window", window_seconds=window_seconds
            )
        return observation(window_seconds, **self.world.profile(cl))


async def _controller(world: World, stop: asyncio.Event) -> None:
    """The Deployment controller and kubelet, reduced to what the operator reads."""
    api = world.api
    seen: dict[str, int] = {}
    while not stop.is_set():
        for dep in await api.list_objects(APPS, "Deployment", namespace=NAMESPACE):
            name = dep["metadata"]["name"]
            generation = dep["metadata"]["generation"]
            if seen.get(name) == generation:
                continue
            seen[name] = generation
            await _roll(world, dep)
        await asyncio.sleep(0.05)


async def _roll(world: World, dep: dict[str, Any]) -> None:
    api = world.api
    name = dep["metadata"]["name"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    cl = VllmCommandLine.parse(container.get("command"), container.get("args"))
    config = ContainerConfig(
        command=tuple(container["command"]) if container.get("command") else None,
        args=tuple(container["args"]) if container.get("args") is not None else None,
        image=container["image"],
        gpu_limit=int(container["resources"]["limits"]["nvidia.com/gpu"]),
    )
    fingerprint = config.fingerprint()
    pods = await api.list_objects("v1", "Pod", namespace=NAMESPACE)
    generation = dep["metadata"]["generation"]
    pod_name = f"{name}-{fingerprint[:10]}-x1"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": NAMESPACE,
            "labels": dict(dep["spec"]["template"]["metadata"]["labels"]),
        },
        "spec": copy.deepcopy(dep["spec"]["template"]["spec"]),
    }
    if not any(p["metadata"]["name"] == pod_name for p in pods):
        await api.create(pod)
    if world.crashes(cl):
        await api.patch(
            "v1", "Pod", pod_name, {"status": _pod_status(ready=False, crash=True)},
            namespace=NAMESPACE, subresource="status",
        )  # fmt: skip
        status = {"observedGeneration": generation, "replicas": 2, "updatedReplicas": 1,
                  "readyReplicas": 1, "availableReplicas": 1, "unavailableReplicas": 1}  # fmt: skip
    else:
        for old in pods:
            if old["metadata"]["name"] != pod_name:
                await api.delete("v1", "Pod", old["metadata"]["name"], namespace=NAMESPACE)
        await api.patch(
            "v1", "Pod", pod_name, {"status": _pod_status(ready=True, crash=False)},
            namespace=NAMESPACE, subresource="status",
        )  # fmt: skip
        status = {"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
                  "readyReplicas": 1, "availableReplicas": 1}  # fmt: skip
        world.served.append((time.time(), fingerprint, cl))
    await api.patch(APPS, "Deployment", name, {"status": status}, namespace=NAMESPACE,
                    subresource="status")  # fmt: skip


def _pod_status(*, ready: bool, crash: bool) -> dict[str, Any]:
    state: dict[str, Any] = (
        {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off restarting"}}
        if crash
        else {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    )
    return {
        "phase": "Running",
        "podIP": "10.0.0.7",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [
            {
                "name": "vllm",
                "ready": ready,
                "restartCount": 3 if crash else 0,
                "state": state,
                "lastState": ({"terminated": {"reason": "Error", "exitCode": 1}} if crash else {}),
            }
        ],
    }


@contextlib.asynccontextmanager
async def cluster(
    tmp_path: Path, profile: Profile, args: Sequence[str], **world_kw: Any
) -> AsyncIterator[World]:
    """The emulator with the CRD, a GPU node, the vLLM Deployment and its controller."""
    async with ApiServer() as api:
        world = World(api=api, profile=profile, **world_kw)
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        await api.create(build_crd())
        await api.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "gpu-node-1",
                    "labels": {
                        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                        "nvidia.com/gpu.count": "8",
                        "latencytuner.io/gpu-interconnect": "NVLink",
                    },
                },
            }
        )
        await api.create(deployment(args))
        stop = asyncio.Event()
        task = asyncio.create_task(_controller(world, stop))
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", namespace=NAMESPACE)
        os.environ["KUBECONFIG"] = str(kubeconfig)
        try:
            yield world
        finally:
            stop.set()
            await task


@contextlib.asynccontextmanager
async def operator_running(world: World, tmp_path: Path) -> AsyncIterator[None]:
    """The real operator (kopf, handlers, reconcile) in-process, watching the namespace.

    Entered from the test's own task: kopf cancels tasks created while it ran when it stops.
    """
    settings = OperatorSettings(
        prometheus_url="http://prometheus.invalid:9090",
        namespaces=(NAMESPACE,),
        interval_seconds=0.3,
        standalone=True,
        metrics_port=0,
        probe_port=0,
        kubeconfig=os.environ["KUBECONFIG"],
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        run_operator(settings, stop_flag=stop, ready_flag=ready, metrics_for=world.metrics_for)
    )
    try:
        async with asyncio.timeout(15):
            await ready.wait()
        yield
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(15):
                await task


async def eventually(
    check: Callable[[], Awaitable[Any]], within: float = 30.0, every: float = 0.1
) -> Any:
    """Poll until ``check`` returns something truthy; fail after ``within`` seconds."""
    last: Any = None
    try:
        async with asyncio.timeout(within):
            while True:
                last = await check()
                if last:
                    return last
                await asyncio.sleep(every)
    except TimeoutError:
        raise AssertionError(f"not within {within} s; last seen: {last!r}") from None


def condition(status: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), None)
