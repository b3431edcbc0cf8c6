from __future__ import annotations

import pytest

from latency_tuner.loadgen.sse import SseDecoder, SseEvent

STREAM = (
    b": keep-alive comment\n\n"
    b'data: {"choices": [{"text": "h\xc3\xa9llo"}]}\n\n'
    b"event: custom\ndata: line one\ndata: line two\n\n"
    b"data:no-space\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    SseEvent(data='{"choices": [{"text": "héllo"}]}'),
    SseEvent(data="line one\nline two", event="custom"),
    SseEvent(data="no-space"),
    SseEvent(data="[DONE]"),
]


def decode(*reads: bytes) -> list[SseEvent]:
    decoder = SseDecoder()
    events: list[SseEvent] = []
    for chunk in reads:
        events += decoder.feed(chunk)
    return events + decoder.close()


def test_a_whole_stream_in_one_read_gives_every_event_and_skips_comments() -> None:
    assert decode(STREAM) == EXPECTED


@pytest.mark.parametrize("split", range(1, len(STREAM)))
def test_a_stream_split_anywhere_across_two_reads_gives_the_same_events(split: int) -> None:
    assert decode(STREAM[:split], STREAM[split:]) == EXPECTED


def test_a_stream_arriving_one_byte_per_read_gives_the_same_events() -> None:
    assert decode(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


@pytest.mark.parametrize("newline", [b"\r\n", b"\r"])
def test_crlf_and_bare_cr_line_endings_are_lines_too(newline: bytes) -> None:
    stream = STREAM.replace(b"\n", newline)
    assert decode(stream) == EXPECTED
    for split in range(1, len(stream)):
        assert decode(stream[:split], stream[split:]) == EXPECTED, split


def test_an_event_is_delivered_as_soon_as_its_blank_line_arrives() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"\n") == [SseEvent(data="a")]


def test_a_last_event_without_its_blank_line_is_still_delivered_at_close() -> None:
    assert decode(b"data: a\n\ndata: tail") == [SseEvent("a"), SseEvent("tail")]


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert decode(b"\n\n\nevent: ping\n\n") == []
