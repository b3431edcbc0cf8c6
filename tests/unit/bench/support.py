"""A small real OpenAI-compatible streaming server (aiohttp on 127.0.0.1, free port) whose
timing is known exactly: first token after ``ttft_s``, then one chunk every ``itl_s``."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

MODEL = "fake-model"


@dataclass
class FakeServer:
    ttft_s: float = 0.05
    itl_s: float = 0.01  # between chunks
    tokens_per_chunk: int = 1
    fail_every: int = 0  # request k (0-based) fails with HTTP 500 when k % fail_every == 0
    error_mid_stream_after: int | None = None  # tokens sent before a streamed error chunk
    send_usage: bool = True
    bodies: list[dict[str, Any]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # time.perf_counter() on arrival
    url: str = ""

    @property
    def prompts(self) -> list[str]:
        return [body["prompt"] for body in self.bodies]

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._complete)
        app.router.add_post("/v1/chat/completions", self._complete)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        arrived = time.perf_counter()
        loop = asyncio.get_running_loop()
        start = loop.time()
        body = await request.json()
        number = len(self.bodies)
        self.bodies.append(body)
        self.arrivals.append(arrived)
        if self.fail_every and number % self.fail_every == 0:
            return web.json_response(
                {"object": "error", "message": f"injected failure {number}", "code": 500},
                status=500,
            )
        chat = request.path.endswith("/chat/completions")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        wanted = int(body["max_tokens"])
        sent = chunks = 0
        while sent < wanted:
            if self.error_mid_stream_after is not None and sent >= self.error_mid_stream_after:
                error = {"error": {"message": "boom mid-stream", "code": 500}}
                await response.write(f"data: {json.dumps(error)}\n\n".encode())
                break
            # Absolute schedule: chunk i leaves at start + ttft + i * itl, no drift.
            await asyncio.sleep(max(0.0, start + self.ttft_s + chunks * self.itl_s - loop.time()))
            count = min(self.tokens_per_chunk, wanted - sent)
            text = " tok" * count
            choice: dict[str, Any] = (
                {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
            )
            await response.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
            sent += count
            chunks += 1
        if self.send_usage:
            words = len(body["prompt"].split()) if "prompt" in body else 0
            usage = {"prompt_tokens": words, "completion_tokens": sent}
            await response.write(
                f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
            )
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
