"""Fixtures: a real emulator on a free 127.0.0.1 port, an HTTP client, the test CRD created."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from tests.integration.apiserver.support import WIDGET_CRD

from latency_tuner.sandbox.apiserver import ApiServer


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
async def client(api: ApiServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.url, timeout=5.0) as http:
        yield http


@pytest.fixture
async def crd(api: ApiServer) -> dict[str, Any]:
    return await api.create(WIDGET_CRD)
