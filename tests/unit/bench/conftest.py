"""Fixtures of the bench tests: a real streaming server on 127.0.0.1 (see support.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from tests.unit.bench.support import FakeServer


@pytest.fixture
async def fake_server() -> AsyncIterator[FakeServer]:
    server = FakeServer()
    runner = web.AppRunner(server.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    server.url = f"http://{host}:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()
