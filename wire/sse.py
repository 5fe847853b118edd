"""Incremental Server-Sent Events framing: bytes in, events out, events back to bytes.

The parser follows the WHATWG event-stream grammar (fields ``event``, ``data`` (repeated,
joined by LF), ``id``, ``retry``, comments starting with ``:``; line ends LF, CRLF or CR).
It differs from a client's parser in one way that matters for a repairing proxy: it never
loses a byte. Every :class:`Event` keeps ``raw``, the exact bytes it was parsed from,
including its terminating blank line, so that the concatenation of all ``raw`` values
(plus :meth:`SseParser.close`'s remainder) is the input, byte for byte. An event that needs
no repair is re-emitted as ``raw``.

Cost bound: every input byte is scanned once; a chunk that ends mid-line is kept and the
scan resumes where it stopped, so feeding n bytes in any chunking is O(n).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Event", "SseParser", "format_event"]

_EOL = re.compile(rb"\r\n|\r|\n")


@dataclass(slots=True)
class Event:
    """One SSE event (or a block of comments / blank lines) as it came off the wire."""

    raw: bytes
    """The exact bytes of the event, including its terminating blank line."""
    fields: list[tuple[bytes, bytes]] = field(default_factory=list)
    """(name, value) in wire order; comments have name ``b""`` and the text as value."""
    eol: bytes = b"\n"
    """The line end this event used (of its first line)."""
    complete: bool = True
    """False for a trailing event that the stream ended before its blank line."""

    @property
    def event(self) -> str | None:
        """The ``event:`` field (last one wins), or None."""
        name = None
        for k, v in self.fields:
            if k == b"event":
                name = v
        return None if name is None else name.decode("utf-8", "replace")

    @property
    def data(self) -> bytes | None:
        """All ``data:`` lines joined by LF, or None if the event has no data field."""
        parts = [v for k, v in self.fields if k == b"data"]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else b"\n".join(parts)

    @property
    def is_comment_only(self) -> bool:
        return all(k == b"" for k, _ in self.fields)

    def with_data(self, data: bytes, event: str | None = None) -> bytes:
        """This event re-serialized with new data (and, if given, a new ``event:`` name).

        Other fields and comments keep their place and value; the data lines take the
        place of the first original data line; the event's own line end is kept.
        """
        eol = self.eol
        out: list[bytes] = []
        data_done = False
        event_done = False
        for k, v in self.fields:
            if k == b"data":
                if not data_done:
                    out.extend(b"data: " + line + eol for line in data.split(b"\n"))
                    data_done = True
            elif k == b"event":
                if event is not None:
                    if not event_done:
                        out.append(b"event: " + event.encode() + eol)
                        event_done = True
                else:
                    out.append(b"event: " + v + eol)
            elif k == b"":
                out.append(b":" + v + eol)
            else:
                out.append(k + b": " + v + eol)
        if not data_done:
            out.extend(b"data: " + line + eol for line in data.split(b"\n"))
        out.append(eol)
        return b"".join(out)


def format_event(data: bytes, event: str | None = None, eol: bytes = b"\n") -> bytes:
    """A new event: optional ``event:`` line, ``data:`` lines, blank line."""
    head = b"event: " + event.encode() + eol if event is not None else b""
    return head + b"".join(b"data: " + line + eol for line in data.split(b"\n")) + eol


class SseParser:
    """Feed bytes, get complete :class:`Event` objects; ``close()`` returns the rest."""

    __slots__ = ("_buf", "_scan", "_start", "_fields", "_eol", "_first", "_seek")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scan = 0  # where the next line starts (relative to _buf)
        self._start = 0  # where the current event's raw bytes start
        self._fields: list[tuple[bytes, bytes]] = []
        self._eol: bytes | None = None
        self._first = True  # strip a UTF-8 BOM at the very start of the stream
        self._seek = 0  # where to look for the next line end: bytes before it hold none

    def feed(self, chunk: bytes) -> list[Event]:
        if not chunk:
            return []
        buf = self._buf
        buf += chunk
        events: list[Event] = []
        scan = self._scan
        n = len(buf)
        while scan < n:
            # resume the search where the last one stopped, so a long line arriving in
            # many small chunks is scanned once, not once per chunk
            m = _EOL.search(buf, max(scan, self._seek))
            if m is None:
                self._seek = n
                break
            end = m.end()
            if m.group() == b"\r" and end == n:
                self._seek = m.start()  # a CR at the end may be the first half of CRLF
                break
            self._line(bytes(buf[scan : m.start()]), m.group(), events, end)
            scan = end
        # drop what has been handed out, so the buffer holds one event at most
        if self._start:
            del buf[: self._start]
            scan -= self._start
            self._seek = max(0, self._seek - self._start)
            self._start = 0
        self._scan = scan
        return events

    def _line(self, line: bytes, eol: bytes, events: list[Event], end: int) -> None:
        if self._first:
            self._first = False
            if line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
        if self._eol is None:
            self._eol = eol
        if not line:
            raw = bytes(self._buf[self._start : end])
            events.append(Event(raw, self._fields, self._eol))
            self._fields = []
            self._eol = None
            self._start = end
            return
        colon = line.find(b":")
        if colon == 0:
            self._fields.append((b"", line[1:]))
        elif colon < 0:
            self._fields.append((line, b""))
        else:
            value = line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
            self._fields.append((line[:colon], value))

    def close(self) -> list[Event]:
        """End of stream: events completed by a held-back CR, then the unterminated rest
        (``complete=False``), if any."""
        buf = self._buf
        events: list[Event] = []
        if self._scan < len(buf):
            rest = bytes(buf[self._scan :])
            if rest.endswith(b"\r"):  # the lone CR held back by feed(): a line end after all
                self._line(rest[:-1], b"\r", events, len(buf))
            else:  # an unterminated last line still holds a field
                self._line(rest, self._eol or b"\n", events, len(buf))
        raw = bytes(buf[self._start :])
        fields, eol = self._fields, self._eol or b"\n"
        self._buf = bytearray()
        self._scan = self._start = 0
        self._fields, self._eol = [], None
        if raw:
            events.append(Event(raw, fields, eol, complete=False))
        return events
