"""The calibrated model's ITL-quantile forecasts of batch-budget moves against the simulator.

For each load of a grid (prompt lengths, arrival rates as a share of an 8B model's prefill
capacity on one H100, max-num-seqs) and each move of ``--max-num-batched-tokens``, the
simulator serves the load on both configurations (matched world, Poisson arrivals, one pod, a
60 s window after 30 s of warm-up); ``core.model`` is calibrated on the running configuration's
window, exactly as the operator calibrates it, and forecasts the candidate. Printed per case:
the measured change of ITL p90 and p99 and the forecast (the mean the planner acts on, and the
cautious one a refinement counts on); then the errors. Windows where either configuration
falls behind its arrivals are left out (the queue, not the step mixture, sets them).

    .venv/bin/python benchmarks/model/itl_forecast.py [--quick] [--json-out FILE]

Run it against another tree with ``PYTHONPATH=<tree>/operator`` to compare two models.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from latency_tuner.convergence.evaluate import serve
from latency_tuner.convergence.world import Load, make_world
from latency_tuner.core import model
from latency_tuner.core.observation import Observation, ObservationResult
from latency_tuner.core.saturation import saturated
from latency_tuner.perf.config import EngineConfig, build_engine_config
from latency_tuner.scenario import Workload
from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GPU = "H100-SXM"
PREFILL_CAPACITY = 30_000  # prompt tokens a second an 8B model prefills on one H100, about
OUTPUT_TOKENS = 150
WARM_UP_S = 30.0
WINDOW_S = 60.0
PERCENTILES = (90, 99)
# A forecast that promises a gain, and a measured change that shows none (or the reverse).
GAIN, NONE = -0.10, -0.05


@dataclass(frozen=True)
class Case:
    prompt: int
    rate: float
    running: int  # max-num-seqs
    budget: int
    to: int
    percentile: int
    before: float  # the window's ITL quantile, seconds
    after: float
    measured: float  # after / before - 1
    forecast: float
    cautious: float


def _window(
    budget: int, seqs: int, prompt: int, rate: float
) -> tuple[EngineConfig, ObservationResult]:
    cl = VllmCommandLine.parse(
        ["vllm", "serve", MODEL],
        ["--max-num-batched-tokens", str(budget), "--max-num-seqs", str(seqs),
         "--max-model-len", "16384"],
    )  # fmt: skip
    config = build_engine_config(cl, gpu=GPU, num_gpus=1, seed=0)
    world = make_world("matched", 0)
    workload = Workload.model_validate(
        {"arrival": "poisson", "rate": rate, "promptTokens": prompt,
         "outputTokens": OUTPUT_TOKENS, "spread": 0.2}
    )  # fmt: skip
    load = Load(workload, world, seed=0, stream="trace")
    return config, serve(config, world, load, seed=0, warmup=WARM_UP_S, seconds=WINDOW_S,
                         percentiles=PERCENTILES)  # fmt: skip


def cases(quick: bool) -> list[Case]:
    prompts = (1200, 3000) if quick else (600, 1200, 2000, 3000, 6000)
    loads = (0.15, 0.4) if quick else (0.1, 0.25, 0.45, 0.65)
    every_move = ((8192, 2048), (8192, 1024), (2048, 1024), (1024, 512), (4096, 1024), (1024, 2048))
    moves = every_move[1:3] if quick else every_move
    seqs = (64,) if quick else (16, 64)
    windows: dict[tuple[int, int, int, float], tuple[EngineConfig, ObservationResult]] = {}

    def window(
        budget: int, running: int, prompt: int, rate: float
    ) -> tuple[EngineConfig, ObservationResult]:
        key = (budget, running, prompt, rate)
        if key not in windows:
            windows[key] = _window(*key)
        return windows[key]

    found = []
    for prompt, load, (budget, to), running in itertools.product(prompts, loads, moves, seqs):
        rate = round(load * PREFILL_CAPACITY / prompt, 2)
        (now, before), (then, after) = (
            window(budget, running, prompt, rate),
            window(to, running, prompt, rate),
        )
        if not isinstance(before, Observation) or not isinstance(after, Observation):
            continue
        if saturated(before) or saturated(after):
            continue
        for p in PERCENTILES:
            b, a = before.itl.get(p), after.itl.get(p)
            calibration = model.calibrate(before, now, p) if b and a else None
            forecast = model.forecast(calibration, now, then) if calibration else None
            if not (b and a and forecast and forecast.itl is not None):
                continue
            # A model from before the cautious reading (another tree): the mean.
            cautious = forecast.cautious().itl if hasattr(forecast, "cautious") else None
            found.append(Case(prompt, rate, running, budget, to, p, b, a, a / b - 1, forecast.itl,
                              forecast.itl if cautious is None else cautious))  # fmt: skip
    return found


def summary(found: Sequence[Case], pick: str) -> str:
    errors = [abs(getattr(c, pick) - c.measured) for c in found]
    promised = sum(getattr(c, pick) < GAIN and c.measured > NONE for c in found)
    missed = sum(getattr(c, pick) > NONE and c.measured < GAIN for c in found)
    wrong = sum(
        getattr(c, pick) * c.measured < 0 and min(abs(getattr(c, pick)), abs(c.measured)) > 0.1
        for c in found
    )
    mean, median = statistics.fmean(errors), statistics.median(errors)
    return (
        f"{pick:9s} mean |error| {mean:.3f}, median {median:.3f}, "
        f"within 0.15: {sum(e <= 0.15 for e in errors) / len(errors):.0%}, beyond 0.5: "
        f"{sum(e > 0.5 for e in errors)}, opposite sign (both beyond 10%): {wrong}, a gain "
        f"promised (< -10%) that was not there (> -5%): {promised}, a gain missed: {missed}"
    )


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few loads and moves (seconds)")
    parser.add_argument("--json-out", type=Path, help="also write every case to this file")
    args = parser.parse_args(argv)
    found = cases(args.quick)
    for c in found:
        print(
            f"{c.prompt:5d} tok {c.rate:6.2f}/s seqs {c.running:3d} {c.budget:5d} -> {c.to:5d} "
            f"p{c.percentile}: {c.before * 1e3:6.1f} -> {c.after * 1e3:6.1f} ms, measured "
            f"{c.measured:+.2f}, forecast {c.forecast:+.2f}, cautious {c.cautious:+.2f}"
        )
    if not found:
        print("no case", file=sys.stderr)
        return 1
    print(f"{len(found)} cases")
    for p in PERCENTILES:
        print(f"p{p}: {summary([c for c in found if c.percentile == p], 'forecast')}")
    print(f"all: {summary(found, 'forecast')}")
    print(f"all: {summary(found, 'cautious')}")
    if args.json_out is not None:
        args.json_out.write_text(json.dumps([asdict(c) for c in found], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
