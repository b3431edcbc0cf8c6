"""The real-world harness survives the race between choosing a free port and binding it."""

from __future__ import annotations

import socket

import httpx
import pytest
from tests.integration.realworld import support

from latency_tuner.sandbox.prometheus import free_port


def test_a_simulator_whose_port_another_process_took_starts_again_on_another_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    ports = iter([busy])
    monkeypatch.setattr(support, "free_port", lambda: next(ports, None) or free_port())
    try:
        server = support.Server("racer", support.LLAMA_8B, ("--max-model-len", "4096"))
        with support.start_servers([server]) as running:
            r = running["racer"]
            assert r.port != busy
            assert httpx.get(f"{r.url}/health", timeout=5).status_code == 200
    finally:
        taken.close()
