"""Scale benchmark: the operator (one process, or ``--shards N``) reconciling 100 / 1,000
LatencyTargets.

Three processes, so each one's CPU and memory is its own:

- **world** (``--role world``): the API emulator (``latency_tuner.sandbox.apiserver``) with N
  vLLM Deployments (ready, one pod each), N LatencyTargets, a GPU node, and a scripted Deployment
  controller that rolls a new pod out when a Deployment's generation bumps. It counts the HTTP
  requests it serves by verb and resource, and records, from its own event stream, each
  target's phase, when ``status.currentTrial`` first appears and when each Deployment's
  generation first bumps.
- **operator** (``--role operator``): the real operator (``run_operator``: kopf, handlers,
  reconcile, adapters) with a scripted metrics source that counts ``observe()`` calls; a target
  answers a TTFT p90 of 0.3 s (threshold 0.5 s) until the bench "breaches" it (2.0 s, queueing).
- With ``--shards N``, N operator processes, each shard ``i`` of ``N`` (``--shard-mode``: hash
  of namespace/name, hash of the namespace, or a label), each acting only on the targets it has
  claimed; their CPU and RSS are summed. With ``--namespaces K`` the targets are dealt round
  robin over K namespaces (``bench-000`` ...; one ``bench`` without it) and the operator
  watches the whole cluster; in label mode every target of a namespace gets the same label.
- **bench** (default): starts both, reads RSS/CPU of each from ``/proc`` (Linux only), waits
  for every target to converge, measures a steady state, breaches a few targets and waits for
  their first rollout, then prints a table (or ``--json``).

The benchmark measures; it must never edit the operator or stand in for any of its parts other
than the metrics backend and the Kubernetes controllers.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # the operator role imports the operator only once tracing is on
    from latency_tuner.core.sharding.assignment import ShardMode

NAMESPACE = "bench"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = [MODEL, "--max-num-seqs", "16"]
LT_API = "tuning.latencytuner.io/v1alpha1"
LT_STORE = ("tuning.latencytuner.io", "latencytargets")
DEP_STORE = ("apps", "deployments")
PERCENTILES = (90,)
CLK_TCK = os.sysconf("SC_CLK_TCK")
# How long a process may take to answer a command: at 10,000 targets the emulator's one event
# loop serves every shard and can fall minutes behind; a slow answer is a figure, not a failure.
ANSWER_SECONDS = 600.0
# Run as a script: the repository root on the path, for this benchmark's sibling modules.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


# ---- world process: emulator + scripted controller ------------------------------------------


def _namespace(i: int, namespaces: int) -> str:
    """The namespace of the ``i``-th Deployment and target: one ``bench``, or round robin."""
    return NAMESPACE if namespaces == 1 else f"{NAMESPACE}-{i % namespaces:03d}"


def _deployment(name: str, namespace: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
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
                            "args": list(ARGS),
                            "ports": [{"name": "http", "containerPort": 8000}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


def _latency_target(
    name: str, deployment: str, namespace: str, window: str, cooldown: str
) -> dict[str, Any]:
    return {
        "apiVersion": LT_API,
        "kind": "LatencyTarget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "targetRef": {"name": deployment, "container": "vllm"},
            "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
            "evaluation": {
                "window": window,
                "settle": "0s",
                "minRequests": 10,
                "progressDeadline": "30s",
                "cooldown": cooldown,
                "maxTrials": 6,
            },
            # Only max-num-seqs may change: a breached target's first trial is predictable.
            "knobs": {
                "prefixCaching": False,
                "chunkedPrefill": False,
                "maxNumBatchedTokens": None,
                "gpuMemoryUtilization": None,
                "maxNumSeqs": {"min": 16, "max": 1024},
            },
        },
    }


def _request_kind(method: str, path: str, query: dict[str, str]) -> str:
    """``"get latencytargets"``, ``"list pods"``, ``"patch latencytargets/status"``, ..."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return f"{method.lower()} (discovery)"
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return f"{method.lower()} (discovery)"
    verb = method.lower()
    if verb == "get":
        verb = (
            "watch" if query.get("watch") in ("true", "1") else "get" if len(rest) > 1 else "list"
        )
    sub = "/" + "/".join(rest[2:]) if len(rest) > 2 else ""
    return f"{verb} {rest[0]}{sub}"


