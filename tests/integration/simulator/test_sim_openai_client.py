"""The official ``openai`` client works against the simulator."""

from __future__ import annotations

import openai
from tests.integration.simulator.support import MODEL, Sim


def client(sim: Sim) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{sim.url}/v1", api_key="unused", max_retries=0)


def test_completions_with_and_without_streaming(sim: Sim) -> None:
    c = client(sim)
    done = c.completions.create(model=MODEL, prompt="the cat sat", max_tokens=6)
    assert done.usage is not None
    assert done.usage.completion_tokens == 6
    assert done.choices[0].finish_reason == "length"
    stream = c.completions.create(
        model=MODEL, prompt="the cat sat", max_tokens=6, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert text == done.choices[0].text  # deterministic pseudo-text
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 6


def test_chat_with_and_without_streaming(sim: Sim) -> None:
    c = client(sim)
    messages: list[openai.types.chat.ChatCompletionMessageParam] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "say something"},
    ]
    done = c.chat.completions.create(model=MODEL, messages=messages, max_tokens=5)
    assert done.choices[0].message.role == "assistant"
    assert done.usage is not None
    assert done.usage.completion_tokens == 5
    stream = c.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=5, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    content = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert content == done.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == done.usage.total_tokens


def test_models_list(sim: Sim) -> None:
    assert [m.id for m in client(sim).models.list()] == [MODEL]
