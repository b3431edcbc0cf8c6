"""Virtual-time speed of the simulator's engine: simulated seconds per wall-clock second.

Llama-3.1-8B on one H100-SXM (vLLM V1 defaults), a closed loop of 16 clients, 512-token prompts
(a shared 128-token system prompt) and 256 output tokens. Target: >= 100x real time.

    .venv/bin/python benchmarks/simulator/virtual_time.py [--requests N] [--concurrency C]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from latency_tuner.perf.config import build_engine_config
from latency_tuner.simulator.engine import VirtualEngine
from latency_tuner.simulator.tokenizer import encode
from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--shared-prefix", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=256)
    parser.add_argument("--gpu", default="H100-SXM")
    args = parser.parse_args(argv)

    config = build_engine_config(VllmCommandLine.parse(None, [MODEL]), gpu=args.gpu, num_gpus=1)
    system = " ".join(f"sys{i}" for i in range(args.shared_prefix))
    unique = args.prompt_tokens - args.shared_prefix

    # Prompts are the client's work: tokenized before the clock starts.
    prompts = [
        encode(f"{system} {' '.join(f'q{i}x{j}' for j in range(unique))}")
        for i in range(args.requests)
    ]

    def make_request(i: int) -> tuple[list[int], int]:
        return prompts[i], args.output_tokens

    engine = VirtualEngine(config)
    started = time.perf_counter()
    records = engine.run_closed_loop(
        concurrency=args.concurrency, num_requests=args.requests, make_request=make_request
    )
    wall = time.perf_counter() - started
    simulated = engine.clock.now()
    ttft = statistics.median(r.ttft for r in records)
    itl = statistics.median(r.tpot for r in records)
    print(
        f"{len(records)} requests, {engine.core.num_steps} steps: {simulated:.1f} simulated s in "
        f"{wall:.2f} wall s; median TTFT {ttft * 1000:.1f} ms, median TPOT {itl * 1000:.2f} ms"
    )
    print(f"speed: {simulated / wall:.0f}x real time (simulated seconds per wall second)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
