"""Collect one greedy completion per prompt from an OpenAI-compatible vLLM endpoint."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from latency_tuner.api.durations import format_duration

# An answer of max_tokens words fits in a few KiB of JSON; a pod that sends more is not vLLM.
MAX_ANSWER_BYTES = 256 * 1024


@dataclass(frozen=True)
class Answers:
    texts: list[str | None]
    """One per prompt, in order; None where the pod gave no usable answer."""
    errors: list[str]
    """Why each missing answer is missing (at most one line each, first ten kept)."""


class _Unusable(Exception):
    pass


async def _read_capped(response: httpx.Response) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            raise _Unusable(f"answer larger than {MAX_ANSWER_BYTES} bytes")
    return bytes(body)


def _text_of(body: bytes) -> str:
    try:
        payload = json.loads(body)
        text = payload["choices"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise _Unusable(f"not a completion: {type(exc).__name__}") from None
    if not isinstance(text, str):
        raise _Unusable("not a completion: choices[0].text is not a string")
    return text


async def _ask(
    client: httpx.AsyncClient, url: str, model: str, prompt: str, max_tokens: int
) -> str:
    request = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    async with client.stream("POST", url, json=request) as response:
        if response.status_code != 200:
            raise _Unusable(f"HTTP {response.status_code}")
        return _text_of(await _read_capped(response))


async def collect_answers(
    base_url: str,
    model: str,
    prompts: Sequence[str],
    *,
    max_tokens: int = 64,
    request_timeout: float = 30.0,
    deadline: float = 120.0,
    concurrency: int = 4,
) -> Answers:
    """Send each prompt once (``temperature: 0``) to ``base_url``'s ``/v1/completions``.

    At most ``concurrency`` requests are in flight; each has ``request_timeout`` and all of them
    ``deadline``: what has not answered by then counts as no answer, never as a wait.
    """
    url = base_url.rstrip("/") + "/v1/completions"
    texts: list[str | None] = [None] * len(prompts)
    errors: list[str] = []
    slots = asyncio.Semaphore(max(1, concurrency))

    async def one(client: httpx.AsyncClient, index: int) -> None:
        async with slots:
            try:
                # httpx's timeout bounds each read, not the whole answer: a pod that drips a
                # byte a second would never time out without this one.
                ask = _ask(client, url, model, prompts[index], max_tokens)
                texts[index] = await asyncio.wait_for(ask, request_timeout)
            except TimeoutError:
                if len(errors) < 10:
                    limit = format_duration(request_timeout)
                    errors.append(f"prompt {index}: no answer within {limit}")
            except (_Unusable, httpx.HTTPError) as exc:
                if len(errors) < 10:
                    errors.append(f"prompt {index}: {exc or type(exc).__name__}")

    timeout = httpx.Timeout(request_timeout)
    async with httpx.AsyncClient(
        timeout=timeout, follow_redirects=False, trust_env=False
    ) as client:
        tasks = [asyncio.create_task(one(client, i)) for i in range(len(prompts))]
        _, pending = await asyncio.wait(tasks, timeout=deadline)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            late = f"after the {format_duration(deadline)} deadline"
            errors.append(f"{len(pending)} prompts unanswered {late}")
    return Answers(texts, errors)
