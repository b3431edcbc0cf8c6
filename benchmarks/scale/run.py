"""Scale benchmark: one operator process reconciling 100 / 1,000 LatencyTargets.

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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

NAMESPACE = "bench"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = [MODEL, "--max-num-seqs", "16"]
LT_API = "tuning.latencytuner.io/v1alpha1"
LT_STORE = ("tuning.latencytuner.io", "latencytargets")
DEP_STORE = ("apps", "deployments")
PERCENTILES = (90,)
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- world process: emulator + scripted controller ------------------------------------------


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
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


def _latency_target(name: str, deployment: str, window: str, cooldown: str) -> dict[str, Any]:
    return {
        "apiVersion": LT_API,
        "kind": "LatencyTarget",
        "metadata": {"name": name, "namespace": NAMESPACE},
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
    def __init__(self, targets: int, window: str, cooldown: str, stock: bool) -> None:
        self.targets = targets
        self.stock = stock
        self.window = window
        self.cooldown = cooldown
        self.requests: collections.Counter[str] = collections.Counter()
        self.phases: dict[str, str] = {}
        self.trial_at: dict[str, float] = {}
        self.bumped_at: dict[str, float] = {}
        self.generation: dict[str, int] = {}
        self.pod: dict[str, str] = {}

    async def serve(self, kubeconfig: Path) -> None:
        from latency_tuner.api.crd import build_crd
        from latency_tuner.sandbox.apiserver import ApiServer, KubeApiEmulator

        counts = self.requests

        stock = self.stock

        class CountingEmulator(KubeApiEmulator):
            async def __call__(self, raw_request: Any) -> Any:
                counts[_request_kind(raw_request.method, raw_request.path, raw_request.query)] += 1
                return await super().__call__(raw_request)

            def _items(self, rdef: Any, namespace: str | None) -> list[dict[str, Any]]:
                # The stock emulator deep-copies every object of the kind in the namespace on
                # each LIST (40 ms for 1,000 pods, even for a label selector matching one):
                # an emulator cost, not the operator's. Its LIST callers only read the items,
                # so top-level copies do (a real API server serves LISTs from a cache too).
                if stock:
                    return super()._items(rdef, namespace)
                found = []
                for (res, ns, _name), stored in self.objects.items():
                    mine = (res.group, res.plural) == rdef.store_key and not stored.deleted
                    if mine and (namespace is None or ns == namespace):
                        found.append({**stored.raw, "apiVersion": rdef.api_version})
                return found

        api = ApiServer()
        api.emulator = CountingEmulator()
        async with api:
            started = time.monotonic()
            await api.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
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
                await api.create(_deployment(name))
                await self._roll(api, name, 1)
                lt = _latency_target(f"lt-{i:04d}", name, self.window, self.cooldown)
                await api.create(lt)
            api.write_kubeconfig(kubeconfig, namespace=NAMESPACE)
            events: asyncio.Queue[Any] = asyncio.Queue()
            api.emulator._watchers.add(events)  # every write, in-process: no HTTP cost
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            threading.Thread(target=self._commands, args=(api, loop, stop), daemon=True).start()
            _say({"ready": True, "setup_seconds": round(time.monotonic() - started, 2)})
            controller = asyncio.create_task(self._control(api, events))
            await stop.wait()
            controller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await controller

    async def _roll(self, api: Any, name: str, generation: int) -> None:
        """The Deployment controller and kubelet: a new ready pod, the old one gone."""
        from latency_tuner.testing.rollouts import roll

        dep = await api.get("apps/v1", "Deployment", name, namespace=NAMESPACE)
        old = self.pod.get(name)
        pod = f"{name}-g{generation}"
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
                if status.get("currentTrial"):
                    self.trial_at.setdefault(name, time.time())

    def _commands(self, api: Any, loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
        for line in sys.stdin:
            command = line.strip()
            if command == "stats":
                future = asyncio.run_coroutine_threadsafe(self._stats(api), loop)
                _say(future.result(30))
            elif command == "size":
                future = asyncio.run_coroutine_threadsafe(self._size(api), loop)
                _say(future.result(30))
            elif command == "quit":
                break
        loop.call_soon_threadsafe(stop.set)

    async def _size(self, api: Any) -> dict[str, Any]:
        """The size of the body of one LIST of every LatencyTarget, as they stand now."""
        items = await api.list_objects(LT_API, "LatencyTarget", namespace=NAMESPACE)
        return {"lt_list_bytes": len(json.dumps({"items": items}))}

    async def _stats(self, api: Any) -> dict[str, Any]:
        return {
            "requests": dict(self.requests),
            "phases": dict(collections.Counter(self.phases.values())),
            "trial_at": self.trial_at,
            "bumped_at": self.bumped_at,
        }


# ---- operator process: the real operator, a scripted metrics source -------------------------


def _scripted() -> tuple[Any, set[str]]:
    """Prometheus' stand-in: every target is healthy until breached (then it queues)."""
    from latency_tuner.testing.metrics import ScriptedMetrics, queueing_signals

    breached: set[str] = set()

    def answer(deployment: str, start: float, end: float) -> dict[str, Any]:
        ttft = 2.0 if deployment in breached else 0.3
        return queueing_signals(ttft, running_mean=16.0, running_max=16.0)

    return ScriptedMetrics(answer), breached


