"""Fixtures: a real API emulator on a free 127.0.0.1 port."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from latency_tuner.sandbox.apiserver import ApiServer


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server
