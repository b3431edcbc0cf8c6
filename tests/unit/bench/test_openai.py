from __future__ import annotations

import json

from latency_tuner.loadgen.openai import Chunk, Usage, first_model_id, parse_chunk, request_body


def test_a_completions_chunk_gives_its_text() -> None:
    assert parse_chunk('{"choices": [{"index": 0, "text": " hi"}]}') == Chunk(text=" hi")


def test_a_chat_chunk_gives_its_delta_content_and_a_role_only_chunk_gives_no_text() -> None:
    assert parse_chunk('{"choices": [{"delta": {"content": "x"}}]}').text == "x"
    assert parse_chunk('{"choices": [{"delta": {"role": "assistant"}}]}').text == ""


def test_reasoning_deltas_count_as_generated_text() -> None:
    chunk = parse_chunk('{"choices": [{"delta": {"content": null, "reasoning_content": "r"}}]}')
    assert chunk.text == "r"


def test_the_usage_chunk_gives_token_counts() -> None:
    chunk = parse_chunk('{"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}')
    assert chunk == Chunk(text="", usage=Usage(prompt_tokens=7, completion_tokens=3))


def test_error_chunks_in_vllm_and_openai_shapes_are_errors() -> None:
    vllm = parse_chunk('{"error": {"message": "out of memory", "code": 500}}')
    openai = parse_chunk('{"object": "error", "message": "bad request"}')
    assert (vllm.error, openai.error) == ("out of memory", "bad request")


def test_a_chunk_that_is_not_json_is_an_error_not_a_crash() -> None:
    assert parse_chunk("{nope").error is not None
    assert parse_chunk("[1, 2]").error is not None


def test_a_completion_request_streams_usage_and_fixes_the_output_length() -> None:
    body = request_body(model="m", prefix="a b", suffix="c d", max_tokens=5, chat=False)
    assert body["prompt"] == "a b c d"
    assert body["max_tokens"] == 5
    assert body["ignore_eos"] is True
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    json.dumps(body)


def test_a_chat_request_sends_the_shared_prefix_as_the_system_message() -> None:
    body = request_body(model="m", prefix="a b", suffix="c d", max_tokens=5, chat=True)
    assert body["messages"] == [
        {"role": "system", "content": "a b"},
        {"role": "user", "content": "c d"},
    ]
    no_prefix = request_body(model="m", prefix="", suffix="c d", max_tokens=5, chat=True)
    assert no_prefix["messages"] == [{"role": "user", "content": "c d"}]


def test_the_first_listed_model_is_found_and_an_empty_list_gives_none() -> None:
    assert first_model_id({"data": [{"id": "a"}, {"id": "b"}]}) == "a"
    assert first_model_id({"data": []}) is None
    assert first_model_id(["a"]) is None
