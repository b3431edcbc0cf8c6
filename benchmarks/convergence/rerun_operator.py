"""Re-run the operator's arm of a recorded convergence run with the code of this tree, keeping
the record's oracle (space, feasibility, reference) and its other arms (grid, random, TPE).

The oracle's exhaustive search is most of a job's time (every configuration of the space
over 8 windows) and does not depend on the operator; the searches do not either. When a
change touches only the operator, this gives the same table ``latency-tuner benchmark
convergence`` would, in a fraction of the time: each job runs the operator as the suite does
(``operator_run.run_operator``) and measures its final configuration with the oracle's judge
(``suite.outcome``). Only valid while the simulator, the worlds and the oracle are those of
the record: a run that goes exactly as recorded but whose final configuration the judge scores
otherwise shows they are not, and the script then stops (exit 3) without writing; anything
else needs the full command.

    .venv/bin/python benchmarks/convergence/rerun_operator.py RECORD.json --suite DIR \\
        [--jobs 2] [--json-out OUT.json] [--details]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from latency_tuner.convergence import report
from latency_tuner.convergence.evaluate import Evaluator
from latency_tuner.convergence.operator_run import run_operator
from latency_tuner.convergence.scenario import load_scenario
from latency_tuner.convergence.suite import (
    DEFAULT_BUDGET,
    JobResult,
    MethodOutcome,
    map_jobs,
    outcome,
)
from latency_tuner.convergence.world import WorldKind, make_world


def rerun(suite: Path, job: JobResult) -> JobResult:
    """The job with its operator arm run again (the oracle's trace, as the suite's)."""
    scenario = load_scenario(suite / f"{job.scenario}.yaml")
    world = make_world(job.world, job.seed)
    started = time.perf_counter()
    run = run_operator(scenario, world, job.seed, budget=job.budget or DEFAULT_BUDGET)
    judge = Evaluator(scenario, world, job.seed, stream="oracle")
    arms = {**job.outcomes, "operator": outcome(judge, run)}
    return replace(job, outcomes=arms, seconds=time.perf_counter() - started)


def _judged_apart(
    before: dict[tuple[str, WorldKind, int], MethodOutcome | None], results: Sequence[JobResult]
) -> list[str]:
    """Runs whose operator went exactly as recorded (the same trials, the same end) but whose
    final configuration the judge scores otherwise: the oracle changed since the record."""
    apart = []
    for r in results:
        was, now = before[(r.scenario, r.world, r.seed)], r.outcomes["operator"]
        if was is None or was.history != now.history:
            continue
        if not math.isclose(was.final_objective, now.final_objective, rel_tol=1e-9):
            apart.append(f"{r.scenario} {r.world}")
    return apart


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=Path, help="a run written with --json-out")
    parser.add_argument("--suite", type=Path, required=True, help="the record's scenarios")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--json-out", type=Path, help="write the new run here")
    parser.add_argument("--details", action="store_true", help="per-scenario lines too")
    args = parser.parse_args(argv)
    recorded, meta = report.load_json(args.record)
    missing = [j.scenario for j in recorded if not (args.suite / f"{j.scenario}.yaml").is_file()]
    if missing:
        print(f"not in {args.suite}: {', '.join(sorted(set(missing)))}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    before = {(j.scenario, j.world, j.seed): j.outcomes.get("operator") for j in recorded}

    def progress(r: JobResult, done: int, total: int) -> None:
        was, now = before[(r.scenario, r.world, r.seed)], r.outcomes["operator"]
        same = was is not None and (was.success, was.rollouts, was.final_objective) == (
            now.success, now.rollouts, now.final_objective)  # fmt: skip
        print(f"[{done}/{total}] {r.scenario} {r.world} seed {r.seed}: {r.seconds:.1f}s"
              f"{'' if same else '  (moved)'}", file=sys.stderr, flush=True)  # fmt: skip

    results = map_jobs(partial(rerun, args.suite), recorded, processes=args.jobs, progress=progress)
    results.sort(key=lambda r: (r.scenario, r.world, r.seed))
    judged_apart = _judged_apart(before, results)
    if judged_apart:
        print(f"the oracle is not the record's: {len(judged_apart)} runs went as recorded and "
              f"ended on a configuration it judges otherwise ({', '.join(judged_apart[:3])}): "
              "run the full `latency-tuner benchmark convergence`", file=sys.stderr)  # fmt: skip
        return 3
    methods = ["operator", *(m for m in meta["methods"] if m != "operator")]
    budget = int(meta["budget"])
    command = " ".join(["benchmarks/convergence/rerun_operator.py", *argv])
    meta = {
        **meta,
        "command": command,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(time.perf_counter() - started, 1),
        "processes": args.jobs,
        "methods": methods,
        "oracle_and_other_arms_from": {"command": meta["command"], "date": meta["date"]},
    }
    print(f"{command}  ({meta['date']}; {len(results)} runs, {meta['seconds']:.0f} s on "
          f"{args.jobs} processes)\n")  # fmt: skip
    print(report.text(results, methods, budget, details=args.details))
    if args.json_out is not None:
        stats = report.all_stats(results, methods, budget)
        args.json_out.write_text(report.to_json(results, stats, meta) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
