"""vLLM's OpenAI-compatible HTTP API in front of the simulated engine (aiohttp).

Wire format as vLLM 0.11 writes it (``vllm/entrypoints/openai/serving_{completion,chat}.py``):
- streaming: ``data: {json}\\n\\n`` per engine step that produced tokens, then, with
  ``stream_options.include_usage``, a usage chunk with ``choices: []``, then ``data: [DONE]\\n\\n``;
  completion chunks are dumped with every field (``exclude_unset=False``), chat chunks with only
  the fields set (``exclude_unset=True``); the first chat chunk carries
  ``delta: {"role": "assistant", "content": ""}`` and, as in vLLM, is sent with the first token;
- non-streaming: every field of ``CompletionResponse`` / ``ChatCompletionResponse``;
- errors: ``{"error": {"message", "type", "param", "code"}}`` with the HTTP status; a wrong model
  name is 404 ``NotFoundError``, a too-long prompt 400 ``BadRequestError``;
- ``max_tokens``: completions default 16, chat defaults to what is left of ``max_model_len``;
  ``n`` must be 1 (the simulator does not fork sequences); logprobs are not simulated (null);
  generation always runs to ``max_tokens`` (``finish_reason: "length"``, stop strings ignored).
A client that goes away aborts its request in the engine.

Must never block the event loop: the engine runs as an asyncio task beside the handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from latency_tuner.perf.config import EngineConfig
from latency_tuner.simulator.clock import Clock, RealClock
from latency_tuner.simulator.engine import AsyncEngine, EngineCore, RequestOutput
from latency_tuner.simulator.metrics import CONTENT_TYPE, EngineMetrics
from latency_tuner.simulator.tokenizer import encode, encode_chat, output_text
from latency_tuner.vllm.metrics import MetricsVersion

__all__ = ["SimServer", "vllm_version"]

log = logging.getLogger("latency_tuner.simulator.server")
_HTTP_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
                 405: "Method Not Allowed", 500: "Internal Server Error"}  # fmt: skip
STATS_LOG_INTERVAL = 10.0


def vllm_version(version: MetricsVersion) -> str:
    """The vLLM version this simulator poses as (its metrics generation decides)."""
    return "0.11.0+sim" if version is MetricsVersion.CURRENT else "0.10.1+sim"


def _dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


class ApiError(Exception):
    def __init__(self, message: str, status: int = 400, err_type: str = "BadRequestError"):
        super().__init__(message)
        self.message, self.status, self.err_type = message, status, err_type


def _error_response(error: ApiError) -> web.Response:
    body = {"error": {"message": error.message, "type": error.err_type, "param": None,
                      "code": error.status}}  # fmt: skip
    return _json(body, error.status)


def _json(payload: Any, status: int = 200) -> web.Response:
    # Starlette's JSONResponse: "application/json" without a charset parameter.
    return web.Response(
        body=_dumps(payload).encode(), status=status, headers={"Content-Type": "application/json"}
    )


class UvicornAccessLogger(AbstractAccessLogger):
    """``INFO:     127.0.0.1:50000 - "POST /v1/completions HTTP/1.1" 200 OK``, as uvicorn."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        host = f"{peer[0]}:{peer[1]}" if peer else "-"
        version = f"{request.version.major}.{request.version.minor}"
        reason = _HTTP_REASONS.get(response.status, response.reason)
        self.logger.info(
            '%s - "%s %s HTTP/%s" %d %s', host, request.method, request.path_qs, version,
            response.status, reason,
        )  # fmt: skip


@dataclass(frozen=True)
class _Prepared:
    request_id: str
    prompt_ids: list[int]
    max_tokens: int
    stream: bool
    include_usage: bool
    continuous_usage: bool


