"""Skimming: the common events of a stream read without a JSON parse, on the same rules.

Most events of a turn are deltas of one open item, each in the layout the gateway used
for the previous one: ``{"type":"response.output_text.delta","sequence_number":7,
"item_id":"msg_1","output_index":0,"content_index":0,"delta":" the","logprobs":[]}``, the
same keys in the same order, only a few values changing. When the full path
(``orjson.loads``, the repairer's rules) has handled such an event, the repairer
:meth:`Skim.learn` s its *layout*: the event's framing and the JSON object's compact
bytes, with a *hole* at each value the repairer names as changing from event to event
(for Responses the ``sequence_number`` and the ``delta``; for chat the text, a call's
index and arguments; for messages the block index and the delta's value), every other
value literal (the item's id, the indexes: :attr:`Layout.consts` keeps them decoded). The
next event whose bytes are the layout's literal pieces with canonical values in the holes
(compared as slices, :meth:`Layout.match`) is handed to the repairer as the values in its
holes (:class:`Skimmed`), without an :class:`~wire.sse.Event` or a dict. The repairer
runs the *same* rule code on them as on the parsed event (its checks first; any doubt
returns None and the event takes the full path), so no rule has a second
implementation. This module only decodes and splices.

Why the result is the full path's, byte for byte:

- A layout matches a strict subset of JSON: compact (no whitespace), keys in the learned
  order, literal values as they came in the learned event, integer holes in canonical
  form (``0`` or digits without a leading zero, at most 18, never negative), strings
  that orjson decodes. orjson would parse such bytes to exactly the object the holes and
  literals describe, and the SSE parser would make them exactly the event (``event:
  NAME`` + ``data: JSON`` or ``data: JSON`` alone, LF line ends: :func:`wire.sse.whole_event`'s
  shape); the driver asks only while the parser is idle on its fast path
  (:meth:`wire.stream.StreamRepair._skim`).
- A string is decoded by :meth:`Skimmed.text`: bytes without a backslash, a quote or a
  control byte are its UTF-8 (strict ``decode``); anything else goes to orjson itself
  (the same decoder as the full path's ``loads``), which fails where the full path fails.
- A rewritten event (:meth:`Skimmed.render`, one integer changed) is what
  ``orjson.dumps`` of the changed object writes: its bytes as they came, the new number,
  and each string holding a backslash in orjson's escaping (orjson escapes only ``"``,
  ``\\`` and control characters, so a string without a backslash is already written as
  orjson writes it).

The equivalence is tested, not argued only: ``tests/wire/test_skim.py``,
``test_skim_chat.py`` and ``test_skim_messages.py`` repair every recording, the bench
streams and generated streams with skimming on and off, in many chunkings, and require
the same bytes, notes, counts, fired rules and verdicts. ``--set streamfix_skim=false``
switches it off.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

__all__ = ["MAX_LAYOUTS", "MAX_MISSES", "MAX_UNUSED", "TRIES", "Layout", "Rewrite", "Skim", "Skimmed"]

MAX_LAYOUTS = 8
"""Layouts a stream keeps (the newest first; the oldest goes when a new one comes)."""

TRIES = 4
"""Failed learns (no layout of the event: floats, spaces...) after which a kind stops."""

MAX_UNUSED = 4
"""Layouts in a row learned for a kind and matched by no event, after which it stops."""

MAX_MISSES = 16
"""Events in a row no layout matched, after which the driver stops asking
(:attr:`Skim.active`: the stream's events go the full way, each read at once, until a
new layout is learned)."""

_loads: Final = orjson.loads
_dumps: Final = orjson.dumps
_SPECIAL: Final = bytes((c + 1) if c < 32 or c == 34 or c == 92 else c for c in range(256))
"""A ``bytes.translate`` table that changes only what a JSON string's raw bytes may not
hold (control bytes) or that a plain one does not (a quote, a backslash): a span it leaves
as it was is text to decode directly."""


class Layout:
    """One learned event shape: the literal pieces between its holes, what each hole
    holds (``s`` string, ``i`` integer), where it sits (a key path), the values the
    event it was learned from had everywhere else (:attr:`consts`, by path), and the
    ``kind`` the repairer filed it under. :attr:`info` is the repairer's own, computed
    once per layout (where its holes are)."""

    __slots__ = ("blank", "consts", "hits", "holes", "info", "kind", "paths", "pieces", "rtl", "same")

    def __init__(
        self,
        kind: str,
        pieces: list[bytes],
        holes: list[str],
        paths: list[tuple[Any, ...]],
        consts: dict[tuple[Any, ...], Any],
    ) -> None:
        self.kind = kind
        self.pieces = pieces
        self.holes = holes
        self.paths = paths
        self.consts = consts
        self.info: Any = None
        self.hits = 0
        """Events this layout matched (:meth:`Skim.match`)."""
        self.blank = [0] * (2 * len(holes))
        """A spans list of this layout's size (zeros), copied for each match."""
        self.same = Rewrite(pieces, list(range(len(holes))))
        """The rewrite that keeps the layout (:meth:`Skimmed.render` of more than two holes)."""
        self.rtl = -1
        """The last string hole, when only integer holes follow it (Devin's deltas:
        ``..."delta":"…","sequence_number":7}``): in an event that ends the read, its
        end is found from the right (:meth:`_from_right`), without a search."""
        last_s = max((k for k, h in enumerate(holes) if h == "s"), default=-1)
        if 0 <= last_s < len(holes) - 1:
            self.rtl = last_s

    def strings(self, *read: int) -> tuple[int, ...]:
        """The string holes but those in ``read``: what a repairer's rules do not read of
        an event, decoded only as a check (the full path's parse fails on what
        :meth:`Skimmed.text` fails on)."""
        return tuple(i for i, h in enumerate(self.holes) if h == "s" and i not in read)

    def slot(self, *path: Any) -> int:
        """The hole at ``path`` (keys and list positions), or -1 if the layout has none."""
        try:
            return self.paths.index(path)
        except ValueError:
            return -1

    def match(self, chunk: bytes, pos: int) -> list[int] | None:
        """The offsets ``[start, end]`` of each hole's value if the event at ``pos`` has this
        layout (a string's offsets exclude its quotes), else None. Integers are canonical
        and not negative (``0``, or up to 18 digits without a leading zero); a string is
        whatever lies between its quotes up to the next piece (an escaped quote does not
        end it); its content is checked when it is decoded (:meth:`Skimmed.text`).

        Pieces are compared as slices (``memcmp``), not with ``startswith(piece, pos)``,
        whose argument tuple costs more than the comparison; a search runs only for a
        string that is not the event's last hole, or when the event does not end the read."""
        pieces = self.pieces
        p = pieces[0]
        i = pos + len(p)
        if pos == 0:
            if not chunk.startswith(p):  # (compiled: a memcmp, no slice made)
                return None
        elif chunk[pos:i] != p:
            return None
        n = len(chunk)
        spans = self.blank.copy()  # (one list of the right size, not grown append by append)
        holes = self.holes
        last = len(holes) - 1
        for k in range(last + 1):
            piece = pieces[k + 1]
            if holes[k] == "i":
                j = i
                while j < n and 48 <= chunk[j] <= 57:
                    j += 1
                if j == i or j - i > 18 or (chunk[i] == 48 and j - i > 1):
                    return None
            elif k == last:
                # the last hole, a string: its last piece (from the closing quote on) ends
                # the event, at the read's end or at the first blank line after it
                j = n - len(piece)
                if j < i or not chunk.endswith(piece) or 10 in chunk[i:j]:  # (no string holds an LF: more events)
                    e = chunk.find(b"\n\n", i)
                    if e < 0:
                        return None
                    j = e + 2 - len(piece)
                    if j < i:
                        return None
                else:
                    spans[2 * k] = i
                    spans[2 * k + 1] = j
                    return spans
            else:
                if k == self.rtl and chunk.endswith(pieces[-1]) and self._from_right(chunk, i, k, spans):
                    return spans
                # a string between holes: it ends where the next piece (its closing quote,
                # the next key...) starts, which a string cannot hold unless that quote is
                # escaped; then the quotes are walked one by one
                j = chunk.find(piece, i)
                if j > 0 and chunk[j - 1] == 92:
                    j = chunk.find(b'"', i)
                    while j > 0 and chunk[j - 1] == 92:  # escaped, unless the backslash is itself escaped
                        b = j - 1
                        while chunk[b - 1] == 92:
                            b -= 1
                        if (j - b) % 2 == 0:
                            break
                        j = chunk.find(b'"', j + 1)
                if j < 0:
                    return None
            e = j + len(piece)
            if chunk[j:e] != piece:
                return None
            spans[2 * k] = i
            spans[2 * k + 1] = j
            i = e
        return spans

    def _from_right(self, chunk: bytes, i: int, k: int, spans: list[int]) -> bool:
        """The rest of the event from string hole ``k`` (starting at ``i``) on, matched
        from the end of the read, which ends with the last piece: the integer holes after
        the string and their pieces, right to left, then the string is what lies between.
        It holds no LF (else the read has more events: the caller searches), and its
        content is checked when it is decoded (a quote in it: orjson's parse says
        whether it is one string). Sets the spans of holes ``k`` on (on False the
        caller's search sets them again)."""
        pieces = self.pieces
        holes = self.holes
        e = len(chunk) - len(pieces[-1])
        for h in range(len(holes) - 1, k, -1):  # (only integer holes here)
            j = e
            while j > i and 48 <= chunk[j - 1] <= 57:
                j -= 1
            if j == e or e - j > 18 or (chunk[j] == 48 and e - j > 1):
                return False
            spans[2 * h] = j
            spans[2 * h + 1] = e
            before = pieces[h]
            e = j - len(before)
            if e < i or chunk[e:j] != before:
                return False
        if 10 in chunk[i:e]:
            return False
        spans[2 * k] = i
        spans[2 * k + 1] = e
        return True


