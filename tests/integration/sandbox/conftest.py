"""Fixtures: an empty sandbox (API server + pod runner on two simulated H100s) and clients."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import kubernetes
import pytest
from tests.integration.sandbox.support import NAMESPACE

from latency_tuner.sandbox.cluster import Sandbox
from latency_tuner.sandbox.podrunner import NodeHardware

# Short back-off and drain so crash loops and rollouts take seconds.
FAST = {"backoff": (0.3, 1.0), "drain_seconds": 0.2, "resync_seconds": 0.1}


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(
        namespace=NAMESPACE,
        hardware=NodeHardware(gpu="H100-SXM", gpus=2),
        prometheus=False,
        runner_options=FAST,
    ) as box:
        yield box


@pytest.fixture
def kube(sandbox: Sandbox) -> Iterator[Any]:
    """An official ``kubernetes`` ApiClient for the sandbox's kubeconfig (blocking calls)."""
    path = str(sandbox.kubeconfig_path)
    client = kubernetes.config.new_client_from_config(config_file=path)  # type: ignore[no-untyped-call]
    try:
        yield client
    finally:
        client.close()
