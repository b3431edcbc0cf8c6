"""Real parts wired together: simulated vLLM servers, bench loads, one real Prometheus.

A ``Server`` is one simulated vLLM pod: the vLLM command line a Deployment would carry, the
simulated hardware, and the pod labels a Kubernetes scrape would attach (so the operator's
default selector ``pod=~"<deployment>-<hash>-<suffix>"`` matches). ``start_servers`` starts
several simulator processes at once (each costs about a second of CPU to import, so starting
them in parallel saves most of that on two cores) and stops them all at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from tests.integration.simulator.support import Sim, running_sims

from latency_tuner.core.prommath import histogram_quantile
from latency_tuner.loadgen.config import BenchConfig
from latency_tuner.loadgen.results import BenchResult
from latency_tuner.loadgen.runner import run_benchmark
from latency_tuner.sandbox.prometheus import PrometheusRunner, Target, binary

NAMESPACE = "ml"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"


def pod_name(deployment: str) -> str:
    """``<deployment>-<10 hex>-<5 alnum>``, as a ReplicaSet names its pods (stable per name)."""
    digest = hashlib.sha256(deployment.encode()).hexdigest()
    return f"{deployment}-{digest[:10]}-{digest[10:15]}"


@dataclass(frozen=True)
class Server:
    """One simulated vLLM pod of Deployment ``deployment``."""

    deployment: str
    model: str
    vllm_flags: tuple[str, ...] = ()
    gpu: str = "H100-SXM"
    gpus: int = 1

    def sim_args(self) -> list[str]:
        return [
            "serve", self.model, *self.vllm_flags, "--disable-uvicorn-access-log",
            "--sim-gpu", self.gpu, "--sim-gpus", str(self.gpus),
        ]  # fmt: skip

    def labels(self) -> dict[str, str]:
        return {"namespace": NAMESPACE, "pod": pod_name(self.deployment), "container": "vllm"}

    def manifest(self) -> dict[str, Any]:
        """The Deployment that would run this server (what ``diagnose`` reads)."""
        return vllm_deployment(self.deployment, [self.model, *self.vllm_flags], gpus=self.gpus)


def vllm_deployment(name: str, args: Sequence[str], *, gpus: int = 1) -> dict[str, Any]:
    return deployment(
        name,
        {
            "name": "vllm",
            "image": "vllm/vllm-openai:v0.11.0",
            "command": ["vllm", "serve"],
            "args": list(args),
            "ports": [{"containerPort": 8000, "name": "http"}],
            "resources": {"limits": {"nvidia.com/gpu": gpus}},
        },
    )


def deployment(name: str, container: dict[str, Any]) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def write_yaml(directory: Path, name: str, document: dict[str, Any]) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@dataclass
class RunningServer:
    server: Server
    sim: Sim

    @property
    def url(self) -> str:
        return self.sim.url

    @property
    def port(self) -> int:
        return self.sim.port

    def target(self) -> Target:
        return Target(f"127.0.0.1:{self.port}", self.server.labels())

    def metrics_text(self) -> str:
        return httpx.get(f"{self.url}/metrics", timeout=5).text

    def metrics(self) -> ServerMetrics:
        return ServerMetrics.parse(self.metrics_text())


@dataclass(frozen=True)
class ServerMetrics:
    """One ``/metrics`` snapshot of a simulated server: what it measured itself, with modeled
    times, so a client slowed down by a busy machine does not blur it."""

    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]

    @classmethod
    def parse(cls, text: str) -> ServerMetrics:
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): float(s.value)
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        return cls(samples)

    def value(self, name: str) -> float:
        """The sum over label sets of sample ``name`` (e.g. a counter's ``_total``)."""
        found = [v for (n, _), v in self.samples.items() if n == name]
        if not found:
            raise KeyError(f"{name} not exposed")
        return sum(found)

    def mean(self, histogram: str) -> float:
        return self.value(f"{histogram}_sum") / self.value(f"{histogram}_count")

    def quantile(self, histogram: str, q: float) -> float:
        buckets = [
            (float(dict(labels)["le"]), v)
            for (n, labels), v in self.samples.items()
            if n == f"{histogram}_bucket"
        ]
        value = histogram_quantile(q, buckets)
        assert value is not None, f"{histogram} has no observations"
        return value


TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"
PREEMPTIONS = "vllm:num_preemptions_total"


@contextlib.contextmanager
def start_servers(
    servers: Sequence[Server], *, ready_timeout: float = 60.0
) -> Iterator[dict[str, RunningServer]]:
    """All ``servers`` started at once and ready (``/health`` 200); SIGTERM to each at the end.
    Keyed by deployment name."""
    commands = [server.sim_args() for server in servers]
    with running_sims(commands, ready_timeout=ready_timeout) as sims:
        yield {s.deployment: RunningServer(s, sim) for s, sim in zip(servers, sims, strict=True)}


@contextlib.contextmanager
def prometheus_or_skip() -> Iterator[PrometheusRunner]:
    """A real Prometheus scraping every second; skipped locally, failed in CI, when missing."""
    if binary() is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; scripts/setup.sh installs it")
        pytest.skip("prometheus is not installed (scripts/setup.sh installs it as root)")
    with PrometheusRunner(scrape_interval="1s") as prom:
        yield prom


def scrape(prometheus: PrometheusRunner, servers: Sequence[RunningServer]) -> None:
    prometheus.set_targets([s.target() for s in servers])
    prometheus.wait_for_targets(len(servers), timeout=30)


@dataclass(frozen=True)
class Load:
    """A closed-loop bench load (``rate`` None) or a Poisson one."""

    concurrency: int
    prompt_tokens: int
    output_tokens: int
    shared_prefix_tokens: int = 0
    rate: float | None = None

    def config(self, url: str, **extra: Any) -> BenchConfig:
        return BenchConfig(
            url=url,
            concurrency=self.concurrency,
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            shared_prefix_tokens=self.shared_prefix_tokens,
            rate=self.rate,
            timeout=120.0,
            **extra,
        )


async def bench_for(url: str, load: Load, seconds: float) -> BenchResult:
    """Send ``load`` for ``seconds`` (then let in-flight requests finish)."""
    return await run_benchmark(load.config(url, duration=seconds))


@dataclass
class BackgroundLoads:
    """Bench loads that run until ``stop()``; in-flight requests are then cancelled."""

    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[BenchResult]] = field(default_factory=list)

    def start(self, url: str, load: Load) -> None:
        task = asyncio.create_task(run_benchmark(load.config(url), stop=self.stop_event))
        self.tasks.append(task)

    async def stop(self) -> list[BenchResult]:
        self.stop_event.set()
        return list(await asyncio.gather(*self.tasks))