class _World:
    def __init__(
        self,
        targets: int,
        window: str,
        cooldown: str,
        shard_labels: int | None = None,
        namespaces: int = 1,
    ) -> None:
        self.targets = targets
        self.namespaces = namespaces
        self.shard_labels = shard_labels  # label mode: the shard count the labels spread over
        self.window = window
        self.cooldown = cooldown
        self.requests: collections.Counter[str] = collections.Counter()
        self.phases: dict[str, str] = {}
        self.trial_at: dict[str, float] = {}
        self.converged_at: dict[str, float] = {}  # first time each target was Converged
        self.bumped_at: dict[str, float] = {}
        self.generation: dict[str, int] = {}
        self.pod: dict[str, str] = {}
        self.namespace_of = {
            f"vllm-{i:04d}": _namespace(i, namespaces) for i in range(targets)
        }  # Deployment -> its namespace
        self.metrics: dict[str, str] = {}  # MetricsAvailable status and reason per target
        # Breached targets (LatencyTarget names): each GET (a reconcile starts with one) and
        # each status write, with the time, so a breach that does not roll out says why.
        self.watched: set[str] = set()
        self.timeline: list[dict[str, Any]] = []
        from benchmarks.scale.fleet_metrics import FleetMetrics

        self.fleet = FleetMetrics(self.namespace_of, self.pod)
        self.fleet_namespaces = sorted(set(self.namespace_of.values()))

    async def serve(self, kubeconfig: Path) -> None:
        from latency_tuner.api.crd import build_crd
        from latency_tuner.core.sharding.assignment import SHARD_LABEL
        from latency_tuner.sandbox.apiserver import ApiServer, KubeApiEmulator

        counts, watched, timeline = self.requests, self.watched, self.timeline

        class CountingEmulator(KubeApiEmulator):
            async def __call__(self, raw_request: Any) -> Any:
                kind = _request_kind(raw_request.method, raw_request.path, raw_request.query)
                counts[kind] += 1
                if kind == "get latencytargets" and watched:
                    name = raw_request.path.rsplit("/", 1)[-1]
                    if name in watched:
                        timeline.append({"t": time.time(), "target": name, "event": "GET"})
                return await super().__call__(raw_request)

            def _items(
                self, rdef: Any, namespace: str | None, selectors: Any = None
            ) -> list[dict[str, Any]]:
                # The stock emulator deep-copies each object it lists (40 ms for 1,000 pods):
                # an emulator cost, not the operator's. Its LIST callers only read the items,
                # so top-level copies do (a real API server serves LISTs from a cache too).
                found: list[dict[str, Any]] = self._selected(rdef, namespace, selectors)
                return found

        api = ApiServer()
        api.emulator = CountingEmulator()
        async with api:
            started = time.monotonic()
            for namespace in sorted(set(self.namespace_of.values())):
                await api.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                )
            await api.create(build_crd())
            labels = {
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": "8",
                "latencytuner.io/gpu-interconnect": "NVLink",
            }
            await api.create(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": "gpu-node-1", "labels": labels},
                }
            )
            for i in range(self.targets):
                name = f"vllm-{i:04d}"
                namespace = self.namespace_of[name]
                await api.create(_deployment(name, namespace))
                await self._roll(api, name, 1)
                lt = _latency_target(f"lt-{i:04d}", name, namespace, self.window, self.cooldown)
                if self.shard_labels:
                    # One shard a namespace when there are several (its batch is its own).
                    dealt = i % self.namespaces if self.namespaces > 1 else i
                    lt["metadata"]["labels"] = {SHARD_LABEL: str(dealt % self.shard_labels)}
                await api.create(lt)
            api.write_kubeconfig(kubeconfig, namespace=_namespace(0, self.namespaces))
            metrics_port = await self._serve_metrics()
            events: asyncio.Queue[Any] = asyncio.Queue()
            api.emulator._watchers.add(events)  # every write, in-process: no HTTP cost
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            threading.Thread(target=self._commands, args=(api, loop, stop), daemon=True).start()
            _say({"ready": True, "setup_seconds": round(time.monotonic() - started, 2),
                  "metrics_port": metrics_port,
                  "metrics_paths": [f"/metrics/{ns}" for ns in self.fleet_namespaces]})  # fmt: skip
            controller = asyncio.create_task(self._control(api, events))
            await stop.wait()
            controller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await controller

    async def _serve_metrics(self) -> int:
        """The pods' /metrics on 127.0.0.1, one path a namespace (``/metrics/<namespace>``):
        Prometheus scrapes each as its own target (its own ``instance``, as a pod would be),
        so no scrape renders the whole fleet at once (one 1.7 M-line scrape of 10,000 pods
        outlasted its timeout and held the emulator's event loop while it rendered)."""
        from aiohttp import web

        from latency_tuner.sandbox.prometheus import free_port

        async def metrics(request: web.Request) -> web.Response:
            namespace = request.match_info["namespace"]
            if namespace not in self.fleet_namespaces:
                raise web.HTTPNotFound()
            return web.Response(body=self.fleet.render(namespace), content_type="text/plain")

        app = web.Application()
        app.router.add_get("/metrics/{namespace}", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        return port

    async def _roll(self, api: Any, name: str, generation: int) -> None:
        """The Deployment controller and kubelet: a new ready pod, the old one gone."""
        from latency_tuner.testing.rollouts import roll

        dep = await api.get("apps/v1", "Deployment", name, namespace=self.namespace_of[name])
        old = self.pod.get(name)
        pod = f"{name}-g{generation}-p"  # <deployment>-<hash>-<suffix>: the default selector
        await roll(api, dep, pod=pod, existing=[old] if old is not None else [])
        self.pod[name] = pod
        self.generation[name] = generation

    async def _control(self, api: Any, events: asyncio.Queue[Any]) -> None:
        while True:
            event = await events.get()
            if event is None:
                return
            obj, name = event.obj, event.obj["metadata"]["name"]
            if event.store == DEP_STORE and event.type != "DELETED":
                generation = int(obj["metadata"].get("generation", 1))
                if generation > self.generation.get(name, 1):
                    self.bumped_at.setdefault(name, time.time())
                    await self._roll(api, name, generation)
            elif event.store == LT_STORE:
                status = obj.get("status") or {}
                self.phases[name] = str(status.get("phase"))
                if status.get("phase") == "Converged":
                    self.converged_at.setdefault(name, time.time())
                for c in status.get("conditions") or []:
                    if c.get("type") == "MetricsAvailable":
                        self.metrics[name] = f"{c.get('status')} {c.get('reason')}"
                if status.get("currentTrial"):
                    self.trial_at.setdefault(name, time.time())
                if name in self.watched:
                    self.timeline.append(_status_event(name, status))

    def _commands(self, api: Any, loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
        for line in sys.stdin:
            command = line.strip()
            if command == "stats":
                future = asyncio.run_coroutine_threadsafe(self._stats(api), loop)
                _say(future.result(ANSWER_SECONDS))
            elif command == "size":
                future = asyncio.run_coroutine_threadsafe(self._size(api), loop)
                _say(future.result(ANSWER_SECONDS))
            elif command.startswith("breach "):
                deployments = command.split(" ", 1)[1].split(",")
                self.watched.update(d.replace("vllm-", "lt-") for d in deployments)
                self.fleet.breached.update(deployments)
                _say({"at": time.time()})
            elif command == "quit":
                break
        loop.call_soon_threadsafe(stop.set)

    async def _size(self, api: Any) -> dict[str, Any]:
        """The size of the body of one LIST of every LatencyTarget, as they stand now."""
        items = await api.list_objects(LT_API, "LatencyTarget", namespace=None)
        return {"lt_list_bytes": len(json.dumps({"items": items}))}

    async def _stats(self, api: Any) -> dict[str, Any]:
        return {
            "requests": dict(self.requests),
            "phases": dict(collections.Counter(self.phases.values())),
            "converged_once": len(self.converged_at),
            "metrics": dict(collections.Counter(self.metrics.values())),
            "trial_at": self.trial_at,
            "bumped_at": self.bumped_at,
            "timeline": self.timeline,
        }


def _status_event(name: str, status: dict[str, Any]) -> dict[str, Any]:
    """One status write of a breached target: phase, window, diagnosis, conditions."""
    observed = status.get("observed") or {}
    conditions = {
        c.get("type"): f"{c.get('status')} {c.get('reason')}"
        for c in status.get("conditions") or []
    }
    return {
        "t": time.time(),
        "target": name,
        "event": "status",
        "phase": status.get("phase"),
        "ttft_s": observed.get("ttftSeconds"),
        "observed_at": observed.get("observedAt"),
        "requests": observed.get("requests"),
        "bottleneck": (status.get("diagnosis") or {}).get("bottleneck"),
        "conditions": conditions,
        "trial": bool(status.get("currentTrial")),
    }


# ---- operator process: the real operator, a scripted metrics source -------------------------


def _operator(
    kubeconfig: str,
    interval: float,
    prometheus_url: str,
    shards: int = 1,
    shard: int = 0,
    trace_memory: str | None = None,
    shard_mode: ShardMode = "hash",
    namespaces: int = 1,
) -> int:
    if trace_memory:  # before the operator's imports, so their allocations are traced too
        import tracemalloc

        tracemalloc.start(8)
    import kopf

    from latency_tuner.handlers.cli import run_operator
    from latency_tuner.settings import OperatorSettings

    kopf.configure(quiet=True)  # as `--log-level warning`: no INFO line per handler run
    settings = OperatorSettings(
        prometheus_url=prometheus_url,
        namespaces=(NAMESPACE,) if namespaces == 1 else (),  # several: the whole cluster
        interval_seconds=interval,
        standalone=True,
        metrics_port=0,
        probe_port=0,
        kubeconfig=kubeconfig,
        log_level="warning",
        shards=shards,
        shard_index=shard,
        shard_mode=shard_mode,
        pod_name=f"bench-shard-{shard}",
    )
    # The operator's calls go by path (``adapters.kubernetes.client.Rest``): the kubernetes
    # client's typed API classes, ~25 MiB that the baseline held from 2026-12-03 to 12-04, are
    # never loaded, so the baseline is the imports alone again.
    imports_only = round(_memory_of("self")[0], 1)
    stop, ready = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(run_operator(settings, stop_flag=stop, ready_flag=ready))
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=main, name="operator", daemon=True)
    _say({"imported": True, "imports_only_rss_mib": imports_only})
    for line in sys.stdin:
        command = line.strip()
        if command == "start":
            thread.start()
            # Traced allocations slow kopf's first listing down several times.
            started = ready.wait(600 if trace_memory else 60)
            _say({"started": started, "failures": [repr(f) for f in failures]})
        elif command == "stats":
            if trace_memory:
                _dump_memory(Path(trace_memory) / f"memory-shard-{shard}.txt")
            _say({"failures": [repr(f) for f in failures]})
        elif command == "stop":
            break
    stop.set()
    thread.join(30)
    _say({"stopped": not thread.is_alive()})
    return 0


def _memory_of(pid: int | str) -> tuple[float, float]:
    """(RSS, peak RSS) in MiB of a process ("self" for this one), from /proc."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(value.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def _dump_memory(path: Path) -> None:
    """The live allocations by the line that made them, and the largest by call stack."""
    import tracemalloc

    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    with open(path, "w") as out:
        total = sum(s.size for s in snapshot.statistics("filename"))
        out.write(f"traced: {total / 2**20:.1f} MiB\n\n== by line\n")
        for stat in snapshot.statistics("lineno")[:40]:
            out.write(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d} {stat.traceback[0]}\n")
        out.write("\n== by stack\n")
        for stat in snapshot.statistics("traceback")[:25]:
            out.write(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d}\n")
            for line in stat.traceback.format(limit=12):
                out.write(f"    {line}\n")


def _say(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


# ---- bench: drive both, read /proc ----------------------------------------------------------


@dataclass
class _Proc:
    popen: subprocess.Popen[str]

    def ask(self, command: str, timeout: float = ANSWER_SECONDS) -> dict[str, Any]:
        stdin = self.popen.stdin
        assert stdin is not None
        stdin.write(command + "\n")
        stdin.flush()
        return self.read(timeout)

    def read(self, timeout: float = ANSWER_SECONDS) -> dict[str, Any]:
        stdout = self.popen.stdout
        assert stdout is not None
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not box or not box[0]:
            raise RuntimeError(f"process {self.popen.args!r} did not answer (see its stderr)")
        answer: dict[str, Any] = json.loads(box[0])
        return answer

    def cpu(self) -> float:
        """User + system CPU seconds of the process (all its threads)."""
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def memory(self) -> tuple[float, float]:
        """(RSS, peak RSS) in MiB."""
        return _memory_of(self.popen.pid)


@dataclass
class _Shards:
    """The operator's shards (one process each) read as one operator: CPU and RSS summed."""

    procs: list[_Proc]

    def ask(self, command: str, timeout: float = ANSWER_SECONDS) -> dict[str, Any]:
        answers = [p.ask(command, timeout) for p in self.procs]
        merged = {k: v for a in answers for k, v in a.items() if k != "failures"}
        if command == "start":
            merged["started"] = all(a.get("started") for a in answers)
        merged["failures"] = [f for a in answers for f in a.get("failures", [])]
        return merged

    def read(self, timeout: float = ANSWER_SECONDS) -> list[dict[str, Any]]:
        return [p.read(timeout) for p in self.procs]

    def cpu(self) -> float:
        return sum(p.cpu() for p in self.procs)

    def memory(self) -> tuple[float, float]:
        each = [p.memory() for p in self.procs]
        return sum(rss for rss, _ in each), sum(peak for _, peak in each)

    def rss_each(self) -> list[float]:
        return [round(p.memory()[0], 1) for p in self.procs]


def _machine_busy() -> float:
    """CPU seconds the whole machine spent busy (all processes, all cores) since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLK_TCK


def _spawn(args: list[str], stderr: IO[str]) -> _Proc:
    popen = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    return _Proc(popen)


def _reconciles(world: dict[str, Any]) -> int:
    # Each reconcile starts with one fresh GET of its LatencyTarget; nothing else GETs one.
    return int(world["requests"].get("get latencytargets", 0))


def _wait(check: Any, timeout: float, every: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(every)
    return False


class _Prometheus:
    """Debian's Prometheus scraping the fleet, one target a path (``honor_labels``: the pods'
    ``namespace``/``pod`` labels are kept), on 127.0.0.1, its TSDB in ``workdir``."""

    def __init__(
        self, workdir: Path, metrics_port: int, paths: list[str], scrape: float, log: IO[str]
    ) -> None:
        from latency_tuner.sandbox.prometheus import binary, free_port

        exe = binary()
        if exe is None:
            raise RuntimeError("prometheus is not installed (scripts/setup.sh installs it)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / f"prometheus-{self.port}.yml"
        config.write_text(
            f"global: {{scrape_interval: {scrape:g}s, evaluation_interval: {scrape:g}s}}\n"
            "scrape_configs:\n"
            "  - job_name: vllm\n"
            "    honor_labels: true\n"
            f"    scrape_timeout: {scrape:g}s\n"
            "    static_configs:\n"
            + "".join(
                f"      - {{targets: ['127.0.0.1:{metrics_port}'], "
                f"labels: {{__metrics_path__: '{path}', instance: '{path}'}}}}\n"
                for path in paths
            )
        )
        self.targets = len(paths)
        self.popen = subprocess.Popen(
            [exe, f"--config.file={config}", f"--storage.tsdb.path={workdir / f'tsdb-{self.port}'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.proc = _Proc(self.popen)  # type: ignore[arg-type]

    def _get(self, path: str) -> str:
        import urllib.request

        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            body: bytes = response.read()
        return body.decode()

    def wait_scraped(self, timeout: float) -> bool:
        """Until every path of the fleet has been scraped successfully."""

        def up() -> bool:
            try:
                answer = json.loads(self._get("/api/v1/query?query=up"))
            except OSError:
                return False
            ready = sum(r["value"][1] == "1" for r in answer["data"]["result"])
            return int(ready) >= self.targets

        return _wait(up, timeout, every=0.5)

    def queries(self) -> int:
        """Instant queries answered so far, from Prometheus' own /metrics (not a query)."""
        total = 0.0
        for line in self._get("/metrics").splitlines():
            if (
                line.startswith("prometheus_http_requests_total{")
                and 'handler="/api/v1/query"' in line
            ):
                total += float(line.rsplit(" ", 1)[1])
        return int(total)

    def scrapes(self) -> dict[str, float]:
        """The fleet's scrapes now: targets down and the slowest scrape [s]."""
        out: dict[str, float] = {}
        for key, query in (("targets_down", "count(up == 0) or vector(0)"),
                           ("slowest_scrape_s", "max(scrape_duration_seconds)")):  # fmt: skip
            answer = json.loads(self._get("/api/v1/query?query=" + urllib.parse.quote(query)))
            result = answer["data"]["result"]
            out[key] = round(float(result[0]["value"][1]), 3) if result else 0.0
        return out

    def series(self) -> int:
        for line in self._get("/metrics").splitlines():
            if line.startswith("prometheus_tsdb_head_series "):
                return int(float(line.split()[1]))
        return 0

    def stop(self) -> None:
        self.popen.terminate()
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            self.popen.kill()


