"""The emulator serves other processes: standalone (`python -m ...`) and from a thread."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from tests.integration.apiserver.support import WIDGET_CRD, deployment

from latency_tuner.sandbox.apiserver import ApiServer


async def test_the_module_runs_standalone_with_a_kubeconfig_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    crd = tmp_path / "crd.yaml"
    crd.write_text(yaml.safe_dump(WIDGET_CRD))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "latency_tuner.sandbox.apiserver",
        "--port=0",
        f"--kubeconfig={kubeconfig}",
        f"--manifest={crd}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), timeout=20)
        url = line.decode().strip().rsplit(" ", 1)[-1]
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert server == url
        async with httpx.AsyncClient(base_url=url, timeout=5) as client:
            assert (await client.get("/version")).json()["minor"] == "32"
            assert (await client.get("/apis/tests.example.com/v1/widgets")).status_code == 200
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), timeout=10) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_a_threaded_server_serves_blocking_clients_and_stops() -> None:
    with ApiServer.run_in_thread() as threaded:
        threaded.create({**deployment("d", "a"), "metadata": {"name": "d", "namespace": "default"}})
        response = httpx.get(f"{threaded.url}/apis/apps/v1/namespaces/default/deployments/d")
        assert response.status_code == 200
        assert threaded.get("apps/v1", "Deployment", "d", namespace="default") is not None
        url = threaded.url
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/version", timeout=1)
