"""Which strategy a trial uses: the spec's, else Canary from 2 replicas on. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latency_tuner.api.spec import LatencyTargetSpec, Strategy
from latency_tuner.api.status import AppliedStrategy

MIN_CANARY_REPLICAS = 2  # with one, shrinking it for the canary would leave no baseline pod


def choose_strategy(
    spec: LatencyTargetSpec, deployment: Mapping[str, Any], *, canary_supported: bool
) -> AppliedStrategy:
    """The strategy of the next trial and why. ``canary_supported``: the operator can run
    canaries at all (a stand-in world, such as the benchmark's, may not)."""
    replicas = int((deployment.get("spec") or {}).get("replicas", 1) or 0)
    selector = (deployment.get("spec") or {}).get("selector") or {}
    asked = spec.strategy
    if asked is Strategy.ROLLOUT:
        return AppliedStrategy(name=Strategy.ROLLOUT, reason="spec.strategy is Rollout")
    problem = None
    if not canary_supported:
        problem = "this operator cannot run canaries here"
    elif selector.get("matchExpressions"):
        problem = "the Deployment selects its pods with matchExpressions"
    elif replicas < MIN_CANARY_REPLICAS:
        problem = (
            f"the Deployment has {replicas} replica{'s' if replicas != 1 else ''} "
            f"(a canary needs {MIN_CANARY_REPLICAS} or more)"
        )
    if problem is None:
        why = "spec.strategy is Canary" if asked is Strategy.CANARY else "strategy unset"
        return AppliedStrategy(
            name=Strategy.CANARY,
            reason=f"{why}: the Deployment has {replicas} replicas ({MIN_CANARY_REPLICAS} or more)",
        )
    lead = "spec.strategy is Canary but" if asked is Strategy.CANARY else "strategy unset and"
    return AppliedStrategy(name=Strategy.ROLLOUT, reason=f"{lead} {problem}: using Rollout")
