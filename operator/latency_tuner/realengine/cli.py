"""``latency-tuner realengine``: set up real vLLM, build the tiny model, serve it.

    latency-tuner realengine setup              # the vLLM venv (scripts/setup-vllm.sh)
    latency-tuner realengine model [DIR]        # build (or reuse) the tiny model directory
    latency-tuner realengine serve [VLLM ARGS]  # serve it on 127.0.0.1 until Ctrl-C

Prints what it did and how long it took; ``serve`` prints the URL and the startup seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from latency_tuner.realengine.server import VllmServer, VllmStartFailed
from latency_tuner.realengine.venv import VllmUnavailable, build_tiny_model, vllm_python


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="latency-tuner realengine",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("setup", help="install (or find) the vLLM venv")
    model = sub.add_parser("model", help="build the tiny model directory")
    model.add_argument("dir", nargs="?", type=Path)
    serve = sub.add_parser("serve", help="serve the tiny model with real vLLM")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--model-dir", type=Path)
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "serve":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    began = time.monotonic()
    try:
        python = vllm_python()
        print(f"vLLM venv python: {python} ({time.monotonic() - began:.1f} s)")
        if args.command == "setup":
            return 0
        began = time.monotonic()
        directory = build_tiny_model(
            args.dir if args.command == "model" else args.model_dir, python
        )
        print(f"tiny model: {directory} ({time.monotonic() - began:.1f} s)")
        if args.command == "model":
            return 0
        server = VllmServer(python, directory, extra, port=args.port).start()
    except (VllmUnavailable, VllmStartFailed) as exc:
        print(f"latency-tuner realengine: {exc}", file=sys.stderr)
        return 1
    print(
        f"serving {server.url} (model name {server.served_name}); started in "
        f"{server.startup_seconds:.1f} s; log {server.log_path}; Ctrl-C stops it"
    )
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            time.sleep(3600)
    server.stop()
    return 0
