"""The OpenAI-compatible wire format, as far as the benchmark needs it. Pure.

Builds streaming request bodies for ``/v1/completions`` and ``/v1/chat/completions`` and reads
one streamed chunk back into the three things we time: generated text, usage, error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DONE = "[DONE]"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None


@dataclass(frozen=True)
class Chunk:
    """What one ``data:`` payload carried. ``text`` is empty for role-only/usage-only chunks."""

    text: str = ""
    usage: Usage | None = None
    error: str | None = None


def endpoint_path(chat: bool) -> str:
    return "/v1/chat/completions" if chat else "/v1/completions"


def request_body(
    *, model: str, prefix: str, suffix: str, max_tokens: int, chat: bool
) -> dict[str, Any]:
    """A streaming request that generates exactly ``max_tokens`` tokens on vLLM.

    ``ignore_eos`` is vLLM's extension (others ignore it) so that output length is fixed and
    runs are comparable. In chat mode a shared prefix becomes the system message, the way a
    real application's fixed system prompt reaches the server.
    """
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "temperature": 0.0,
    }
    if chat:
        messages = [{"role": "system", "content": prefix}] if prefix else []
        messages.append({"role": "user", "content": suffix})
        body["messages"] = messages
    else:
        body["prompt"] = f"{prefix} {suffix}" if prefix else suffix
    return body


def parse_chunk(data: str) -> Chunk:
    """Interpret one SSE ``data`` payload (not ``[DONE]``) of either endpoint."""
    try:
        payload = json.loads(data)
    except ValueError:
        return Chunk(error=f"unparseable chunk: {data[:200]!r}")
    if not isinstance(payload, dict):
        return Chunk(error=f"unexpected chunk: {data[:200]!r}")
    error = _error_of(payload)
    if error is not None:
        return Chunk(error=error)
    return Chunk(text=_text_of(payload), usage=_usage_of(payload.get("usage")))


def _error_of(payload: dict[str, Any]) -> str | None:
    # vLLM streams {"error": {...}} mid-stream; some servers use {"object": "error", ...}.
    error = payload.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    if error:
        return str(error)
    if payload.get("object") == "error":
        return str(payload.get("message") or payload)
    return None


def _text_of(payload: dict[str, Any]) -> str:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    text = choice.get("text")
    if isinstance(text, str):
        return text
    delta = choice.get("delta")
    if isinstance(delta, dict):
        # Reasoning models stream their thinking first; those are generated tokens too.
        for key in ("content", "reasoning_content", "reasoning"):
            value = delta.get(key)
            if isinstance(value, str) and value:
                return value
    return ""


def _usage_of(usage: object) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return Usage(
        prompt_tokens=prompt if isinstance(prompt, int) else None,
        completion_tokens=completion if isinstance(completion, int) else None,
    )


def first_model_id(payload: object) -> str | None:
    """The first model id of a ``GET /v1/models`` answer."""
    if isinstance(payload, dict):
        data = payload.get("data")
        if isinstance(data, list) and data and isinstance(data[0], dict):
            model = data[0].get("id")
            if isinstance(model, str) and model:
                return model
    return None
