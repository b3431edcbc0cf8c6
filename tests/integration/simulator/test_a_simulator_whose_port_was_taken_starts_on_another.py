"""The simulator launcher survives the race between choosing a free port and binding it."""

from __future__ import annotations

import socket

import httpx
import pytest
from tests.integration.simulator import support

from latency_tuner.sandbox.prometheus import free_port


def test_a_simulator_whose_port_another_process_took_starts_again_on_another_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = iter([busy])
        monkeypatch.setattr(support, "free_port", lambda: next(ports, None) or free_port())
        with support.running_sim(support.MODEL, "--max-model-len", "4096") as sim:
            assert sim.port != busy
            assert httpx.get(f"{sim.url}/health", timeout=5).status_code == 200


def test_a_simulator_that_fails_for_another_reason_is_not_started_again() -> None:
    with (
        pytest.raises(RuntimeError, match="simulator exited"),
        support.running_sim(support.MODEL, "--tensor-parallel-size", "2", "--sim-gpus", "1"),
    ):
        pass
