"""Incremental Server-Sent Events framing: bytes in, events out, events back to bytes.

The parser follows the WHATWG event-stream grammar (fields ``event``, ``data`` (repeated,
joined by LF), ``id``, ``retry``, comments starting with ``:``; line ends LF, CRLF or CR).
It differs from a client's parser in one way that matters for a repairing proxy: it never
loses a byte. Every :class:`Event` keeps ``raw``, the exact bytes it was parsed from,
including its terminating blank line, so that the concatenation of all ``raw`` values
(plus :meth:`SseParser.close`'s remainder) is the input, byte for byte. An event that needs
no repair is re-emitted as ``raw``.

Two paths, one grammar. The fast path serves what every gateway we know sends: LF line
ends, no byte order mark. It cuts events at ``\\n\\n`` with ``bytes.find`` and splits their
lines with ``bytes.split`` (C loops), so Python runs once per line, not once per byte
class. The first CR or a leading BOM switches the stream, for good, to the general path
(a line scanner for LF, CRLF and CR, resumable mid-line and between the two bytes of a
CRLF). Both give the same events for the same bytes, however they are chunked.

Cost bound: every input byte is scanned a bounded number of times, so feeding n bytes in
any chunking is O(n). On the fast path, bytes of an unfinished event are kept as a list
of the chunks and joined only when a chunk can finish it (it holds ``\\n\\n``, or starts
with LF after a chunk ending with LF); the general path resumes its scan where it
stopped.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

__all__ = ["Event", "SseParser", "cr_cut", "format_event", "glued_at", "whole_event"]

_EOL = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"
_UNPARSED: Any = object()


class Event:
    """One SSE event (or a block of comments / blank lines) as it came off the wire.

    ``data`` and ``event`` are computed once, when the event is made: the repairers read
    them several times per event.
    """

    __slots__ = ("_json", "complete", "data", "eol", "event", "fields", "raw")

    raw: bytes
    """The exact bytes of the event, including its terminating blank line."""
    fields: list[tuple[bytes, bytes]]
    """(name, value) in wire order; comments have name ``b""`` and the text as value."""
    eol: bytes
    """The line end this event used (of its first line)."""
    complete: bool
    """False for a trailing event that the stream ended before its blank line."""
    data: bytes | None
    """All ``data:`` lines joined by LF, or None if the event has no data field."""
    event: str | None
    """The ``event:`` field (last one wins), or None."""

    def __init__(
        self,
        raw: bytes,
        fields: list[tuple[bytes, bytes]] | None = None,
        eol: bytes = b"\n",
        complete: bool = True,
        data: bytes | None = None,
        event: str | None = None,
        scanned: bool = False,
    ) -> None:
        """``scanned``: ``data`` and ``event`` are given, already read from ``fields``
        (the parser's paths, which read them while they split the lines)."""
        self.raw = raw
        self.fields = fields = [] if fields is None else fields
        self.eol = eol
        self.complete = complete
        if not scanned:
            data = name = None
            for k, v in fields:
                if k == b"data":
                    data = v if data is None else data + b"\n" + v
                elif k == b"event":
                    name = v
            event = None if name is None else name.decode("utf-8", "replace")
        self.data = data
        self.event = event
        self._json: Any = _UNPARSED

    def __repr__(self) -> str:
        return f"Event(raw={self.raw!r}, complete={self.complete})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.raw, self.fields, self.eol, self.complete) == (other.raw, other.fields, other.eol, other.complete)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    @property
    def is_comment_only(self) -> bool:
        if self.data is not None or self.event is not None:  # O(1) for every real event
            return False
        return all(k == b"" for k, _ in self.fields)

    def json(self) -> Any:
        """``data`` decoded as JSON, once per event (``orjson.JSONDecodeError`` if it is
        not JSON; ``None`` without data): the repairer and the checks before it (e.g.
        :func:`wire.foreign.foreign`) share one ``orjson.loads``. Callers that change
        the object own it: later calls return the changed object."""
        cached = self._json
        if cached is _UNPARSED:
            if self.data is None:
                cached = None
            else:
                try:
                    cached = orjson.loads(self.data)
                except orjson.JSONDecodeError as e:
                    cached = e
            self._json = cached
        if type(cached) is dict:  # the usual case, without the isinstance below
            return cached
        if isinstance(cached, orjson.JSONDecodeError):
            raise cached
        return cached

    def with_data(self, data: bytes, event: str | None = None) -> bytes:
        """This event re-serialized with new data (and, if given, a new ``event:`` name).

        Other fields and comments keep their place and value; the data lines take the
        place of the first original data line; the event's own line end is kept.
        """
        eol = self.eol
        fields = self.fields
        if 10 not in data and event is None and len(fields) <= 2:  # (an int: no TypeError raised inside)
            # the common shapes: "data:" alone, or "event:" and "data:" (either order)
            if len(fields) == 1 and fields[0][0] == b"data":
                return b"data: " + data + eol + eol
            if len(fields) == 2 and fields[0][0] == b"event" and fields[1][0] == b"data":
                return b"event: " + fields[0][1] + eol + b"data: " + data + eol + eol
        out: list[bytes] = []
        data_done = False
        event_done = False
        for k, v in fields:
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


_RAW_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def glued_at(raw: bytes) -> int | None:
    """Where a second event starts inside this one's bytes: the offset of the first
    ``event:`` line after a ``data:`` line (a gateway that wrote its own event right after
    a cut line, no blank line between: rule glued_event, the contract's ``sse.glued``);
    None if there is none. Only asked of an event whose data did not parse."""
    seen_data = False
    for m in _RAW_LINE.finditer(raw):
        line = m.group()
        if seen_data and (line.startswith(b"event:") or line.rstrip(b"\r\n") == b"event"):
            return m.start()
        if line.startswith(b"data:") or line.rstrip(b"\r\n") == b"data":
            seen_data = True
    return None


def cr_cut(tail: bytes) -> bool:
    """A stream's last 3 bytes say it ends with an event's CR and the CR of its blank line,
    nothing after (rule cr_end; the contract's ``sse.cr_end``)."""
    return len(tail) == 3 and tail[1:] == b"\r\r" and tail[0] not in b"\r\n"


def _field(line: bytes) -> tuple[bytes, bytes]:
    """One non-blank line as (name, value): ``name: value`` (one leading space of the
    value dropped), ``:comment`` -> (b"", comment), a bare name -> (name, b"")."""
    name, colon, value = line.partition(b":")
    if not colon:
        return line, b""
    if not name:
        return b"", value  # a comment keeps its text as it is
    if value[:1] == b" ":
        value = value[1:]
    return name, value


def whole_event(chunk: bytes) -> Event | None:
    """The read is exactly one event of the shape gateways write, one event per write:
    ``event: NAME\\ndata: DATA\\n\\n`` or ``data: DATA\\n\\n`` (the caller saw the final
    blank line and nothing pending). NAME and DATA holding no LF proves there is no other
    line, so they are whole field values (the one space after the colon dropped, as the
    grammar says); no CR may appear (a CR is a line end). The event is the one
    :meth:`SseParser._fast` makes of these bytes at a fraction of the cost: one
    ``partition`` and ``memchr`` scans (``10 in``: an int operand; a bytes one costs a
    raised and cleared TypeError inside CPython), no loop per line, no method taking a
    start offset (those parse an argument tuple); any other shape returns None and takes
    that path."""
    if chunk.startswith(b"data: "):
        data = chunk[6:-2]
        if 10 in data or 13 in data:
            return None
        return Event(chunk, [(b"data", data)], b"\n", True, data, None, True)
    if not chunk.startswith(b"event: "):
        return None
    head, sep, rest = chunk.partition(b"\ndata: ")
    if not sep or 10 in head or 13 in head:
        return None
    data = rest[:-2]
    if 10 in data or 13 in data:
        return None
    name = head[7:]
    return Event(chunk, [(b"event", name), (b"data", data)], b"\n", True, data, name.decode("utf-8", "replace"), True)


_UNDECIDED: Final = 0
_FAST: Final = 1
_GENERAL: Final = 2
"""The parser's modes (constants: the compiled core inlines them)."""


SEAMED_MAX: Final = 65536
"""The largest event, begun in an earlier read, that :meth:`SseParser.pending` joins for a
reader to match in the read ending it (its bytes are joined to be matched, and joined
again by the parser if they are not): deltas are far smaller; a large item or terminal
event goes the full way anyway."""


class SseParser:
    """Feed bytes, get complete :class:`Event` objects; ``close()`` returns the rest."""

    __slots__ = ("_buf", "_eol", "_fields", "_first", "_mode", "_pend", "_pend_lf", "_scan", "_seek", "_start")

    def __init__(self) -> None:
        self._mode = _UNDECIDED  # until the first 3 bytes tell whether a BOM starts the stream
        # fast path: the unfinished event's chunks (never holding "\n\n"; never starting
        # with LF, which would have been a blank line, i.e. an event of its own)
        self._pend: list[bytes] = []
        self._pend_lf = False  # the last pending chunk ends with LF
        # general path
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
        mode = self._mode
        if mode == _FAST:
            if not self._pend and chunk[-2:] == b"\n\n":
                ev = whole_event(chunk)
                if ev is not None:
                    return [ev]
            if b"\r" in chunk:
                return self._to_general(chunk)
            return self._fast(chunk)
        if mode == _GENERAL:
            return self._general(chunk)
        # undecided: at most the first 3 bytes wait here
        self._pend.append(chunk)
        head = b"".join(self._pend)
        if len(head) < 3 and _BOM.startswith(head):
            return []
        self._pend = []
        if head.startswith(_BOM) or b"\r" in head:
            self._mode = _GENERAL
            return self._general(head)
        self._mode = _FAST
        self._first = False
        return self._fast(head)

    # --- fast path: LF only ---------------------------------------------------------
    def _fast(self, chunk: bytes) -> list[Event]:
        pend = self._pend
        if pend:
            # the pending event ends at the first "\n\n": in this chunk, or across the seam
            if chunk.find(b"\n\n") < 0 and not (self._pend_lf and chunk[0] == 10):
                pend.append(chunk)
                self._pend_lf = chunk[-1] == 10
                return []
            pend.append(chunk)
            data = b"".join(pend)
            pend.clear()
        else:
            data = chunk
        events: list[Event] = []
        append = events.append
        find = data.find
        pos = 0
        n = len(data)
        while pos < n:
            if data[pos] == 10:  # a blank line where an event would start: an empty event
                append(Event(b"\n"))
                pos += 1
                continue
            end = find(b"\n\n", pos)
            if end < 0:
                break
            # values are sliced straight out of ``data`` (one copy each, no copy of the
            # event's lines first), and ``raw`` is ``data`` itself when the read held
            # exactly this event: a large event is not copied over and over
            raw = data if pos == 0 and end + 2 == n else data[pos : end + 2]
            ev = whole_event(raw)  # the shape gateways write: the same event without the line loop
            if ev is not None:
                append(ev)
                pos = end + 2
                continue
            d = name = None
            fields = []
            ls = pos
            pos = end + 2
            while True:  # the event's lines: [ls, le) up to ``end``
                le = find(b"\n", ls, end)
                if le < 0:
                    le = end
                colon = find(b":", ls, le)
                if colon < 0:
                    k, v = data[ls:le], b""
                elif colon == ls:
                    k, v = b"", data[ls + 1 : le]  # a comment keeps its text as it is
                else:
                    k = data[ls:colon]
                    vs = colon + 2 if data[colon + 1 : colon + 2] == b" " else colon + 1
                    v = data[vs:le]
                fields.append((k, v))
                if k == b"data":
                    d = v if d is None else d + b"\n" + v
                elif k == b"event":
                    name = v
                if le == end:
                    break
                ls = le + 1
            event = None if name is None else name.decode("utf-8", "replace")
            append(Event(raw, fields, b"\n", True, d, event, True))
        if pos < n:
            rest = data[pos:] if pos else data
            pend.append(rest)
            self._pend_lf = rest[-1] == 10
        return events

    def _to_general(self, chunk: bytes) -> list[Event]:
        """A CR: the rest of the stream takes the general path. What is pending holds no
        whole event, so the general path sees it as if it had had it from the start."""
        self._mode = _GENERAL
        self._first = False
        head = b"".join(self._pend)
        self._pend = []
        return self._general(head + chunk if head else chunk)

    # --- general path: LF, CRLF, CR, BOM ----------------------------------------------
    def _general(self, chunk: bytes) -> list[Event]:
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
            if line.startswith(_BOM):
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
        self._fields.append(_field(line))

    def idle(self) -> bool:
        """Between events on the fast path (LF framing, nothing unfinished): bytes fed
        now start a new event, and a read that is whole events leaves the parser as it is."""
        return self._mode == _FAST and not self._pend

    def fast(self) -> bool:
        """On the fast path (LF framing, decided)."""
        return self._mode == _FAST

    def start(self, chunk: bytes) -> bool:
        """Before the first byte: True if ``chunk``, the stream's first read, decides the
        fast path (no BOM can start it, no CR in it), which it then is; the events fed
        afterwards are those :meth:`feed` would have made of it. Else False, and nothing
        changed (:meth:`feed` decides)."""
        if self._mode != _UNDECIDED or self._pend or not chunk:
            return False
        if _BOM.startswith(chunk[:3]) or b"\r" in chunk:  # (a BOM, or its first bytes, or a CR)
            return False
        self._mode = _FAST
        self._first = False
        return True

    def pending(self, chunk: bytes, end: int) -> bytes | None:
        """The unfinished event completed by ``chunk[:end]`` (:meth:`seam`'s offset): its
        bytes, the parser unchanged (:meth:`taken` says it was handled elsewhere); None when
        they would be over :data:`SEAMED_MAX` (the parser then ends it, joining it once)."""
        if self.buffered + end > SEAMED_MAX:
            return None
        return b"".join(self._pend) + chunk[:end]

    def taken(self) -> None:
        """The unfinished event, completed by the read (:meth:`pending`), was handled
        without the parser: idle again, as after it."""
        self._pend.clear()
        self._pend_lf = False

    def seam(self, chunk: bytes, pos: int = 0) -> int:
        """Where in ``chunk`` the event begun before ``pos`` (the pending one, or one starting
        at ``pos`` when idle) ends on the fast path: the offset after its blank line, or -1
        if the chunk does not end it. A blank line where an event would start is an event
        of its own (one byte)."""
        if pos == 0 and self._pend:
            if self._pend_lf and chunk[:1] == b"\n":
                return 1
            end = chunk.find(b"\n\n")
            return end + 2 if end >= 0 else -1
        if chunk[pos] == 10:
            return pos + 1
        end = chunk.find(b"\n\n", pos)
        return end + 2 if end >= 0 else -1

    @property
    def buffered(self) -> int:
        """Bytes fed but not yet handed out in an event (the unfinished event)."""
        return sum(map(len, self._pend)) + len(self._buf) - self._start

    def close(self) -> list[Event]:
        """End of stream: events completed by a held-back CR, then the unterminated rest
        (``complete=False``), if any."""
        if self._mode != _GENERAL and self._pend:
            # an unfinished event (or the undecided first bytes): the general path ends it
            self._mode = _GENERAL
            head = b"".join(self._pend)
            self._pend = []
            events = self._general(head)
        else:
            events = []
        buf = self._buf
        if self._scan < len(buf):
            rest = bytes(buf[self._scan :])
            if rest.endswith(b"\r"):  # the lone CR held back by feed(): a line end after all
                self._line(rest[:-1], b"\r", events, len(buf))
            else:  # an unterminated last line still holds a field (a BOM alone does not)
                if self._first:
                    self._first = False
                    rest = rest[3:] if rest.startswith(_BOM) else rest
                if rest:
                    self._line(rest, self._eol or b"\n", events, len(buf))
        raw = bytes(buf[self._start :])
        fields, eol = self._fields, self._eol or b"\n"
        self._buf = bytearray()
        self._scan = self._start = self._seek = 0
        self._fields, self._eol = [], None
        if raw:
            events.append(Event(raw, fields, eol, complete=False))
        return events