@dataclass(frozen=True)
class DiagnoseRun:
    """One ``latency-tuner diagnose`` process: its exit code, output and parsed JSON."""

    exit_code: int
    stdout: str
    stderr: str
    seconds: float  # wall time of the process

    @property
    def report(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.stdout)
        return parsed

    @property
    def bottleneck(self) -> str:
        value: str = self.report["diagnosis"]["bottleneck"]
        return value

    @property
    def findings(self) -> list[str]:
        value: list[str] = self.report["diagnosis"]["findings"]
        return value

    @property
    def recommended_knob(self) -> str | None:
        rec = self.report["recommendation"]
        return None if rec is None else rec.get("knob")

    @property
    def observation(self) -> dict[str, Any]:
        value: dict[str, Any] = self.report["observation"]
        return value

    def explain(self) -> str:
        return (
            f"exit {self.exit_code} after {self.seconds:.1f} s\n"
            f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )


async def run_diagnose(*args: str, limit_seconds: float = 60.0) -> DiagnoseRun:
    """``latency-tuner diagnose ARGS`` as a real subprocess."""
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "latency_tuner.cli",
        "diagnose",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), limit_seconds)
    assert process.returncode is not None
    seconds = time.monotonic() - started
    return DiagnoseRun(process.returncode, out.decode(), err.decode(), seconds)
