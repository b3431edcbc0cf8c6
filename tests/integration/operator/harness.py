"""A world for the operator: the API emulator, a stand-in Deployment controller, a scripted
vLLM whose latency is a function of its arguments, and kopf running the real handlers.

The controller (``latency_tuner.testing.rollouts``) makes rollouts complete (or crash, for
configurations the world says cannot start) the way the Deployment controller and kubelet report
them; the metrics source (``latency_tuner.testing.metrics``) answers a window with the latency
of the configuration that was serving during it. Everything else, the
operator's handlers, reconcile, adapters and decisions, is the real code over real HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kopf

from latency_tuner.api.crd import build_crd
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.controller.deployment import DEFAULT_GPU_RESOURCE, container_config
from latency_tuner.handlers.cli import run_kwargs
from latency_tuner.sandbox.apiserver import ApiServer
from latency_tuner.settings import OperatorSettings
from latency_tuner.testing.metrics import ScriptedMetrics, queueing_signals
from latency_tuner.testing.rollouts import roll
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

NAMESPACE = "ml"
DEPLOYMENT = "llama"
APPS = "apps/v1"
LT_API = "tuning.latencytuner.io/v1alpha1"
UNREACHABLE = "Prometheus at http://prometheus:9090 is unreachable"

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


def evaluation(**fields: Any) -> dict[str, Any]:
    """Short windows (seconds) so a trial takes a few seconds; ``fields`` override."""
    return {
        "window": "3s",
        "settle": "1s",
        "minRequests": 10,
        "progressDeadline": "4s",
        "cooldown": "1h",
        "maxTrials": 6,
        **fields,
    }


# Only max-num-seqs may change: the planner's next step is predictable in these worlds.
SEQS_ONLY = {
    "prefixCaching": False,
    "chunkedPrefill": False,
    "maxNumBatchedTokens": None,
    "gpuMemoryUtilization": None,
    "maxNumSeqs": {"min": 16, "max": 1024},
}


def latency_target(
    name: str = "llama-latency", *, target: str = DEPLOYMENT, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "targetRef": {"name": target, "container": "vllm"},
        "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
        "evaluation": evaluation(),
    }
    body.update(spec)
    return {
        "apiVersion": LT_API,
        "kind": "LatencyTarget",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": body,
    }


def queueing(ttft_of: Callable[[VllmCommandLine], float]) -> Profile:
    """A Deployment whose requests queue for a slot (TTFT over 0.5 s is waiting time) and whose
    TTFT p90 is ``ttft_of(command line)``: the diagnosis says Queueing while it is slow."""

    def profile(cl: VllmCommandLine) -> dict[str, Any]:
        seqs = int(cl.get("max-num-seqs") or 1024)
        return queueing_signals(
            ttft_of(cl), running_mean=float(min(seqs, 40)), running_max=float(min(seqs, 48))
        )

    return profile


def seqs(cl: VllmCommandLine) -> int:
    return int(cl.get("max-num-seqs") or 1024)


def by_seqs(cl: VllmCommandLine) -> float:
    """TTFT p90 of the classic queueing Deployment: better with every doubling up to 64."""
    n = seqs(cl)
    return 2.0 if n < 32 else 0.9 if n < 64 else 0.3


@dataclass
class World:
    """The scripted cluster: which configuration served when, and how it performs.

    Several Deployments may live in one world (one LatencyTarget each); ``profiles`` gives one
    its own latency function, the others use ``profile``.
    """

    api: ApiServer
    profile: Profile
    crashes: Callable[[VllmCommandLine], bool] = lambda _cl: False
    # Deployment -> (since, container fingerprint, command line) of what served, oldest first
    served: dict[str, list[tuple[float, str, VllmCommandLine]]] = field(default_factory=dict)
    profiles: dict[str, Profile] = field(default_factory=dict)
    # The controller leaves new Deployment generations alone: their rollouts hang.
    stalled: bool = False

    def __post_init__(self) -> None:
        self.script = ScriptedMetrics(self._signals)

    @property
    def metrics_down(self) -> bool:
        return self.script.unreachable is not None

    @metrics_down.setter
    def metrics_down(self, down: bool) -> None:
        self.script.unreachable = UNREACHABLE if down else None

    @property
    def observe_calls(self) -> int:
        return self.script.observe_calls

    def _signals(self, name: str, start: float, end: float) -> dict[str, Any] | None:
        """A window shows the configuration that served in its middle."""
        cl = self.serving_at((start + end) / 2, name)
        return None if cl is None else self.profiles.get(name, self.profile)(cl)

    def serving_at(self, moment: float, name: str = DEPLOYMENT) -> VllmCommandLine | None:
        current = None
        for since, _, cl in self.served.get(name, []):
            if since <= moment:
                current = cl
        return current

    async def metrics_for(self, spec: LatencyTargetSpec, namespace: str, name: str) -> Any:
        return await self.script.metrics_for(spec, namespace, name)

    async def add_deployment(self, args: Sequence[str], name: str, **meta: Any) -> None:
        await self.api.create(deployment(args, name=name, **meta))

    async def deployment(self, name: str = DEPLOYMENT) -> dict[str, Any]:
        obj = await self.api.get(APPS, "Deployment", name, namespace=NAMESPACE)
        assert obj is not None
        return obj

    async def args(self, name: str = DEPLOYMENT) -> list[str]:
        dep = await self.deployment(name)
        return list(dep["spec"]["template"]["spec"]["containers"][0]["args"])

    async def set_args(self, args: Sequence[str], name: str = DEPLOYMENT) -> None:
        """Someone else (kubectl edit, GitOps) changes the vLLM container's arguments."""
        dep = await self.deployment(name)
        containers = dep["spec"]["template"]["spec"]["containers"]
        containers[0]["args"] = list(args)
        patch = {"spec": {"template": {"spec": {"containers": containers}}}}
        await self.api.patch(APPS, "Deployment", name, patch, namespace=NAMESPACE)

    async def target(self, name: str = "llama-latency") -> dict[str, Any]:
        obj = await self.api.get(LT_API, "LatencyTarget", name, namespace=NAMESPACE)
        assert obj is not None
        return obj

    async def status(self, name: str = "llama-latency") -> dict[str, Any]:
        return dict((await self.target(name)).get("status") or {})

    async def phase(self, name: str = "llama-latency") -> str | None:
        return (await self.status(name)).get("phase")

    async def set_spec(self, name: str = "llama-latency", **fields: Any) -> None:
        await self.api.patch(LT_API, "LatencyTarget", name, {"spec": fields}, namespace=NAMESPACE)

    async def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        found = await self.api.list_objects("v1", "Event", namespace=NAMESPACE)
        return [e for e in found if reason is None or e.get("reason") == reason]

    def deployment_patches(self, name: str = DEPLOYMENT) -> list[Any]:
        """The bodies of the PATCH requests sent over HTTP to the Deployment (the operator's:
        the scripted controller and the tests write in-process, not over HTTP)."""
        path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}"
        return [
            r.data
            for r in list(self.api.emulator)
            if getattr(r.method, "value", r.method) == "PATCH" and r.url.path.rstrip("/") == path
        ]


