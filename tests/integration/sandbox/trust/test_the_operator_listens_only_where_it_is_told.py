"""The operator's own endpoints (metrics and the liveness probe) bind the addresses its
settings name, so a deployment can keep them off the pod network. Finding 10 of issue 13
(the NetworkPolicy, image digest and lock file are checked in tests/chart) — the operator
under kopf against the API emulator, its sockets read from /proc/net/tcp."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from tests.integration.operator.harness import (
    SEQS_ONLY,
    by_seqs,
    cluster,
    eventually,
    latency_target,
    operator_running,
    queueing,
)
from tests.integration.sandbox.trust.support import ARGS

from latency_tuner.sandbox.prometheus import free_port

LISTEN = "0A"


def listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses (dotted) with a socket listening on ``port``."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == LISTEN and int(hex_port, 16) == port:
            found.add(".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


@pytest.mark.parametrize("address", ["127.0.0.1", "0.0.0.0"])
async def test_metrics_and_probe_listen_on_the_configured_address_only(
    tmp_path: Path, address: str
) -> None:
    metrics_port, probe_port = free_port(), free_port()
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(
            world,
            tmp_path,
            metrics_port=metrics_port,
            probe_port=probe_port,
            metrics_address=address,
            probe_address=address,
        ):

            async def both_listening() -> bool:
                # kopf opens the probe's socket a moment after it reports itself ready.
                return bool(listening_addresses(metrics_port) and listening_addresses(probe_port))

            await eventually(both_listening, within=15)
            metrics_on = listening_addresses(metrics_port)
            probe_on = listening_addresses(probe_port)
            async with httpx.AsyncClient() as http:
                metrics = await http.get(f"http://127.0.0.1:{metrics_port}/metrics")
                probe = await http.get(f"http://127.0.0.1:{probe_port}/healthz")
    assert metrics_on == {address}
    assert probe_on == {address}
    assert metrics.status_code == 200
    assert probe.status_code == 200
