"""Start ``latency-tuner sim`` as a real subprocess on a free 127.0.0.1 port, and stop it."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import httpx

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def sim_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "latency_tuner.cli", "sim", *args]


@dataclass
class Sim:
    url: str
    process: subprocess.Popen[str]

    def stop(self) -> int:
        """SIGTERM, as Kubernetes does; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@contextlib.contextmanager
def running_sim(*args: str, ready_timeout: float = 30.0) -> Iterator[Sim]:
    # Output to a file, not a pipe: nobody drains a pipe, and a full one blocks the server.
    with tempfile.TemporaryFile(mode="w+") as log:
        port = free_port()
        process = subprocess.Popen(
            sim_command(*args, "--host", "127.0.0.1", "--port", str(port)),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        sim = Sim(f"http://127.0.0.1:{port}", process)
        try:
            _wait_ready(sim, log, ready_timeout)
            yield sim
        finally:
            sim.stop()


def _wait_ready(sim: Sim, log: IO[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if sim.process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"simulator exited with {sim.process.returncode}:\n{log.read()}")
        try:
            if httpx.get(f"{sim.url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("simulator did not become ready")
        time.sleep(0.05)
