"""The operator as a separate process (`latency-tuner run`), as a cluster would run it.

For the demo and the e2e tests: started against the sandbox's kubeconfig, ready when kopf's
liveness endpoint answers, stopped with SIGTERM (or killed with SIGKILL to test a crash), its
output kept in a log file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from latency_tuner.sandbox.prometheus import free_port


class OperatorProcess:
    def __init__(
        self,
        *,
        kubeconfig: Path,
        namespace: str,
        log_path: Path,
        prometheus_url: str | None,
        interval: str = "1s",
        extra_args: Sequence[str] = (),
    ) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.log_path = log_path
        self.prometheus_url = prometheus_url
        self.interval = interval
        self.extra_args = list(extra_args)  # e.g. the shard flags
        self.probe_port = free_port()
        self.metrics_port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def argv(self) -> list[str]:
        metrics = (
            ["--prometheus-url", self.prometheus_url]
            if self.prometheus_url
            else ["--metrics-source", "scrape"]
        )
        return [
            sys.executable,
            "-m",
            "latency_tuner.cli",
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--namespaces",
            self.namespace,
            "--interval",
            self.interval,
            "--standalone",
            "--probe-port",
            str(self.probe_port),
            "--metrics-port",
            str(self.metrics_port),
            *metrics,
            *self.extra_args,
        ]

    def start(self, timeout: float = 90.0) -> None:
        # Importing kopf, kubernetes and pydantic models takes seconds; on 2 busy cores (a
        # real vLLM beside it) a CI run once needed more than 30.
        log = self.log_path.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._process = subprocess.Popen(
            self.argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"the operator exited with {self._process.returncode}: "
                    + self.log_path.read_text()[-3000:]
                )
            try:
                url = f"http://127.0.0.1:{self.probe_port}/healthz"
                if httpx.get(url, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the operator was not ready within {timeout} s; see {self.log_path}")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to clean up."""
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._process = None

    def stop(self, timeout: float = 20.0) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
        self._process = None

    def metrics(self) -> str:
        """The operator's own /metrics text."""
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
