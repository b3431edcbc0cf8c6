"""A cheap fake OpenAI-compatible streaming server for the bench-client benchmark (own process).

It must not be the bottleneck when 256 streams want a token every 20 ms (12,800 chunks/s on
one core), so it is a bare asyncio.Protocol speaking just enough HTTP/1.1 (keep-alive, chunked
transfer) and driving every stream with ``loop.call_at`` timers instead of a coroutine per
stream: first chunk at request arrival + --ttft-ms, then one chunk of one token every
--itl-ms on an absolute schedule. It records how late each chunk left versus that schedule
(``GET /stats``; ``POST /stats`` also resets), so the benchmark can tell server lag from client
lag. Prints ``PORT <n>`` once listening on 127.0.0.1.

    python benchmarks/bench_client/fake_server.py --itl-ms 20 --ttft-ms 0
"""

from __future__ import annotations

import argparse
import asyncio
import json

CHUNK = b'data: {"choices": [{"index": 0, "text": " tok"}]}\n\n'
DONE = b"data: [DONE]\n\n"
STREAM_HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)


def chunked(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def json_response(payload: object, status: str = "200 OK") -> bytes:
    body = json.dumps(payload).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


class Schedule:
    def __init__(self, ttft_s: float, itl_s: float) -> None:
        self.ttft_s = ttft_s
        self.itl_s = itl_s
        self.lateness: list[float] = []

    def stats(self, reset: bool) -> dict[str, float]:
        late = sorted(self.lateness)
        if reset:
            self.lateness = []
        if not late:
            return {"chunks": 0}
        return {
            "chunks": len(late),
            "mean_late_ms": 1000 * sum(late) / len(late),
            "p99_late_ms": 1000 * late[int(0.99 * (len(late) - 1))],
        }


class Connection(asyncio.Protocol):
    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.loop = asyncio.get_running_loop()
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.streaming = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while not self.streaming:  # HTTP/1.1 without pipelining: one request at a time
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < head_end + 4 + length:
                return
            body = self.buffer[head_end + 4 : head_end + 4 + length]
            self.buffer = self.buffer[head_end + 4 + length :]
            method, path, _ = head[0].split(" ", 2)
            self.handle(method, path, body)

    def handle(self, method: str, path: str, body: bytes) -> None:
        assert self.transport is not None
        if path == "/v1/models":
            self.transport.write(json_response({"data": [{"id": "fake", "object": "model"}]}))
        elif path == "/stats":
            self.transport.write(json_response(self.schedule.stats(reset=method == "POST")))
        elif path == "/v1/completions":
            request = json.loads(body)
            self.streaming = True
            self.transport.write(STREAM_HEADERS)
            start = self.loop.time() + self.schedule.ttft_s
            prompt_words = len(str(request.get("prompt", "")).split())
            self.loop.call_at(start, self.tick, start, 0, int(request["max_tokens"]), prompt_words)
        else:
            self.transport.write(json_response({"error": "not found"}, "404 Not Found"))

    def tick(self, start: float, sent: int, wanted: int, prompt_words: int) -> None:
        if self.transport is None:
            return
        due = start + sent * self.schedule.itl_s
        self.schedule.lateness.append(max(0.0, self.loop.time() - due))
        self.transport.write(chunked(CHUNK))
        sent += 1
        if sent < wanted:
            due += self.schedule.itl_s
            self.loop.call_at(due, self.tick, start, sent, wanted, prompt_words)
            return
        usage = {"prompt_tokens": prompt_words, "completion_tokens": wanted}
        usage_event = b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
        self.transport.write(chunked(usage_event) + chunked(DONE) + b"0\r\n\r\n")
        self.streaming = False
        if self.buffer:
            self.data_received(b"")


async def serve(ttft_s: float, itl_s: float) -> None:
    schedule = Schedule(ttft_s, itl_s)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(schedule), "127.0.0.1", 0, backlog=1024)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    args = parser.parse_args()
    asyncio.run(serve(args.ttft_ms / 1000, args.itl_ms / 1000))


if __name__ == "__main__":
    main()
