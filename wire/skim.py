"""Skimming: the common events of a stream read without a JSON parse, on the same rules.

Most events of a turn are deltas of one open item, each in the layout the gateway used
for the previous one: ``{"type":"response.output_text.delta","sequence_number":7,
"item_id":"msg_1","output_index":0,"content_index":0,"delta":" the","logprobs":[]}``, the
same keys in the same order, only values changing. When the full path (``orjson.loads``,
the repairer's rules) has handled such an event, the repairer :meth:`Skim.learn` s its
*layout*: the event's framing and the JSON object's shape, with every string and integer
a hole (the ``type`` and ``object`` strings stay literal: they say what the event is).
The layout becomes one regular expression, and the next event that matches it byte for
byte is handed to the repairer as the values in its holes (:class:`Skimmed`), without an
:class:`~wire.sse.Event` or a dict: the repairer runs the *same* rule code on them
(its checks first; any doubt returns None and the event takes the full path), so no rule
has a second implementation. This module only decodes.

Why the result is the full path's, byte for byte:

- A layout matches a strict subset of JSON: compact (no whitespace), keys in the learned
  order, integers in canonical form (``0`` or no leading zero, at most 18 digits, so
  within int64), strings without raw control characters. orjson would parse such bytes
  to exactly the object the holes describe, and the SSE parser would make them exactly
  the event (``event: NAME`` + ``data: JSON`` or ``data: JSON`` alone, LF line ends:
  :func:`wire.sse._whole`'s shape).
- A string is decoded by :meth:`Skimmed.text`: without a backslash its bytes are UTF-8
  (``decode`` raises on anything else, and the repairer declines), with one by orjson
  itself (the same decoder as the full path's ``loads``).
- A rewritten event (:meth:`Skimmed.render`) is what ``orjson.dumps`` of the changed
  object writes: the literal parts as they came (orjson writes compact JSON in the
  object's order, which is the order they came in), each string in orjson's escaping
  (as it came when it holds no backslash: orjson escapes only ``"``, ``\\`` and control
  characters), integers in decimal.

The equivalence is tested, not argued only: ``tests/test_skim.py`` repairs every
recording and generated streams with skimming on and off, in every chunking, and
requires the same bytes, notes, counts and verdicts.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["MAX_LAYOUTS", "Layout", "Skim", "Skimmed"]

MAX_LAYOUTS = 8
"""Layouts a stream keeps (the newest first); a stream of ever-new shapes stops learning."""

_STR = rb'"([^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*)"'
_INT = rb"(-?(?:0|[1-9][0-9]{0,17}))"
_LITERAL_KEYS = ("type", "object")
"""Keys whose string value is part of the layout, not a hole: what the event is."""


class Layout:
    """One learned event shape: the literal pieces between its holes, what each hole
    holds (``s`` string, ``i`` integer) and where it sits (a key path), and the
    ``kind`` the repairer filed it under."""

    __slots__ = ("kind", "pieces", "holes", "paths", "source", "first")

    def __init__(self, kind: str, pieces: list[bytes], holes: list[str], paths: list[tuple[Any, ...]]) -> None:
        self.kind = kind
        self.pieces = pieces
        self.holes = holes
        self.paths = paths
        self.first = 0  # the group number of the first hole, in the combined pattern
        parts = [re.escape(pieces[0])]
        for hole, piece in zip(holes, pieces[1:]):
            parts.append(_STR if hole == "s" else _INT)
            parts.append(re.escape(piece))
        self.source = b"".join(parts)

    def slot(self, *path: Any) -> int:
        """The hole at ``path`` (keys and list positions), or -1 if the layout has none."""
        try:
            return self.paths.index(path)
        except ValueError:
            return -1


def _shape(obj: Any, path: tuple[Any, ...], pieces: list[bytes], holes: list[str], paths: list[tuple[Any, ...]]) -> bool:
    """Appends ``obj``'s compact JSON to the pieces, its strings and ints as holes; False
    for what a layout does not hold (floats, big ints, non-string keys)."""
    t = type(obj)
    if t is dict:
        pieces[-1] += b"{"
        first = True
        for k, v in obj.items():
            if type(k) is not str:
                return False
            pieces[-1] += (b"" if first else b",") + orjson.dumps(k) + b":"
            first = False
            if k in _LITERAL_KEYS and type(v) is str:
                pieces[-1] += orjson.dumps(v)
            elif not _shape(v, path + (k,), pieces, holes, paths):
                return False
        pieces[-1] += b"}"
        return True
    if t is list:
        pieces[-1] += b"["
        for i, v in enumerate(obj):
            if i:
                pieces[-1] += b","
            if not _shape(v, path + (i,), pieces, holes, paths):
                return False
        pieces[-1] += b"]"
        return True
    if t is str or (t is int and -(10**18) < obj < 10**18):
        holes.append("s" if t is str else "i")
        paths.append(path)
        pieces.append(b"")
        return True
    if obj is None or obj is True or obj is False:
        pieces[-1] += orjson.dumps(obj)
        return True
    return False


class Skimmed:
    """A matched event: its bytes and the raw values of its holes."""

    __slots__ = ("layout", "raw", "values")

    def __init__(self, layout: Layout, raw: bytes, values: tuple[Any, ...]) -> None:
        self.layout = layout
        self.raw = raw
        self.values = values

    def text(self, slot: int) -> str:
        """The string in hole ``slot``, decoded as orjson decodes it (ValueError, e.g.
        ``UnicodeDecodeError`` or ``orjson.JSONDecodeError``, where it would fail)."""
        raw: bytes = self.values[slot]
        if 92 not in raw:
            return raw.decode("utf-8")
        value = orjson.loads(b'"' + raw + b'"')
        if type(value) is not str:  # cannot happen for a quoted string; kept as a guard
            raise ValueError("not a string")
        return value

    def number(self, slot: int) -> int:
        return int(self.values[slot])

    def render(self, slot: int, value: int) -> bytes:
        """The event with the integer in ``slot`` replaced: ``orjson.dumps`` of the
        changed object, in the event's framing."""
        layout = self.layout
        pieces = layout.pieces
        holes = layout.holes
        out = [pieces[0]]
        for i, raw in enumerate(self.values):
            if i == slot:
                out.append(str(value).encode())
            elif holes[i] == "s":
                out.append(b'"' + (raw if 92 not in raw else orjson.dumps(self.text(i))[1:-1]) + b'"')
            else:
                out.append(raw)
            out.append(pieces[i + 1])
        return b"".join(out)


