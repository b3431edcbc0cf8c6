"""Prometheus (when installed) scrapes the ready pods with namespace/pod/container labels, and
is restarted, as a kubelet would, when it stops answering."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from tests.integration.sandbox.support import NAMESPACE, deployment, eventually

from latency_tuner.sandbox import prometheus
from latency_tuner.sandbox.cluster import Sandbox, keep_alive

pytestmark = pytest.mark.prometheus


@pytest.fixture(autouse=True)
def _needs_prometheus() -> None:
    if prometheus.binary() is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; scripts/setup.sh installs it")
        pytest.skip("prometheus is not installed (scripts/setup.sh installs it as root)")


async def test_prometheus_scrapes_the_pod_under_its_kubernetes_labels() -> None:
    async with Sandbox(namespace=NAMESPACE, prometheus=True) as sandbox:
        await sandbox.apply(deployment())
        await eventually(lambda: asyncio.sleep(0, any(p.ready for p in sandbox.pods())))
        [pod] = sandbox.pods()
        assert sandbox.prometheus_url is not None
        query = f"{sandbox.prometheus_url}/api/v1/query"

        async def scraped() -> list[dict[str, str]]:
            async with httpx.AsyncClient() as http:
                params = {"query": 'vllm:num_requests_running{job="vllm"}'}
                body = (await http.get(query, params=params)).json()
            return [r["metric"] for r in body["data"]["result"]]

        [series] = await eventually(scraped, within=20, every=0.2)

    assert series["namespace"] == NAMESPACE
    assert series["pod"] == pod.name
    assert series["container"] == "vllm"
    assert series["instance"] == f"127.0.0.1:{pod.port}"


async def _scraping_itself(runner: prometheus.PrometheusRunner) -> float:
    """Once ``runner`` has scraped its own metrics: the time from which samples exist."""
    runner.set_targets([prometheus.Target(runner.url.removeprefix("http://"))])
    await asyncio.to_thread(runner.wait_for_targets, 1)
    return time.time()


async def _samples_up_to(runner: prometheus.PrometheusRunner, moment: float) -> int:
    """How many samples of ``up`` the server holds from the five minutes before ``moment``."""
    async with httpx.AsyncClient() as http:
        params = {"query": "count_over_time(up[5m])", "time": f"{moment:.3f}"}
        body = (await http.get(f"{runner.url}/api/v1/query", params=params)).json()
    [row] = body["data"]["result"]
    return int(row["value"][1])


@contextlib.asynccontextmanager
async def _probed(
    runner: prometheus.PrometheusRunner, *, period: float, failures: int
) -> AsyncIterator[None]:
    """The sandbox's liveness probe watching ``runner`` for the block's duration."""
    watch = asyncio.create_task(keep_alive(runner, period=period, failures=failures))
    try:
        yield
    finally:
        watch.cancel()


async def test_a_prometheus_that_stops_answering_is_restarted_on_its_port_with_its_data(
    tmp_path: Path,
) -> None:
    # A stopped process accepts connections (the kernel does) and answers nothing: the stall
    # CI saw. The probe restarts it; the series scraped before the stall are still there.
    with prometheus.PrometheusRunner(scrape_interval="1s", log_path=tmp_path / "p.log") as runner:
        began = await _scraping_itself(runner)
        assert runner._process is not None
        os.kill(runner._process.pid, signal.SIGSTOP)
        async with _probed(runner, period=0.5, failures=3):
            await eventually(lambda: asyncio.sleep(0, runner.restarts == 1), within=30)
        assert await asyncio.to_thread(runner.probe) is None
        kept = await _samples_up_to(runner, began)
    assert kept >= 1  # a sample from before the stall, kept over the restart
    log = (tmp_path / "p.log").read_text()
    assert "restarting Prometheus (3 liveness probes failed in a row, the last: ReadTimeout" in log


async def test_a_prometheus_that_exits_is_restarted_and_a_restart_that_fails_is_tried_again(
    tmp_path: Path,
) -> None:
    # Killed, then its port taken: the first restarts exit at once (address in use). Each
    # failed attempt leaves the TSDB in place, and once the port is free the next one comes up
    # with the series scraped before the crash.
    with prometheus.PrometheusRunner(scrape_interval="1s", log_path=tmp_path / "p.log") as runner:
        began = await _scraping_itself(runner)
        assert runner._process is not None
        runner._process.kill()
        runner._process.wait()
        squatter = socket.socket()
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", runner.port))
        squatter.listen()
        log = tmp_path / "p.log"
        with squatter:
            async with _probed(runner, period=0.3, failures=2):
                await eventually(
                    lambda: asyncio.sleep(0, log.read_text().count("restarting Prometheus") >= 2),
                    within=30,
                )
                assert runner.restarts == 0  # none came up while the port was taken
                squatter.close()
                await eventually(lambda: asyncio.sleep(0, runner.restarts == 1), within=60)
        assert await asyncio.to_thread(runner.probe) is None
        kept = await _samples_up_to(runner, began)
    assert kept >= 1  # a sample from before the crash, kept over the attempts
    assert "address already in use" in (tmp_path / "p.log").read_text()


async def test_a_prometheus_stopped_on_purpose_is_not_restarted(tmp_path: Path) -> None:
    runner = prometheus.PrometheusRunner(scrape_interval="1s", log_path=tmp_path / "p.log")
    runner.start()
    runner.stop()
    async with _probed(runner, period=0.1, failures=1):
        await asyncio.sleep(1.0)
    assert not runner.running
    assert runner.restarts == 0
    assert "restarting Prometheus" not in (tmp_path / "p.log").read_text()