async def _controller(world: World, stop: asyncio.Event) -> None:
    """The Deployment controller and kubelet, reduced to what the operator reads."""
    api = world.api
    seen: dict[str, int] = {}
    while not stop.is_set():
        for dep in await api.list_objects(APPS, "Deployment", namespace=NAMESPACE):
            name = dep["metadata"]["name"]
            generation = dep["metadata"]["generation"]
            if seen.get(name) == generation or world.stalled:
                continue
            seen[name] = generation
            await _roll(world, dep)
        await asyncio.sleep(0.05)


async def _roll(world: World, dep: dict[str, Any]) -> None:
    name = dep["metadata"]["name"]
    # The vLLM container wherever it is (a sidecar may come first); none: nothing serves.
    cl, container = None, dep["spec"]["template"]["spec"]["containers"][0]
    for candidate in dep["spec"]["template"]["spec"]["containers"]:
        try:
            cl = VllmCommandLine.of_container(
                candidate.get("command"), candidate.get("args"), image=candidate.get("image")
            )
        except NotVllmError:
            continue
        container = candidate
        break
    fingerprint = container_config(container, DEFAULT_GPU_RESOURCE).fingerprint()
    labels = dep["spec"]["template"]["metadata"]["labels"]
    pods = [
        p["metadata"]["name"]
        for p in await world.api.list_objects("v1", "Pod", namespace=NAMESPACE)
        if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())
    ]
    crash = cl is not None and world.crashes(cl)
    await roll(world.api, dep, pod=f"{name}-{fingerprint[:10]}-x1", existing=pods, crash=crash)
    if not crash and cl is not None:
        world.served.setdefault(name, []).append((time.time(), fingerprint, cl))


