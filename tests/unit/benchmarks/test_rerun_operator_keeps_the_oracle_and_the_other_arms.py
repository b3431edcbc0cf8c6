"""``benchmarks/convergence/rerun_operator.py``: the operator's arm of a recorded run, run again
with this tree's code, next to the record's oracle and other arms."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml
from benchmarks.convergence import rerun_operator
from tests.unit.benchmarks.support import EASY

from latency_tuner.convergence import report
from latency_tuner.convergence.scenario import parse_scenario
from latency_tuner.convergence.suite import Job, JobResult, run_job


def test_the_operator_arm_is_run_again_and_the_oracle_and_the_other_arms_are_kept(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "easy.yaml").write_text(yaml.safe_dump(EASY))
    recorded = run_job(Job(parse_scenario(EASY), "matched", 0, ("operator", "random"), 12))
    operator = recorded.outcomes["operator"]
    # The record's operator arm as an older operator left it: the rerun must replace it.
    older = replace(operator, rollouts=operator.rollouts + 5, history=("an older run",))
    stale = replace(recorded, outcomes={**recorded.outcomes, "operator": older})
    meta = {"command": "latency-tuner benchmark convergence --suite suite", "date": "then",
            "scenarios": 1, "jobs": 1, "of_jobs": 1, "seconds": 1.0, "processes": 1,
            "budget": 12, "methods": ["operator", "random"]}  # fmt: skip
    record = tmp_path / "record.json"
    stats = report.all_stats([stale], ["operator", "random"], 12)
    record.write_text(report.to_json([stale], stats, meta))
    out = tmp_path / "out.json"

    code = rerun_operator.main(
        [str(record), "--suite", str(suite), "--jobs", "1", "--json-out", str(out)]
    )

    assert code == 0
    [again], written = report.load_json(out)
    assert again.outcomes["operator"] == operator  # the same code runs the same run
    assert again.outcomes["random"] == recorded.outcomes["random"]
    assert (again.feasible, again.best_objective, again.space, again.meeting) == (
        recorded.feasible, recorded.best_objective, recorded.space, recorded.meeting
    )  # fmt: skip
    assert written["command"].startswith("benchmarks/convergence/rerun_operator.py")
    assert written["oracle_and_other_arms_from"]["command"] == meta["command"]


def test_a_record_whose_scenarios_are_not_in_the_suite_is_refused(tmp_path: Path) -> None:
    elsewhere = JobResult("not-here", "matched", 0, "feasible", True, 1.0, 1, 4, 2, 4, 1.0)
    meta = {"command": "c", "date": "d", "scenarios": 1, "jobs": 1, "of_jobs": 1,
            "seconds": 1.0, "processes": 1, "budget": 12, "methods": []}  # fmt: skip
    record = tmp_path / "record.json"
    record.write_text(report.to_json([elsewhere], [], meta))
    assert rerun_operator.main([str(record), "--suite", str(tmp_path)]) == 2