def _operator(kubeconfig: str, interval: float, indexed_conflicts: bool) -> int:
    import kopf

    from latency_tuner.controller import gather
    from latency_tuner.handlers.cli import run_operator
    from latency_tuner.settings import OperatorSettings

    if indexed_conflicts:
        # Experiment only: what the reconcile costs without its O(N) LIST (a kopf index or an
        # informer cache answers "who else targets this Deployment" in O(1)).
        async def no_conflict(
            latencytargets: Any, spec: Any, namespace: str, name: str, claims: Any = None
        ) -> None:
            return None

        gather.owner_conflict = no_conflict

    kopf.configure(quiet=True)  # as `--log-level warning`: no INFO line per handler run
    settings = OperatorSettings(
        prometheus_url="http://prometheus.invalid:9090",
        namespaces=(NAMESPACE,),
        interval_seconds=interval,
        standalone=True,
        metrics_port=0,
        probe_port=0,
        kubeconfig=kubeconfig,
        log_level="warning",
    )
    script, breached = _scripted()
    stop, ready = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(run_operator(settings, stop_flag=stop, ready_flag=ready,
                                     metrics_for=script.metrics_for))  # fmt: skip
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=main, name="operator", daemon=True)
    _say({"imported": True})
    for line in sys.stdin:
        command, _, rest = line.strip().partition(" ")
        if command == "start":
            thread.start()
            _say({"started": ready.wait(60), "failures": [repr(f) for f in failures]})
        elif command == "breach":
            breached.update(rest.split(","))
            _say({"at": time.time()})
        elif command == "stats":
            _say({"observe_calls": script.observe_calls, "failures": [repr(f) for f in failures]})
        elif command == "stop":
            break
    stop.set()
    thread.join(30)
    _say({"stopped": not thread.is_alive()})
    return 0