@contextlib.asynccontextmanager
async def cluster(
    tmp_path: Path, profile: Profile, args: Sequence[str], **world_kw: Any
) -> AsyncIterator[World]:
    """The emulator with the CRD, a GPU node, the vLLM Deployment and its controller."""
    async with ApiServer() as api:
        down = bool(world_kw.pop("metrics_down", False))
        world = World(api=api, profile=profile, **world_kw)
        world.metrics_down = down
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
async def operator_running(
    world: World,
    tmp_path: Path,
    *,
    prometheus_url: str | None = None,
    metrics_port: int = 0,
    real_metrics: bool = False,
    **settings_overrides: Any,
) -> AsyncIterator[None]:
    """The real operator (kopf, handlers, reconcile) watching the namespace, on an event loop
    of its own in a thread, as it would run in its own process. With ``prometheus_url`` (or
    ``real_metrics``) it reads the metrics sources its settings name (that Prometheus over
    HTTP, or scrape mode) instead of the world's script; ``settings_overrides``: other fields
    of ``OperatorSettings``.

    Its own loop, because kopf counts every task created on its loop while it ran as its own
    and waits 5 s for them when it stops (the emulator's watch handlers among them): a test
    that stops and restarts the operator would wait for nothing.
    """
    settings = OperatorSettings(
        prometheus_url=prometheus_url or "http://prometheus.invalid:9090",
        namespaces=(NAMESPACE,),
        interval_seconds=0.3,
        standalone=True,
        metrics_port=metrics_port,
        metrics_address="127.0.0.1",
        probe_port=0,
        kubeconfig=os.environ["KUBECONFIG"],
    )
    settings = dataclasses.replace(settings, **settings_overrides)
    stop, ready = threading.Event(), threading.Event()
    real = real_metrics or prometheus_url is not None
    kwargs = run_kwargs(settings, metrics_for=None if real else world.metrics_for)
    failures: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(kopf.operator(stop_flag=stop, ready_flag=ready, **kwargs))  # type: ignore[arg-type]
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)

    thread = threading.Thread(target=main, name="latency-tuner-operator", daemon=True)
    thread.start()
    try:
        if not await asyncio.to_thread(ready.wait, 15):
            raise AssertionError(f"the operator did not start: {failures!r}")
        yield
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 20)
    assert not thread.is_alive(), "the operator did not stop within 20 s"
    assert not failures, f"the operator failed: {failures!r}"


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


async def phase_in(world: World, *phases: str, name: str = "llama-latency") -> dict[str, Any]:
    """Wait (polling fast) until the LatencyTarget's phase is one of ``phases``; its status."""

    async def check() -> dict[str, Any] | None:
        status = await world.status(name)
        return status if status.get("phase") in phases else None

    found: dict[str, Any] = await eventually(check, within=30, every=0.05)
    return found


def args_patches(patches: Sequence[Any], args: Sequence[str]) -> int:
    """How many of the Deployment PATCH bodies set the vLLM container's args to ``args``."""
    return sum(
        1
        for body in patches
        for op in body or []
        if op.get("path", "").endswith("/args") and op.get("value") == list(args)
    )


async def posted(
    world: World, reason: str, within: float = 10.0, about: str | None = None
) -> list[dict[str, Any]]:
    """The Events of ``reason``, waiting for at least one (on the object named ``about``, when
    given): kopf posts them from a queue, a moment after the handler that made them returned."""

    async def found() -> list[dict[str, Any]]:
        events = await world.events(reason)
        if about is not None and not any(
            (e.get("involvedObject") or {}).get("name") == about for e in events
        ):
            return []
        return events

    events: list[dict[str, Any]] = await eventually(found, within=within)
    return events
