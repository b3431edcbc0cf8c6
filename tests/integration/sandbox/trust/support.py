"""What the trust tests share: a hostile HTTP server on 127.0.0.1 that records what reaches it,
Deployments with the containers a tenant would bring, and a status a tenant would forge.

The operator itself runs as in ``tests.integration.operator.harness`` (kopf, the real handlers,
the API emulator); these helpers only build what an attacker controls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from tests.integration.operator.harness import APPS, DEPLOYMENT, LT_API, NAMESPACE, World

from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.rollout.values import container_snapshot
from latency_tuner.sandbox.prometheus import free_port

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
IMAGE = "vllm/vllm-openai:v0.11.0"
ARGS = [MODEL, "--max-num-seqs", "16"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    """One request as it reached the hostile server."""

    path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class HostileServer:
    """An HTTP server on 127.0.0.1 whose behaviour a test chooses; it records every request and
    holds the ones its handler makes wait until ``release`` is set."""

    handler: Handler
    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0  # requests inside the handler now

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(Seen(request.path, dict(request.query), dict(request.headers)))
        self.waiting += 1
        try:
            return await self.handler(request)
        finally:
            self.waiting -= 1


@contextlib.asynccontextmanager
async def hostile_server(handler: Handler) -> AsyncIterator[HostileServer]:
    server = HostileServer(handler)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server._serve)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        server.release.set()
        await runner.cleanup()


def empty_vector() -> web.Response:
    """Prometheus' answer when no series matched."""
    return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})


def containers_deployment(
    containers: Sequence[Mapping[str, Any]], *, name: str = DEPLOYMENT
) -> dict[str, Any]:
    """A Deployment with exactly these containers (the tenant chose them)."""
    labels = {"app": name}
    return {
        "apiVersion": APPS,
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeName": "gpu-node-1", "containers": [dict(c) for c in containers]},
            },
        },
    }


def container(name: str, image: str, args: Sequence[str], **more: Any) -> dict[str, Any]:
    return {"name": name, "image": image, "args": list(args), **more}


async def forge_status(world: World, name: str, status: Mapping[str, Any]) -> None:
    """Write ``status`` as anyone with `latencytargets/status` rights could."""
    valid = LatencyTargetStatus.model_validate(dict(status)).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    await world.api.patch(LT_API, "LatencyTarget", name, {"status": valid},
                          namespace=NAMESPACE, subresource="status")  # fmt: skip


def forged_trial(running: ContainerConfig, to: ContainerConfig) -> dict[str, Any]:
    """A status saying a trial from ``running`` to ``to`` is rolling out."""
    return {
        "phase": "RollingOut",
        "phaseSince": "2026-12-02T11:59:00Z",
        "observedGeneration": 1,
        "trialCount": 1,
        "expectedContainer": running.fingerprint(),
        "currentTrial": {
            "id": 1,
            "knob": "maxNumSeqs",
            "from": "16",
            "to": "32",
            "startedAt": "2026-12-02T11:59:00Z",
            "fromContainer": container_snapshot(running).model_dump(mode="json", by_alias=True),
            "toContainer": container_snapshot(to).model_dump(mode="json", by_alias=True),
        },
    }


def forged_baseline(to: ContainerConfig) -> dict[str, Any]:
    """A status whose saved baseline (what a restore puts back) is ``to``."""
    return {
        "phase": "Observing",
        "phaseSince": "2026-12-02T11:59:00Z",
        "baseline": {
            "container": "vllm",
            "command": list(to.command) if to.command is not None else None,
            "args": list(to.args) if to.args is not None else None,
            "image": to.image,
            "gpuLimit": str(to.gpu_limit) if to.gpu_limit is not None else None,
            "configHash": to.fingerprint(),
            "capturedAt": "2026-12-02T11:00:00Z",
        },
    }


async def several_more_rounds() -> None:
    """Let the operator (interval 0.3 s) reconcile several more times before a test checks that
    something did NOT happen: a refusal must hold, not only be the first word."""
    await asyncio.sleep(2.0)
