"""The simulator's HTTP API byte by byte against what vLLM 0.11 sends."""

from __future__ import annotations

import json
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families
from tests.integration.simulator.support import MODEL, Sim


def sse_events(response: httpx.Response) -> list[str]:
    """The raw stream split into events; asserts vLLM's exact framing on the way."""
    raw = response.read().decode()
    assert raw.endswith("data: [DONE]\n\n")
    events = raw.split("\n\n")
    assert events[-1] == ""
    for event in events[:-1]:
        assert event.startswith("data: ")
        assert "\n" not in event
    return [e.removeprefix("data: ") for e in events[:-1]]


def test_a_streamed_completion_is_framed_like_vllm(sim: Sim) -> None:
    body = {"model": MODEL, "prompt": "one two three four", "max_tokens": 5, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    with httpx.stream("POST", f"{sim.url}/v1/completions", json=body, timeout=10) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        events = sse_events(response)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    *tokens, usage = chunks
    assert len(tokens) == 5
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1
    assert ids.pop().startswith("cmpl-")
    for chunk in tokens:
        assert list(chunk) == ["id", "object", "created", "model", "choices", "usage"]
        assert chunk["object"] == "text_completion"
        assert chunk["model"] == MODEL
        assert chunk["usage"] is None
        (choice,) = chunk["choices"]
        assert list(choice) == ["index", "text", "logprobs", "finish_reason", "stop_reason",
                                "prompt_token_ids", "token_ids"]  # fmt: skip
        assert choice["text"].startswith(" ")
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 4 + ["length"]
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 4, "total_tokens": 9, "completion_tokens": 5}


def test_a_streamed_chat_starts_with_the_role_and_ends_with_length(sim: Sim) -> None:
    body = {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 3,
            "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    with httpx.stream("POST", f"{sim.url}/v1/chat/completions", json=body, timeout=10) as r:
        assert r.status_code == 200
        events = sse_events(r)
    role, *content, last, usage = (json.loads(e) for e in events[:-1])
    assert role["id"].startswith("chatcmpl-")
    assert role["object"] == "chat.completion.chunk"
    assert role["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                "logprobs": None, "finish_reason": None}]  # fmt: skip
    assert len(content) == 2
    for chunk in content:
        (choice,) = chunk["choices"]
        assert list(choice) == ["index", "delta", "logprobs", "finish_reason", "token_ids"]
        assert list(choice["delta"]) == ["content"]
        assert "usage" not in chunk
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["choices"][0]["stop_reason"] is None
    assert usage["usage"]["completion_tokens"] == 3
    assert usage["usage"]["prompt_tokens"] == 7  # <|im_start|> user hello there <|im_end|> + 2
    assert {role["id"], usage["id"]} == {last["id"]}


def test_without_stream_options_no_usage_chunk_is_sent(sim: Sim) -> None:
    body = {"prompt": "a b", "max_tokens": 2, "stream": True}
    with httpx.stream("POST", f"{sim.url}/v1/completions", json=body, timeout=10) as r:
        events = sse_events(r)
    assert len(events) == 3  # two tokens, [DONE]


def test_non_streaming_completion_and_chat_carry_usage(sim: Sim) -> None:
    r = httpx.post(f"{sim.url}/v1/completions", json={"prompt": "x y z"}, timeout=10)
    assert r.status_code == 200
    payload = r.json()
    assert payload["object"] == "text_completion"
    assert payload["usage"] == {"prompt_tokens": 3, "total_tokens": 19, "completion_tokens": 16,
                                "prompt_tokens_details": None}  # fmt: skip
    assert len(payload["choices"][0]["text"].split()) == 16  # completions default: 16 tokens
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    r = httpx.post(f"{sim.url}/v1/chat/completions", json=chat, timeout=10)
    payload = r.json()
    assert payload["object"] == "chat.completion"
    assert payload["choices"][0]["message"]["role"] == "assistant"
    assert payload["choices"][0]["finish_reason"] == "length"
    assert payload["usage"]["completion_tokens"] == 4


def test_a_shared_prefix_shows_up_as_cached_prompt_tokens(sim: Sim) -> None:
    system = " ".join(f"sys{i}" for i in range(64))
    details = []
    for question in ("what is one", "and what is two"):
        body = {"prompt": f"{system} {question}", "max_tokens": 2, "stream": True,
                "stream_options": {"include_usage": True}}  # fmt: skip
        with httpx.stream("POST", f"{sim.url}/v1/completions", json=body, timeout=10) as r:
            usage = json.loads(sse_events(r)[-2])["usage"]
        details.append(usage.get("prompt_tokens_details"))
    assert details == [None, {"cached_tokens": 64}]


def test_errors_look_like_vllms(sim: Sim) -> None:
    r = httpx.post(f"{sim.url}/v1/completions", json={"model": "nope", "prompt": "a"})
    assert r.status_code == 404
    assert r.json() == {"error": {"message": "The model `nope` does not exist.",
                                  "type": "NotFoundError", "param": None, "code": 404}}  # fmt: skip
    long_prompt = " ".join(["w"] * 4090)
    r = httpx.post(f"{sim.url}/v1/completions", json={"prompt": long_prompt, "max_tokens": 10})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["type"] == "BadRequestError"
    assert error["code"] == 400
    assert "maximum context length is 4096 tokens" in error["message"]
    r = httpx.post(f"{sim.url}/v1/completions", json={"prompt": "a", "n": 2})
    assert r.status_code == 400


def test_models_health_version_and_metrics_endpoints(sim: Sim) -> None:
    models = httpx.get(f"{sim.url}/v1/models").json()
    (card,) = models["data"]
    assert models["object"] == "list"
    assert card["id"] == MODEL
    assert card["object"] == "model"
    assert card["owned_by"] == "vllm"
    assert card["max_model_len"] == 4096
    health = httpx.get(f"{sim.url}/health")
    assert health.status_code == 200
    assert health.content == b""
    assert httpx.get(f"{sim.url}/version").json()["version"].startswith("0.11")
    metrics = httpx.get(f"{sim.url}/metrics")
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    names = {f.name for f in text_string_to_metric_families(metrics.text)}
    assert {"vllm:time_to_first_token_seconds", "vllm:cache_config_info"} <= names


def running_requests(sim: Sim) -> float:
    text = httpx.get(f"{sim.url}/metrics").text
    (family,) = [
        f for f in text_string_to_metric_families(text) if f.name == "vllm:num_requests_running"
    ]
    return float(family.samples[0].value)


def test_a_client_that_disconnects_aborts_its_request(sim: Sim) -> None:
    body = {"prompt": "long story", "max_tokens": 3000, "stream": True}
    with httpx.stream("POST", f"{sim.url}/v1/completions", json=body, timeout=10) as r:
        lines = r.iter_lines()
        for _ in range(3):
            next(lines)
        assert running_requests(sim) == 1
    deadline = time.monotonic() + 3
    while running_requests(sim) != 0:
        assert time.monotonic() < deadline, "the engine kept generating for a gone client"
        time.sleep(0.05)
