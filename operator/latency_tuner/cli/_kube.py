"""The API client of the read-only commands (``diagnose``, ``report``): a missing or broken
kubeconfig is one line telling what to do, never a traceback."""

from __future__ import annotations

from typing import Any

import kubernetes

from latency_tuner.adapters.kubernetes.client import make_api_client


class NoCluster(Exception):
    """No usable credentials for a cluster; the message says what to give instead."""


def cluster_client(kubeconfig: str | None, *, instead: str = "") -> Any:
    """An ``ApiClient`` from ``kubeconfig`` (None: in-cluster, then $KUBECONFIG, then
    ~/.kube/config). ``instead`` names another way to give the command what it needs."""
    try:
        return make_api_client(kubeconfig)
    except (kubernetes.config.ConfigException, OSError) as exc:
        where = kubeconfig or "$KUBECONFIG or ~/.kube/config"
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NoCluster(
            f"no usable kubeconfig ({where}: {detail}); give --kubeconfig FILE{instead}"
        ) from None
