"""The pod runner's API client: plain HTTP to the API server, as any controller talks to it.

One method, ``request``: JSON in, JSON out, 404 as None when allowed, other errors raised as
``RuntimeError`` with the server's message. Holds no state beyond the connection pool.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

Body = dict[str, Any]


class ApiClient:
    """An ``httpx.AsyncClient`` on ``api_url``; ``open()`` before use, ``aclose()`` after."""

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url
        self._client: httpx.AsyncClient | None = None

    def open(self) -> None:
        self._client = httpx.AsyncClient(base_url=self.api_url, timeout=10.0)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        self._client = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("the PodRunner is not running")
        return self._client

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/merge-patch+json",
        ok_missing: bool = True,
    ) -> Body | None:
        response = await self.client.request(
            method,
            path,
            content=None if body is None else json.dumps(body),
            headers={"Content-Type": content_type} if body is not None else {},
        )
        if response.status_code == 404 and ok_missing:
            return None
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        result: Body = response.json()
        return result
