"""The strategy comparison's figures on constructed cases with known answers: harm counts the
requests served by configurations worse than the start in steady state, a wrong keep is a kept
change no better than what it replaced, and worse/better read the violation score first."""

from __future__ import annotations

import math

from latency_tuner.convergence.strategies import (
    TOLERANCE,
    Steady,
    StrategyJobResult,
    StrategyOutcome,
    harm,
    worse,
    wrong_keeps,
)
from latency_tuner.convergence.strategies_report import strategy_stats, table
from latency_tuner.core.cluster import ContainerConfig


def _config(seqs: int) -> ContainerConfig:
    return ContainerConfig(("vllm", "serve", "m"), ("--max-num-seqs", str(seqs)), "img", 1)


START, SLOWER, FASTER, ALMOST, BROKEN = (_config(n) for n in (8, 4, 16, 12, 2))
RATINGS = {
    START: Steady(violation=0.50, ratios=2.5),
    SLOWER: Steady(violation=0.90, ratios=2.9),  # worse
    FASTER: Steady(violation=0.00, ratios=0.9),  # better
    ALMOST: Steady(violation=0.51, ratios=2.52),  # the same within the tolerance
    BROKEN: Steady(violation=math.inf, ratios=math.inf),  # cannot serve the load
}


def _rating(c: ContainerConfig) -> Steady:
    return RATINGS[c]


def test_harm_counts_the_requests_served_by_configurations_worse_than_the_start() -> None:
    served = [(START, 500), (SLOWER, 200), (FASTER, 250), (ALMOST, 40), (BROKEN, 10)]
    assert harm(served, _rating, START) == (210, 1000)


def test_no_request_on_a_worse_configuration_is_no_harm() -> None:
    assert harm([(START, 300), (FASTER, 700)], _rating, START) == (0, 1000)


def test_a_kept_change_no_better_than_what_it_replaced_is_a_wrong_keep() -> None:
    kept = [(START, FASTER), (START, ALMOST), (FASTER, SLOWER), (SLOWER, START)]
    # START -> ALMOST changed nothing that matters, FASTER -> SLOWER made it worse.
    assert wrong_keeps(kept, _rating) == 2


def test_worse_reads_the_violation_score_first_then_the_ratios() -> None:
    met_fast, met_slow = Steady(0.0, 1.2), Steady(0.0, 1.5)
    assert worse(met_slow, met_fast)
    assert not worse(met_fast, met_slow)
    # A lower violation wins even with higher ratios.
    assert worse(Steady(0.3, 1.0), Steady(0.1, 3.0))
    # Within the tolerance on both: the same, neither worse.
    a, b = Steady(0.2, 2.0), Steady(0.2 + TOLERANCE / 2, 2.0 * (1 + TOLERANCE / 2))
    assert not worse(a, b)
    assert not worse(b, a)
    # Saturated servers score in the tens: the tolerance is relative there.
    assert not worse(Steady(40.5, 42.0), Steady(40.0, 41.5))
    assert worse(Steady(42.0, 43.5), Steady(40.0, 41.5))


def _outcome(strategy: str, requests: int, harmful: int, wrong: int, kept: int) -> StrategyOutcome:
    return StrategyOutcome(strategy, True, 2, 1 if strategy == "canary" else 0, 2, kept, wrong,
                           requests, harmful, 0, False, True, 100.0, "converged")  # fmt: skip


def test_the_table_pools_harm_over_every_request_of_every_run() -> None:
    results = [
        StrategyJobResult("a", "perturbed", 0, 2, 12, 60.0, True, False, 4, 1.0,
                          {"rollout": _outcome("rollout", 1000, 300, 1, 2),
                           "canary": _outcome("canary", 1000, 50, 0, 1)}),
        StrategyJobResult("b", "perturbed", 0, 2, 12, 60.0, True, False, 4, 1.0,
                          {"rollout": _outcome("rollout", 3000, 0, 0, 1),
                           "canary": _outcome("canary", 3000, 0, 0, 1)}),
    ]  # fmt: skip
    rollout = strategy_stats(results, "rollout", "perturbed", 12)
    canary = strategy_stats(results, "canary", "perturbed", 12)
    assert rollout.harm_share == 300 / 4000
    assert canary.harm_share == 50 / 4000
    assert (rollout.runs_with_harm, rollout.worst_harm) == (1, 0.3)
    assert (rollout.wrong_keeps, rollout.kept, canary.wrong_keeps, canary.kept) == (1, 3, 0, 2)
    text = table([rollout, canary], 12)
    assert "| perturbed | rollout | 2/2 (100%) | 2.0 / 2.0 | 0 | 7.5% | 1/2 | 30.0% | 1/3 |" in text
