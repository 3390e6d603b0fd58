"""Server-sent events over raw bytes: one incremental decoder, shared by every stream client.

The rules (the WHATWG SSE parsing rules, as much of them as a chat-completion stream uses):
lines end with LF, CRLF or CR; a `data:` line adds its value (one leading space dropped) to the
event being read; a blank line dispatches that event (its data lines joined with LF); comment
lines (`:`) and other fields (`event:`, `id:`, `retry:`) are ignored. **An event that the stream
does not end with its blank line is not dispatched** (the spec: "if the file ends in the middle of
an event, before the final empty line, the incomplete event is not dispatched"): a stream cut
inside its last event lost that event. vLLM ends every stream with `data: [DONE]` and a blank
line, so a complete vLLM stream never has one.

Limits: a line, and an event's data, of at most `MAX_LINE_BYTES` (1 MiB; vLLM's largest chunk is
a few KB). Past it the decoder raises `StreamLineTooLong` at once, holding no more than the limit,
so a hostile server streaming one endless line costs bounded memory and linear time.
"""

from __future__ import annotations

MAX_LINE_BYTES = 1 << 20
"""The longest SSE line (and event data) accepted: 1 MiB."""


def size_text(n: int) -> str:
    """A byte count in the units limits are given in (`1 MiB`, `512 KiB`, `300 bytes`)."""
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} bytes"


class StreamFormatError(ValueError):
    """The stream is not a well-formed event stream (the message says what was wrong)."""


class StreamLineTooLong(StreamFormatError):
    """A line or an event's data passed the decoder's limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"stream line over {size_text(limit)}")
        self.limit = limit


class SseDecoder:
    """Bytes in (as they arrive), the data of each complete event out."""

    __slots__ = ("_buf", "_cr", "_data", "_data_size", "limit")

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._buf = bytearray()
        """The line being read (no line end yet)."""
        self._cr = False
        """The last byte read was a CR: an LF right after it ends no second line."""
        self._data: list[bytes] = []
        """The data lines of the event being read."""
        self._data_size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of every event that `chunk` completes, in order (StreamLineTooLong past the
        limit)."""
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                self._cr = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        if b"\n" not in chunk:
            if len(buf) + len(chunk) > self.limit:
                buf.clear()
                raise StreamLineTooLong(self.limit)
            buf += chunk
            return []
        lines = chunk.split(b"\n")
        if buf:
            lines[0] = bytes(buf) + lines[0]
            buf.clear()
        last = lines.pop()
        if len(last) > self.limit:
            raise StreamLineTooLong(self.limit)
        buf += last
        out: list[bytes] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    out.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data.clear()
                    self._data_size = 0
                continue
            if len(line) > self.limit:
                raise StreamLineTooLong(self.limit)
            if line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
                self._data_size += len(value) + 1
                if self._data_size > self.limit:
                    raise StreamLineTooLong(self.limit)
                data.append(value)
        return out

    @property
    def pending(self) -> bool:
        """Whether an event (or a line) was begun and not finished: at the end of a stream, the
        part that is not dispatched."""
        return bool(self._data or self._buf.strip())
