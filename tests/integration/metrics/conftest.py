"""Fixtures: the controlled exporter and a real Prometheus."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web
from tests.integration.metrics.support import Exporter, make_exporter

from latency_tuner.sandbox.prometheus import PrometheusRunner, binary
from latency_tuner.vllm.metrics import MetricsVersion


@pytest.fixture
async def exporter(request: pytest.FixtureRequest) -> AsyncIterator[Exporter]:
    version = getattr(request, "param", MetricsVersion.CURRENT)
    exp, app = make_exporter(version)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", exp.port).start()
    try:
        yield exp
    finally:
        await runner.cleanup()


@pytest.fixture
def prometheus() -> Iterator[PrometheusRunner]:
    if binary() is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; scripts/setup.sh installs it")
        pytest.skip("prometheus is not installed (scripts/setup.sh installs it as root)")
    with PrometheusRunner(scrape_interval="1s") as prom:
        yield prom
