"""``latency-tuner benchmark convergence``: the scenario suite in virtual time, every method.

Prints per method (the operator, the blind planner, grid, random, TPE) and world (matched,
perturbed, foreign): success on feasible scenarios, median and p90 rollouts, the ratio to the
operator, the gap to the oracle's reference (the best of the cheapest knob class that meets),
false successes and give-ups on infeasible scenarios; optionally the per-scenario lines, the
JSON of every run and a PNG. ``generate`` writes the seeded part of the harder suite.
``strategies`` runs the suite on N replicas once per trial strategy (Rollout, Canary) and
prints success, rollouts, user-visible harm and wrong keeps per strategy
(``convergence.strategies``).
TPE needs optuna and the plot matplotlib (the ``bench`` extra): without them the command says
so and runs the rest.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

from latency_tuner.api.durations import parse_duration
from latency_tuner.convergence import report, strategies_report
from latency_tuner.convergence.baselines import optuna_available
from latency_tuner.convergence.generate import generate
from latency_tuner.convergence.measure import SCRAPE_SECONDS
from latency_tuner.convergence.scenario import Scenario, ScenarioError, load_suite, parse_scenario
from latency_tuner.convergence.strategies import (
    DEFAULT_REPLICAS,
    STRATEGIES,
    StrategyJob,
    StrategyJobResult,
    canary_min_window,
    run_strategy_job,
    with_min_window,
)
from latency_tuner.convergence.suite import (
    DEFAULT_BUDGET,
    METHODS,
    JobResult,
    jobs_for,
    map_jobs,
    run_suite,
)
from latency_tuner.convergence.world import WORLDS, WorldKind

_REPO_SUITE = Path(__file__).resolve().parents[3] / "benchmarks" / "scenarios"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latency-tuner benchmark",
        description="Convergence benchmark: the operator's reconcile loop against a blind "
        "planner, a grid sweep, random search and Optuna TPE under one measurement protocol, "
        "with an exhaustive steady-state oracle, in virtual time.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convergence", help="run the scenario suite")
    c.add_argument("--suite", type=Path, default=_REPO_SUITE, help="directory of *.yaml scenarios")
    c.add_argument(
        "--methods", default=",".join(METHODS), help="comma-separated: " + ",".join(METHODS)
    )
    c.add_argument("--seeds", type=int, default=2, help="seeds per scenario and world (default 2)")
    c.add_argument(
        "--worlds", default=",".join(WORLDS), help="comma-separated: " + ",".join(WORLDS)
    )
    c.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="rollouts per run")
    c.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    c.add_argument("--scenario", action="append", default=[], help="only this scenario (repeat)")
    c.add_argument("--json", action="store_true", help="print the JSON of every run instead")
    c.add_argument("--json-out", type=Path, help="also write the JSON of every run to this file")
    c.add_argument("--plot", type=Path, help="write a PNG of rollouts per scenario per method")
    c.add_argument("--details", action="store_true", help="also print one line per run")
    c.add_argument(
        "--in-order",
        action="store_true",
        help="run the jobs in suite order (default: largest spaces first, to balance workers)",
    )
    _strategies_parser(sub)
    g = sub.add_parser("generate", help="write the seeded part of the harder suite as YAML files")
    g.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    g.add_argument("--count", type=int, default=50, help="scenarios to draw (default 50)")
    g.add_argument("--out", type=Path, required=True, help="directory to write them to")
    r = sub.add_parser(
        "report", help="print the report of a run saved with --json-out (convergence or strategies)"
    )
    r.add_argument("file", type=Path, nargs="+", help="one or more JSON files, one table")
    r.add_argument("--details", action="store_true", help="also print one line per run")
    r.add_argument("--common", action="store_true", help="only scenarios run in every world")
    r.add_argument("--plot", type=Path, help="write a PNG of rollouts per scenario per method")
    return p


def _strategies_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "strategies",
        help="Rollout against Canary on N replicas: success, rollouts, harm, wrong keeps",
    )
    s.add_argument("--suite", type=Path, default=_REPO_SUITE, help="directory of *.yaml scenarios")
    s.add_argument("--strategies", default=",".join(STRATEGIES),
                   help="comma-separated: " + ",".join(STRATEGIES))  # fmt: skip
    s.add_argument("--replicas", type=int, default=DEFAULT_REPLICAS,
                   help=f"replicas of the Deployment, 2 or more (default {DEFAULT_REPLICAS}); "
                   "the scenario's load is per replica")  # fmt: skip
    default_window = f"{canary_min_window(SCRAPE_SECONDS):.0f}s"
    s.add_argument("--min-window", default=default_window,
                   help="raise evaluation.window to at least this, for the oracle and both "
                   f"strategies (default {default_window}: two scrapes per canary interval; "
                   "0s keeps the scenarios' own)")  # fmt: skip
    s.add_argument("--seeds", type=int, default=1, help="seeds per scenario and world (default 1)")
    s.add_argument(
        "--worlds", default=",".join(WORLDS), help="comma-separated: " + ",".join(WORLDS)
    )
    s.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="rollouts per run")
    s.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    s.add_argument("--scenario", action="append", default=[], help="only this scenario (repeat)")
    s.add_argument("--json-out", type=Path, help="also write the JSON of every run to this file")
    s.add_argument("--details", action="store_true", help="also print one line per run")
    s.add_argument(
        "--blind",
        action="store_true",
        help="trials from the blind planner (diagnosis ignored; bad changes common)",
    )
    s.add_argument(
        "--from-best",
        action="store_true",
        help="start each scenario at its best safe configuration with every target tightened "
        "out of its reach: trials are then harmful or neutral (measures harm)",
    )


def _strategies(args: argparse.Namespace, argv: list[str]) -> int:
    names = [n.strip() for n in args.strategies.split(",") if n.strip()]
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown or not names:
        print(f"unknown strategies: {', '.join(unknown)}; known: {', '.join(STRATEGIES)}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.replicas < 2:
        print("--replicas: a canary needs 2 replicas or more", file=sys.stderr)
        return 2
    worlds = _worlds(args.worlds)
    scenarios = _scenarios(args.suite, args.scenario)
    if worlds is None or scenarios is None:
        return 2
    window = parse_duration(args.min_window)
    scenarios = [with_min_window(s, window) for s in scenarios]
    jobs = [StrategyJob(s, w, seed, tuple(names), args.budget, args.replicas, args.blind,
                        args.from_best)
            for s in scenarios for w in worlds for seed in range(args.seeds)]  # fmt: skip
    started = time.perf_counter()
    finished: list[StrategyJobResult] = []

    def meta_now(done: int) -> dict[str, object]:
        return {
            "command": "latency-tuner benchmark " + " ".join(argv),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "scenarios": len(scenarios), "jobs": done, "of_jobs": len(jobs),
            "seconds": round(time.perf_counter() - started, 1), "processes": args.jobs,
            "budget": args.budget, "replicas": args.replicas, "min_window": window,
            "strategies": names, "planner": "blind" if args.blind else "operator",
            "start": "best, targets tightened" if args.from_best else "scenario",
        }  # fmt: skip

    def progress(r: StrategyJobResult, done: int, total: int) -> None:
        print(f"[{done}/{total}] {r.scenario} {r.world} seed {r.seed}: {r.seconds:.1f}s",
              file=sys.stderr, flush=True)  # fmt: skip
        finished.append(r)
        if args.json_out is not None:  # what is done so far survives an interrupted run
            part = sorted(finished, key=lambda x: (x.scenario, x.world, x.seed))
            stats = strategies_report.all_stats(part, names, args.budget)
            args.json_out.write_text(strategies_report.to_json(part, stats, meta_now(done)) + "\n")

    results = map_jobs(run_strategy_job, jobs, processes=args.jobs, progress=progress)
    results.sort(key=lambda x: (x.scenario, x.world, x.seed))
    stats = strategies_report.all_stats(results, names, args.budget)
    meta = meta_now(len(jobs))
    print(f"{meta['command']}  ({meta['date']}; {len(scenarios)} scenarios, {len(jobs)} runs, "
          f"{meta['seconds']:.0f} s on {args.jobs} processes)\n")  # fmt: skip
    print(strategies_report.table(stats, args.budget))
    if args.details:
        print()
        print(strategies_report.per_scenario(results, names))
    if args.json_out is not None:
        args.json_out.write_text(strategies_report.to_json(results, stats, meta) + "\n")
    return 0


def _worlds(text: str) -> list[WorldKind] | None:
    worlds: list[WorldKind] = []
    for w in text.split(","):
        if w not in WORLDS:
            print(f"unknown world {w!r}: one of {', '.join(WORLDS)}", file=sys.stderr)
            return None
        worlds.append(w)
    return worlds


def _scenarios(suite: Path, names: list[str]) -> list[Scenario] | None:
    try:
        scenarios = load_suite(suite)
    except ScenarioError as exc:
        print(f"invalid suite: {exc}", file=sys.stderr)
        return None
    if names:
        scenarios = [s for s in scenarios if s.name in set(names)]
        if not scenarios:
            print("no scenario of that name in the suite", file=sys.stderr)
            return None
    return scenarios


def _strategies_report(args: argparse.Namespace) -> int:
    """The table of ``strategies`` runs saved with --json-out."""
    results: list[StrategyJobResult] = []
    names: list[str] = []
    budget = 0
    for path in args.file:
        part, meta = strategies_report.load_json(path)
        results.extend(part)
        names += [n for n in meta["strategies"] if n not in names]
        budget = int(meta["budget"])
        print(f"{meta['command']}  ({meta['date']}; {meta['jobs']} of {meta['of_jobs']} runs, "
              f"{meta['seconds']:.0f} s on {meta['processes']} processes)")  # fmt: skip
    print()
    print(strategies_report.table(strategies_report.all_stats(results, names, budget), budget))
    if args.details:
        print()
        print(strategies_report.per_scenario(results, names))
    return 0


def _report(args: argparse.Namespace) -> int:
    if all("strategies" in json.loads(path.read_text())["meta"] for path in args.file):
        return _strategies_report(args)
    results: list[JobResult] = []
    methods: list[str] = []
    budget = 0
    for path in args.file:  # several runs (e.g. one per world) make one table
        part, meta = report.load_json(path)
        results.extend(part)
        if meta.get("of_jobs", meta["jobs"]) != meta["jobs"]:
            print(f"(partial: {meta['jobs']} of {meta['of_jobs']} runs)")
        methods += [m for m in meta["methods"] if m not in methods]
        budget = int(meta["budget"])
        runs = f"{meta['scenarios']} scenarios, {meta['jobs']} runs"
        print(f"{meta['command']}  ({meta['date']}; {runs}, {meta['seconds']:.0f} s on "
              f"{meta['processes']} processes)")  # fmt: skip
    results = report.merge(results)  # arms run apart (operator, searches) compare run by run
    if args.common:
        worlds = {r.world for r in results}
        keep = {n for n in {r.scenario for r in results}
                if {r.world for r in results if r.scenario == n} == worlds}  # fmt: skip
        print(f"(only the {len(keep)} scenarios run in every world: {len(worlds)} worlds)")
        results = [r for r in results if r.scenario in keep]
    print()
    print(report.text(results, methods, budget, details=args.details))
    if args.plot is not None:
        report.plot(results, methods, budget, args.plot)
    return 0


def _generate(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    for data in generate(args.seed, args.count):
        try:
            parse_scenario(data, data["name"])
        except ScenarioError as exc:
            print(f"generated an invalid scenario: {exc}", file=sys.stderr)
            return 1
        path = args.out / f"{data['name']}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    print(f"{args.count} scenarios written to {args.out}", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "report":
        return _report(args)
    if args.command == "generate":
        return _generate(args)
    if args.command == "strategies":
        return _strategies(args, argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        print(
            f"unknown method(s): {', '.join(unknown)}; known: {', '.join(METHODS)}", file=sys.stderr
        )
        return 2
    if "tpe" in methods and not optuna_available():
        print("optuna is not installed: the tpe baseline is skipped (pip install optuna, "
              "or the `bench` extra)", file=sys.stderr)  # fmt: skip
        methods.remove("tpe")
    worlds = _worlds(args.worlds)
    scenarios = _scenarios(args.suite, args.scenario)
    if worlds is None or scenarios is None:
        return 2
    jobs = jobs_for(scenarios, seeds=args.seeds, methods=methods, budget=args.budget, worlds=worlds)
    started = time.perf_counter()

    def meta_now(done: int) -> dict[str, object]:
        return {
            "command": "latency-tuner benchmark convergence " + " ".join(argv[1:]),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "scenarios": len(scenarios),
            "jobs": done,
            "of_jobs": len(jobs),
            "seconds": round(time.perf_counter() - started, 1),
            "processes": args.jobs,
            "cpu": platform.processor() or platform.machine(),
            "budget": args.budget,
            "methods": methods,
        }

    finished: list[JobResult] = []

    def progress(r: JobResult, done: int, total: int) -> None:
        print(f"[{done}/{total}] {r.scenario} {r.world} seed {r.seed}: {r.seconds:.1f}s",
              file=sys.stderr, flush=True)  # fmt: skip
        finished.append(r)
        if args.json_out is not None:  # what is done so far survives an interrupted run
            partial = sorted(finished, key=lambda x: (x.scenario, x.world, x.seed))
            stats = report.all_stats(partial, methods, args.budget)
            args.json_out.write_text(report.to_json(partial, stats, meta_now(done)) + "\n")

    results = run_suite(jobs, processes=args.jobs, progress=progress, in_order=args.in_order)
    elapsed = time.perf_counter() - started
    stats = report.all_stats(results, methods, args.budget)
    meta = meta_now(len(jobs))
    if args.json:
        print(report.to_json(results, stats, meta))
    else:
        print(f"{meta['command']}  ({meta['date']}; {len(scenarios)} scenarios, {len(jobs)} runs, "
              f"{elapsed:.0f} s on {args.jobs} processes)\n")  # fmt: skip
        print(report.text(results, methods, args.budget, details=args.details))
    if args.json_out is not None:
        args.json_out.write_text(report.to_json(results, stats, meta) + "\n")
    if args.plot is not None:
        try:
            report.plot(results, methods, args.budget, args.plot)
        except ImportError:
            print("matplotlib is not installed: no plot (pip install matplotlib, or the `bench` "
                  "extra)", file=sys.stderr)  # fmt: skip
        else:
            print(f"plot written to {args.plot}", file=sys.stderr)
    return 0
