"""Helpers for the end-to-end tests: a shipped scenario, changed for a test, run through the
demo machinery (sandbox + the operator as its own process)."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

import pytest

from latency_tuner.report.model import TuningReport
from latency_tuner.sandbox.demo import DemoRun
from latency_tuner.sandbox.prometheus import binary
from latency_tuner.sandbox.scenario import Scenario, load_scenario


def scenario(name: str, change: Callable[[dict[str, Any]], None] | None = None) -> Scenario:
    """A shipped scenario, with ``change`` applied to its LatencyTarget manifest."""
    loaded = load_scenario(name)
    if change is None:
        return loaded
    data = loaded.model_dump(mode="json", by_alias=True)
    target = copy.deepcopy(data["latencyTarget"])
    change(target)
    data["latencyTarget"] = target
    return Scenario.from_mapping(data, f"{name} (changed for the test)")


def require_prometheus() -> None:
    if binary() is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; scripts/setup.sh installs it")
        pytest.skip("prometheus is not installed (scripts/setup.sh installs it as root)")


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), {})


def met(status: dict[str, Any]) -> bool:
    return condition(status, "TargetsMet").get("status") == "True"


def converged(status: dict[str, Any]) -> bool:
    return status.get("phase") == "Converged" and met(status)


async def deployment_generation(run: DemoRun) -> int:
    dep = await run.sandbox.get(
        "apps/v1", "Deployment", run.scenario.deployment_name, run.sandbox.namespace
    )
    assert dep is not None
    return int(dep["metadata"]["generation"])


def story(result: TuningReport) -> str:
    """What a run went through, for an assertion message: pytest shortens a repr of the trials
    to their first keys, which hides the verdicts and reasons that explain a failure."""
    lines = [f"phase {result.phase}, targets met {result.targets_met}, problems {result.problems}"]
    lines += [
        f"trial {t.get('id')}{' (for margin)' if t.get('refinement') else ''}: "
        f"{t.get('knob')} {t.get('from')} -> {t.get('to')}: {t.get('verdict')}: "
        f"{t.get('reason')}; before {t.get('before')}, after {t.get('after')}"
        for t in result.trials
    ]
    lines += [
        f"condition {c.get('type')}={c.get('status')}: {c.get('message')}"
        for c in result.conditions
    ]
    return "\n".join(lines)