class Skim:
    """The layouts a repairer learned on one stream, as one pattern."""

    __slots__ = ("layouts", "pattern", "_by_last", "_tried")

    def __init__(self) -> None:
        self.layouts: list[Layout] = []
        self.pattern: Any = None
        """The compiled alternation of the layouts (None until one is learned)."""
        self._by_last: dict[int, Layout] = {}
        self._tried: dict[str, int] = {}

    def learn(self, kind: str, raw: bytes, data: bytes | None, event: str | None, obj: Any) -> None:
        """The full path handled this event the way a skim of its layout would: learn the
        layout (a few times per ``kind`` at most; a known one is not learned again)."""
        tried = self._tried.get(kind, 0)
        if tried >= 4 or len(self.layouts) >= MAX_LAYOUTS or data is None:
            return
        self._tried[kind] = tried + 1
        if event is not None:
            head = b"event: " + event.encode() + b"\ndata: "
        else:
            head = b"data: "
        if raw != head + data + b"\n\n":  # only the one-line shape (wire.sse._whole's)
            return
        pieces = [head]
        holes: list[str] = []
        paths: list[tuple[Any, ...]] = []
        if not _shape(obj, (), pieces, holes, paths) or not holes:
            return
        pieces[-1] += b"\n\n"
        layout = Layout(kind, pieces, holes, paths)
        if any(known.source == layout.source for known in self.layouts):
            return
        if re.fullmatch(layout.source, raw) is None:
            return  # the bytes are not the compact form (spaces, other escapes in keys): no layout of them
        self.layouts.insert(0, layout)
        self._compile()

    def _compile(self) -> None:
        first = 1
        by_last: dict[int, Layout] = {}
        for layout in self.layouts:
            layout.first = first
            first += len(layout.holes)
            by_last[first - 1] = layout
        self._by_last = by_last
        self.pattern = re.compile(b"|".join(b"(?:" + layout.source + b")" for layout in self.layouts))

    def match(self, chunk: bytes, pos: int) -> Skimmed | None:
        """The event starting at ``pos`` if it has a learned layout, else None."""
        m = self.pattern.match(chunk, pos)
        if m is None:
            return None
        layout = self._by_last[m.lastindex]
        first = layout.first
        end = m.end()
        raw = chunk if pos == 0 and end == len(chunk) else chunk[pos:end]
        values = m.groups()
        if len(values) != len(layout.holes):
            values = values[first - 1 : first - 1 + len(layout.holes)]
        return Skimmed(layout, raw, values)
