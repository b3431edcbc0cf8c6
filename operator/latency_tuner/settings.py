"""The operator's settings: every one a command-line flag and an environment variable.

``latency-tuner run --prometheus-url URL`` and ``LT_PROMETHEUS_URL=URL latency-tuner run`` mean
the same; a flag wins over the environment. The Helm chart sets the environment. Parsing is
pure (argv and environ come in as arguments) and a bad value is a clear error naming the flag.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from latency_tuner.api.durations import format_duration, parse_duration
from latency_tuner.core.sharding.assignment import Sharding, ShardMode, ordinal

ENV_PREFIX = "LT_"


@dataclass(frozen=True)
class OperatorSettings:
    prometheus_url: str | None = None
    prometheus_bearer_token: str | None = field(default=None, repr=False)
    prometheus_bearer_token_file: str | None = None
    prometheus_ca_file: str | None = None
    prometheus_timeout_seconds: float = 10.0
    # The most targets one batched query of the operator's Prometheus covers; a batch over
    # more goes in chunks of whole namespaces (``adapters.metrics.batch``).
    prometheus_max_targets_per_query: int = 500
    allow_per_resource_prometheus_url: bool = False
    # With per-resource URLs allowed, the prefixes such a URL must start with (empty: any).
    prometheus_url_prefixes: tuple[str, ...] = ()
    # Image prefixes a quantization variant may switch to; empty: only the repository the
    # container already runs (a LatencyTarget never brings in an image of its own choosing).
    variant_images: tuple[str, ...] = ()
    metrics_source: Literal["prometheus", "scrape"] = "prometheus"
    namespaces: tuple[str, ...] = ()  # empty: cluster-wide
    interval_seconds: float = 30.0
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["plain", "json"] = "plain"
    standalone: bool = True
    peering_name: str = "latency-tuner"
    metrics_port: int = 8080
    probe_port: int = 8081
    metrics_address: str = "0.0.0.0"  # in a pod: the pod IP, so Prometheus can scrape
    probe_address: str = "0.0.0.0"  # the kubelet probes the pod IP
    kubeconfig: str | None = None
    verbose: bool = False
    # Sharding: this process is shard `shard_index` of `shards` (see core/sharding).
    shards: int = 1
    shard_index: int = 0
    shard_mode: ShardMode = "hash"
    shard_lease_seconds: float = 180.0
    pod_name: str = ""  # who holds the claims; the pod's name (HOSTNAME) when unset

    @property
    def sharding(self) -> Sharding:
        return Sharding(index=self.shard_index, shards=self.shards, mode=self.shard_mode)

    @property
    def shard_peering_name(self) -> str:
        """The peering each shard's replicas elect their leader in: one per shard."""
        if self.shards == 1:
            return self.peering_name
        return f"{self.peering_name}-shard-{self.shard_index}"


# flag name -> (help, kind); kind: str | float-duration | bool | int | list | choice
_FLAGS: dict[str, tuple[str, str]] = {
    "prometheus-url": ("Prometheus HTTP API base URL", "str"),
    "prometheus-bearer-token": ("bearer token for Prometheus (prefer the _FILE form)", "str"),
    "prometheus-bearer-token-file": ("file holding the Prometheus bearer token", "str"),
    "prometheus-ca-file": ("CA bundle to verify Prometheus' TLS certificate", "str"),
    "prometheus-timeout": ("timeout of one Prometheus query, e.g. 10s", "duration"),
    "prometheus-max-targets-per-query": (
        "the most LatencyTargets one batched query covers; more go in chunks of whole "
        "namespaces", "count"),
    "allow-per-resource-prometheus-url": (
        "let LatencyTargets name their own Prometheus (SSRF risk)", "bool"),
    "prometheus-url-prefixes": (
        "comma-separated prefixes a LatencyTarget's own Prometheus URL must start with", "list"),
    "variant-images": (
        "comma-separated image prefixes quantization variants may use; empty: the running "
        "image's repository only", "list"),
    "metrics-source": ("prometheus, or scrape (read pods' /metrics directly)", "choice"),
    "namespaces": ("comma-separated namespaces to watch; empty for the whole cluster", "list"),
    "interval": ("how often each LatencyTarget is reconciled, e.g. 30s", "duration"),
    "log-level": ("debug, info, warning or error", "choice"),
    "log-format": ("plain or json", "choice"),
    "standalone": ("run without peering (one replica); false to elect a leader", "bool"),
    "peering-name": ("kopf peering object name used for leader election", "str"),
    "metrics-port": ("port of the operator's own /metrics", "int"),
    "probe-port": ("port of the liveness endpoint /healthz", "int"),
    "metrics-address": ("address /metrics listens on, e.g. 127.0.0.1 or 0.0.0.0", "address"),
    "probe-address": ("address /healthz listens on", "address"),
    "kubeconfig": ("kubeconfig file (default: in-cluster, then ~/.kube/config)", "str"),
    "verbose": ("debug logging of kopf itself", "bool"),
    "shards": ("number of operator shards the LatencyTargets are split across", "count"),
    "shard-index": (
        "this operator's shard, 0 to shards-1; default: the ordinal ending the hostname "
        "(a StatefulSet pod's), else 0", "index"),
    "shard-mode": (
        "hash (of namespace/name), namespace (a hash of the namespace: all its targets on one "
        "shard) or label (the target's latencytuner.io/shard label)", "choice"),
    "shard-lease": (
        "how long a shard's claim on a target holds without renewal, e.g. 3m", "duration"),
    "pod-name": ("who holds this shard's claims (default: $POD_ID, else $HOSTNAME)", "str"),
}  # fmt: skip
_CHOICES = {
    "metrics-source": ("prometheus", "scrape"),
    "log-format": ("plain", "json"),
    "log-level": ("debug", "info", "warning", "error"),
    "shard-mode": get_args(ShardMode),
}


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
    defaults = OperatorSettings()
    for flag, (text, kind) in _FLAGS.items():
        boolean = kind == "bool"
        shown = _default_text(defaults, flag, kind)
        # No argparse `choices`: a bad value must be the same SettingsError whether it came
        # from a flag or from the environment.
        p.add_argument(
            f"--{flag}",
            default=None,
            help=f"{text} [{_env_name(flag)}]" + (f" (default: {shown})" if shown else ""),
            metavar="{" + ",".join(_CHOICES[flag]) + "}" if kind == "choice" else "VALUE",
            nargs="?" if boolean else None,  # `--standalone` alone means true
            const="true" if boolean else None,
        )
    return p