def measure(n: int, options: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    interval, window, cooldown = options.interval, options.window, options.cooldown
    kubeconfig = workdir / f"kubeconfig-{n}"
    result: dict[str, Any] = {
        "targets": n,
        "interval_s": interval,
        "window_s": window,
        "cooldown_s": cooldown,
        "scrape_interval_s": options.scrape,
        "shards": options.shards,
        "shard_mode": options.shard_mode,
        "namespaces": options.namespaces,
    }
    with (
        open(workdir / f"world-{n}.log", "w") as wlog,
        open(workdir / f"op-{n}.log", "w") as olog,
        open(workdir / f"prometheus-{n}.log", "w") as plog,
    ):
        world = _spawn(
            ["--role", "world", "--targets", str(n), "--kubeconfig", str(kubeconfig),
             "--window", str(window), "--cooldown", str(cooldown),
             "--shards", str(options.shards), "--shard-mode", options.shard_mode,
             "--namespaces", str(options.namespaces)],
            wlog,
        )  # fmt: skip
        operator = prometheus = None
        try:
            hello = world.read(600)
            result["world_setup_s"] = hello["setup_seconds"]
            prometheus = _Prometheus(
                workdir, hello["metrics_port"], hello["metrics_paths"], options.scrape, plog
            )
            if not prometheus.wait_scraped(120):
                raise RuntimeError("Prometheus did not scrape the fleet (see its log)")
            time.sleep(window + options.scrape)  # a full window of samples before the operator
            result["prometheus_series"] = prometheus.series()
            operator = _Shards([
                _spawn(["--role", "operator", "--kubeconfig", str(kubeconfig),
                        "--interval", str(interval), "--prometheus-url", prometheus.url,
                        "--shards", str(options.shards), "--shard", str(i),
                        "--shard-mode", options.shard_mode,
                        "--namespaces", str(options.namespaces)]
                       + (["--trace-memory", options.trace_memory] if options.trace_memory
                          else []), olog)
                for i in range(options.shards)
            ])  # fmt: skip
            hellos = operator.read(120)
            time.sleep(0.5)
            base_rss, _ = operator.memory()
            result["operator_baseline_rss_mib"] = round(base_rss, 1)
            # The same as the baseline since the operator stopped loading the kubernetes
            # client's API classes; kept for the results of 2026-12-03 and -04 that preloaded them.
            result["operator_imports_only_rss_mib"] = round(
                sum(h["imports_only_rss_mib"] for h in hellos), 1
            )
            result["world_rss_after_setup_mib"] = round(world.memory()[0], 1)
            started = time.monotonic()
            answer = operator.ask("start", 630 if options.trace_memory else 90)
            if not answer["started"]:
                raise RuntimeError(f"the operator did not start: {answer}")
            stats: dict[str, Any] = {}

            # Converged once: with the benchmark's 2 s cooldown a converged target checks
            # again on every tick (Converged -> Observing -> Converged), so "all Converged at
            # one instant" also needs every re-check to be done at that instant.
            first: float | None = None

            def converged() -> bool:
                nonlocal stats, first
                stats = world.ask("stats")
                if first is None and stats["converged_once"] >= n:
                    first = time.monotonic() - started
                return int(stats["phases"].get("Converged", 0)) >= n

            ok = _wait(converged, options.converge_timeout)
            result["all_converged"] = ok
            result["time_to_converge_all_s"] = round(time.monotonic() - started, 1)
            result["converged_once"] = stats["converged_once"]
            result["time_until_each_converged_once_s"] = round(first, 1) if first else None
            result["phases_at_converge"] = stats["phases"]
            result["metrics_available_at_converge"] = stats["metrics"]
            result["operator_rss_converged_mib"] = round(operator.memory()[0], 1)
            result["scrapes_at_converge"] = prometheus.scrapes()

            # Steady state: every target converged, re-checked after each cooldown.
            t0, c0, w0, m0 = time.monotonic(), operator.cpu(), world.cpu(), _machine_busy()
            p0, q0 = prometheus.proc.cpu(), prometheus.queries()
            s0 = world.ask("stats")
            r0 = _reconciles(s0)

            def steady_enough() -> bool:
                done = _reconciles(world.ask("stats")) - r0 >= options.cycles * n
                return bool(done and time.monotonic() - t0 >= options.min_steady)

            _wait(steady_enough, options.max_steady)
            t1, c1, w1, m1 = time.monotonic(), operator.cpu(), world.cpu(), _machine_busy()
            p1, q1 = prometheus.proc.cpu(), prometheus.queries()
            s1, o1 = world.ask("stats"), operator.ask("stats", 900 if options.trace_memory else 60)
            reconciles = _reconciles(s1) - r0
            cycles = reconciles / n
            rss, peak = operator.memory()
            requests = {
                k: round((v - s0["requests"].get(k, 0)) / max(reconciles, 1), 2)
                for k, v in sorted(s1["requests"].items())
                if v - s0["requests"].get(k, 0) > 0
            }
            result.update(
                steady_seconds=round(t1 - t0, 1),
                reconciles=reconciles,
                cycles=round(cycles, 2),
                cycle_period_s=round((t1 - t0) / cycles, 2) if cycles else None,
                operator_cpu_s=round(c1 - c0, 2),
                operator_cpu_cores=round((c1 - c0) / (t1 - t0), 2),
                operator_cpu_ms_per_reconcile=round(1000 * (c1 - c0) / max(reconciles, 1), 2),
                operator_cpu_s_per_cycle=round((c1 - c0) / cycles, 2) if cycles else None,
                emulator_cpu_ms_per_reconcile=round(1000 * (w1 - w0) / max(reconciles, 1), 2),
                emulator_cpu_cores=round((w1 - w0) / (t1 - t0), 2),
                prometheus_cpu_cores=round((p1 - p0) / (t1 - t0), 2),
                prometheus_rss_mib=round(prometheus.proc.memory()[0], 1),
                api_requests_per_reconcile=requests,
                promql_queries=q1 - q0,
                promql_per_cycle=round((q1 - q0) / cycles, 1) if cycles else None,
                # The batches follow the wall clock (max age: half the interval), so a cycle
                # stretched by a starved machine holds more of them; per configured interval:
                promql_per_interval=round((q1 - q0) / (t1 - t0) * interval, 1),
                operator_rss_mib=round(rss, 1),
                operator_peak_rss_mib=round(peak, 1),
                operator_rss_over_baseline_mib=round(rss - base_rss, 1),
                operator_rss_over_imports_only_mib=round(
                    rss - result["operator_imports_only_rss_mib"], 1
                ),
                operator_rss_ratio=round(rss / base_rss, 2),
                operator_rss_per_target_kib=round(1024 * (rss - base_rss) / n, 1),
                operator_rss_per_shard_mib=operator.rss_each(),
                world_rss_mib=round(world.memory()[0], 1),
                # Other processes' CPU (and this driver's) in the steady window: contention
                # inflates the wall-clock figures (cycle period, breach -> rollout), not CPU.
                other_cpu_cores=round(
                    ((m1 - m0) - (c1 - c0) - (w1 - w0) - (p1 - p0)) / (t1 - t0), 2
                ),
                cores=os.cpu_count(),
                operator_failures=o1["failures"],
            )

            # Breach: a handful of converged targets go slow; time to their first rollout.
            k = min(options.breach, n)
            names = [f"vllm-{i * n // k:04d}" for i in range(k)]
            breach_at = float(world.ask("breach " + ",".join(names))["at"])

            def rolled() -> bool:
                nonlocal stats
                stats = world.ask("stats")
                return all(name in stats["bumped_at"] for name in names)

            _wait(rolled, options.breach_timeout, every=0.25)
            lts = [name.replace("vllm-", "lt-") for name in names]
            bumps = [stats["bumped_at"][m] - breach_at for m in names if m in stats["bumped_at"]]
            trials = [stats["trial_at"][m] - breach_at for m in lts if m in stats["trial_at"]]
            # What each breached target went through, seconds after the breach: why a breach
            # that did not roll out did not (not reconciled, judged met, no data, stuck).
            timeline = [{**e, "t": round(e["t"] - breach_at, 1)} for e in stats["timeline"]]
            result.update(
                breached=k,
                breach_timeline=timeline,
                rolled_out=len(bumps),
                breach_to_trial_s=_summary(trials),
                breach_to_rollout_s=_summary(bumps),
                breach_to_rollout_intervals=round(statistics.median(bumps) / interval, 2)
                if bumps
                else None,
            )
        finally:
            if operator is not None:
                with contextlib.suppress(Exception):
                    operator.ask("stop", 60)
                for proc in operator.procs:
                    _end(proc)
            if prometheus is not None:
                prometheus.stop()
            with contextlib.suppress(Exception):
                world.popen.stdin.write("quit\n")  # type: ignore[union-attr]
                world.popen.stdin.flush()  # type: ignore[union-attr]
            _end(world)
    return result


def _end(proc: _Proc) -> None:
    try:
        proc.popen.wait(30)
    except subprocess.TimeoutExpired:
        proc.popen.terminate()
        proc.popen.wait(10)


def _summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
        "min": round(min(values), 2),
    }


