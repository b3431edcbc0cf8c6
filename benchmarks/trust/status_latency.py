"""Trust benchmark: how long a healthy LatencyTarget waits for its status while eight other
LatencyTargets point at a Prometheus that never answers, against the same with none of them,
measured in one run and given as a ratio.

One process, in order, for each scenario (0 hostile targets, then ``--hostile`` of them):

- the API emulator (``latency_tuner.sandbox.apiserver``) with the CRD, a GPU node and ready
  vLLM Deployments (one pod each, rolled out by ``latency_tuner.testing.rollouts``);
- a real Prometheus (``latency_tuner.sandbox.prometheus``, nothing to scrape: every query
  answers at once, with no data) as the operator's own Prometheus;
- an HTTP server on 127.0.0.1 that accepts every request and never answers: the hostile
  targets' ``spec.metrics.prometheusUrl`` (a path each, so each is its own source);
- the real operator (kopf, handlers, reconcile, its real Prometheus client) on its own event
  loop in a thread, per-resource URLs allowed, its default 10 s query timeout.

Once the hostile targets' queries hang in the server, ``--samples`` healthy LatencyTargets are
created one after another; a sample is the time from creating one to the first status that
carries its ``MetricsAvailable`` condition (one whole observation done and written). The figure
is the median; the ratio is hostile median / baseline median. A short discarded round comes
first, so one-off start-up costs count against neither scenario.

Run it against another commit's operator with ``PYTHONPATH=<that tree>/operator``; the helpers
this script needs and that tree lacks (``testing/rollouts.py``) are loaded from this checkout.
The benchmark measures; it never edits the operator or stands in for any part of it.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import kopf
from aiohttp import web

import latency_tuner
from latency_tuner.api.crd import build_crd
from latency_tuner.handlers.cli import run_kwargs
from latency_tuner.sandbox.apiserver import ApiServer
from latency_tuner.sandbox.prometheus import PrometheusRunner, free_port
from latency_tuner.settings import OperatorSettings

NAMESPACE = "bench"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LT_API = "tuning.latencytuner.io/v1alpha1"
APPS = "apps/v1"
HERE = Path(__file__).resolve().parents[2]


def _rollouts() -> ModuleType:
    """``latency_tuner.testing.rollouts``, from the package under test or from this checkout."""
    try:
        from latency_tuner.testing import rollouts

        return rollouts
    except ImportError:
        path = HERE / "operator" / "latency_tuner" / "testing" / "rollouts.py"
        spec = importlib.util.spec_from_file_location("bench_rollouts", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


ROLLOUTS = _rollouts()


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.11.0",
        "args": [MODEL, "--max-num-seqs", "16"],
        "ports": [{"name": "http", "containerPort": 8000}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    return {
        "apiVersion": APPS,
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeName": "gpu-node-1", "containers": [container]},
            },
        },
    }


def latency_target(name: str, prometheus_url: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "targetRef": {"name": name, "container": "vllm"},
        "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
        "evaluation": {"window": "1m", "settle": "10s", "minRequests": 10},
    }
    if prometheus_url:
        spec["metrics"] = {"prometheusUrl": prometheus_url}
    return {
        "apiVersion": LT_API,
        "kind": "LatencyTarget",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


async def ready_deployment(api: ApiServer, name: str) -> None:
    created = await api.create(deployment(name))
    await ROLLOUTS.roll(api, created, pod=f"{name}-1")


@asynccontextmanager
async def hanging_server() -> AsyncIterator[tuple[str, Callable[[], int], asyncio.Event]]:
    """A server that never answers until released: its URL, requests in flight, release."""
    release = asyncio.Event()
    inside = 0

    async def hang(_: web.Request) -> web.Response:
        nonlocal inside
        inside += 1
        try:
            await release.wait()
        finally:
            inside -= 1
        return web.json_response({"status": "success", "data": {"result": []}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}", lambda: inside, release
    finally:
        release.set()
        await runner.cleanup()


@asynccontextmanager
async def operator_running(settings: OperatorSettings) -> AsyncIterator[None]:
    """The real operator on an event loop of its own, in a thread, as in its own process."""
    stop, ready = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(kopf.operator(stop_flag=stop, ready_flag=ready, **run_kwargs(settings)))  # type: ignore[arg-type]
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=main, name="operator", daemon=True)
    thread.start()
    if not await asyncio.to_thread(ready.wait, 30):
        raise RuntimeError(f"the operator did not start: {failures!r}")
    try:
        yield
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 30)


async def until(check: Callable[[], Awaitable[bool]], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.02)
    return False


async def scenario(
    hostile: int, samples: int, prometheus_url: str, timeout_per_sample: float
) -> dict[str, Any]:
    async with ApiServer() as api, hanging_server() as (hang_url, in_flight, release):
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        await api.create(build_crd())
        await api.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "gpu-node-1",
                    "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                               "nvidia.com/gpu.count": "8"},
                },
            }
        )  # fmt: skip
        for i in range(hostile):
            await ready_deployment(api, f"hostile-{i}")
            await api.create(latency_target(f"hostile-{i}", f"{hang_url}/tenant-{i}/"))
        with tempfile.TemporaryDirectory() as tmp:
            settings = OperatorSettings(
                prometheus_url=prometheus_url,
                allow_per_resource_prometheus_url=True,
                namespaces=(NAMESPACE,),
                interval_seconds=1.0,
                standalone=True,
                metrics_port=0,
                probe_port=0,
                kubeconfig=str(api.write_kubeconfig(Path(tmp) / "kubeconfig", namespace=NAMESPACE)),
            )
            async with operator_running(settings):

                async def all_hanging() -> bool:
                    return in_flight() >= hostile

                hung = await until(all_hanging, 60)
                latencies: list[float | None] = []
                for j in range(samples):
                    name = f"healthy-{j}"
                    await ready_deployment(api, name)
                    started = time.monotonic()
                    await api.create(latency_target(name))

                    async def observed(name: str = name) -> bool:
                        obj = await api.get(LT_API, "LatencyTarget", name, namespace=NAMESPACE)
                        conditions = ((obj or {}).get("status") or {}).get("conditions") or []
                        return any(c.get("type") == "MetricsAvailable" for c in conditions)

                    done = await until(observed, timeout_per_sample)
                    latencies.append(time.monotonic() - started if done else None)
                hanging_at_end = in_flight()
                release.set()
    measured = [x for x in latencies if x is not None]
    return {
        "hostile": hostile,
        "hostile_queries_hanging_before_samples": hung,
        "hostile_queries_hanging_at_end": hanging_at_end,
        "samples_s": [None if x is None else round(x, 3) for x in latencies],
        "missed": len(latencies) - len(measured),
        "median_s": round(statistics.median(measured), 3) if measured else None,
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with PrometheusRunner(scrape_interval="1s") as prometheus:
        # A discarded first round: imports, kopf's start and Prometheus' first queries are slow
        # once per process, and would otherwise count against whichever scenario runs first.
        await scenario(0, 2, prometheus.url, args.timeout)
        baseline = await scenario(0, args.samples, prometheus.url, args.timeout)
        hostile = await scenario(args.hostile, args.samples, prometheus.url, args.timeout)
    ratio = (
        round(hostile["median_s"] / baseline["median_s"], 1)
        if hostile["median_s"] and baseline["median_s"]
        else None
    )
    return {
        "operator": str(Path(latency_tuner.__file__).parent),
        "cpus": os.cpu_count(),
        "baseline": baseline,
        "with_hostile": hostile,
        "ratio_hostile_over_baseline": ratio,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hostile", type=int, default=8, help="hostile targets (default 8)")
    parser.add_argument("--samples", type=int, default=5, help="healthy targets measured")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="give up on one sample after this [s]"
    )
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
