"""Incremental Server-Sent Events decoding: bytes in (split anywhere), events out. Pure.

Follows the WHATWG event-stream rules that matter for OpenAI-compatible streams: lines end in
LF, CRLF or CR (a CR at the end of one network read may pair with an LF at the start of the
next); ``:`` starts a comment; ``data`` lines of one event are joined with ``\\n``; a blank line
dispatches the event. One deliberate leniency: an event left without its closing blank line
when the stream ends is still delivered by ``close()`` (a benchmark should not drop the last
chunk of a server that forgets it).
"""

from __future__ import annotations

from dataclasses import dataclass

_CR, _LF = 0x0D, 0x0A


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its ``data`` (lines joined by newlines) and ``event`` name."""

    data: str
    event: str = "message"


class SseDecoder:
    """Feed raw bytes as they arrive; get back the events they complete."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data_lines: list[str] = []
        self._event = ""
        self._skip_lf = False  # the last read ended in CR: a leading LF belongs to it

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == _LF:
                chunk = chunk[1:]
        self._buffer += chunk
        events: list[SseEvent] = []
        start = 0
        buffer = self._buffer
        size = len(buffer)
        while start < size:
            lf = buffer.find(b"\n", start)
            cr = buffer.find(b"\r", start, lf if lf >= 0 else size)
            if cr >= 0:
                end, next_start = cr, cr + 1
                if next_start < size:
                    if buffer[next_start] == _LF:
                        next_start += 1
                else:
                    self._skip_lf = True
            elif lf >= 0:
                end, next_start = lf, lf + 1
            else:
                break
            event = self._line(bytes(buffer[start:end]).decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
            start = next_start
        del self._buffer[:start]
        return events

    def close(self) -> list[SseEvent]:
        """End of stream: the unterminated last line and a pending event, if any."""
        events: list[SseEvent] = []
        if self._buffer:
            event = self._line(bytes(self._buffer).decode("utf-8", errors="replace"))
            self._buffer.clear()
            if event is not None:
                events.append(event)
        event = self._dispatch()
        if event is not None:
            events.append(event)
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data_lines.append(value)
        elif field == "event":
            self._event = value
        # id / retry / unknown fields: irrelevant to a benchmark, ignored as the spec allows.
        return None

    def _dispatch(self) -> SseEvent | None:
        if not self._data_lines:
            self._event = ""
            return None
        event = SseEvent(data="\n".join(self._data_lines), event=self._event or "message")
        self._data_lines = []
        self._event = ""
        return event
