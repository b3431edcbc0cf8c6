"""`python -m latency_tuner.sandbox.apiserver`: the emulator as a process of its own.

Serves until SIGINT or SIGTERM; writes a kubeconfig and creates manifests at start if asked.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml

from latency_tuner.sandbox.apiserver._resources import Body
from latency_tuner.sandbox.apiserver._server import ApiServer

_DESCRIPTION = (
    "A Kubernetes API emulator good enough for kopf, the `kubernetes` client and kubectl."
)


def _iter_manifests(paths: Sequence[str]) -> Iterator[Body]:
    for path in paths:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if doc:
                yield doc


async def _serve_cli(args: argparse.Namespace) -> int:
    async with ApiServer(
        host=args.host, port=args.port, bookmark_interval=args.bookmark_interval
    ) as api:
        for doc in _iter_manifests(args.manifest):
            await api.create(doc)
        if args.kubeconfig:
            api.write_kubeconfig(args.kubeconfig)
        print(f"apiserver listening on {api.url}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m latency_tuner.sandbox.apiserver --port N --kubeconfig PATH [--manifest F]...`"""
    parser = argparse.ArgumentParser(
        prog="latency_tuner.sandbox.apiserver", description=_DESCRIPTION
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig", help="write a kubeconfig for this server here")
    parser.add_argument("--manifest", action="append", default=[], help="YAML to create at start")
    parser.add_argument("--bookmark-interval", type=float, default=30.0)
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("aiohttp.access").setLevel(logging.INFO if args.verbose else logging.WARNING)
    return asyncio.run(_serve_cli(args))
