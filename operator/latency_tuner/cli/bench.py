"""``latency-tuner bench``: parse arguments, run the benchmark, print the result."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys

from latency_tuner.loadgen.config import BenchConfig
from latency_tuner.loadgen.report import ProgressLine, render_text
from latency_tuner.loadgen.results import BenchResult
from latency_tuner.loadgen.runner import BenchError, run_benchmark

DESCRIPTION = """\
Measure TTFT, inter-token latency (ITL), TPOT and end-to-end latency of an OpenAI-compatible
server (vLLM) with streaming requests of fixed input and output length.

Prompts are deterministic synthetic text where one token = one whitespace-separated word
(the simulator counts tokens the same way; a real tokenizer makes ~1.3 tokens of a word).
Requests ask for exactly --output-tokens tokens (max_tokens plus vLLM's ignore_eos).
ITL is the gap between successive streamed chunks (as vLLM's benchmark_serving.py does);
TPOT = (e2e - TTFT) / (output tokens - 1) per request."""

EPILOG = """\
Without --requests or --duration the load runs until Ctrl-C / SIGTERM, then reports.
Exit status: 0 all requests succeeded, 1 some failed or none completed, 2 could not start."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="latency-tuner bench",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--url", required=True, metavar="URL", help="server root, e.g. http://127.0.0.1:8000"
    )
    parser.add_argument(
        "--model", metavar="M", help="model name (default: first id of GET /v1/models)"
    )
    parser.add_argument(
        "--chat", action="store_true", help="use /v1/chat/completions (default /v1/completions)"
    )
    parser.add_argument(
        "--concurrency", type=int, required=True, metavar="C", help="max requests in flight"
    )
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        required=True,
        metavar="P",
        help="prompt length (1 token = 1 word)",
    )
    parser.add_argument(
        "--output-tokens", type=int, required=True, metavar="O", help="tokens to generate"
    )
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument("--requests", type=int, metavar="N", help="stop after sending N requests")
    stop.add_argument("--duration", type=float, metavar="S", help="stop sending after S seconds")
    parser.add_argument(
        "--shared-prefix-tokens",
        type=int,
        default=0,
        metavar="K",
        help="the first K prompt tokens are identical in every request (a system prompt)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        metavar="R",
        help="open loop: Poisson arrivals at R req/s, capped at --concurrency "
        "(default: closed loop, each of the --concurrency workers sends back to back)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, metavar="S", help="seed for prompts and arrivals"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="T", help="HTTP timeout in s"
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("OPENAI_API_KEY"),
        metavar="KEY",
        help="default: $OPENAI_API_KEY",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = BenchConfig(
            url=args.url,
            model=args.model,
            chat=args.chat,
            concurrency=args.concurrency,
            prompt_tokens=args.prompt_tokens,
            output_tokens=args.output_tokens,
            requests=args.requests,
            duration=args.duration,
            shared_prefix_tokens=args.shared_prefix_tokens,
            rate=args.rate,
            seed=args.seed,
            timeout=args.timeout,
            api_key=args.api_key,
        )
    except ValueError as exc:
        parser.error(str(exc))
    progress = ProgressLine(sys.stderr) if sys.stderr.isatty() else None
    try:
        result = asyncio.run(_run(config, progress))
    except BenchError as exc:
        print(f"latency-tuner bench: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 130
    finally:
        if progress:
            progress.clear()
    if args.json:
        print(json.dumps(result.to_json_dict()))
    else:
        print(render_text(result))
    return 0 if result.completed and not result.failed else 1


async def _run(config: BenchConfig, progress: ProgressLine | None) -> BenchResult:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()

    def interrupted() -> None:
        # First signal: stop and report what was measured. Second: give up at once.
        if stop.is_set() and main_task is not None:
            main_task.cancel()
        stop.set()

    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, interrupted)
            installed.append(signum)
        except (ValueError, RuntimeError, NotImplementedError):
            pass  # not the main thread (embedded use) or no signal support: no graceful stop
    try:
        return await run_benchmark(config, on_progress=progress, stop=stop)
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