ROWS = [
    ("LatencyTargets (one Deployment, one pod each)", "targets"),
    ("namespaces the targets are dealt over", "namespaces"),
    ("operator shards (one process each; CPU and RSS summed over them)", "shards"),
    ("shard mode", "shard_mode"),
    ("operator RSS per shard, steady state [MiB]", "operator_rss_per_shard_mib"),
    ("time until all Converged [s]", "time_to_converge_all_s"),
    ("time until each target had been Converged once [s]", "time_until_each_converged_once_s"),
    ("operator RSS before start (baseline) [MiB]", "operator_baseline_rss_mib"),
    ("operator RSS, steady state [MiB]", "operator_rss_mib"),
    ("  over baseline [MiB]", "operator_rss_over_baseline_mib"),
    ("  ratio to baseline", "operator_rss_ratio"),
    ("  per target [KiB]", "operator_rss_per_target_kib"),
    ("operator peak RSS [MiB]", "operator_peak_rss_mib"),
    ("steady-state reconciles measured", "reconciles"),
    ("configured interval / measured cycle period [s]", "cycle"),
    ("operator CPU per reconcile [ms]", "operator_cpu_ms_per_reconcile"),
    ("operator CPU per full cycle [s]", "operator_cpu_s_per_cycle"),
    ("operator CPU use [cores]", "operator_cpu_cores"),
    ("API emulator CPU per reconcile [ms] (other process)", "emulator_cpu_ms_per_reconcile"),
    ("API emulator CPU use [cores]", "emulator_cpu_cores"),
    ("other processes' CPU during the measurement [cores]", "other_cpu_cores"),
    ("API requests per reconcile (all verbs)", "api_total"),
    ("GET deployments / GET nodes per reconcile", "gets"),
    ("Prometheus: series held", "prometheus_series"),
    ("Prometheus CPU use [cores] (other process)", "prometheus_cpu_cores"),
    ("Prometheus RSS [MiB]", "prometheus_rss_mib"),
    ("PromQL queries per measured cycle (Prometheus backend)", "promql_per_cycle"),
    ("PromQL queries per configured interval", "promql_per_interval"),
    ("breach -> status.currentTrial, median / max [s]", "trial"),
    ("breach -> Deployment generation bump, median / max [s]", "rollout"),
    ("  median in intervals", "breach_to_rollout_intervals"),
]


