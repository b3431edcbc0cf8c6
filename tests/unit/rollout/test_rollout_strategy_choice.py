"""The strategy of a trial: the spec's when it can work, else Canary from two replicas on,
with the reason in words."""

from __future__ import annotations

from typing import Any

from latency_tuner.api.spec import LatencyTargetSpec, Strategy
from latency_tuner.core.rollout.strategy import choose_strategy


def spec(**extra: Any) -> LatencyTargetSpec:
    return LatencyTargetSpec.model_validate(
        {
            "targetRef": {"name": "llama"},
            "objectives": {"ttft": {"percentile": 95, "threshold": "500ms"}},
            **extra,
        }
    )


def deployment(replicas: int, **selector: Any) -> dict[str, Any]:
    return {"spec": {"replicas": replicas, "selector": selector or {"matchLabels": {"a": "b"}}}}


def test_unset_picks_canary_from_two_replicas_and_says_why() -> None:
    chosen = choose_strategy(spec(), deployment(2), canary_supported=True)
    assert chosen.name is Strategy.CANARY
    assert "2 replicas" in chosen.reason
    assert "unset" in chosen.reason


def test_unset_picks_rollout_for_a_single_replica() -> None:
    chosen = choose_strategy(spec(), deployment(1), canary_supported=True)
    assert chosen.name is Strategy.ROLLOUT
    assert "1 replica" in chosen.reason


def test_an_explicit_rollout_is_kept_whatever_the_replicas() -> None:
    chosen = choose_strategy(spec(strategy="Rollout"), deployment(8), canary_supported=True)
    assert (chosen.name, chosen.reason) == (Strategy.ROLLOUT, "spec.strategy is Rollout")


def test_an_explicit_canary_that_cannot_work_falls_back_to_rollout_saying_so() -> None:
    one = choose_strategy(spec(strategy="Canary"), deployment(1), canary_supported=True)
    expressions = choose_strategy(
        spec(strategy="Canary"),
        deployment(3, matchExpressions=[{"key": "a", "operator": "Exists"}]),
        canary_supported=True,
    )
    unsupported = choose_strategy(spec(strategy="Canary"), deployment(3), canary_supported=False)
    assert {one.name, expressions.name, unsupported.name} == {Strategy.ROLLOUT}
    assert "spec.strategy is Canary but" in one.reason
    assert "matchExpressions" in expressions.reason
    assert "cannot run canaries" in unsupported.reason


def test_an_explicit_canary_with_replicas_enough_is_used() -> None:
    chosen = choose_strategy(spec(strategy="Canary"), deployment(4), canary_supported=True)
    assert chosen.name is Strategy.CANARY
    assert chosen.reason.startswith("spec.strategy is Canary")
