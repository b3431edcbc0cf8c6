"""A real Prometheus server for tests, the demo and e2e: Debian's binary, started by hand.

Listens on 127.0.0.1 on a free port, keeps its TSDB in a temporary folder, and discovers its
targets through a ``file_sd`` file that ``set_targets`` rewrites (Prometheus re-reads it by
itself). Each target carries the labels a Kubernetes scrape would attach (``namespace``,
``pod``, ``container``), so the operator's default selectors match.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx

from latency_tuner.api.durations import format_duration

# A restart replays the TSDB's write-ahead log before it answers: on a starved CI machine two
# minutes of one pod's series took 21 s to replay, past the 20 s a first start gets.
RESTART_READY_SECONDS = 120.0


class PrometheusNotInstalled(RuntimeError):
    """The ``prometheus`` binary is not on PATH."""


@dataclass(frozen=True)
class Target:
    address: str  # host:port
    labels: Mapping[str, str] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def binary() -> str | None:
    return shutil.which("prometheus")


class PrometheusRunner:
    """Start with ``start()`` (or ``with``); ``url`` is its HTTP API; ``stop()`` ends it."""

    def __init__(
        self, *, scrape_interval: str = "1s", port: int | None = None, log_path: Path | None = None
    ) -> None:
        self.scrape_interval = scrape_interval
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._dir = Path(tempfile.mkdtemp(prefix="lt-prometheus-"))
        self._targets_file = self._dir / "targets.json"
        self._process: subprocess.Popen[bytes] | None = None
        # Outside the TSDB folder when given, so that it outlives ``stop()`` for a post-mortem.
        self.log_path = log_path or self._dir / "prometheus.log"
        self.restarts = 0  # by ``restart``: the sandbox's liveness probe
        # Started and not stopped on purpose: what the liveness probe keeps running, whether
        # the process still runs or not (it may have crashed, or a restart may have failed).
        self.wanted = False

    def start(self, timeout: float = 20.0) -> PrometheusRunner:
        """Start the server and wait until it is ready. When it exits or is not ready within
        ``timeout``, end it and raise; its folder (TSDB, targets) stays for the next attempt
        until ``stop()``."""
        exe = binary()
        if exe is None:
            raise PrometheusNotInstalled(
                "prometheus is not installed: `apt-get install prometheus` (scripts/setup.sh does)"
            )
        self.wanted = True
        self._dir.mkdir(parents=True, exist_ok=True)
        if not self._targets_file.exists():
            self.set_targets([])
        config = self._dir / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {self.scrape_interval}\n"
            f"  evaluation_interval: {self.scrape_interval}\n"
            "scrape_configs:\n"
            "  - job_name: vllm\n"
            f"    scrape_timeout: {self.scrape_interval}\n"
            "    file_sd_configs:\n"
            f"      - files: ['{self._targets_file}']\n"
            "        refresh_interval: 1s\n"
        )
        with self.log_path.open("ab") as log:  # the child keeps its own copy of the descriptor
            self._process = subprocess.Popen(
                [
                    exe,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self._dir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                    "--web.enable-lifecycle",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self._end_process()
        raise RuntimeError(f"prometheus did not become ready in {format_duration(timeout)}")

    def probe(self, timeout: float = 5.0) -> str | None:
        """None when the server answers a query on its own series within ``timeout``, else
        why not: what a liveness probe of a Prometheus pod would ask."""
        try:
            response = httpx.get(
                f"{self.url}/api/v1/query", params={"query": "up"}, timeout=timeout
            )
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__} {exc}".strip()
        return None if response.status_code == 200 else f"HTTP {response.status_code}"

    def restart(self, why: str, timeout: float = RESTART_READY_SECONDS) -> None:
        """Stop the server (SIGKILL when it does not end) and start it again on the same port
        and TSDB, as a kubelet restarts a container whose liveness probe fails. Counted in
        ``restarts`` once the server is ready again (an attempt that fails raises, uncounted,
        and leaves the TSDB for the next one; the log keeps every attempt)."""
        with self.log_path.open("a") as log:
            log.write(f"--- sandbox: restarting Prometheus ({why})\n")
        self.stop(keep_data=True)
        self.start(timeout)
        self.restarts += 1

    def set_targets(self, targets: Sequence[Target]) -> None:
        groups = [{"targets": [t.address], "labels": dict(t.labels)} for t in targets]
        tmp = self._targets_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.replace(self._targets_file)  # atomic: Prometheus never reads half a file

    def wait_for_targets(self, count: int, timeout: float = 20.0) -> None:
        """Block until ``count`` targets have been scraped successfully at least once."""
        deadline = time.monotonic() + timeout
        up = 0
        while time.monotonic() < deadline:
            try:
                active = httpx.get(f"{self.url}/api/v1/targets", timeout=2).json()["data"]
            except (httpx.HTTPError, KeyError, ValueError):
                active = {}
            up = sum(1 for t in active.get("activeTargets", []) if t.get("health") == "up")
            if up >= count:
                return
            time.sleep(0.1)
        raise TimeoutError(
            f"prometheus scraped {up} of {count} targets within {format_duration(timeout)}"
        )

    def stop(self, *, keep_data: bool = False) -> None:
        """End the server; with ``keep_data`` a later ``start()`` resumes on the same TSDB,
        without it the server is not wanted any more and its folder is removed."""
        self._end_process()
        if not keep_data:
            self.wanted = False
            shutil.rmtree(self._dir, ignore_errors=True)

    def _end_process(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            with contextlib.suppress(OSError):  # a stopped (SIGSTOP) process handles TERM
                os.kill(self._process.pid, signal.SIGCONT)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def health(self, timeout: float = 5.0) -> str:
        """One line on how the server does now: how long it took to answer, and each target's
        health, last scrape and error (a stalled server stops scraping as well as answering)."""
        began = time.monotonic()
        try:
            answer = httpx.get(f"{self.url}/api/v1/targets", timeout=timeout).json()["data"]
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            waited = format_duration(time.monotonic() - began)
            return f"did not answer its targets API ({type(exc).__name__} after {waited})"
        took = time.monotonic() - began
        parts = [
            f"{t.get('scrapeUrl')} {t.get('health')}, last scrape {t.get('lastScrape')} "
            f"({t.get('lastScrapeDuration')}s){' ' + t['lastError'] if t.get('lastError') else ''}"
            for t in answer.get("activeTargets", [])
        ]
        restarted = f"restarted {self.restarts}x by the liveness probe; " if self.restarts else ""
        answered = f"answered in {format_duration(took)}"
        return f"{restarted}{answered}; targets: {'; '.join(parts) or 'none'}"

    def __enter__(self) -> PrometheusRunner:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