def _say(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


# ---- bench: drive both, read /proc ----------------------------------------------------------


@dataclass
class _Proc:
    popen: subprocess.Popen[str]

    def ask(self, command: str, timeout: float = 60.0) -> dict[str, Any]:
        stdin = self.popen.stdin
        assert stdin is not None
        stdin.write(command + "\n")
        stdin.flush()
        return self.read(timeout)

    def read(self, timeout: float = 60.0) -> dict[str, Any]:
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
        values = {}
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(value.split()[0]) / 1024
        return values["VmRSS"], values["VmHWM"]


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


def measure(n: int, options: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from latency_tuner.core.signals import queries_for

    interval, window, cooldown = options.interval, options.window, options.cooldown
    kubeconfig = workdir / f"kubeconfig-{n}"
    result: dict[str, Any] = {
        "targets": n,
        "interval_s": interval,
        "window_s": window,
        "cooldown_s": cooldown,
        "stock_emulator": options.stock_emulator,
        "what_if_indexed_conflicts": options.what_if_indexed_conflicts,
    }
    with open(workdir / f"world-{n}.log", "w") as wlog, open(workdir / f"op-{n}.log", "w") as olog:
        extra = ["--stock-emulator"] if options.stock_emulator else []
        world = _spawn(
            ["--role", "world", "--targets", str(n), "--kubeconfig", str(kubeconfig),
             "--window", str(window), "--cooldown", str(cooldown), *extra],
            wlog,
        )  # fmt: skip
        operator = None
        try:
            result["world_setup_s"] = world.read(600)["setup_seconds"]
            extra = ["--what-if-indexed-conflicts"] if options.what_if_indexed_conflicts else []
            operator = _spawn(["--role", "operator", "--kubeconfig", str(kubeconfig),
                               "--interval", str(interval), *extra], olog)  # fmt: skip
            operator.read(120)
            time.sleep(0.5)
            base_rss, _ = operator.memory()
            result["operator_baseline_rss_mib"] = round(base_rss, 1)
            result["world_rss_after_setup_mib"] = round(world.memory()[0], 1)
            started = time.monotonic()
            answer = operator.ask("start", 90)
            if not answer["started"]:
                raise RuntimeError(f"the operator did not start: {answer}")
            stats: dict[str, Any] = {}

            def converged() -> bool:
                nonlocal stats
                stats = world.ask("stats")
                return int(stats["phases"].get("Converged", 0)) >= n

            ok = _wait(converged, options.converge_timeout)
            result["all_converged"] = ok
            result["time_to_converge_all_s"] = round(time.monotonic() - started, 1)
            result["phases_at_converge"] = stats["phases"]
            result["operator_rss_converged_mib"] = round(operator.memory()[0], 1)

            # Steady state: every target converged, re-checked after each cooldown.
            t0, c0, w0, m0 = time.monotonic(), operator.cpu(), world.cpu(), _machine_busy()
            s0, o0 = world.ask("stats"), operator.ask("stats")
            r0 = _reconciles(s0)

            def steady_enough() -> bool:
                done = _reconciles(world.ask("stats")) - r0 >= options.cycles * n
                return bool(done and time.monotonic() - t0 >= options.min_steady)

            _wait(steady_enough, options.max_steady)
            t1, c1, w1, m1 = time.monotonic(), operator.cpu(), world.cpu(), _machine_busy()
            s1, o1 = world.ask("stats"), operator.ask("stats")
            reconciles = _reconciles(s1) - r0
            cycles = reconciles / n
            observes = o1["observe_calls"] - o0["observe_calls"]
            per_observe = len(queries_for(PERCENTILES)) + 2
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
                api_requests_per_reconcile=requests,
                lt_list_bytes=world.ask("size")["lt_list_bytes"],
                observe_per_cycle=round(observes / cycles, 1) if cycles else None,
                promql_per_observe=per_observe,
                promql_per_cycle=round(observes / cycles * per_observe) if cycles else None,
                operator_rss_mib=round(rss, 1),
                operator_peak_rss_mib=round(peak, 1),
                operator_rss_over_baseline_mib=round(rss - base_rss, 1),
                operator_rss_ratio=round(rss / base_rss, 2),
                operator_rss_per_target_kib=round(1024 * (rss - base_rss) / n, 1),
                world_rss_mib=round(world.memory()[0], 1),
                # Other processes' CPU (and this driver's) in the steady window: contention
                # inflates the wall-clock figures (cycle period, breach -> rollout), not CPU.
                other_cpu_cores=round(((m1 - m0) - (c1 - c0) - (w1 - w0)) / (t1 - t0), 2),
                cores=os.cpu_count(),
                operator_failures=o1["failures"],
            )

            # Breach: a handful of converged targets go slow; time to their first rollout.
            k = min(options.breach, n)
            names = [f"vllm-{i * n // k:04d}" for i in range(k)]
            breach_at = float(operator.ask("breach " + ",".join(names))["at"])

            def rolled() -> bool:
                nonlocal stats
                stats = world.ask("stats")
                return all(name in stats["bumped_at"] for name in names)

            _wait(rolled, options.breach_timeout, every=0.25)
            lts = [name.replace("vllm-", "lt-") for name in names]
            bumps = [stats["bumped_at"][m] - breach_at for m in names if m in stats["bumped_at"]]
            trials = [stats["trial_at"][m] - breach_at for m in lts if m in stats["trial_at"]]
            result.update(
                breached=k,
                rolled_out=len(bumps),
                breach_to_trial_s=_summary(trials),
                breach_to_rollout_s=_summary(bumps),
            )
        finally:
            if operator is not None:
                with contextlib.suppress(Exception):
                    operator.ask("stop", 60)
                _end(operator)
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
    ("time until all Converged [s]", "time_to_converge_all_s"),
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
    ("LIST latencytargets per reconcile", "lt_lists"),
    ("  size of one such LIST [KiB]", "lt_list_kib"),
    ("observe() calls per cycle", "observe_per_cycle"),
    ("PromQL queries per observe", "promql_per_observe"),
    ("PromQL queries per cycle (Prometheus backend)", "promql_per_cycle"),
    ("breach -> status.currentTrial, median / max [s]", "trial"),
    ("breach -> Deployment generation bump, median / max [s]", "rollout"),
]


