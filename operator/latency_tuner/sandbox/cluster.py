"""``Sandbox``: a one-machine "cluster" for the demo and e2e tests, as one async context manager.

In order it starts the Kubernetes API emulator (and writes a kubeconfig for it), creates the
namespace, applies the LatencyTarget CRD, starts the pod runner (Deployment controller +
kubelet running ``latency-tuner sim`` processes on the scenario's simulated GPU nodes), starts
Prometheus when the binary is installed (its targets follow the ready pods; a liveness probe
restarts it when it runs but stops answering, as a kubelet would), and, given a
scenario, applies its Deployment, waits until it is available and starts the background load.
On exit it stops all of it in reverse order, also on errors.

It never starts the operator: the caller runs it against ``kubeconfig_path`` (and
``prometheus_url``, or a direct scrape of ``targets()`` when that is None) and applies the
scenario's LatencyTarget with ``apply_latency_target()`` when it is ready to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from latency_tuner.api import build_crd
from latency_tuner.api.durations import format_duration
from latency_tuner.sandbox import prometheus as prom
from latency_tuner.sandbox.apiserver import ApiServer
from latency_tuner.sandbox.load import BackgroundLoad
from latency_tuner.sandbox.podrunner import NodeHardware, PodInfo, PodRunner
from latency_tuner.sandbox.scenario import Load, Scenario

__all__ = ["Sandbox", "SandboxError", "keep_alive"]

# The liveness probe of the sandbox's Prometheus, as a Prometheus pod's would be: a server that
# stops answering (seen in CI: neither scraping nor answering queries for minutes, while
# running) or exits is restarted on the same port and TSDB, as a kubelet would restart it. Six
# failures, as prometheus-operator's pods allow: a server merely slow on a starved machine is
# left to catch up (a restart replays its whole log, slower still there).
LIVENESS_PERIOD_SECONDS = 5.0
LIVENESS_FAILURES = 6

Body = dict[str, Any]


class SandboxError(RuntimeError):
    """The sandbox could not do what was asked (an API error, a Deployment that never came up)."""


class Sandbox:
    """The API server, pods, Prometheus and load of one scenario (or of none: an empty cluster).

    ::

        async with Sandbox(load_scenario("queueing")) as sandbox:
            run_operator(kubeconfig=sandbox.kubeconfig_path, prometheus=sandbox.prometheus_url)
            await sandbox.apply_latency_target()

    ``prometheus``: True requires the binary, False never starts it, None (default) starts it
    when installed. ``load``: False skips the background load. ``runner_options`` go to
    ``PodRunner`` (e.g. ``backoff``, ``drain_seconds``).
    """

    def __init__(
        self,
        scenario: Scenario | None = None,
        *,
        namespace: str | None = None,
        hardware: NodeHardware | None = None,
        prometheus: bool | None = None,
        load: bool = True,
        scrape_interval: str = "1s",
        workdir: str | Path | None = None,
        runner_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.scenario = scenario
        self.namespace = namespace or (scenario.namespace if scenario else "default")
        if hardware is None and scenario is not None:
            hw = scenario.hardware
            hardware = NodeHardware(
                gpu=hw.canonical_gpu, gpus=hw.gpus, interconnect=hw.link, nodes=hw.nodes
            )
        self.hardware = hardware or NodeHardware()
        self._want_prometheus = prometheus
        self._want_load = load
        self._scrape_interval = scrape_interval
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="lt-sandbox-"))
        self._runner_options = dict(runner_options or {})
        self._stack = contextlib.AsyncExitStack()
        self._api: ApiServer | None = None
        self._client: httpx.AsyncClient | None = None
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}
        self.runner: PodRunner | None = None
        self.prometheus: prom.PrometheusRunner | None = None
        self.load: BackgroundLoad | None = None
        self.kubeconfig_path = self.workdir / "kubeconfig"

    # -- lifecycle -------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        try:
            await self._start()
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

    async def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._api = await self._stack.enter_async_context(ApiServer())
        self._api.write_kubeconfig(self.kubeconfig_path, namespace=self.namespace)
        self._client = httpx.AsyncClient(base_url=self._api.url, timeout=10.0)
        self._stack.push_async_callback(self._client.aclose)
        if await self.get("v1", "Namespace", self.namespace) is None:
            await self.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
            )
        await self.apply(build_crd())
        options: dict[str, Any] = {"log_dir": self.workdir / "pods", **self._runner_options}
        self.runner = await self._stack.enter_async_context(
            PodRunner(self._api.url, namespaces=[self.namespace], hardware=self.hardware, **options)
        )
        if self._want_prometheus or (self._want_prometheus is None and prom.binary() is not None):
            await self._start_prometheus()
        if self.scenario is not None:
            await self.apply(self.scenario.deployment_manifest())
            await self.wait_for_deployment(
                self.scenario.deployment_name, within=self.scenario.timeouts.ready_seconds
            )
            if self._want_load:
                self.load = await self._stack.enter_async_context(
                    BackgroundLoad(
                        Load.of(self.scenario.workload),
                        self._endpoints,
                        model=self.scenario.served_model,
                    )
                )

    async def _start_prometheus(self) -> None:
        runner = prom.PrometheusRunner(
            scrape_interval=self._scrape_interval, log_path=self.workdir / "prometheus.log"
        )
        self._stack.push_async_callback(asyncio.to_thread, runner.stop)  # also a failed start's
        self.prometheus = await asyncio.to_thread(runner.start)
        assert self.runner is not None
        pods = self.runner

        def sync_targets() -> None:
            # Also while a restart runs (the file is read at start); not once stopped: the
            # folder is gone then.
            with contextlib.suppress(FileNotFoundError):
                runner.set_targets(pods.targets())

        pods.add_listener(sync_targets)
        sync_targets()
        watch = asyncio.create_task(keep_alive(runner))
        self._stack.push_async_callback(_cancel, watch)

    async def close(self) -> None:
        """Stop everything this sandbox started (load, pods, Prometheus, API server)."""
        try:
            await self._stack.aclose()
        finally:
            if self._own_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def _endpoints(self) -> list[str]:
        if self.runner is None or self.scenario is None:
            return []
        # A Service selecting the Deployment's pod labels: canary pods included.
        manifest = self.scenario.deployment_manifest()
        selector = (manifest["spec"].get("selector") or {}).get("matchLabels")
        if not selector:
            return self.runner.endpoints(self.namespace, self.scenario.deployment_name)
        return self.runner.endpoints(self.namespace, labels=selector)

    # -- what the operator and tests use ---------------------------------------------------------

    @property
    def api_url(self) -> str:
        if self._api is None:
            raise SandboxError("the sandbox is not running")
        return self._api.url

    @property
    def api_server(self) -> ApiServer:
        if self._api is None:
            raise SandboxError("the sandbox is not running")
        return self._api

    @property
    def prometheus_url(self) -> str | None:
        return self.prometheus.url if self.prometheus is not None else None

    def targets(self) -> list[prom.Target]:
        """Ready pods as scrape targets (``address`` = 127.0.0.1:PORT; namespace/pod/container);
        the metrics are at ``http://{address}/metrics``."""
        return self.runner.targets() if self.runner is not None else []

    def pods(self) -> list[PodInfo]:
        return self.runner.pods() if self.runner is not None else []

    async def apply_latency_target(self) -> Body:
        """Create (or update) the scenario's LatencyTarget."""
        if self.scenario is None:
            raise SandboxError("this sandbox has no scenario")
        return await self.apply(self.scenario.latency_target_manifest())

    # -- a small client --------------------------------------------------------------------------

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise SandboxError("the sandbox is not running")
        return self._client

    async def _resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) of a kind, from discovery (CRDs included)."""
        key = (api_version, kind)
        if key not in self._resources:
            path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
            listing = (await self.client.get(path)).json()
            for resource in listing.get("resources", []):
                if "/" not in resource["name"]:
                    found = (resource["name"], bool(resource["namespaced"]))
                    self._resources[(api_version, resource["kind"])] = found
            if key not in self._resources:
                raise SandboxError(f"the API server does not serve {kind} in {api_version}")
        return self._resources[key]

    async def _path(
        self, api_version: str, kind: str, name: str | None, namespace: str | None
    ) -> str:
        plural, namespaced = await self._resource(api_version, kind)
        base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        if namespaced:
            base += f"/namespaces/{namespace or self.namespace}"
        return f"{base}/{plural}" + (f"/{name}" if name else "")

    @staticmethod
    def _check(response: httpx.Response, what: str) -> Body:
        if response.status_code >= 400:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise SandboxError(f"{what}: {response.status_code} {message}")
        body: Body = response.json()
        return body

    async def apply(self, manifest: Mapping[str, Any]) -> Body:
        """Create the object, or, when it exists, merge-patch its labels, annotations and the
        rest of its body (lists are replaced; status is left alone)."""
        meta = manifest.get("metadata") or {}
        api_version, kind, name = manifest["apiVersion"], manifest["kind"], meta["name"]
        namespace = meta.get("namespace")
        collection = await self._path(api_version, kind, None, namespace)
        response = await self.client.post(collection, json=dict(manifest))
        if response.status_code != 409:
            return self._check(response, f"create {kind} {name}")
        patch = {k: v for k, v in manifest.items() if k not in ("status", "apiVersion", "kind")}
        patch["metadata"] = {k: meta[k] for k in ("labels", "annotations") if k in meta}
        response = await self.client.patch(
            f"{collection}/{name}",
            content=json.dumps(patch),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        return self._check(response, f"update {kind} {name}")

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Body | None:
        response = await self.client.get(await self._path(api_version, kind, name, namespace))
        if response.status_code == 404:
            return None
        return self._check(response, f"get {kind} {name}")

    async def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[Body]:
        path = await self._path(api_version, kind, None, namespace)
        items: list[Body] = self._check(await self.client.get(path), f"list {kind}")["items"]
        return items

    async def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> None:
        response = await self.client.delete(await self._path(api_version, kind, name, namespace))
        if response.status_code != 404:
            self._check(response, f"delete {kind} {name}")

    async def wait_for_deployment(self, name: str, *, within: float = 60.0) -> Body:
        """Wait until the Deployment has rolled out its current generation (``kubectl rollout
        status``: observed, all replicas updated and available, no old pods left)."""
        deadline = time.monotonic() + within
        last: Body | None = None
        while time.monotonic() < deadline:
            last = await self.get("apps/v1", "Deployment", name)
            if last is not None and _rolled_out(last):
                return last
            await asyncio.sleep(0.1)
        status = json.dumps((last or {}).get("status"), indent=1)
        logs = ""
        for pod in self.pods():
            with contextlib.suppress(OSError):
                logs += f"\n--- {pod.name}\n" + pod.log_path.read_text()[-1500:]
        raise SandboxError(
            f"Deployment {name} not rolled out within {format_duration(within)}; "
            f"status {status}{logs}"
        )


def _rolled_out(deployment: Mapping[str, Any]) -> bool:
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    desired = int(spec.get("replicas", 1))
    generation = int(deployment["metadata"].get("generation", 0))
    return (
        int(status.get("observedGeneration", 0)) >= generation
        and int(status.get("updatedReplicas", 0)) == desired
        and int(status.get("replicas", 0)) == desired
        and int(status.get("availableReplicas", 0)) == desired
    )


async def keep_alive(
    runner: prom.PrometheusRunner,
    *,
    period: float = LIVENESS_PERIOD_SECONDS,
    failures: int = LIVENESS_FAILURES,
) -> None:
    """Probe ``runner`` every ``period`` while it is wanted; restart it after ``failures``
    failed probes in a row, and again after as many more when a restart does not come up.
    Runs until cancelled."""
    failed = 0
    while True:
        await asyncio.sleep(period)
        # A server that crashed or does not answer; one stopped on purpose stays stopped.
        why = await asyncio.to_thread(runner.probe, period) if runner.wanted else None
        failed = 0 if why is None else failed + 1
        if failed >= failures:
            failed = 0
            with contextlib.suppress(RuntimeError):  # did not come back: probed again
                await asyncio.to_thread(
                    runner.restart, f"{failures} liveness probes failed in a row, the last: {why}"
                )


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
