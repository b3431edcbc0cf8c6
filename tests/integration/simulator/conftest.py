"""A simulated vLLM server shared by the tests of one module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.integration.simulator.support import MODEL, Sim, running_sim


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    with running_sim(
        "serve", MODEL, "--max-model-len", "4096", "--enable-prompt-tokens-details",
        "--sim-gpu", "H100-SXM", "--sim-gpus", "1",
    ) as server:  # fmt: skip
        yield server