def _default_text(defaults: OperatorSettings, flag: str, kind: str) -> str:
    """The default as one would write it on the command line; empty when there is none."""
    attr = flag.replace("-", "_")
    if kind == "duration":
        return format_duration(getattr(defaults, f"{attr}_seconds"))
    value = getattr(defaults, attr, None)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return "" if value is None else str(value)


def _int(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise SettingsError(f"{what}: {text!r} is not a whole number") from None
    if not 0 <= value <= 65535:
        raise SettingsError(f"{what}: {value} is not a port number (0-65535; 0 turns it off)")
    return value


def _whole(text: str, what: str, *, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise SettingsError(f"{what}: {text!r} is not a whole number") from None
    if value < least:
        raise SettingsError(f"{what}: {value} must be at least {least}")
    return value


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
                seconds = parse_duration(raw)
                if seconds <= 0:  # an interval of 0 would spin; a timeout of 0 always fails
                    raise SettingsError(f"{what}: {raw!r} must be longer than zero")
                values[f"{attr}_seconds"] = seconds
            elif kind == "bool":
                values[attr] = _bool(raw, what)
            elif kind == "int":
                values[attr] = _int(raw, what)
            elif kind in ("count", "index"):
                values[attr] = _whole(raw, what, least=1 if kind == "count" else 0)
            elif kind == "address":
                values[attr] = str(ipaddress.ip_address(raw.strip()))
            elif kind == "list":
                values[attr] = tuple(x.strip() for x in raw.split(",") if x.strip())
            elif kind == "choice":
                choice = raw.strip().lower() if flag == "log-level" else raw
                if choice not in _CHOICES[flag]:
                    choices = ", ".join(_CHOICES[flag])
                    raise SettingsError(f"{what}: {raw!r} is not one of {choices}")
                values[attr] = choice
            else:
                values[attr] = raw
        except SettingsError:
            raise
        except ValueError as exc:
            raise SettingsError(f"{what}: {exc}") from exc
    _shard_identity(values, environ)
    settings = OperatorSettings(**values)  # type: ignore[arg-type]
    if settings.metrics_source == "prometheus" and not settings.prometheus_url:
        raise SettingsError(
            "no Prometheus: set --prometheus-url (LT_PROMETHEUS_URL), "
            "or --metrics-source scrape to read the pods' /metrics directly"
        )
    for prefix in settings.prometheus_url_prefixes:
        if not prefix.startswith(("http://", "https://")) or prefix.count("/") < 3:
            raise SettingsError(
                f"--prometheus-url-prefixes: {prefix!r} must be a URL with a path, e.g. "
                "https://prometheus.monitoring.svc:9090/ (a bare host would also admit "
                "host.attacker.example)"
            )
    return settings


def _shard_identity(values: dict[str, object], environ: Mapping[str, str]) -> None:
    """Fill in the pod name and, for a StatefulSet pod, the shard index from its ordinal."""
    hostname = environ.get("HOSTNAME", "")
    values.setdefault("pod_name", environ.get("POD_ID") or hostname)
    shards = int(values.get("shards", 1))  # type: ignore[call-overload]
    if "shard_index" not in values and shards > 1:
        values["shard_index"] = ordinal(hostname) or 0
    index = int(values.get("shard_index", 0))  # type: ignore[call-overload]
    if index >= shards:
        raise SettingsError(
            f"--shard-index: {index} is not a shard of {shards} (0 to {shards - 1}); with a "
            "StatefulSet, its replicas must equal --shards"
        )
