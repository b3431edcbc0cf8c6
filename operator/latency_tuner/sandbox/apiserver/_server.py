"""The emulator served over real HTTP on 127.0.0.1: `ApiServer` (async) and a threaded one.

Both are context managers that start and stop the aiohttp server; their `create`/`get`/...
helpers go straight to the emulator's synchronous operations (same rules as over HTTP).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import aiohttp.web
import yaml

from latency_tuner.sandbox.apiserver._http import KubeApiEmulator
from latency_tuner.sandbox.apiserver._resources import Body


class ApiServer:
    """The emulator on 127.0.0.1:<port> (a free one by default), as an async context manager.

    ::

        async with ApiServer() as api:
            kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
            await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        bookmark_interval: float = 30.0,
        history_size: int = 10_000,
    ) -> None:
        self.emulator = KubeApiEmulator(
            bookmark_interval=bookmark_interval, history_size=history_size
        )
        self._host = host
        self._port = port
        self._runner: aiohttp.web.ServerRunner | None = None

    @property
    def url(self) -> str:
        if self._runner is None:
            raise RuntimeError("The API server is not running.")
        host, port = self._runner.addresses[0][:2]
        return f"http://{host}:{port}"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    async def __aenter__(self) -> Self:
        await self.emulator.__aenter__()
        server = aiohttp.web.Server(self.emulator, handler_cancellation=True)
        self._runner = aiohttp.web.ServerRunner(server, shutdown_timeout=1.0)
        await self._runner.setup()
        site = aiohttp.web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.emulator.close_watches()
        await asyncio.sleep(0)  # let the watches see their end-of-stream
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.emulator.__aexit__(exc_type, exc_value, traceback)

    async def serve_forever(self) -> None:
        """Serve until cancelled."""
        await asyncio.Event().wait()

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        """Write a kubeconfig for this server: plain HTTP, a dummy bearer token."""
        return write_kubeconfig(path, self.url, namespace=namespace)

    async def create(self, obj: Mapping[str, Any]) -> Body:
        """Create as POST would (validation, defaults, events); returns the stored object."""
        return self.emulator.create_object(obj)

    async def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> Body | None:
        """The object, or None when absent. `kind` may also be the plural."""
        return self.emulator.get_object(api_version, kind, name, namespace)

    async def list_objects(
        self, api_version: str, kind: str, *, namespace: str | None = None
    ) -> list[Body]:
        return self.emulator.list_objects(api_version, kind, namespace)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Body:
        """A JSON merge patch, to the object or (subresource="status") to its status."""
        return self.emulator.patch_object(
            api_version, kind, name, patch, namespace=namespace, subresource=subresource
        )

    async def delete(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> Body:
        return self.emulator.delete_object(api_version, kind, name, namespace)

    async def apply_manifests(self, text: str) -> list[Body]:
        """Create every document of a YAML stream (CRDs first would be the caller's order)."""
        return [self.emulator.create_object(doc) for doc in yaml.safe_load_all(text) if doc]

    @classmethod
    def run_in_thread(cls, **kwargs: Any) -> ThreadedApiServer:
        """Start one in a thread of its own (for code that blocks: kubectl, sync clients)."""
        return ThreadedApiServer(**kwargs).start()


class ThreadedApiServer:
    """An `ApiServer` on its own event loop in a daemon thread; a sync context manager."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._server: ApiServer | None = None
        self._failure: BaseException | None = None

    def start(self, timeout: float = 10.0) -> Self:
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._server is None:
            raise RuntimeError(f"The API server did not start: {self._failure!r}")
        return self

    async def _main(self) -> None:
        try:
            async with ApiServer(**self._kwargs) as server:
                self._server, self._loop, self._stop = (
                    server,
                    asyncio.get_running_loop(),
                    asyncio.Event(),
                )
                self._ready.set()
                await self._stop.wait()
        except BaseException as e:
            self._failure = e
            self._ready.set()
            raise

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def server(self) -> ApiServer:
        if self._server is None:
            raise RuntimeError("The API server is not running.")
        return self._server

    @property
    def url(self) -> str:
        return self.server.url

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        return self.server.write_kubeconfig(path, namespace=namespace)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one of the server's coroutine methods on its loop and wait for the result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(fn(*args, **kwargs), self._loop).result(10)

    def create(self, obj: Mapping[str, Any]) -> Body:
        result: Body = self.call(self.server.create, obj)
        return result

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> Body | None:
        result: Body | None = self.call(
            self.server.get, api_version, kind, name, namespace=namespace
        )
        return result


def write_kubeconfig(path: str | Path, url: str, *, namespace: str = "default") -> Path:
    """A kubeconfig naming one plain-HTTP server and a dummy token (the emulator ignores it)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": url}}],
        "users": [{"name": "emulator", "user": {"token": "dummy-token"}}],
        "contexts": [
            {
                "name": "emulator",
                "context": {"cluster": "emulator", "user": "emulator", "namespace": namespace},
            }
        ],
        "current-context": "emulator",
    }
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target
