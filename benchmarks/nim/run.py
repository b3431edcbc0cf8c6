"""The simulator against NVIDIA's NIM benchmark: Llama-3.3-70B FP8 on 2xH100 (TP2).

Replays every row of tests/fixtures/reference/nim_points.csv (closed-loop clients, 5000 prompt
and 500 output tokens, concurrency 1 to 250; plus 500/2000 at concurrency 1) with the
simulator's engine in VIRTUAL time, and prints the model's mean TTFT and ITL next to the
measured ones with the relative error. Target: within 35% on every row.

Measured as genai-perf does for the NIM guide: TTFT and ITL (= TPOT, (e2e - TTFT) / (n - 1))
averaged over requests, in steady state (``simulator.measured.run_closed_loop_steady``: the
clients' first requests spread over one request's duration). Only requests that ran entirely at
full concurrency count: the first ``concurrency`` requests and those that had not finished when
the last request was sent (clients then drain) are left out.

The engine runs vLLM V1's defaults for an H100 (max-num-seqs 1024, max-num-batched-tokens 8192,
gpu-memory-utilization 0.92) with an FP8 KV cache by default (``--kv-cache-dtype auto`` for
BF16): NIM's FP8 profiles quantize the KV cache too, and with a BF16 one ~40 requests of 5.5k
tokens fill the two GPUs, so queueing would start near concurrency 40 instead of ~90.

    .venv/bin/python benchmarks/nim/run.py [--kv-cache-dtype auto|fp8] [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from latency_tuner.perf.config import build_engine_config
from latency_tuner.simulator.engine import VirtualEngine
from latency_tuner.simulator.measured import run_closed_loop_steady
from latency_tuner.vllm.args import VllmCommandLine

MODEL = "nvidia/Llama-3.3-70B-Instruct-FP8"
REFERENCE = Path(__file__).resolve().parents[2] / "tests/fixtures/reference/nim_points.csv"
TARGET = 0.35  # relative error allowed on every row


@dataclass(frozen=True)
class Point:
    id: str
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    ttft_ms: float
    itl_ms: float


@dataclass(frozen=True)
class Row:
    id: str
    concurrency: int
    ttft_ms: float
    itl_ms: float
    reference_ttft_ms: float
    reference_itl_ms: float
    requests: int  # requests averaged
    simulated_s: float
    wall_s: float

    @property
    def ttft_error(self) -> float:
        return self.ttft_ms / self.reference_ttft_ms - 1

    @property
    def itl_error(self) -> float:
        return self.itl_ms / self.reference_itl_ms - 1

    @property
    def within_target(self) -> bool:
        return abs(self.ttft_error) <= TARGET and abs(self.itl_error) <= TARGET


def load_points(path: Path) -> list[Point]:
    with path.open() as f:
        return [
            Point(
                id=row["id"],
                concurrency=int(row["concurrency"]),
                prompt_tokens=int(row["prompt_tokens"]),
                output_tokens=int(row["output_tokens"]),
                ttft_ms=float(row["ttft_ms"]),
                itl_ms=float(row["itl_ms"]),
            )
            for row in csv.DictReader(f)
        ]


def simulate(point: Point, *, kv_cache_dtype: str, rounds: int) -> Row:
    max_len = -(-(point.prompt_tokens + point.output_tokens) // 4096) * 4096
    flags = ["--tensor-parallel-size", "2", "--max-model-len", str(max_len)]
    if kv_cache_dtype != "auto":
        flags += ["--kv-cache-dtype", kv_cache_dtype]
    cl = VllmCommandLine.parse(None, [MODEL, *flags])
    engine = VirtualEngine(build_engine_config(cl, gpu="H100-SXM", num_gpus=2))
    started = time.perf_counter()
    result = run_closed_loop_steady(
        engine,
        clients=point.concurrency,
        prompt_tokens=point.prompt_tokens,
        output_tokens=point.output_tokens,
        rounds=rounds,
    )
    wall = time.perf_counter() - started
    return Row(
        id=point.id,
        concurrency=point.concurrency,
        ttft_ms=result.ttft_ms,
        itl_ms=result.tpot_ms,
        reference_ttft_ms=point.ttft_ms,
        reference_itl_ms=point.itl_ms,
        requests=len(result.steady),
        simulated_s=engine.clock.now(),
        wall_s=wall,
    )


def render(rows: Sequence[Row]) -> str:
    header = (
        f"{'id':16} {'conc':>4} {'TTFT ms':>9} {'ref':>8} {'err':>7} "
        f"{'ITL ms':>7} {'ref':>6} {'err':>7} {'reqs':>5} {'wall s':>7}  ok"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.id:16} {r.concurrency:>4} {r.ttft_ms:>9.0f} {r.reference_ttft_ms:>8.0f} "
            f"{r.ttft_error:>+7.0%} {r.itl_ms:>7.1f} {r.reference_itl_ms:>6.1f} "
            f"{r.itl_error:>+7.0%} {r.requests:>5} {r.wall_s:>7.1f}  "
            f"{'yes' if r.within_target else 'NO'}"
        )
    ok = sum(r.within_target for r in rows)
    lines.append(f"{ok}/{len(rows)} rows within {TARGET:.0%} on both TTFT and ITL")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kv-cache-dtype", default="fp8", choices=("auto", "fp8"))
    parser.add_argument("--rounds", type=int, default=4, help="requests per client, measured")
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(list(argv))
    rows = [
        simulate(p, kv_cache_dtype=args.kv_cache_dtype, rounds=args.rounds)
        for p in load_points(args.reference)
    ]
    if args.json:
        print(json.dumps([asdict(r) | {"within_target": r.within_target} for r in rows]))
    else:
        print(f"{MODEL} on 2x H100-SXM (TP2), KV cache {args.kv_cache_dtype}, virtual time")
        print(render(rows))
    return 0 if all(r.within_target for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
