"""The official `kubernetes` Python client works against the emulator through a kubeconfig."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kubernetes import client, config
from tests.integration.apiserver.support import deployment

from latency_tuner.sandbox.apiserver import ApiServer


def create_patch_read(kubeconfig: Path) -> client.V1Deployment:
    api_client = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    with api_client:
        apps = client.AppsV1Api(api_client)
        body: Any = deployment("vllm", "server", "sidecar")  # the client takes plain dicts too
        apps.create_namespaced_deployment("default", body)
        # A dict body goes as a strategic merge patch: only the named container's args change.
        patch = {
            "spec": {"template": {"spec": {"containers": [{"name": "server", "args": ["--x"]}]}}}
        }
        apps.patch_namespaced_deployment("vllm", "default", patch)
        return apps.read_namespaced_deployment("vllm", "default")


async def test_the_client_creates_patches_and_reads_a_deployment(
    api: ApiServer, tmp_path: Path
) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    read = await asyncio.wait_for(asyncio.to_thread(create_patch_read, kubeconfig), timeout=30)
    assert read.spec is not None
    assert read.spec.template.spec is not None
    assert read.metadata is not None
    containers = {c.name: c.args for c in read.spec.template.spec.containers}
    assert containers == {"server": ["--x"], "sidecar": ["--sidecar"]}
    assert read.metadata.generation == 2
    assert read.metadata.creation_timestamp is not None
