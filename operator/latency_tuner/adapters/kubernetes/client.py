"""One API client for the process: in-cluster credentials, else a kubeconfig."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import quote

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from latency_tuner.controller.errors import ClusterError, StaleWrite

_T = TypeVar("_T")
# Connect and read timeouts of one API call: without them, a request the server never answers
# (a half-open connection after a network blip) holds its pool thread, and the reconcile
# awaiting it, for ever. A read of a whole list of objects stays well within a minute.
REQUEST_TIMEOUT = (10.0, 60.0)


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


JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


class Rest:
    """API calls by path through one ``ApiClient`` (its credentials, TLS and proxy settings):
    a JSON document in, the decoded JSON out, errors mapped to ours. Blocking: run it in a
    ``Calls`` pool.

    Not the client's typed API classes: the operator reads and writes JSON documents anyway,
    and those classes import their models on first use, ~25 MiB a process (``CoreV1Api`` 14,
    ``AppsV1Api`` 11) whatever the number of targets."""

    def __init__(self, api_client: Any, timeout: tuple[float, float] = REQUEST_TIMEOUT) -> None:
        self._client = api_client
        self._timeout = timeout

    def __call__(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> Any:
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self._client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._client.call_api(*request, _request_timeout=self._timeout)
            data = response.read()
        except ApiException as exc:  # no answer at all (TLS, connection)
            raise translate(exc) from exc
        except urllib3.exceptions.HTTPError as exc:  # timed out, reset, refused
            raise KubernetesError(f"no answer from the API server: {exc}") from exc
        if not 200 <= response.status <= 299:
            raise translate(ApiException(http_resp=response))
        return json.loads(data or b"null")


def path(*segments: str) -> str:
    """An API path from its segments, each quoted whole: a name (a tenant may write one) is
    never a path, nor a "." or ".." that a URL parser would resolve away."""
    for segment in segments:
        if segment in ("", ".", ".."):
            raise KubernetesError(f"{segment!r} is not a name in an API path", status=400)
    return "".join("/" + quote(segment, safe="") for segment in segments)


def namespaced(group: str, version: str, namespace: str, plural: str, *rest: str) -> str:
    """The path of a namespaced resource (``group`` "" is the core API)."""
    root = ("api", version) if not group else ("apis", group, version)
    return path(*root, "namespaces", namespace, plural, *rest)


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