def _shape(
    obj: Any,
    path: tuple[Any, ...],
    want: frozenset[tuple[Any, ...]],
    pieces: list[bytes],
    holes: list[str],
    paths: list[tuple[Any, ...]],
    consts: dict[tuple[Any, ...], Any],
) -> bool:
    """Appends ``obj``'s compact JSON to the pieces, the values at the paths in ``want``
    (strings and ints) as holes; False for what a layout does not hold (floats, big ints,
    a wanted value that is no string or int)."""
    t = type(obj)
    if path in want:
        if t is str or (t is int and 0 <= obj < 10**18):
            holes.append("s" if t is str else "i")
            paths.append(path)
            if t is str:
                pieces[-1] += b'"'
                pieces.append(b'"')
            else:
                pieces.append(b"")
            return True
        return False
    if t is dict:
        pieces[-1] += b"{"
        first = True
        for k, v in obj.items():
            pieces[-1] += (b"" if first else b",") + orjson.dumps(k) + b":"
            first = False
            if not _shape(v, path + (k,), want, pieces, holes, paths, consts):
                return False
        pieces[-1] += b"}"
        return True
    if t is list:
        pieces[-1] += b"["
        for i, v in enumerate(obj):
            if i:
                pieces[-1] += b","
            if not _shape(v, path + (i,), want, pieces, holes, paths, consts):
                return False
        pieces[-1] += b"]"
        return True
    if t is float:
        return False  # orjson's float text is not always the one that came
    try:
        pieces[-1] += orjson.dumps(obj)
    except (TypeError, orjson.JSONEncodeError):
        return False
    if path:
        consts[path] = obj
    return True


