"""Can the bench client time 256 concurrent streams without becoming the bottleneck?

Spawns fake_server.py as its own process (pinned to the other core when there are two) and
runs ``latency_tuner.loadgen.run_benchmark`` in this process against it:

* baseline  - 1 stream: ITL/TTFT with no client load at all;
* steady    - N streams (default 256) sustained: open loop at the rate that keeps N requests
              in flight (N / (output_tokens * ITL)), capped at N - starts are staggered as
              in real traffic;
* burst     - N streams closed loop: all N start at once, every round (worst case for TTFT);
* single    - "steady" again with one httpx client for all N connections instead of the
              library's shards of 16 (httpcore's pool does O(n^2) bookkeeping per request,
              encode/httpcore#1035) - shows why the library shards.

Everything is reported as ratios to what the server was told to do, or to the baseline of the
same run - never as absolute thresholds: measured/expected ITL, TTFT added over the baseline
(in ITLs), the server's own lateness against its schedule (to tell server lag from client
lag), the client's CPU per received chunk and share of its core (on a small VM each wake-up of
an idle process is expensive, so CPU per chunk falls as streams rise), and the cost of one
``time.perf_counter_ns()`` call (the timestamping overhead).

    .venv/bin/python benchmarks/bench_client/run.py                  # 256 streams, ITL 20 ms
    .venv/bin/python benchmarks/bench_client/run.py --itl-ms 50 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from latency_tuner.loadgen import BenchConfig, BenchResult, run_benchmark

HERE = Path(__file__).resolve().parent


def perf_counter_ns_cost(calls: int = 1_000_000) -> float:
    """Nanoseconds per ``time.perf_counter_ns()`` call (loop overhead subtracted)."""
    clock = time.perf_counter_ns
    start = clock()
    for _ in range(calls):
        clock()
    timed = clock() - start
    start = clock()
    for _ in range(calls):
        pass
    empty = clock() - start
    return max(0.0, (timed - empty) / calls)


def start_server(ttft_ms: float, itl_ms: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(HERE / "fake_server.py"), "--ttft-ms", str(ttft_ms),
         "--itl-ms", str(itl_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.terminate()
        raise RuntimeError(f"fake server did not start: {line!r}")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cores) >= 2:  # give each side a core of its own
        os.sched_setaffinity(process.pid, {cores[-1]})
        os.sched_setaffinity(0, {cores[0]})
    return process, f"http://127.0.0.1:{line.split()[1]}"


async def server_stats(url: str, *, reset: bool) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        response = await (client.post if reset else client.get)(f"{url}/stats")
        stats: dict[str, Any] = response.json()
        return stats


async def measure(
    url: str,
    *,
    streams: int,
    requests: int,
    output_tokens: int,
    itl_ms: float,
    steady: bool,
    shard: int = 16,
) -> dict[str, Any]:
    await server_stats(url, reset=True)
    config = BenchConfig(
        url=url,
        model="fake",
        concurrency=streams,
        prompt_tokens=64,
        output_tokens=output_tokens,
        requests=requests,
        rate=streams / (output_tokens * itl_ms / 1000) if steady else None,
        timeout=120.0,
        pool_shard_size=shard,
    )
    result: BenchResult = await run_benchmark(config)
    cpu = result.process_cpu_s
    server = await server_stats(url, reset=True)
    assert result.itl is not None
    assert result.ttft is not None
    assert result.e2e is not None
    chunks = result.itl.count + result.completed
    concurrency = result.e2e.mean * result.e2e.count / result.duration_s
    return {
        "streams": streams,
        "pool_shard_size": shard,
        "mode": "steady open loop" if steady else "burst closed loop",
        "completed": result.completed,
        "failed": result.failed,
        "duration_s": result.duration_s,
        "achieved_mean_concurrency": concurrency,
        "chunks_per_s": chunks / result.duration_s,
        "itl_ms": result.itl.scaled(1000).as_dict(),
        "ttft_ms": result.ttft.scaled(1000).as_dict(),
        "client_cpu_share": cpu / result.duration_s,
        "client_cpu_us_per_chunk": 1e6 * cpu / chunks,
        "server": server,
        "errors": [e.message for e in result.errors],
    }


async def bench(args: argparse.Namespace, url: str) -> dict[str, Any]:
    common = {"output_tokens": args.output_tokens, "itl_ms": args.itl_ms}
    await measure(url, streams=8, requests=8, steady=False, **common)  # warm-up
    requests = args.streams * args.rounds
    runs = {
        "baseline": await measure(
            url, streams=1, requests=args.baseline_requests, steady=False, **common
        ),
        "steady": await measure(
            url, streams=args.streams, requests=requests, steady=True, **common
        ),
        "burst": await measure(
            url, streams=args.streams, requests=requests, steady=False, **common
        ),
    }
    if not args.skip_single_client:
        runs["single"] = await measure(
            url, streams=args.streams, requests=requests, steady=True, shard=0, **common
        )
    expected = float(args.itl_ms)
    base = runs["baseline"]
    ratios: dict[str, float] = {}
    for name, run in runs.items():
        itl, ttft = run["itl_ms"], run["ttft_ms"]
        ratios[f"{name}_mean_itl_vs_expected"] = itl["mean"] / expected
        ratios[f"{name}_p50_itl_vs_expected"] = itl["p50"] / expected
        ratios[f"{name}_p99_itl_vs_expected"] = itl["p99"] / expected
        if name != "baseline":
            ratios[f"{name}_mean_itl_vs_baseline"] = itl["mean"] / base["itl_ms"]["mean"]
            ratios[f"{name}_p50_ttft_added_over_baseline_in_itls"] = (
                ttft["p50"] - base["ttft_ms"]["p50"]
            ) / expected
    if "single" in runs:
        ratios["single_vs_sharded_cpu_per_chunk"] = (
            runs["single"]["client_cpu_us_per_chunk"] / runs["steady"]["client_cpu_us_per_chunk"]
        )
    return {
        "expected_itl_ms": expected,
        "output_tokens": args.output_tokens,
        "perf_counter_ns_cost_ns": perf_counter_ns_cost(),
        "runs": runs,
        "ratios": ratios,
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        f"server: TTFT 0, ITL {report['expected_itl_ms']:.1f} ms, "
        f"{report['output_tokens']} tokens/request; "
        f"perf_counter_ns() costs {report['perf_counter_ns_cost_ns']:.0f} ns/call"
    ]
    for name, run in report["runs"].items():
        itl, ttft, server = run["itl_ms"], run["ttft_ms"], run["server"]
        lines += [
            f"{name}: {run['streams']} streams ({run['mode']}, {run['pool_shard_size'] or 'one'} "
            f"conn/client), {run['completed']} ok, {run['failed']} failed, "
            f"mean in flight {run['achieved_mean_concurrency']:.0f}, "
            f"{run['chunks_per_s']:.0f} chunks/s",
            f"    ITL mean {itl['mean']:.2f} p50 {itl['p50']:.2f} p99 {itl['p99']:.2f} ms; "
            f"TTFT p50 {ttft['p50']:.2f} p99 {ttft['p99']:.2f} ms",
            f"    client CPU {100 * run['client_cpu_share']:.0f}% of a core, "
            f"{run['client_cpu_us_per_chunk']:.1f} us/chunk; server late vs schedule mean "
            f"{server.get('mean_late_ms', 0):.2f} p99 {server.get('p99_late_ms', 0):.2f} ms",
        ]
    lines += [f"  {key}: {value:.3f}" for key, value in report["ratios"].items()]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3, help="requests per stream")
    parser.add_argument("--baseline-requests", type=int, default=10)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    parser.add_argument("--skip-single-client", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    process, url = start_server(0.0, args.itl_ms)
    try:
        report = asyncio.run(bench(args, url))
    finally:
        process.terminate()
        process.wait(timeout=10)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