def _cell(r: dict[str, Any], key: str) -> str:
    if key == "cycle":
        return f"{r['interval_s']:g} / {r.get('cycle_period_s')}"
    if key == "api_total":
        return f"{sum(r.get('api_requests_per_reconcile', {}).values()):.2f}"
    if key == "lt_lists":
        return str(r.get("api_requests_per_reconcile", {}).get("list latencytargets", 0))
    if key == "lt_list_kib":
        return f"{r.get('lt_list_bytes', 0) / 1024:.0f}"
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
    p.add_argument("--interval", type=float, default=3.0, help="operator --interval [s]")
    p.add_argument("--window", type=float, default=2.0, help="evaluation.window [s]")
    p.add_argument("--cooldown", type=float, default=2.0, help="evaluation.cooldown [s]")
    p.add_argument("--breach", type=int, default=5, help="targets made slow after converging")
    p.add_argument("--cycles", type=float, default=2.0, help="steady-state cycles to measure")
    p.add_argument("--min-steady", type=float, default=10.0)
    p.add_argument("--max-steady", type=float, default=90.0)
    p.add_argument("--converge-timeout", type=float, default=180.0)
    p.add_argument("--breach-timeout", type=float, default=90.0)
    p.add_argument(
        "--stock-emulator",
        action="store_true",
        help="keep the emulator's deep-copying LIST (much slower at 1,000)",
    )
    p.add_argument(
        "--what-if-indexed-conflicts",
        action="store_true",
        help="experiment: skip the per-reconcile LIST of every LatencyTarget "
        "(what an in-memory index would cost: ~nothing)",
    )
    p.add_argument("--workdir", help="keep kubeconfigs and logs here (default: a temp dir)")
    p.add_argument("--role", choices=["bench", "world", "operator"], default="bench",
                   help=argparse.SUPPRESS)  # fmt: skip
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    options = p.parse_args(list(argv) if argv is not None else None)
    if options.role == "world":
        window, cooldown = f"{options.window * 1000:.0f}ms", f"{options.cooldown * 1000:.0f}ms"
        world = _World(options.targets[0], window, cooldown, options.stock_emulator)
        asyncio.run(world.serve(Path(options.kubeconfig)))
        return 0
    if options.role == "operator":
        return _operator(options.kubeconfig, options.interval, options.what_if_indexed_conflicts)
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