class Skimmed:
    """A matched event: its bytes (:attr:`raw`) and where its holes' values are. The
    offsets (:attr:`spans`) are in :attr:`src`, the read it came in, from :attr:`base`
    on: a skimmed event of a read with many is not copied to be read, only to be sent."""

    __slots__ = ("base", "layout", "plain", "plain_of", "raw", "spans", "src")

    def __init__(self, layout: Layout, raw: bytes, spans: list[int], src: bytes | None = None, base: int = 0) -> None:
        self.layout = layout
        self.raw = raw
        self.spans = spans
        self.src = raw if src is None else src
        self.base = base
        self.plain: bytes | None = None
        """After :meth:`text`: the string's bytes when they are its UTF-8 (no escape in
        them), else None; its callers hand them on instead of encoding the text again."""
        self.plain_of = -1
        """The hole :attr:`plain` is of (the last :meth:`text`)."""

    def text(self, slot: int) -> str:
        """The string in hole ``slot``, as orjson decodes it (a ValueError, e.g.
        ``orjson.JSONDecodeError`` or ``UnicodeDecodeError``, where the full path's parse
        would fail). Without a backslash, a quote or a control byte (which JSON forbids
        raw) inside, its bytes are the UTF-8 of the text, decoded directly (strict UTF-8,
        as orjson validates it); anything else goes to orjson."""
        spans = self.spans
        start = spans[2 * slot]
        end = spans[2 * slot + 1]
        raw = self.src
        span = raw[start:end]
        self.plain_of = slot
        if span.translate(_SPECIAL) == span:  # no control byte, quote or backslash (one C loop)
            value = span.decode("utf-8")  # strict: what orjson rejects as UTF-8 raises
            self.plain = span
            return value
        self.plain = None if 92 in span else span
        value = _loads(raw[start - 1 : end + 1])
        if type(value) is not str:  # e.g. '"a", "b"' cut as one string: not the layout after all
            raise ValueError("not one string")
        return value

    def number(self, slot: int) -> int:
        """The integer in hole ``slot`` (its digits were checked by the match)."""
        raw = self.src
        v = 0
        for j in range(self.spans[2 * slot], self.spans[2 * slot + 1]):
            v = v * 10 + raw[j] - 48
        return v

    def render(self, slot: int, value: int, text: int = -1, decoded: str = "") -> bytes:
        """The event with the integer in ``slot`` replaced: ``orjson.dumps`` of the
        changed object, in the event's framing. The other holes go as they came unless a
        string holds a backslash (an escape orjson may write otherwise, e.g. ``\\u003c``
        as ``<``): that one is written as orjson writes it, from ``decoded`` for hole
        ``text`` (its value, already decoded by the caller)."""
        src = self.src
        base = self.base
        stop = base + len(self.raw)
        spans = self.spans
        holes = self.layout.holes
        if len(holes) == 2:  # the usual delta: a number and a text (one bytes built, b"%b%d%b")
            other = 1 - slot
            sstart = spans[2 * slot]
            send = spans[2 * slot + 1]
            ostart = spans[2 * other]
            oend = spans[2 * other + 1]
            if (
                holes[other] != "s"
                or (other == text and self.plain_of == text and self.plain is not None)
                or 92 not in src[ostart:oend]
            ):
                # (a text just decoded without a backslash in it is known to have none)
                return b"%b%d%b" % (src[base:sstart], value, src[send:stop])
            canon = _dumps(decoded if other == text else self.text(other))[1:-1]
            if slot < other:
                return b"%b%d%b%b%b" % (src[base:sstart], value, src[send:ostart], canon, src[oend:stop])
            return b"%b%b%b%d%b" % (src[base:ostart], canon, src[oend:sstart], value, src[send:stop])
        return self.rewrite(self.layout.same, slot, value, text, decoded)

    def rewrite(self, out: Rewrite, slot: int, value: int, text: int = -1, decoded: str = "") -> bytes:
        """The event as a learned rewrite writes it (:meth:`Skim.rewrite`): the rewrite's
        pieces with this event's hole values between them, the integer in ``slot`` as
        ``value``, each string as orjson writes it (as :meth:`render`)."""
        src = self.src
        spans = self.spans
        holes = self.layout.holes
        pieces = out.pieces
        parts = [pieces[0]]
        k = 1
        for i in out.slots:
            start = spans[2 * i]
            end = spans[2 * i + 1]
            if i == slot:
                parts.append(b"%d" % value)
            elif holes[i] == "s" and 92 in src[start:end]:
                parts.append(_dumps(decoded if i == text else self.text(i))[1:-1])
            else:
                parts.append(src[start:end])
            parts.append(pieces[k])
            k += 1
        return b"".join(parts)


