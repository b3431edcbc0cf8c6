"""One API client for the process: in-cluster credentials, else a kubeconfig."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import kubernetes
from kubernetes.client.exceptions import ApiException

from latency_tuner.controller.errors import ClusterError, StaleWrite

_T = TypeVar("_T")


class Calls:
    """A bounded thread pool for one kind of blocking API call (Deployments, LatencyTargets,
    nodes), never asyncio's shared default: a backlog of one kind (status writes of a
    thousand targets) cannot queue the others' reads, nor Prometheus' or kopf's own work."""

    def __init__(self, kind: str, workers: int = 4) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"k8s-{kind}")

    async def run(self, call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(call, *args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class KubernetesError(ClusterError):
    """The API server refused or failed a request."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(KubernetesError):
    """The object does not exist (404)."""


class Conflict(KubernetesError, StaleWrite):
    """The object changed since it was read (409, or a failed JSON-patch test: 422)."""


def make_api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """An ``ApiClient``: the in-cluster service account if present, else the kubeconfig."""
    configuration = kubernetes.client.Configuration()
    if kubeconfig is None:
        try:
            kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
            return kubernetes.client.ApiClient(configuration)
        except kubernetes.config.ConfigException:
            pass
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=kubeconfig, context=context, client_configuration=configuration
    )
    return kubernetes.client.ApiClient(configuration)


def raw(call: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a client method and return the decoded JSON body; map errors to ours."""
    try:
        response = call(*args, _preload_content=False, **kwargs)
    except ApiException as exc:
        raise translate(exc) from exc
    return json.loads(response.data or b"null")


def translate(exc: ApiException) -> KubernetesError:
    message = exc.reason or "error"
    try:
        body = json.loads(exc.body or "{}")
        message = body.get("message") or message
    except (TypeError, ValueError):
        pass
    status = exc.status
    if status == 404:
        return NotFound(message, status=status)
    if status == 409 or (status == 422 and "test" in message.lower()):
        return Conflict(message, status=status)
    return KubernetesError(f"{status}: {message}", status=status)