class SimServer:
    """One simulated vLLM server: engine, metrics and the aiohttp application."""

    def __init__(
        self,
        config: EngineConfig,
        *,
        metrics_version: MetricsVersion = MetricsVersion.CURRENT,
        seed: int | None = None,
        clock: Clock | None = None,
        api_key: str | None = None,
        model_path: str | None = None,
        log_stats: bool = True,
        served_names: Sequence[str] | None = None,
        prompt_tokens_details: bool = False,
    ) -> None:
        self.config = config
        # Every --served-model-name is accepted; the first one is reported (as vLLM does).
        self.names: list[str] = list(served_names or config.served_model_name.split())
        self.names = self.names or [config.model.name]
        self.model_name = self.names[0]
        self.model_path = model_path or config.model.name
        self.metrics = EngineMetrics(config, version=metrics_version)
        self.core = EngineCore(config, seed=seed, sink=self.metrics)
        self.engine = AsyncEngine(self.core, clock or RealClock())
        self.version = vllm_version(metrics_version)
        self.api_key = api_key
        self.log_stats = log_stats
        self.prompt_tokens_details = prompt_tokens_details
        self._stats_task: asyncio.Task[None] | None = None
        self.app = self._build_app()

    # --- application -------------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors_middleware], client_max_size=64 * 2**20)
        app.router.add_get("/health", self.health)
        app.router.add_get("/ping", self.health)
        app.router.add_post("/ping", self.health)
        app.router.add_get("/version", self.version_info)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics_page)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        app.on_response_prepare.append(self._server_header)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        self.engine.start()
        if self.log_stats:
            self._stats_task = asyncio.get_running_loop().create_task(self._log_stats_forever())

    async def _on_cleanup(self, app: web.Application) -> None:
        if self._stats_task is not None:
            self._stats_task.cancel()
        await self.engine.stop()

    async def _log_stats_forever(self) -> None:
        while True:
            await asyncio.sleep(STATS_LOG_INTERVAL)
            line = self.metrics.log_line()
            if line is not None:
                log.info("%s", line)

    @staticmethod
    async def _server_header(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["Server"] = "uvicorn"

    @web.middleware
    async def _errors_middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            if (
                self.api_key is not None
                and request.path.startswith("/v1")
                and request.headers.get("Authorization") != f"Bearer {self.api_key}"
            ):
                return _json({"error": "Unauthorized"}, 401)
            return await handler(request)
        except ApiError as error:
            return _error_response(error)
        except web.HTTPNotFound:
            return _json({"detail": "Not Found"}, 404)
        except web.HTTPMethodNotAllowed:
            return _json({"detail": "Method Not Allowed"}, 405)

    # --- simple endpoints --------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version_info(self, request: web.Request) -> web.Response:
        return _json({"version": self.version})

    async def metrics_page(self, request: web.Request) -> web.Response:
        body = self.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def models(self, request: web.Request) -> web.Response:
        created = int(time.time())
        cards = [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": self.model_path,
                "parent": None,
                "max_model_len": self.config.max_model_len,
                "permission": [
                    {
                        "id": f"modelperm-{uuid.uuid4().hex}",
                        "object": "model_permission",
                        "created": created,
                        "allow_create_engine": False,
                        "allow_sampling": True,
                        "allow_logprobs": True,
                        "allow_search_indices": False,
                        "allow_view": True,
                        "allow_fine_tuning": False,
                        "organization": "*",
                        "group": None,
                        "is_blocking": False,
                    }
                ],
            }
            for name in self.names
        ]
        return _json({"object": "list", "data": cards})

    # --- request parsing ---------------------------------------------------------------------

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(f"JSON decode error: {exc}") from None
        if not isinstance(body, dict):
            raise ApiError("Input should be a valid dictionary or object to extract fields from")
        model = body.get("model")
        if model and model not in self.names:
            raise ApiError(f"The model `{model}` does not exist.", 404, "NotFoundError")
        n = body.get("n", 1)
        if n not in (None, 1):
            raise ApiError("n must be 1: the simulator generates a single sequence per request")
        return body

    def _prepare(
        self, request: web.Request, body: Mapping[str, Any], prompt_ids: list[int],
        max_tokens: Any, prefix: str,
    ) -> _Prepared:  # fmt: skip
        if not prompt_ids:
            raise ApiError("Either prompt or prompt_embeds must be provided and non-empty.")
        limit = self.config.max_model_len
        num = len(prompt_ids)
        if max_tokens is None:
            if num >= limit:
                raise ApiError(
                    f"This model's maximum context length is {limit} tokens. However, you "
                    f"requested {num} tokens in the messages, Please reduce the length of the "
                    f"messages."
                )
            max_tokens = limit - num
        elif not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            raise ApiError("max_tokens must be an integer")
        elif max_tokens < 1:
            raise ApiError(f"max_tokens must be at least 1, got {max_tokens}.")
        elif num + max_tokens > limit:
            raise ApiError(
                f"This model's maximum context length is {limit} tokens. However, you "
                f"requested {max_tokens + num} tokens ({num} in the messages, {max_tokens} in "
                f"the completion). Please reduce the length of the messages or completion."
            )
        stream = bool(body.get("stream"))
        options = body.get("stream_options")
        if options and not stream:
            raise ApiError("Stream options can only be defined when `stream=True`.")
        # vLLM's StreamOptions.include_usage defaults to True once stream_options is given.
        include_usage = isinstance(options, dict) and bool(options.get("include_usage", True))
        continuous = include_usage and bool(
            isinstance(options, dict) and options.get("continuous_usage_stats")
        )
        base = request.headers.get("X-Request-Id") or str(body.get("request_id") or "")
        request_id = f"{prefix}-{base or uuid.uuid4().hex}"
        if self.engine.in_use(request_id):
            raise ApiError(f"request id {request_id!r} is already in use")
        return _Prepared(request_id, prompt_ids, max_tokens, stream, include_usage, continuous)

    @staticmethod
    def _completion_prompt(body: Mapping[str, Any]) -> list[int]:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, str):
            return encode(prompt)
        if isinstance(prompt, list) and all(
            isinstance(t, int) and not isinstance(t, bool) for t in prompt
        ):
            return list(prompt)
        if isinstance(prompt, list) and prompt:
            raise ApiError("the simulator serves one prompt per request (batched prompts: no)")
        raise ApiError("Either prompt or prompt_embeds must be provided and non-empty.")

    # --- generation ----------------------------------------------------------------------------

    async def _outputs(self, prepared: _Prepared) -> AsyncGenerator[RequestOutput, None]:
        """Engine outputs of one request as they come; aborts it if the consumer goes away."""
        queue = await self.engine.submit(
            prepared.request_id, prepared.prompt_ids, prepared.max_tokens
        )
        finished = False
        try:
            while not finished:
                out = await queue.get()
                finished = out.finished
                yield out
        finally:
            if not finished:
                self.engine.abort(prepared.request_id)

    async def _collect(self, prepared: _Prepared) -> list[RequestOutput]:
        async with contextlib.aclosing(self._outputs(prepared)) as outputs:
            return [out async for out in outputs]

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        prompt_ids = self._completion_prompt(body)
        prepared = self._prepare(request, body, prompt_ids, body.get("max_tokens", 16), "cmpl")
        created = int(time.time())
        if prepared.stream:
            return await self._stream(request, prepared, created, chat=False)
        outputs = await self._collect(prepared)
        total = sum(o.count for o in outputs)
        text = output_text(prompt_ids, 0, total, self.config.altered_share)
        payload = {
            "id": prepared.request_id,
            "object": "text_completion",
            "created": created,
            "model": self.model_name,
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": "length",
                    "stop_reason": None,
                    "token_ids": None,
                    "prompt_logprobs": None,
                    "prompt_token_ids": None,
                }
            ],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": self._usage(
                len(prompt_ids), total, details=True, cached=outputs[-1].num_cached_tokens
            ),
            "kv_transfer_params": None,
        }
        return _json(payload)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ApiError("Field required: messages (a list of message objects)")
        try:
            prompt_ids = encode_chat(
                messages, add_generation_prompt=body.get("add_generation_prompt", True) is not False
            )
        except ValueError as exc:
            raise ApiError(str(exc)) from None
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        prepared = self._prepare(request, body, prompt_ids, max_tokens, "chatcmpl")
        created = int(time.time())
        if prepared.stream:
            return await self._stream(request, prepared, created, chat=True)
        outputs = await self._collect(prepared)
        total = sum(o.count for o in outputs)
        payload = {
            "id": prepared.request_id,
            "object": "chat.completion",
            "created": created,
            "model": self.model_name,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": output_text(
                            prompt_ids, 0, total, self.config.altered_share
                        ).lstrip(" "),
                        "refusal": None,
                        "annotations": None,
                        "audio": None,
                        "function_call": None,
                        "tool_calls": [],
                        "reasoning_content": None,
                    },
                    "logprobs": None,
                    "finish_reason": "length",
                    "stop_reason": None,
                    "token_ids": None,
                }
            ],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": self._usage(
                len(prompt_ids), total, details=True, cached=outputs[-1].num_cached_tokens
            ),
            "prompt_logprobs": None,
            "prompt_token_ids": None,
            "kv_transfer_params": None,
        }
        return _json(payload)

    def _usage(
        self, prompt: int, completion: int, *, details: bool, cached: int = 0
    ) -> dict[str, Any]:
        """UsageInfo; ``details``: dumped with None fields (non-streaming responses).
        ``prompt_tokens_details.cached_tokens`` only with --enable-prompt-tokens-details."""
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
        }
        if self.prompt_tokens_details and cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        elif details:
            usage["prompt_tokens_details"] = None
        return usage

    async def _stream(
        self, request: web.Request, prepared: _Prepared, created: int, *, chat: bool
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream; charset=utf-8"}
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        head = (
            f'{{"id":{_dumps(prepared.request_id)},'
            f'"object":"{"chat.completion.chunk" if chat else "text_completion"}",'
            f'"created":{created},"model":{_dumps(self.model_name)},'
        )
        num_prompt = len(prepared.prompt_ids)
        generated = cached = 0
        # If the client goes away (handler cancelled, or a write fails), closing the generator
        # aborts the request in the engine.
        async with contextlib.aclosing(self._outputs(prepared)) as outputs:
            async for out in outputs:
                cached = out.num_cached_tokens
                if chat and generated == 0:
                    # vLLM sends the role chunk when the first output arrives, not before.
                    await response.write(self._role_chunk(head, prepared).encode())
                generated += out.count
                await response.write(self._chunk(head, prepared, out, generated, chat).encode())
        if prepared.include_usage:
            usage = _dumps(self._usage(num_prompt, generated, details=False, cached=cached))
            await response.write(f'data: {head}"choices":[],"usage":{usage}}}\n\n'.encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def _role_chunk(self, head: str, prepared: _Prepared) -> str:
        first = {"index": 0, "delta": {"role": "assistant", "content": ""},
                 "logprobs": None, "finish_reason": None}  # fmt: skip
        usage = ""
        if prepared.continuous_usage:
            usage = f',"usage":{_dumps(self._usage(len(prepared.prompt_ids), 0, details=False))}'
        return f'data: {head}"choices":[{_dumps(first)}]{usage},"prompt_token_ids":null}}\n\n'

    def _chunk(
        self, head: str, prepared: _Prepared, out: RequestOutput, generated: int, chat: bool
    ) -> str:
        text = output_text(prepared.prompt_ids, out.start, out.count, self.config.altered_share)
        finish = _dumps(out.finish_reason)
        usage = ""
        if prepared.continuous_usage:
            num = len(prepared.prompt_ids)
            usage = _dumps(self._usage(num, generated, details=False))
        if chat:
            if out.start == 0:
                text = text.lstrip(" ")
            stop = ',"stop_reason":null' if out.finished else ""
            choice = (
                f'{{"index":0,"delta":{{"content":{_dumps(text)}}},"logprobs":null,'
                f'"finish_reason":{finish}{stop},"token_ids":null}}'
            )
            tail = f',"usage":{usage}' if usage else ""
            return f'data: {head}"choices":[{choice}]{tail}}}\n\n'
        choice = (
            f'{{"index":0,"text":{_dumps(text)},"logprobs":null,"finish_reason":{finish},'
            f'"stop_reason":null,"prompt_token_ids":null,"token_ids":null}}'
        )
        return f'data: {head}"choices":[{choice}],"usage":{usage or "null"}}}\n\n'