class Rewrite:
    """How the full path rewrites every event of one layout (:meth:`Skim.rewrite`): the
    rewritten event's literal pieces, and for each of its holes the layout's hole whose
    value goes there."""

    __slots__ = ("pieces", "slots")

    def __init__(self, pieces: list[bytes], slots: list[int]) -> None:
        self.pieces = pieces
        self.slots = slots


class Skim:
    """The layouts a repairer learned on one stream (newest first)."""

    __slots__ = ("_misses", "_s", "_tried", "_unused", "active", "layouts")

    def __init__(self) -> None:
        self._s: Skimmed | None = None
        self.layouts: list[Layout] = []
        self.active = False
        """True once a layout is learned (the driver skims only then), until
        :data:`MAX_MISSES` events in a row matched none."""
        self._tried: dict[str, int] = {}
        self._unused: dict[str, int] = {}
        self._misses = 0

    def learn(
        self,
        kind: str,
        raw: bytes,
        data: bytes | None,
        event: str | None,
        obj: Any,
        holes: frozenset[tuple[Any, ...]],
    ) -> Layout | None:
        """The full path handled this event the way a skim of its layout would: learn its
        layout, ``holes`` (key paths) being the values that change from event to event,
        everything else literal (a new value there is another layout). A known layout
        is not learned again; a kind whose events keep failing to give one, or keep
        giving one no later event has, stops trying (:meth:`tries`)."""
        if data is None or not self.tries(kind):
            return None
        if event is not None:
            head = b"event: " + event.encode() + b"\ndata: "
        else:
            head = b"data: "
        if raw != head + data + b"\n\n":  # only the one-line shape (wire.sse.whole_event's)
            return None
        pieces = [head]
        hs: list[str] = []
        paths: list[tuple[Any, ...]] = []
        consts: dict[tuple[Any, ...], Any] = {}
        if not _shape(obj, (), holes, pieces, hs, paths, consts) or not hs:
            return self._failed(kind)
        pieces[-1] += b"\n\n"
        for known in self.layouts:
            if known.pieces == pieces and known.holes == hs:
                self.active = True  # (the events keep a layout again)
                return known
        layout = Layout(kind, pieces, hs, paths, consts)
        if layout.match(raw, 0) is None:
            return self._failed(kind)  # not the compact form it came in (spaces, other escapes)
        for known in self.layouts:
            if known.kind == kind:
                # the kind's last layout never served an event: a literal that changes
                # every time (a per-event stamp or count); a kind doing that again and
                # again stops learning (each try costs a shape and every match a test)
                if known.hits:
                    self._unused.pop(kind, None)
                else:
                    self._unused[kind] = self._unused.get(kind, 0) + 1
                    if self._unused[kind] >= MAX_UNUSED:
                        self._tried[kind] = TRIES
                break
        self.layouts.insert(0, layout)
        if len(self.layouts) > MAX_LAYOUTS:
            self.layouts.pop()
        self.active = True
        return layout

    def rewrite(
        self,
        layout: Layout,
        raw: bytes,
        out: bytes,
        obj: Any,
        event: str | None,
        slot: int,
        value: int,
        text: int,
        decoded: str,
    ) -> Rewrite | None:
        """The rewrite the full path made of the event ``raw`` (of ``layout``) as a template
        for the next events of the layout: ``obj`` is the rewritten object, ``out`` the
        bytes the full path sent for it (``slot``: the integer hole whose value became
        ``value``, e.g. a renumbered ``sequence_number``; ``decoded``, the text in hole
        ``text`` as the repairer decoded it). The rewritten object must keep the layout's holes (the same
        paths, the same kinds) and everything else must be what ``orjson.dumps`` writes;
        the template is kept only if it gives exactly ``out`` for this event. The
        repairer checks, for each next event, that the rewrite would be the same (the
        values it added are those of the template)."""
        head = b"event: " + event.encode() + b"\ndata: " if event is not None else b"data: "
        pieces = [head]
        hs: list[str] = []
        paths: list[tuple[Any, ...]] = []
        if not _shape(obj, (), frozenset(layout.paths), pieces, hs, paths, {}):
            return None
        pieces[-1] += b"\n\n"
        if sorted(paths) != sorted(layout.paths):
            return None
        slots = [layout.paths.index(p) for p in paths]
        if [layout.holes[i] for i in slots] != hs:
            return None
        spans = layout.match(raw, 0)
        if spans is None:
            return None
        tpl = Rewrite(pieces, slots)
        try:
            if Skimmed(layout, raw, spans).rewrite(tpl, slot, value, text, decoded) != out:
                return None
        except ValueError:
            return None
        return tpl

    def _failed(self, kind: str) -> Layout | None:
        self._tried[kind] = self._tried.get(kind, 0) + 1
        return None

    def tries(self, kind: str) -> bool:
        """Whether learning ``kind`` is still worth a try: it failed fewer than
        :data:`TRIES` times, and fewer than :data:`MAX_UNUSED` layouts in a row were
        learned for it that no event matched."""
        return self._tried.get(kind, 0) < TRIES

    def match(self, chunk: bytes, pos: int) -> Skimmed | None:
        """The event starting at ``pos`` if it has a learned layout, else None. The
        :class:`Skimmed` is this Skim's own, refilled by the next match (one object per
        stream, not one per event): read it before matching again, keep none of it but
        its bytes (:attr:`Skimmed.raw`)."""
        for layout in self.layouts:
            spans = layout.match(chunk, pos)
            if spans is not None:
                layout.hits += 1
                self._misses = 0
                end = spans[-1] + len(layout.pieces[-1])
                raw = chunk if pos == 0 and end == len(chunk) else chunk[pos:end]
                s = self._s
                if s is None:
                    s = self._s = Skimmed(layout, raw, spans, chunk, pos)
                else:
                    s.layout = layout
                    s.raw = raw
                    s.spans = spans
                    s.src = chunk
                    s.base = pos
                    s.plain = None
                    s.plain_of = -1
                return s
        return None

    def missed(self) -> None:
        """A whole event matched no layout (the driver says so; a match tried on an event
        the read does not hold whole is not a miss, nor one before any layout is learned:
        the stream's first read goes event by event to learn them)."""
        if not self.active:
            return
        self._misses += 1
        if self._misses >= MAX_MISSES:  # a stream whose events do not keep a layout
            self.active = False
            self._misses = 0
