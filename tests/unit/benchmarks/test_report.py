"""The report's arithmetic: percentiles, rollouts to success, ratios, gaps, give-ups."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from latency_tuner.convergence.report import (
    load_json,
    merge,
    method_stats,
    percentile,
    predictions,
    rollouts_to_success,
    table,
    to_json,
)
from latency_tuner.convergence.suite import JobResult, MethodOutcome


def outcome(
    method: str, success: bool, rollouts: int, *, objective: float = 1.0, gpus: int = 1,
    gave_up: bool = False,
) -> MethodOutcome:  # fmt: skip
    return MethodOutcome(method, success, rollouts, rollouts, gave_up, 60.0 * rollouts,
                         objective, gpus, success, "test")  # fmt: skip


def job(
    name: str, feasible: bool, *outcomes: MethodOutcome, best: float = 1.0, space: int = 4,
    reference: str | None = "safe",
) -> JobResult:  # fmt: skip
    return JobResult(name, "matched", 0, "feasible", feasible, best, 1 if feasible else None,
                     space, 1 if feasible else 0, 4, 0.1, {o.method: o for o in outcomes},
                     reference if feasible else None, {}, 12)  # fmt: skip


def test_percentiles_interpolate_linearly_like_numpy() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90) == pytest.approx(9.1)
    assert percentile([7], 90) == 7
    assert percentile([], 50) is None


def test_a_run_that_did_not_succeed_counts_as_at_least_the_whole_budget() -> None:
    assert rollouts_to_success(True, 3, 12) == 3
    assert rollouts_to_success(False, 5, 12) == 12
    assert rollouts_to_success(False, 14, 12) == 14


RESULTS = [
    job("a", True, outcome("operator", True, 1), outcome("grid", True, 6, objective=1.05)),
    job("b", True, outcome("operator", True, 2, objective=1.3), outcome("grid", False, 12)),
    job("c", True, outcome("operator", False, 4), outcome("grid", True, 3, gpus=2)),
    job("d", False, outcome("operator", False, 2, gave_up=True), outcome("grid", True, 5)),
]


def test_method_stats_count_success_rollouts_ratio_gap_and_give_ups() -> None:
    op = method_stats(RESULTS, "operator", "all", budget=12)
    grid = method_stats(RESULTS, "grid", "all", budget=12)
    assert (op.feasible_runs, op.successes) == (3, 2)
    assert op.success_rate == pytest.approx(2 / 3)
    assert op.median_rollouts == 2  # 1, 2 and a failure counted as 12
    assert op.p90_rollouts == pytest.approx(10.0)
    assert op.ratio_to_operator == pytest.approx(1.0)
    assert grid.ratio_to_operator == pytest.approx((6 + 12 + 3) / (1 + 2 + 12))
    assert op.median_gap == pytest.approx(0.15)  # gaps 0 and +30%
    assert (op.within_gap, op.at_min_gpus) == (1, 2)
    assert (grid.within_gap, grid.at_min_gpus) == (1, 1)  # the TP-2 success is not at min GPUs
    assert (op.infeasible_runs, op.gave_up, op.false_success) == (1, 1, 0)
    assert (grid.gave_up, grid.false_success) == (0, 1)


def test_the_table_and_the_json_carry_the_numbers() -> None:
    stats = [method_stats(RESULTS, m, "matched", 12) for m in ("operator", "grid")]
    text = table(stats, 12)
    assert "| matched | operator | 2/3 (67%) | 2.0 / 10.0 | 1.5 / 1.9 | 1.00x |" in text
    assert text.splitlines()[2].endswith("| 0/1 (0%) | 1/1 (100%) | 2.0 |")
    body = json.loads(to_json(RESULTS, stats, {"command": "x"}))
    assert body["stats"][0]["successes"] == 2
    assert len(body["jobs"]) == 4


def test_a_saved_run_reloads_into_the_same_statistics(tmp_path: Path) -> None:
    stats = [method_stats(RESULTS, "operator", "matched", 12)]
    path = tmp_path / "run.json"
    path.write_text(to_json(RESULTS, stats, {"command": "x"}))
    again, meta = load_json(path)
    assert meta == {"command": "x"}
    assert method_stats(again, "operator", "matched", 12) == stats[0]


def test_give_ups_count_only_where_every_method_could_search_the_whole_space() -> None:
    results = [
        job("small", False, outcome("operator", False, 2, gave_up=True),
            outcome("grid", False, 4, gave_up=True)),
        job("large", False, outcome("operator", False, 3, gave_up=True),
            outcome("grid", False, 12), space=30),
    ]  # fmt: skip
    op = method_stats(results, "operator", "all", budget=12)
    grid = method_stats(results, "grid", "all", budget=12)
    assert (op.infeasible_runs, op.give_up_runs, op.gave_up) == (2, 1, 1)
    assert (grid.give_up_runs, grid.gave_up) == (1, 1)  # the 30-point space says nothing


def test_a_success_on_a_costlier_class_than_needed_is_not_within_reach_of_the_reference() -> None:
    lossy = replace(outcome("operator", True, 1, objective=0.5), final_class="lossy")
    safe = replace(outcome("grid", True, 2, objective=1.05), final_class="safe")
    results = [job("fp8-not-needed", True, lossy, safe, reference="safe")]
    op = method_stats(results, "operator", "all", budget=12)
    grid = method_stats(results, "grid", "all", budget=12)
    assert (op.successes, op.preferred_class, op.within_gap) == (1, 0, 0)
    assert (grid.successes, grid.preferred_class, grid.within_gap) == (1, 1, 1)


def test_trial_predictions_are_summed_up_per_method_and_survive_a_reload(tmp_path: Path) -> None:
    predicted = replace(
        outcome("operator", True, 2),
        # expected -30% got -50%; expected -20% got +10% (the wrong way)
        predictions=(("ttft", -0.3, -0.5), ("itl", -0.2, 0.1)),
    )
    results = [job("a", True, predicted, outcome("grid", True, 3))]
    text = predictions(results, ["operator", "grid"])
    # Recorded before predictions had a basis: the prior's, aimed at.
    assert text.splitlines()[2] == (
        "| matched | operator | prior | 2 | -25% | -20% | 25% | 1/2 (50%) |"
    )
    assert "grid" not in text  # searches make no predictions
    path = tmp_path / "run.json"
    path.write_text(to_json(results, [], {}))
    reloaded, _ = load_json(path)
    assert reloaded[0].outcomes["operator"].predictions == predicted.predictions


def test_model_and_prior_predictions_are_summed_up_apart() -> None:
    predicted = replace(
        outcome("operator", True, 2),
        predictions=(
            ("ttft", -0.4, -0.5, "model", True),
            ("ttft", -0.3, 0.1, "prior", True),
            ("itl", 0.1, 0.2, "model", False),
        ),
    )
    rows = predictions([job("a", True, predicted)], ["operator"]).splitlines()[2:]
    assert rows == [
        "| matched | operator | model | 1 | -40% | -50% | 10% | 1/1 (100%) |",
        "| matched | operator | model, along the way | 1 | +10% | +20% | 10% | 1/1 (100%) |",
        "| matched | operator | prior | 1 | -30% | +10% | 40% | 0/1 (0%) |",
    ]


def test_a_run_without_predictions_prints_no_prediction_table() -> None:
    assert predictions(RESULTS, ["operator", "grid"]) == ""


def test_arms_run_apart_compare_run_by_run_once_merged() -> None:
    operator_arm = [job(r.scenario, r.feasible, r.outcomes["operator"]) for r in RESULTS]
    search_arm = [job(r.scenario, r.feasible, r.outcomes["grid"]) for r in RESULTS]
    apart = [*operator_arm, *search_arm]
    assert method_stats(apart, "grid", "all", budget=12).ratio_to_operator is None
    merged = merge(apart)
    assert len(merged) == len(RESULTS)
    grid = method_stats(merged, "grid", "all", budget=12)
    assert grid.ratio_to_operator == pytest.approx((6 + 12 + 3) / (1 + 2 + 12))


def test_runs_whose_oracles_disagree_are_not_merged() -> None:
    # The simulator changed between the arms: the same scenario's space is another one.
    operator_arm = job("a", True, outcome("operator", True, 1), space=4)
    search_arm = job("a", True, outcome("grid", True, 6), space=6)
    again = job("a", True, outcome("operator", True, 2), space=4)  # the same method twice
    assert len(merge([operator_arm, search_arm])) == 2
    assert len(merge([operator_arm, again])) == 2
