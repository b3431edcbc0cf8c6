"""The adapters' API calls go by path through the client's ``ApiClient`` (``Rest``): a name is
one path segment whatever it holds, errors come back as ours, and the operator never loads the
client's typed API classes (their models cost ~25 MiB a process)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from latency_tuner.adapters.kubernetes.client import (
    KubernetesError,
    NotFound,
    Rest,
    make_api_client,
    namespaced,
)
from latency_tuner.sandbox.apiserver import ApiServer


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        for ns in ("team-a", "team-b"):
            await server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await server.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "keys", "namespace": "team-b"},
                "data": {"token": "hunter2"},
            }
        )
        yield server


def rest(api: ApiServer, tmp_path: Path) -> Callable[..., Awaitable[Any]]:
    """The blocking call in a thread: the emulator answers on this test's event loop."""
    call = Rest(make_api_client(str(api.write_kubeconfig(tmp_path / "kubeconfig"))))

    async def in_thread(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(call, *args, **kwargs)

    return in_thread


async def test_an_object_is_read_by_its_path(api: ApiServer, tmp_path: Path) -> None:
    obj = await rest(api, tmp_path)("GET", namespaced("", "v1", "team-b", "configmaps", "keys"))
    assert obj["data"] == {"token": "hunter2"}


async def test_a_name_that_looks_like_a_path_stays_one_segment(
    api: ApiServer, tmp_path: Path
) -> None:
    call = rest(api, tmp_path)
    with pytest.raises(NotFound):
        await call(
            "GET", namespaced("", "v1", "team-a", "configmaps", "../../team-b/configmaps/keys")
        )
    for name in ("..", "."):
        with pytest.raises(KubernetesError) as refused:
            await call("GET", namespaced("", "v1", "team-a", "configmaps", name))
        assert refused.value.status == 400


async def test_an_answer_the_server_refuses_is_our_error_with_its_status(
    api: ApiServer, tmp_path: Path
) -> None:
    with pytest.raises(NotFound) as missing:
        await rest(api, tmp_path)("GET", namespaced("", "v1", "team-a", "configmaps", "nothing"))
    assert missing.value.status == 404


def test_the_operator_never_loads_the_clients_typed_api_classes() -> None:
    """Building every adapter and the operator's handlers loads none of them (a subprocess:
    other tests of this session may have)."""
    script = textwrap.dedent(
        """
        import sys
        import kubernetes
        from latency_tuner.adapters.kubernetes.canaries import Canaries
        from latency_tuner.adapters.kubernetes.configmaps import ConfigMaps
        from latency_tuner.adapters.kubernetes.deployments import Deployments
        from latency_tuner.adapters.kubernetes.latencytargets import LatencyTargets
        from latency_tuner.adapters.kubernetes.nodes import Nodes
        from latency_tuner.adapters.kubernetes.shard_claims import ShardClaims
        import latency_tuner.handlers.operator

        client = kubernetes.client.ApiClient(kubernetes.client.Configuration())
        for adapter in (Canaries, ConfigMaps, Deployments, LatencyTargets, Nodes, ShardClaims):
            adapter(client)
        print(sorted(m for m in sys.modules if m.startswith("kubernetes.client.api.")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout


async def test_a_call_the_server_never_answers_fails_at_its_timeout_as_ours(
    tmp_path: Path,
) -> None:
    # A server that accepts the connection and then says nothing (a half-open connection):
    # without a read timeout the call, and the reconcile awaiting it, would wait for ever.
    held: list[asyncio.StreamWriter] = []

    async def silent(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        textwrap.dedent(f"""\
            apiVersion: v1
            kind: Config
            clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
            users: [{{name: u, user: {{token: t}}}}]
            contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
            current-context: x
            """)
    )
    call = Rest(make_api_client(str(kubeconfig)), timeout=(1.0, 1.0))
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with server:
        with pytest.raises(KubernetesError, match="no answer from the API server"):
            await asyncio.to_thread(call, "GET", namespaced("", "v1", "team-a", "configmaps"))
    assert loop.time() - began < 15  # the pool's retries included, bounded
    assert held  # the request did reach the silent server
