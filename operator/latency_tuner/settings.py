"""The operator's settings: every one a command-line flag and an environment variable.

``latency-tuner run --prometheus-url URL`` and ``LT_PROMETHEUS_URL=URL latency-tuner run`` mean
the same; a flag wins over the environment. The Helm chart sets the environment. Parsing is
pure (argv and environ come in as arguments) and a bad value is a clear error naming the flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from latency_tuner.api.durations import parse_duration

ENV_PREFIX = "LT_"


@dataclass(frozen=True)
class OperatorSettings:
    prometheus_url: str | None = None
    prometheus_bearer_token: str | None = field(default=None, repr=False)
    prometheus_bearer_token_file: str | None = None
    prometheus_ca_file: str | None = None
    prometheus_timeout_seconds: float = 10.0
    allow_per_resource_prometheus_url: bool = False
    metrics_source: Literal["prometheus", "scrape"] = "prometheus"
    namespaces: tuple[str, ...] = ()  # empty: cluster-wide
    interval_seconds: float = 30.0
    log_level: str = "info"
    log_format: Literal["plain", "json"] = "plain"
    standalone: bool = True
    peering_name: str = "latency-tuner"
    metrics_port: int = 8080
    probe_port: int = 8081
    kubeconfig: str | None = None
    verbose: bool = False


# flag name -> (help, kind); kind: str | float-duration | bool | int | list | choice
_FLAGS: dict[str, tuple[str, str]] = {
    "prometheus-url": ("Prometheus HTTP API base URL", "str"),
    "prometheus-bearer-token": ("bearer token for Prometheus (prefer the _FILE form)", "str"),
    "prometheus-bearer-token-file": ("file holding the Prometheus bearer token", "str"),
    "prometheus-ca-file": ("CA bundle to verify Prometheus' TLS certificate", "str"),
    "prometheus-timeout": ("timeout of one Prometheus query, e.g. 10s", "duration"),
    "allow-per-resource-prometheus-url": (
        "let LatencyTargets name their own Prometheus (SSRF risk)", "bool"),
    "metrics-source": ("prometheus, or scrape (read pods' /metrics directly)", "choice"),
    "namespaces": ("comma-separated namespaces to watch; empty for the whole cluster", "list"),
    "interval": ("how often each LatencyTarget is reconciled, e.g. 30s", "duration"),
    "log-level": ("debug, info, warning or error", "str"),
    "log-format": ("plain or json", "choice"),
    "standalone": ("run without peering (one replica); false to elect a leader", "bool"),
    "peering-name": ("kopf peering object name used for leader election", "str"),
    "metrics-port": ("port of the operator's own /metrics", "int"),
    "probe-port": ("port of the liveness endpoint /healthz", "int"),
    "kubeconfig": ("kubeconfig file (default: in-cluster, then ~/.kube/config)", "str"),
}  # fmt: skip
_CHOICES = {"metrics-source": ("prometheus", "scrape"), "log-format": ("plain", "json")}


class SettingsError(ValueError):
    """A flag or environment variable with a value that cannot be used."""


def _env_name(flag: str) -> str:
    return ENV_PREFIX + flag.upper().replace("-", "_")


def _bool(text: str, what: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise SettingsError(f"{what}: {text!r} is not a boolean (true or false)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latency-tuner run",
        description="Run the latency-tuner operator. Every flag can also be set as the "
        "environment variable shown in brackets.",
    )
    for flag, (text, kind) in _FLAGS.items():
        boolean = kind == "bool"
        p.add_argument(
            f"--{flag}",
            default=None,
            help=f"{text} [{_env_name(flag)}]",
            choices=_CHOICES.get(flag),
            metavar=None if kind == "choice" else "VALUE",
            nargs="?" if boolean else None,  # `--standalone` alone means true
            const="true" if boolean else None,
        )
    p.add_argument("--verbose", action="store_true", help="debug logging of kopf itself")
    return p


def parse_settings(argv: Sequence[str], environ: Mapping[str, str]) -> OperatorSettings:
    """Settings from flags, then the environment, then defaults."""
    ns = parser().parse_args(list(argv))
    values: dict[str, object] = {}
    for flag, (_, kind) in _FLAGS.items():
        attr = flag.replace("-", "_")
        raw = getattr(ns, attr)
        what = f"--{flag}"
        if raw is None and _env_name(flag) in environ:
            raw, what = environ[_env_name(flag)], _env_name(flag)
        if raw is None or (raw == "" and kind != "list"):
            continue
        try:
            if kind == "duration":
                values[f"{attr}_seconds"] = parse_duration(raw)
            elif kind == "bool":
                values[attr] = _bool(raw, what)
            elif kind == "int":
                values[attr] = int(raw)
            elif kind == "list":
                values[attr] = tuple(x.strip() for x in raw.split(",") if x.strip())
            elif kind == "choice" and raw not in _CHOICES[flag]:
                raise SettingsError(f"{what}: {raw!r} is not one of {', '.join(_CHOICES[flag])}")
            else:
                values[attr] = raw
        except ValueError as exc:
            raise SettingsError(f"{what}: {exc}") from exc
    values["verbose"] = ns.verbose
    settings = OperatorSettings(**values)  # type: ignore[arg-type]
    if settings.metrics_source == "prometheus" and not settings.prometheus_url:
        raise SettingsError(
            "no Prometheus: set --prometheus-url (LT_PROMETHEUS_URL), "
            "or --metrics-source scrape to read the pods' /metrics directly"
        )
    return settings
