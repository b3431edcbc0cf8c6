"""The kubelet of the sandbox: runs a pod's container as a process, probes it, restarts it.

``Kubelet.supervise(pod)`` asks the engine (``_engine.PodEngine``) what to run, starts it in a
process group of its own with output to the pod's log, marks the pod ready once ``/health``
answers 200, and on exit records ``lastState.terminated`` and restarts after an exponential
back-off (kubelet: 10 s doubling to 5 min; here ``backoff`` scales it down), showing
``CrashLoopBackOff`` meanwhile. ``publish(pod)`` writes the pod's status as a kubelet would.
``stop(pod)`` sends TERM to the group, then KILL after ``grace_seconds``; ``kill_all_now()`` is
the synchronous last resort (for ``atexit``).

It decides nothing about how many pods there are: that is the controller's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable

import httpx

from latency_tuner.sandbox.podrunner._api import ApiClient, Body
from latency_tuner.sandbox.podrunner._engine import EngineCommand, PodEngine, vllm_container
from latency_tuner.sandbox.podrunner._pod import PodState, now_stamp, pod_status

logger = logging.getLogger("latency_tuner.sandbox.podrunner")


class Kubelet:
    """Process supervision of pods on the sandbox's nodes (see the module docstring).

    ``on_ready_change()`` is called when a pod's readiness changes (the scrape targets move);
    ``on_published()`` after every status write (the controller counts pods again).
    """

    def __init__(
        self,
        api: ApiClient,
        engine: PodEngine,
        *,
        gpu: str,
        backoff: tuple[float, float],
        grace_seconds: float,
        on_ready_change: Callable[[], None],
        on_published: Callable[[], None],
    ) -> None:
        self.api = api
        self.engine = engine
        self.gpu = gpu
        self.backoff = backoff
        self.grace_seconds = grace_seconds
        self._on_ready_change = on_ready_change
        self._on_published = on_published
        self._probe: httpx.AsyncClient | None = None
        self._processes: set[subprocess.Popen[bytes]] = set()

    def open(self) -> None:
        self._probe = httpx.AsyncClient(timeout=1.0)

    async def aclose(self) -> None:
        if self._probe is not None:
            await self._probe.aclose()
        self._probe = None

    def _delay(self, restarts: int) -> float:
        return float(min(self.backoff[0] * 2 ** (restarts - 1), self.backoff[1]))

    async def supervise(self, pod: PodState) -> None:
        """Start the container, probe it, restart it with back-off when it exits."""
        try:
            _, container = vllm_container(pod.template)
            try:
                command = self.engine.command(
                    container, port=pod.port, gpu=self.gpu, gpus=max(pod.gpus, 1)
                )
            except ValueError as exc:  # NotVllmError included
                pod.waiting = ("CreateContainerError", f"the sandbox runs only vLLM: {exc}")
                await self.publish(pod)
                return
            pod.argv = list(command.args)
            while not pod.terminating:
                if pod.restart_count:
                    await asyncio.sleep(self._delay(pod.restart_count))
                code = await self._run_container(pod, command)
                if pod.terminating:
                    return
                finished = now_stamp()
                pod.restart_count += 1
                pod.ready_since = None
                pod.last_terminated = {
                    "exitCode": code,
                    "reason": "Completed" if code == 0 else "Error",
                    "startedAt": pod.started_at,
                    "finishedAt": finished,
                    "containerID": f"sandbox://{pod.process.pid if pod.process else 0}",
                }
                message = (
                    f"back-off {self._delay(pod.restart_count):g}s restarting failed "
                    f"container={container.get('name')} pod={pod.name}_{pod.namespace}({pod.name})"
                )
                pod.waiting = ("CrashLoopBackOff", message)
                pod.started_at = None
                self._on_ready_change()
                await self.publish(pod)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("pod %s: supervisor failed", pod.name)

    async def _run_container(self, pod: PodState, command: EngineCommand) -> int:
        with pod.log_path.open("ab") as log:
            log.write(f"--- start {now_stamp()}: {command.name} {' '.join(pod.argv)}\n".encode())
            log.flush()
            pod.process = subprocess.Popen(  # noqa: ASYNC220 - fork+exec, not a wait
                [*command.program, *pod.argv],
                env={**os.environ, **command.env} if command.env else None,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopped as a whole
            )
        self._processes.add(pod.process)
        pod.started_at = now_stamp()
        pod.first_start = pod.first_start or pod.started_at
        pod.waiting = None
        await self.publish(pod)
        assert self._probe is not None
        health = f"http://127.0.0.1:{pod.port}/health"
        while (code := pod.process.poll()) is None:
            if pod.ready_since is None:
                with contextlib.suppress(httpx.HTTPError):
                    if (await self._probe.get(health)).status_code == 200:
                        pod.ready_since = time.monotonic()
                        self._on_ready_change()
                        await self.publish(pod)
                        continue
            await asyncio.sleep(0.1)
        self._processes.discard(pod.process)
        return code

    async def stop(self, pod: PodState) -> None:
        """TERM to the pod's process group, KILL after ``grace_seconds``; wait for the end."""
        process = pod.process
        if process is None or process.poll() is not None:
            if process is not None:
                self._processes.discard(process)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, self.grace_seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await asyncio.to_thread(process.wait)
        self._processes.discard(process)

    def kill_all_now(self) -> None:
        """Last resort, synchronous: SIGKILL every process group still alive."""
        for process in list(self._processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=5)
            self._processes.discard(process)

    async def publish(self, pod: PodState) -> None:
        """Write the pod's status (and, once, its node) as the kubelet would."""
        if pod.published is None:
            return  # not created yet
        status: Body = pod_status(pod)
        if status == pod.published:
            return
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        try:
            if pod.node is not None and not pod.bound:
                await self.api.request("PATCH", path, {"spec": {"nodeName": pod.node}})
                pod.bound = True
            await self.api.request("PATCH", f"{path}/status", {"status": status})
        except (httpx.HTTPError, RuntimeError) as exc:
            logger.warning("pod %s: status not written: %s", pod.name, exc)
            return
        pod.published = status
        self._on_published()
