"""``benchmarks/convergence/rerun_operator.py``: the operator's arm of a recorded run, run again
with this tree's code, next to the record's oracle and other arms."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from benchmarks.convergence import rerun_operator
from tests.unit.benchmarks.support import EASY

from latency_tuner.convergence import report
from latency_tuner.convergence.scenario import parse_scenario
from latency_tuner.convergence.suite import Job, JobResult, run_job

META: dict[str, Any] = {
    "command": "latency-tuner benchmark convergence --suite suite", "date": "then",
    "scenarios": 1, "jobs": 1, "of_jobs": 1, "seconds": 1.0, "processes": 1, "budget": 12,
    "methods": ["operator", "random"],
}  # fmt: skip


@pytest.fixture(scope="module")
def recorded() -> JobResult:
    return run_job(Job(parse_scenario(EASY), "matched", 0, ("operator", "random"), 12))


def _rerun(tmp_path: Path, record: JobResult) -> tuple[int, Path]:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "easy.yaml").write_text(yaml.safe_dump(EASY))
    path, out = tmp_path / "record.json", tmp_path / "out.json"
    stats = report.all_stats([record], ["operator", "random"], 12)
    path.write_text(report.to_json([record], stats, META))
    code = rerun_operator.main(
        [str(path), "--suite", str(suite), "--jobs", "1", "--json-out", str(out)]
    )
    return code, out


def test_the_operator_arm_is_run_again_and_the_oracle_and_the_other_arms_are_kept(
    tmp_path: Path, recorded: JobResult
) -> None:
    operator = recorded.outcomes["operator"]
    # The record's operator arm as an older operator left it: the rerun must replace it.
    older = replace(operator, rollouts=operator.rollouts + 5, history=("an older run",))
    code, out = _rerun(
        tmp_path, replace(recorded, outcomes={**recorded.outcomes, "operator": older})
    )
    assert code == 0
    [again], written = report.load_json(out)
    assert again.outcomes["operator"] == operator  # the same code runs the same run
    assert again.outcomes["random"] == recorded.outcomes["random"]
    assert (again.feasible, again.best_objective, again.space, again.meeting) == (
        recorded.feasible, recorded.best_objective, recorded.space, recorded.meeting
    )  # fmt: skip
    assert written["command"].startswith("benchmarks/convergence/rerun_operator.py")
    assert written["oracle_and_other_arms_from"]["command"] == META["command"]


def test_a_record_judged_by_another_oracle_is_refused_and_nothing_is_written(
    tmp_path: Path, recorded: JobResult
) -> None:
    # The same run, its final configuration scored otherwise: the judge is not the record's.
    operator = recorded.outcomes["operator"]
    judged = replace(operator, final_objective=operator.final_objective * 1.5 + 0.1)
    code, out = _rerun(
        tmp_path, replace(recorded, outcomes={**recorded.outcomes, "operator": judged})
    )
    assert code == 3
    assert not out.exists()


def test_a_record_whose_scenarios_are_not_in_the_suite_is_refused(tmp_path: Path) -> None:
    elsewhere = JobResult("not-here", "matched", 0, "feasible", True, 1.0, 1, 4, 2, 4, 1.0)
    record = tmp_path / "record.json"
    record.write_text(report.to_json([elsewhere], [], {**META, "methods": []}))
    assert rerun_operator.main([str(record), "--suite", str(tmp_path)]) == 2
