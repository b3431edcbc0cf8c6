"""A test waiting on the operator in the sandbox learns why the wait ended where it did: a dead
operator ends the wait at once rather than at its deadline, and ``explain`` names the state,
the target's conditions, whether Prometheus still answers and scrapes (with its log, kept in
the sandbox's folder), how busy the machine is, and the operator log's last lines of note (for
CI runs, whose files are gone by the time anyone reads the failure)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from latency_tuner.sandbox.demo import demo_run
from latency_tuner.sandbox.prometheus import binary
from latency_tuner.sandbox.scenario import load_scenario


async def test_a_dead_operator_ends_the_wait_at_once_and_the_explanation_says_so(
    tmp_path: Path,
) -> None:
    if binary() is None:
        pytest.skip("prometheus is not installed (scripts/setup.sh installs it)")
    async with demo_run(load_scenario("queueing"), workdir=tmp_path) as run:
        await run.sandbox.apply_latency_target()
        await run.wait_for(lambda s: s.get("phase") == "Observing", within=60)
        run.operator.kill()
        began = time.monotonic()
        status = await run.wait_for(lambda s: s.get("phase") == "Converged", within=120)
        waited = time.monotonic() - began
        explained = await run.explain()
    assert status.get("phase") != "Converged"
    assert waited < 10
    assert "operator running: False; Prometheus running: True" in explained
    assert "phase Observing" in explained
    assert "  Ready True Ready: tuning Deployment" in explained
    assert "took the target" in explained  # a line of the operator's own log
    assert "' succeeded." not in explained
    # Whether Prometheus still answers and scrapes, and how busy the machine was.
    assert "  Prometheus answered in " in explained
    assert "; targets: " in explained  # each with its health and last scrape, once discovered
    assert "  machine: load " in explained
    assert (tmp_path / "sandbox" / "prometheus.log").stat().st_size > 0  # kept after the run
