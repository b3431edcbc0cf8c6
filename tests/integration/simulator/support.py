"""Start ``latency-tuner sim`` as real subprocesses on free 127.0.0.1 ports, and stop them: the
one launcher of the simulator for the integration tests."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

import httpx

from latency_tuner.sandbox.prometheus import free_port

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# The port free_port found can be taken by another process before the simulator binds it: the
# simulator then starts again on another one, this many times in all.
PORT_ATTEMPTS = 3


def sim_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "latency_tuner.cli", "sim", *args]


@dataclass
class Sim:
    args: tuple[str, ...]
    port: int
    process: subprocess.Popen[str]
    log: IO[str]  # a file, not a pipe: nobody drains a pipe, and a full one blocks the server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def lost_its_port(self) -> bool:
        return self.process.poll() is not None and "address already in use" in self.log_text()

    def stop(self) -> int:
        """SIGTERM, as Kubernetes does (a kill after 10 s); returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def _launch(args: Sequence[str]) -> Sim:
    port = free_port()
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed by running_sims
    process = subprocess.Popen(
        sim_command(*args, "--host", "127.0.0.1", "--port", str(port)),
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return Sim(tuple(args), port, process, log)


def _wait_ready(sims: Sequence[Sim], timeout: float) -> list[Sim]:
    """Waits until every simulator answers /health; returns those that exited because their
    port was taken (any other exit is an error)."""
    deadline = time.monotonic() + timeout
    pending, lost = list(sims), []
    while pending:
        for sim in list(pending):
            if sim.lost_its_port():
                pending.remove(sim)
                lost.append(sim)
            elif sim.process.poll() is not None:
                raise RuntimeError(
                    f"simulator exited with {sim.process.returncode}:\n{sim.log_text()}"
                )
            else:
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{sim.url}/health", timeout=1.0).status_code == 200:
                        pending.remove(sim)
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"simulator not ready in {timeout} s: {pending[0].args}")
        time.sleep(0.05)
    return lost


@contextlib.contextmanager
def running_sims(
    commands: Sequence[Sequence[str]], *, ready_timeout: float = 30.0
) -> Iterator[list[Sim]]:
    """Every command's simulator started at once and ready; each stopped at the end."""
    sims = [_launch(args) for args in commands]
    try:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            lost = _wait_ready(sims, ready_timeout)
            if not lost:
                break
            if attempt == PORT_ATTEMPTS:
                raise RuntimeError(f"simulator found no free port:\n{lost[0].log_text()}")
            for sim in lost:
                sim.stop()
                sim.log.close()
                sims[sims.index(sim)] = _launch(sim.args)
        yield sims
    finally:
        for sim in sims:
            sim.stop()
            sim.log.close()


@contextlib.contextmanager
def running_sim(*args: str, ready_timeout: float = 30.0) -> Iterator[Sim]:
    with running_sims([args], ready_timeout=ready_timeout) as [sim]:
        yield sim
