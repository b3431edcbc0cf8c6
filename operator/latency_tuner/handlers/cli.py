"""`latency-tuner run`: start the operator with settings from flags and the environment."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import threading
from collections.abc import Sequence

import kopf

from latency_tuner.controller.ports import MetricsFor
from latency_tuner.handlers import kopf_readiness
from latency_tuner.handlers.operator import build_registry
from latency_tuner.settings import OperatorSettings, SettingsError, parse_settings


def _configure_logging(settings: OperatorSettings) -> None:
    level = settings.log_level  # one of debug, info, warning, error (checked when parsed)
    kopf.configure(
        debug=level == "debug",
        verbose=settings.verbose or level == "debug",
        quiet=level in ("warning", "error"),
        log_format=kopf.LogFormat.JSON if settings.log_format == "json" else kopf.LogFormat.FULL,
    )


def run_kwargs(
    settings: OperatorSettings, *, metrics_for: MetricsFor | None = None
) -> dict[str, object]:
    """The arguments of ``kopf.run``/``kopf.operator`` for these settings."""
    scope: dict[str, object] = (
        {"namespaces": settings.namespaces} if settings.namespaces else {"clusterwide": True}
    )
    return {
        "registry": build_registry(settings, metrics_for=metrics_for),
        "standalone": settings.standalone,
        # Naming a peering makes kopf require it: only when several replicas elect a leader.
        # Each shard's replicas elect their leader in a peering of their own.
        "peering_name": None if settings.standalone else settings.shard_peering_name,
        # kopf pauses every peer when the highest priority is shared: a random one per process
        # lets one replica of a shard lead and the others stand by.
        "priority": None if settings.standalone else secrets.randbelow(1_000_000) + 1,
        "liveness_endpoint": (
            f"http://{settings.probe_address}:{settings.probe_port}/healthz"
            if settings.probe_port
            else None
        ),
        **scope,
    }


async def run_operator(
    settings: OperatorSettings,
    *,
    stop_flag: asyncio.Event | threading.Event | None = None,
    ready_flag: asyncio.Event | threading.Event | None = None,
    metrics_for: MetricsFor | None = None,
) -> None:
    """The operator as a coroutine (tests and the demo run it in-process)."""
    kopf_readiness.install()
    kwargs = run_kwargs(settings, metrics_for=metrics_for)
    await kopf.operator(stop_flag=stop_flag, ready_flag=ready_flag, **kwargs)  # type: ignore[arg-type]


def main(argv: Sequence[str]) -> int:
    try:
        settings = parse_settings(argv, os.environ)
        _configure_logging(settings)
    except SettingsError as exc:
        print(f"latency-tuner run: {exc}", file=sys.stderr)
        return 2
    kopf_readiness.install()
    kopf.run(**run_kwargs(settings))  # type: ignore[arg-type]
    return 0