def _cell(r: dict[str, Any], key: str) -> str:
    if key == "cycle":
        return f"{r['interval_s']:g} / {r.get('cycle_period_s')}"
    if key == "api_total":
        return f"{sum(r.get('api_requests_per_reconcile', {}).values()):.2f}"
    if key == "gets":
        per = r.get("api_requests_per_reconcile", {})
        return f"{per.get('get deployments', 0)} / {per.get('get nodes', 0)}"
    if key in ("trial", "rollout"):
        s = r.get("breach_to_trial_s" if key == "trial" else "breach_to_rollout_s")
        done = f" ({r.get('rolled_out')}/{r.get('breached')} rolled)" if key == "rollout" else ""
        return f"{s['median']} / {s['max']}{done}" if s else f"none{done}"
    value = r.get(key)
    return "n/a" if value is None else str(value)


def table(results: list[dict[str, Any]]) -> str:
    head = "| measure | " + " | ".join(str(r["targets"]) for r in results) + " |"
    rule = "|---|" + "---:|" * len(results)
    rows = [f"| {label} | " + " | ".join(_cell(r, key) for r in results) + " |"
            for label, key in ROWS]  # fmt: skip
    return "\n".join([head, rule, *rows])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--targets", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--interval", type=float, default=30.0, help="operator --interval [s]")
    p.add_argument("--window", type=float, default=30.0, help="evaluation.window [s]")
    p.add_argument("--cooldown", type=float, default=2.0, help="evaluation.cooldown [s]")
    p.add_argument("--scrape", type=float, default=5.0, help="Prometheus scrape interval [s]")
    p.add_argument("--breach", type=int, default=5, help="targets made slow after converging")
    p.add_argument("--cycles", type=float, default=2.0, help="steady-state cycles to measure")
    p.add_argument("--min-steady", type=float, default=60.0)
    p.add_argument("--max-steady", type=float, default=150.0)
    p.add_argument("--converge-timeout", type=float, default=300.0)
    p.add_argument("--breach-timeout", type=float, default=150.0)
    p.add_argument("--workdir", help="keep kubeconfigs and logs here (default: a temp dir)")
    p.add_argument("--shards", type=int, default=1, help="operator shards (processes)")
    p.add_argument("--trace-memory", metavar="DIR",
                   help="trace the operator's allocations (slow) and write its largest live "
                        "ones to DIR/memory-shard-N.txt at each stats read")  # fmt: skip
    p.add_argument("--shard", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--shard-mode", choices=["hash", "namespace", "label"], default="hash",
                   help="hash of namespace/name, hash of the namespace, or a latencytuner.io/shard "
                        "label on each target (round robin; one per namespace with --namespaces), "
                        "whose watch the API server filters")  # fmt: skip
    p.add_argument("--namespaces", type=int, default=1,
                   help="namespaces the targets are dealt over, round robin")  # fmt: skip
    p.add_argument("--role", choices=["bench", "world", "operator"], default="bench",
                   help=argparse.SUPPRESS)  # fmt: skip
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--prometheus-url", help=argparse.SUPPRESS)
    options = p.parse_args(list(argv) if argv is not None else None)
    if options.role == "world":
        window, cooldown = f"{options.window * 1000:.0f}ms", f"{options.cooldown * 1000:.0f}ms"
        labels = options.shards if options.shard_mode == "label" and options.shards > 1 else None
        world = _World(options.targets[0], window, cooldown, labels, options.namespaces)
        asyncio.run(world.serve(Path(options.kubeconfig)))
        return 0
    if options.role == "operator":
        return _operator(
            options.kubeconfig,
            options.interval,
            options.prometheus_url,
            options.shards,
            options.shard,
            options.trace_memory,
            options.shard_mode,
            options.namespaces,
        )
    results = []
    with contextlib.ExitStack() as stack:
        workdir = Path(options.workdir or stack.enter_context(tempfile.TemporaryDirectory()))
        workdir.mkdir(parents=True, exist_ok=True)
        for n in options.targets:
            results.append(measure(n, options, workdir))
            if not options.json:
                print(f"[{n} targets done]", file=sys.stderr, flush=True)
    if options.json:
        print(json.dumps(results, indent=2))
    else:
        print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
