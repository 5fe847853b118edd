"""The providers' own responses, decoded on the upstream leg as CPA reads them (sans-IO).

One decoder per provider wire, each fed the response body chunk by chunk and never
changing a byte (the caller forwards every chunk as it came), each reading both framings
a provider answers with: SSE (a stream) and JSON (a non-streaming body, read with a
streaming JSON parser, ijson, so no body is held whole: only the item being read, one
content part or output item).

Providers: ``gemini`` (``generateContent``, streamed or not, also in the Gemini CLI /
Antigravity envelope), ``interactions`` (Gemini Interactions), ``anthropic`` (Messages),
``openai_chat`` (chat completions), ``responses`` (OpenAI / Codex Responses); the frames
each reads and what they mean: docs/upstream-leg.md, "Every provider: what its frames mean".

Devin's Connect-RPC stream keeps its own tap (``wire/devin.py``).

Each decoder records a :class:`wire.upstream_call.CallResult`. :attr:`CallDecoder.decided`
turns True at the provider's decisive event (the finish with its usage, or an error), the
moment the correlator can take the call's facts, before CPA has read them; :meth:`close`
gives the final result at the end of the body (``cut=True`` when the connection failed).

Failing open: a decoder never raises; an event that is not JSON is counted in ``bad`` and
skipped; an internal error stops the reading (:attr:`CallDecoder.stopped`, one log line
for the caller) and the bytes still go on. Cost: the common deltas are skimmed (matched
against a learned layout, ``wire/skim.py``, in LF or Google's CRLF framing: no SSE parse,
no JSON parse, the one string read hashed from the raw bytes; a read that is one usual
delta by ``wire/fastread.py``, in C in the compiled core; in a read of several, the first
of the newest layout by a fused match, :class:`_Fast`, and the rest of the read split once
at its blank lines, each part read by ``wire/fastread.py`` too, as is the event a read
cuts once the next read ends it), any other event one SSE parse and one
``orjson.loads``, alone (a layout learned on it serves the next);
memory: one event (SSE) or one item (JSON).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from typing import Any, Final

import ijson  # type: ignore[import-untyped]  # push parser (yajl2_c backend): JSON bodies read as they stream
import orjson
from ijson.common import ObjectBuilder  # type: ignore[import-untyped]

from .encoding import Decoder
from .fastread import event_string
from .skim import MAX_MISSES, Layout, Skim
from .sse import Event, SseParser
from .upstream_call import CallResult, Ending
from .verdict import HASH_BATCH, Outcome, UpstreamUsage

__all__ = [
    "AnthropicDecoder",
    "CallDecoder",
    "CallTap",
    "ChatDecoder",
    "GeminiDecoder",
    "InteractionsDecoder",
    "ProviderRequest",
    "ResponsesDecoder",
    "decoder_for",
    "provider_for_path",
    "read_json_request",
]

# --- what each provider's finish means -----------------------------------------------

GEMINI_FINISH: dict[str, Outcome] = {
    "STOP": "complete",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "MALFORMED_FUNCTION_CALL": "failed",
    "UNEXPECTED_TOOL_CALL": "failed",
    "TOO_MANY_TOOL_CALLS": "failed",
}
"""Gemini ``FinishReason``; any other value (``OTHER``, ``LANGUAGE``, ``NO_IMAGE``,
``FINISH_REASON_UNSPECIFIED``) proves nothing (``unknown``). A malformed or unexpected
function call is a failed turn: the model's call cannot be run."""
GEMINI_BLOCK: Outcome = "content_filter"
"""``promptFeedback.blockReason`` (the prompt was blocked; no candidate)."""
INTERACTIONS_STATUS: dict[str, Outcome] = {
    "completed": "complete",
    "requires_action": "complete",
    "incomplete": "max_tokens",
    "budget_exceeded": "max_tokens",
    "failed": "failed",
    "cancelled": "failed",
}
ANTHROPIC_STOP: dict[str, Outcome] = {
    "end_turn": "complete",
    "tool_use": "complete",
    "stop_sequence": "complete",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "content_filter",
    "pause_turn": "max_tokens",
}
"""Claude ``stop_reason``; ``pause_turn`` (a server-tool loop to continue) is an unfinished
turn, told in each client API's word for one (:mod:`wire.stops`: ``length``,
``max_output_tokens``, ``MAX_TOKENS``; Messages keeps ``pause_turn``)."""
CHAT_FINISH: dict[str, Outcome] = {
    "stop": "complete",
    "tool_calls": "complete",
    "function_call": "complete",
    "length": "max_tokens",
    "content_filter": "content_filter",
}
RESPONSES_INCOMPLETE: dict[str, Outcome] = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}


_GEMINI_TEXT = ("candidates", 0, "content", "parts", 0, "text")
_GEMINI_HOLES = frozenset({_GEMINI_TEXT, *(("usageMetadata", k) for k in (
    "promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "totalTokenCount", "cachedContentTokenCount"))})  # fmt: skip
_INTERACTIONS_HOLES = frozenset({("index",), ("delta", "text"), ("delta", "arguments"), ("delta", "content", "text")})
_ANTHROPIC_HOLES = frozenset({("index",), ("delta", "text"), ("delta", "partial_json"), ("delta", "thinking")})
_CHAT_CONTENT = ("choices", 0, "delta", "content")
_CHAT_ARGS = ("choices", 0, "delta", "tool_calls", 0, "function", "arguments")
_CHAT_HOLES = frozenset({_CHAT_CONTENT, _CHAT_ARGS, ("choices", 0, "delta", "reasoning_content"),
                         ("choices", 0, "delta", "tool_calls", 0, "index"), ("created",), ("obfuscation",)})  # fmt: skip
_RESPONSES_HOLES = frozenset({("sequence_number",), ("delta",), ("obfuscation",)})
"""The values that change from one delta to the next, per provider (wire/skim.py holes)."""


def _chat_pure(obj: dict[str, Any]) -> tuple[str, tuple[Any, ...] | None] | None:
    """(kind, the hole hashed) of a chunk that is one delta of one choice and nothing else
    that counts (no finish, usage, error, call header); else None."""
    choices = obj.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or obj.get("usage") is not None or "error" in obj:
        return None
    ch = choices[0]
    if not isinstance(ch, dict) or ch.get("index", 0) != 0 or ch.get("finish_reason") is not None:
        return None
    d = ch.get("delta")
    if not isinstance(d, dict) or len(d) != 1:
        return None
    if isinstance(d.get("content"), str):
        return "text", _CHAT_CONTENT
    if isinstance(d.get("reasoning_content"), str):
        return "reasoning", None
    tcs = d.get("tool_calls")
    if isinstance(tcs, list) and len(tcs) == 1 and isinstance(tcs[0], dict) and set(tcs[0]) == {"index", "function"}:
        f = tcs[0]["function"]
        if isinstance(f, dict) and set(f) == {"arguments"} and isinstance(f["arguments"], str):
            return "args", _CHAT_ARGS
    return None


def _n(v: Any) -> int:
    """A token count (an int, or ijson's number), else 0."""
    if isinstance(v, bool):
        return 0
    if isinstance(v, int):
        return max(v, 0)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0
    return max(int(f), 0) if math.isfinite(f) else 0


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _error_tag(err: Any) -> str:
    """``503 UNAVAILABLE: The model is overloaded.`` from an error object (code, status or
    type, a short message): a provider's error text, never the user's content."""
    if not isinstance(err, dict):
        return str(err)[:80] if isinstance(err, str) and err else "error"
    bits = [str(err[k]) for k in ("code", "status", "type")
            if isinstance(err.get(k), (str, int)) and err.get(k) not in ("", "error")]  # fmt: skip
    tag = " ".join(dict.fromkeys(bits)) or "error"
    msg = err.get("message")
    if isinstance(msg, str) and msg:
        tag += ": " + (msg if len(msg) <= 120 else msg[:117] + "...")
    return tag


def _utf8(s: str) -> bytes:
    """``s.encode("utf-8", "surrogatepass")``, by the cheaper strict encoder when ``s`` holds
    no lone surrogate (the same bytes: the two differ only on surrogates)."""
    try:
        return s.encode()
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogatepass")


_loads: Final = orjson.loads  # (a module attribute looked up per call costs as much as a short string's parse)
_SPECIAL: Final = bytes((c + 1) if c < 32 or c == 34 or c == 92 else c for c in range(256))
"""wire/skim.py's table: ``span.translate(_SPECIAL) == span`` when a JSON string's raw bytes
hold no control byte, quote or backslash (its bytes are then its UTF-8)."""


def _hole(src: bytes, spans: list[int], slot: int) -> bytes:
    """The UTF-8 of the string in hole ``slot`` of an event a layout matched (``spans``:
    :meth:`wire.skim.Layout.match`'s offsets in ``src``): what :meth:`wire.skim.Skimmed.text`
    decodes, with its checks and failures (a ValueError where the full path's parse
    fails), as bytes, without a :class:`~wire.skim.Skimmed` refilled per event."""
    start = spans[2 * slot]
    end = spans[2 * slot + 1]
    return _string(src, start, end, src[start:end])


def _holes(src: bytes, spans: list[int], r: _Read) -> bytes:
    """Layout.match's way of reading an event (``spans`` in ``src``) as :class:`_Read` ``r``
    says: the strings not read decoded as a check, then the UTF-8 of the one read (b"":
    none); a ValueError where the full path's parse fails."""
    for other in r.others:
        _hole(src, spans, other)
    return _hole(src, spans, r.slot) if r.slot >= 0 else b""


def _string(src: bytes, start: int, end: int, span: bytes) -> bytes:
    """:func:`_hole` of the string at ``src[start:end]`` (``span``, already sliced)."""
    if span.translate(_SPECIAL) == span:  # no control byte, quote or backslash
        if not span.isascii():  # (ASCII is valid UTF-8: no str made to check it)
            span.decode("utf-8")  # strict: what orjson rejects as UTF-8 raises
        return span
    return _escaped(src, start, end, span)


_ASCII: Final = bytes((c + 1) if c < 32 or c == 34 or c == 92 else 0 if c >= 128 else c for c in range(256))
""":data:`_SPECIAL` that changes the non-ASCII bytes too: a span it leaves as it was is its
own UTF-8 without a check."""


def _kind(span: bytes) -> int:
    """0: ASCII without a control byte, quote or backslash (the text's UTF-8 as it is); 1:
    no control byte, quote or backslash, but non-ASCII bytes (UTF-8 to check); 2: else
    (orjson decodes it). One ``translate`` for the usual ASCII delta, no ``isascii`` call;
    an escaped one is told by its backslash (the usual way to 2, without a second table)."""
    if span.translate(_ASCII) == span:
        return 0
    if 92 in span:
        return 2
    return 1 if span.translate(_SPECIAL) == span else 2


def _escaped(src: bytes, start: int, end: int, span: bytes) -> bytes:
    """:func:`_string` of a span holding a control byte, a quote or a backslash: orjson's
    (the full path's decoder; a per-byte unescape compiled with mypyc cost more per
    escaped delta than this one call, measured)."""
    value = _loads(src[start - 1 : end + 1])
    if type(value) is not str:  # e.g. '"a", "b"' cut as one string: not the layout after all
        raise ValueError("not one string")
    return _utf8(value)  # (without a backslash, the span itself: orjson checked it is UTF-8)


class _Digest:
    """:class:`wire.verdict.Digest`'s hash (blake2b of the pieces in order, and their
    size), the pieces kept by reference and joined into the hash :data:`HASH_BATCH` bytes
    at a time: the same hex digest, without a bytearray grown piece by piece (a generic
    ``+=`` cost more than the rest of a skimmed delta's bookkeeping)."""

    __slots__ = ("_hash", "_pending", "_pieces", "size")

    def __init__(self) -> None:
        self._hash: Any = hashlib.blake2b()
        self._pieces: list[bytes] = []
        self._pending = 0
        self.size = 0

    def add(self, piece: bytes) -> None:
        n = len(piece)
        self._pieces.append(piece)
        self.size += n
        self._pending += n
        if self._pending >= HASH_BATCH:
            self._hash.update(b"".join(self._pieces))
            self._pieces.clear()
            self._pending = 0

    def hexdigest(self) -> str:
        if self._pieces:
            self._hash.update(b"".join(self._pieces))
            self._pieces.clear()
            self._pending = 0
        out: str = self._hash.hexdigest()
        return out


class _Read:
    """What the decoder reads of one learned layout (its :attr:`wire.skim.Layout.info`):
    the hole hashed (-1: none), whether as arguments, the other string holes (decoded as
    a check only), the layout in CRLF framing (:func:`_crlf`), the model name its events
    carry (the literal at the decoder's :attr:`CallDecoder.model_key`, or None)."""

    __slots__ = ("args", "cr", "crfast", "fast", "model", "others", "slot")

    def __init__(self, slot: int, args: bool, others: tuple[int, ...], cr: Layout, model: str | None) -> None:
        self.slot = slot
        self.args = args
        self.others = others
        self.cr = cr
        self.model = model
        self.fast: _Fast | None = None
        """The fused match of the layout (LF framing) and of its CRLF form, when it has
        the usual delta shape (:meth:`_Fast.of`)."""
        self.crfast: _Fast | None = None


class _Fast:
    """:meth:`wire.skim.Layout.match` for the usual delta layout, one string hole and it the
    last (integer holes before it: a sequence number, an index, a ``created``): the same
    steps in the same order (the first piece, each integer's canonical digits and the
    piece after it, the last piece ending the read or, else, ending at the first blank
    line after the string's start), returning the string's start and keeping its end
    (:attr:`stop`) without a spans list or a boxed offset. It accepts what the layout
    accepts, with the same string, and refuses (:data:`FAST_NO`) what it refuses; the
    one check left to the caller is the layout's LF test of a string that ends the read
    (:attr:`tail`: an LF in it, then :meth:`search` is the layout's next step)."""

    __slots__ = (
        "body",
        "caching",
        "first",
        "kind",
        "last",
        "lf",
        "mids",
        "misses",
        "nlast",
        "pieces",
        "seen",
        "span",
        "stop",
        "tail",
        "top",
    )

    def __init__(self, pieces: list[bytes], top: int) -> None:
        self.pieces = pieces
        self.seen: list[bytes] = [b""] * top
        """Per integer hole, its digits and the piece after it as the last event had them
        (b"": none kept): an event with the same bytes there is matched by one compare,
        without reading the digits one by one (a chat chunk's 10-digit ``created``, an
        index, the same from one delta to the next)."""
        self.misses: list[int] = [0] * top
        """Per integer hole, the events in a row whose value differed from the one kept;
        at :data:`SEEN_MISSES` none is kept any more (a ``sequence_number`` changes at
        every event: the compare would only cost)."""
        self.caching = top > 0
        """Some integer hole is kept, or may be: False once none may (then the digits are
        read as they always were, with no per-hole step added)."""
        self.first = pieces[0]
        self.mids = tuple(pieces[1 : top + 1])
        """The piece after each integer hole (:func:`wire.fastread.event_string`'s layout)."""
        self.last = pieces[-1]
        self.nlast = len(pieces[-1])
        self.lf = self.last.endswith(BLANK_LF)
        """The layout ends LF LF (else CR LF CR LF, Google's framing: then :meth:`search`,
        which looks for the first LF LF as the layout's match does, can never find the
        last piece ending there, and fails at once instead of across the read)."""
        self.body = self.last[: -len(BLANK_LF if self.lf else BLANK_CRLF)]
        """:attr:`last` without the blank line that ends it (the event's end once a read is
        split at its blank lines: :meth:`CallDecoder._run_of`)."""
        self.top = top
        """The integer holes (the string is hole ``top``)."""
        self.stop = 0
        """After a match: the string's end (the event ends ``nlast`` bytes later)."""
        self.tail = False
        """After a match: the event ends the read (its string not yet tested for an LF)."""
        self.span = b""
        """After :meth:`take`: the string's raw bytes, ``chunk[start:stop]``."""
        self.kind = 0
        """After :meth:`take`: the string's :func:`_kind`."""

    @staticmethod
    def of(layout: Layout, slot: int) -> _Fast | None:
        """The fused match of ``layout`` if its one string hole is its last, and is the hole
        read (``slot``) or none is (-1: the string only checked); else None."""
        holes = layout.holes
        top = len(holes) - 1
        if top < 0 or holes[top] != "s" or "s" in holes[:top] or slot not in (-1, top):
            return None
        return _Fast(layout.pieces, top)

    def match(self, chunk: bytes, pos: int) -> int:
        """The string's start (its end: :attr:`stop`), or :data:`FAST_NO`."""
        p = self.first
        i = pos + len(p)
        if pos == 0:
            if not chunk.startswith(p):
                return FAST_NO
        elif chunk[pos:i] != p:
            return FAST_NO
        n = len(chunk)
        pieces = self.pieces
        caching = self.caching
        for k in range(self.top):
            if caching:
                kept = self.seen[k]
                e = i + len(kept)
                if e > i and chunk[i:e] == kept:  # (what the steps below accept: the piece starts with no digit)
                    self.misses[k] = 0
                    i = e
                    continue
            j = i
            while j < n and 48 <= chunk[j] <= 57:
                j += 1
            if j == i or j - i > 18 or (chunk[i] == 48 and j - i > 1):
                return FAST_NO
            piece = pieces[k + 1]
            e = j + len(piece)
            if chunk[j:e] != piece:
                return FAST_NO
            if caching:
                self._miss(k, chunk[i:e])
            i = e
        j = n - self.nlast
        if j >= i and chunk.endswith(self.last):
            self.stop = j
            self.tail = True
            return i
        return self.search(chunk, i)

    def _miss(self, k: int, now: bytes) -> None:
        """Integer hole ``k`` did not hold the bytes kept: ``now`` (its digits and the piece
        after them) is kept instead, or none after :data:`SEEN_MISSES` misses in a row
        (and no hole at all once every one has missed so)."""
        m = self.misses[k] + 1
        self.misses[k] = m
        if m < SEEN_MISSES:
            self.seen[k] = now
            return
        self.seen[k] = b""
        self.caching = any(x < SEEN_MISSES for x in self.misses)

    def take(self, chunk: bytes, pos: int) -> int:
        """:meth:`match`, then the string's raw bytes and kind (:attr:`span`, :attr:`kind`),
        with the layout's next step for a string that ends the read but holds an LF (a
        search for the event's end): the string's start, or :data:`FAST_NO`."""
        start = self.match(chunk, pos)
        if start < 0:
            return FAST_NO
        span = chunk[start : self.stop]
        kind = _kind(span)  # 0/1: no control byte (LF), quote or backslash
        if kind == 2 and self.tail and 10 in span:
            start = self.search(chunk, start)
            if start < 0:
                return FAST_NO
            span = chunk[start : self.stop]
            kind = _kind(span)
        self.span = span
        self.kind = kind
        return start

    def search(self, chunk: bytes, i: int) -> int:
        """The layout's way when the string (from ``i``) does not end the read, or holds an
        LF: the event ends at the first blank line after ``i``, with the last piece."""
        if not self.lf:
            return FAST_NO
        e = chunk.find(b"\n\n", i)
        if e < 0:
            return FAST_NO
        j = e + 2 - self.nlast
        if j < i or chunk[j : e + 2] != self.last:
            return FAST_NO
        self.stop = j
        self.tail = False
        return i


BLANK_LF: Final = b"\n\n"
"""The line end and blank line that end an event, LF framing."""
BLANK_CRLF: Final = b"\r\n\r\n"
"""The same in CRLF framing (Google's)."""
FAST_NO: Final = -1
""":meth:`_Fast.match`: the layout does not match."""
REPEAT_ON: Final = -1
""":meth:`CallDecoder._repeat`: a repeat whose ``data:`` line goes on past the read."""
REPEAT_LF: Final = -2
""":meth:`CallDecoder._repeat`: a repeat whose ``data:`` line ends with the read."""
SEEN_MISSES: Final = 3
""":attr:`_Fast.misses`: after this many changed values in a row an integer hole is read
digit by digit only."""


def _crlf(layout: Layout) -> Layout:
    """``layout`` in CRLF framing (Google's): the LFs of its first and last pieces (the
    ``event:``/``data:`` lines and the blank line) as CR LF; the JSON between holds no raw
    LF or CR. An event it matches in a raw read is the one ``layout`` matches once CR LF
    is made LF, as long as its strings hold no CR (a CR in one fails the string's check:
    the event then goes the LF way)."""
    p = layout.pieces
    pieces = [p[0].replace(b"\n", b"\r\n"), *p[1:-1], p[-1].replace(b"\n", b"\r\n")]
    return Layout(layout.kind, pieces, layout.holes, layout.paths, layout.consts)


def _repeats(*names: str) -> dict[str, bytes]:
    """:attr:`CallDecoder.repeats` of these event names."""
    return {n: b'{"type":"' + n.encode() + b'"' for n in names}


def _repeat_lines(repeats: dict[str, bytes]) -> dict[bytes, bytes]:
    """:attr:`CallDecoder.repeat_lines` of :attr:`CallDecoder.repeats`."""
    return {n.encode(): b"\ndata: " + head for n, head in repeats.items()}


_RESPONSES_REPEATS: Final = _repeats(
    "response.output_item.done",
    "response.content_part.done",
    "response.output_text.done",
    "response.function_call_arguments.done",
    "response.refusal.done",
    "response.reasoning_text.done",
    "response.reasoning_summary_text.done",
    "response.reasoning_summary_part.done",
)


class CallDecoder:
    """The shared part: framing (SSE or JSON), the digests, the facts; one subclass per
    provider reads its events (:meth:`on_event`)."""

    provider = ""
    finish_field = "finish"
    json_items: tuple[str, ...] = ()
    """JSON bodies: the paths (ijson prefixes, below any envelope) whose values are built
    and handed to :meth:`on_json`, one at a time; everything else is skipped."""
    envelopes: tuple[str, ...] = ()
    """Prefixes a JSON body (or SSE frame) may be wrapped in (``response.``)."""
    sse_envelope = False
    """SSE frames too may come in the envelope (Gemini CLI / Antigravity)."""
    item_starts: tuple[str, ...] = ()
    """JSON bodies: paths whose objects' starts :meth:`on_json_start` is told of (to
    count candidates or choices)."""
    repeats: dict[str, bytes] = {}  # noqa: RUF012 - a per-instance default (mypyc), read only
    """SSE events that only repeat what earlier events said (an item's or a part's whole
    text or arguments once its deltas are over), by SSE event name, each with how its data
    starts when its JSON ``type`` is that name (its first key, as the providers write it):
    such an event is counted and not parsed, since :meth:`on_event` reads nothing of it
    (its JSON is then not checked: a broken one is not among the ``bad``). One whose data
    starts otherwise goes the full path."""
    repeat_lines: dict[bytes, bytes] = {}  # noqa: RUF012 - a per-instance default (mypyc), read only
    """:attr:`repeats` for :meth:`_repeat` (made once per class, :func:`_repeat_lines`): the
    SSE name's bytes -> the rest of its ``event:`` line and how its ``data:`` line starts."""
    model_key = ""
    """The key whose string the full path takes as :attr:`model` from every delta it reads
    (Gemini ``modelVersion``, chat ``model``): a skimmed delta sets it too (its layout's
    literal), so the usage names the same model whatever the chunking."""

    def __init__(self, json_body: bool = False) -> None:
        self.framing = "json" if json_body else "sse"
        self.model = ""
        self._sse: SseParser | None = None if json_body else SseParser()
        self._jevents: Any = None
        self._jcoro: Any = None
        self._build: tuple[str, Any] | None = None  # (prefix, ObjectBuilder) of the item being read
        self._jstarted = False
        self._jdone = False
        if json_body:
            self._jevents = ijson.sendable_list()
            self._jcoro = ijson.parse_coro(self._jevents, use_float=True)
        self.finish: str | None = None
        self.says: Outcome | None = None
        self.usage: UpstreamUsage | None = None
        self.errors: list[str] = []
        self.events = 0
        self.bad = 0
        self.decided = False
        """The decisive event passed (the finish with its usage, an error, a terminal)."""
        self.ended: Ending | None = None
        self.stopped: str | None = None
        """Why the decoder stopped reading (its own failure); the bytes went on."""
        self.partial = False
        """The body ended inside an event (SSE) or a JSON value."""
        self.done = False
        """``[DONE]`` came: the provider's own end of stream."""
        self.declined = False
        """An OpenAI refusal came in content (:attr:`CallResult.declined`)."""
        self._text = _Digest()
        self._args = _Digest()
        self.skimming = True
        """Read the common deltas without a JSON parse (:meth:`learn`); False: parse all."""
        self.skimmed = 0
        self.fused = True
        """Match the usual delta layouts with :class:`_Fast` (False: every layout with
        :meth:`wire.skim.Layout.match`; the same facts, the tests compare the two)."""
        self._skim = Skim()
        self._ev: Event | None = None  # the event the full path is on (SSE)
        self._top: Any = None  # its parsed object, before an envelope is taken off
        self._pre: tuple[Any, ...] = ()  # the envelope's key path ("response",) or ()
        self._cr = False  # a CR at the end of the last read (its LF may follow)
        self._crs = False  # a read held a CR (then :meth:`_one` is not tried)
        self._skip: list[bytes] | None = None
        """The reads of a repeat whose ``data:`` line ran past its read (:meth:`_repeat`),
        skipped to its end without the parser (:meth:`_skip_on`), kept by reference for it
        in case the event ends some other way; the first from :attr:`_skip_at`."""
        self._skip_at = 0
        self._skip_lf = False  # the skipped line ended with the last read: a blank line may follow

    # --- input ------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
        if self.stopped is not None or not chunk or self.ended is not None:
            return
        try:
            if self._sse is not None:
                self._feed_sse(chunk)
            else:
                self._json_feed(chunk)
        except Exception as e:  # noqa: BLE001 - a decoder never breaks the stream it reads
            self.stopped = f"{self.provider} decoder failed: {type(e).__name__}"

    def _feed_sse(self, chunk: bytes) -> None:
        """A read of an SSE body: CR line ends made LF (the decoder re-emits nothing, so
        only the events matter: Google frames with CRLF, and the parser's fast path and
        the learned layouts are LF), events of a learned layout read without a parse, the
        rest through the parser and the full path."""
        if self._skip is not None:  # a repeat begun in an earlier read, skipped to its end
            pos = self._skip_on(chunk)
            if pos < 0 or pos >= len(chunk):
                return
            if pos:
                chunk = chunk[pos:]
        if not self._crs and self._one(chunk):
            return
        if self._cr or 13 in chunk:
            self._crs = True  # (a stream with CRs, Google's: its reads go the CR way first)
            if self.skimming and self._skim.active:
                pos = 0
                parser = self._sse
                assert parser is not None
                if self._cr or not parser.idle():
                    # the read ends an event begun before it (every read but the first of a
                    # stream whose reads are not its events): that much the LF way, the
                    # rest skimmed in CRLF as a read of whole events is
                    e = chunk.find(b"\r\n\r\n")
                    if 0 <= e and e + 4 < len(chunk):
                        pos = e + 4
                        self._feed_lf(self._lf(chunk[:pos]))  # (no CR left over: it ends CR LF)
                if not self._cr:
                    pos = self._skim_crlf(chunk, pos)
                if pos:
                    if pos >= len(chunk):
                        return
                    chunk = chunk[pos:]
            head = chunk[:-4] if not self._cr and chunk.endswith(b"\r\n\r\n") else None
            if head is not None and 13 not in head:
                # one event in Google's CRLF framing and no other CR: what _lf makes of
                # it (bytes.find and replace parse their arguments: dearer than the event)
                chunk = head + b"\n\n"
            else:
                chunk = self._lf(chunk)
                if not chunk:
                    return
        self._feed_lf(chunk)

    def _feed_lf(self, chunk: bytes) -> None:
        """A read in LF framing holding no CR (:meth:`_feed_sse`'s, CR line ends made LF, so
        the parser stays on its fast path): each event a learned layout reads, read
        without a parse, any other through the full path."""
        parser = self._sse
        assert parser is not None
        skim = self._skim
        # event by event once a layout is learned, and in the first read, whose first
        # events teach the layouts that serve the rest of it (a 16 KiB read holds ~100):
        # an event no layout reads goes the full way alone, so that a layout learned on
        # it serves the next (the parser makes the same events of bytes in any cuts)
        if not self.skimming or not (parser.fast() and skim.active or parser.start(chunk)):
            self._parse(chunk)
            return
        n = len(chunk)
        pos = 0
        if not parser.idle():  # an event begun in an earlier read: the parser ends it first
            pos = parser.seam(chunk)
            if pos < 0:
                self._parse(chunk)
                return
            if not self._seamed(chunk, pos):
                self._parse(chunk[:pos] if pos < n else chunk)
            if pos >= n:
                return
        layouts = skim.layouts
        misses = 0
        split = False
        while pos < n:
            # Skim.match's loop, its Skimmed left out (the decoder reads one string)
            layout: Layout | None = None
            spans: list[int] | None = None
            span: bytes | None = None
            start = -1
            stop = 0
            kind = 0
            for known in layouts:
                r0: _Read | None = known.info
                f = r0.fast if r0 is not None else None
                if f is not None:
                    start = f.take(chunk, pos)
                    if start < 0:
                        continue
                    span = f.span
                    kind = f.kind
                    stop = f.stop
                    layout = known
                    break
                spans = known.match(chunk, pos)
                if spans is not None:
                    layout = known
                    break
            if layout is not None:
                layout.hits += 1
                r: _Read | None = layout.info
                if span is not None and r is not None:  # the fused match: one string, chunk[start:stop]
                    if self._read_string(r, chunk, start, stop, span, kind):
                        if r.model is not None:
                            self.model = r.model
                        self.events += 1
                        self.skimmed += 1
                        misses = 0
                        pos = stop + len(layout.pieces[-1])  # the event's end
                        if not split and pos < n and layout is layouts[0] and r.fast is not None:
                            split = True  # (once a read: a split that serves no event is not made again)
                            pos = self._run_of(chunk, pos, layout, r, r.fast, BLANK_LF)
                        continue
                elif spans is not None:
                    ok = True
                    if r is not None:
                        try:
                            raw = _holes(chunk, spans, r)
                            if raw:
                                (self._args if r.args else self._text).add(raw)
                        except ValueError:
                            ok = False
                        if ok and r.model is not None:
                            self.model = r.model
                    if ok:
                        self.events += 1
                        self.skimmed += 1
                        misses = 0
                        pos = spans[-1] + len(layout.pieces[-1])  # the event's end
                        continue
                # a string the check refused: the full path fails on it the same way (a bad event, counted)
            else:
                if self.repeats:
                    end = self._repeat(chunk, pos)
                    if end > 0:
                        self.events += 1  # (what _frame does of it)
                        pos = end
                        continue
                    if end < 0 and not self._crs:  # it goes on past this read: skipped to its end
                        self._skip = [chunk]  # (kept by reference: the parser's if the skip ends otherwise)
                        self._skip_at = pos
                        self._skip_lf = end == REPEAT_LF
                        return
                misses += 1
                if misses > MAX_MISSES:  # events that keep no layout: the parser takes the rest
                    self._parse(chunk[pos:] if pos else chunk)
                    return
            end = parser.seam(chunk, pos)  # this one event the full way
            if end < 0 or end >= n:
                self._parse(chunk[pos:] if pos else chunk)
                return
            self._parse(chunk[pos:end])  # (the parser between events after it: the read holds no CR)
            pos = end

    def _seamed(self, chunk: bytes, pos: int) -> bool:
        """The event the parser holds unfinished, which ``chunk[:pos]`` ends (:meth:`SseParser.seam`),
        read as :meth:`_one` reads a read when it is the newest layout's usual event (its
        bytes joined once, up to :data:`wire.sse.SEAMED_MAX`): True, and the parser is between
        events again, as after it (:meth:`SseParser.taken`); False: nothing done (the
        parser ends it). Every read of many events but the first cuts one."""
        parser = self._sse
        layouts = self._skim.layouts
        if parser is None or not layouts:
            return False
        layout = layouts[0]
        r: _Read | None = layout.info
        event = parser.pending(chunk, pos) if r is not None else None
        if r is None or event is None:
            return False
        f = r.fast
        if f is not None:
            raw = event_string(event, f.first, f.mids, f.last)
            if raw is None:
                return False
        else:  # (fused off: Layout.match's way, as the loop's)
            spans = layout.match(event, 0)
            if spans is None or spans[-1] + len(layout.pieces[-1]) != len(event):
                return False
            try:
                raw = _holes(event, spans, r)
            except ValueError:
                return False
        parser.taken()
        return self._took(layout, r, raw)

    def _one(self, chunk: bytes) -> bool:
        """The read is one event of the newest layout, in LF framing, its string holding no
        CR (then the read holds none: a layout's pieces and digits hold none), read as the
        first step of :meth:`_feed_sse`'s loop would read it, without first asking whether
        the read holds a CR. False: nothing done (the read goes the whole way)."""
        parser = self._sse
        skim = self._skim
        if not self.skimming or not skim.active or parser is None or not skim.layouts:
            return False
        layout = skim.layouts[0]
        r: _Read | None = layout.info
        f = r.fast if r is not None else None
        if r is None or f is None or not parser.fast() or not parser.idle():
            return False
        # the match and the string in one call (wire/fastread.py: in C in the compiled core);
        # a string it decodes holds no raw LF or CR (orjson refuses them), nor does the read
        raw = event_string(chunk, f.first, f.mids, f.last)
        if raw is None:
            return False  # (the whole way reads it, and fails on it as the full path does)
        return self._took(layout, r, raw)

    def _took(self, layout: Layout, r: _Read, raw: bytes) -> bool:
        """One event of ``layout`` read whole (:meth:`_one`, :meth:`_seamed`), ``raw`` its
        string's UTF-8: counted and hashed as the loop does. True."""
        layout.hits += 1
        if raw and r.slot >= 0:
            (self._args if r.args else self._text).add(raw)
        if r.model is not None:
            self.model = r.model
        self.events += 1
        self.skimmed += 1
        return True

    def _repeat(self, chunk: bytes, pos: int) -> int:
        """The end of the event at ``pos`` when it is one of :attr:`repeats` as the providers
        write it, ``event: NAME`` and one ``data:`` line starting with its JSON type, ended
        by a blank line in this read (what :meth:`_frame` counts and does not parse, without
        the parser's copy of it); :data:`REPEAT_ON` when it is such an event whose ``data:``
        line goes on past this read, :data:`REPEAT_LF` when the line ends with the read (its
        blank line may follow: :meth:`_skip_on` reads on); else 0 (the parser reads it)."""
        if not chunk.startswith(b"event: ", pos):
            return 0
        nl = chunk.find(b"\n", pos + 7)
        if nl < 0:
            return 0
        want = self.repeat_lines.get(chunk[pos + 7 : nl])
        if want is None or not chunk.startswith(want, nl):
            return 0
        e = chunk.find(b"\n", nl + len(want))
        if e < 0:
            return REPEAT_ON
        if e + 1 >= len(chunk):
            return REPEAT_LF
        if chunk[e + 1] != 10:
            return 0
        return e + 2

    def _skip_on(self, chunk: bytes) -> int:
        """A read after one that began a repeat whose ``data:`` line it did not end
        (:attr:`_skip`): where in ``chunk`` the event ends as :meth:`_repeat` would have
        ended it in one read (the line's LF, then a blank line), the event counted; -1 when
        it goes on past this read too. Anything else (a CR, another line after the data)
        hands the bytes kept back to the parser first, as if they had been parsed all
        along (0: the read then goes its usual way)."""
        kept = self._skip
        assert kept is not None
        if 13 not in chunk:
            if self._skip_lf:
                if chunk[0] == 10:
                    self._skip = None
                    self.events += 1  # (what _frame does of it)
                    return 1
            else:
                e = chunk.find(b"\n")
                if e < 0:
                    kept.append(chunk)
                    return -1
                if e + 1 >= len(chunk):
                    kept.append(chunk)
                    self._skip_lf = True
                    return -1
                if chunk[e + 1] == 10:
                    self._skip = None
                    self.events += 1
                    return e + 2
        self._unskip()
        return 0

    def _unskip(self) -> None:
        """The bytes of the repeat being skipped to the parser, as they came."""
        kept = self._skip
        if kept is not None:
            self._skip = None
            kept[0] = kept[0][self._skip_at :]
            self._parse(b"".join(kept))

    def _skim_crlf(self, chunk: bytes, pos: int) -> int:
        """The events of a read in CRLF framing that the learned layouts' CRLF forms match,
        read off the raw bytes as the LF loop of :meth:`_feed_sse` reads them once CR LF
        is LF (the same layouts in the same order, the same checks), without the copy,
        from ``pos`` (where the parser is between events): the offset after the last one
        (``pos``: none). An event whose string fails its check
        is left to the LF way, which reads it as before (its match not counted here)."""
        parser = self._sse
        if parser is None or not parser.fast() or not parser.idle():
            return pos
        n = len(chunk)
        layouts = self._skim.layouts
        split = False
        while pos < n:
            layout: Layout | None = None
            spans: list[int] | None = None
            span: bytes | None = None
            start = -1
            stop = 0
            kind = 0
            for known in layouts:
                r0: _Read | None = known.info
                if r0 is None:
                    return pos  # (no CRLF form: the LF way tries this one first)
                f = r0.crfast
                if f is not None:
                    start = f.take(chunk, pos)
                    if start < 0:
                        continue
                    span = f.span
                    kind = f.kind
                    stop = f.stop
                    layout = known
                    break
                spans = r0.cr.match(chunk, pos)
                if spans is not None:
                    layout = known
                    break
            if layout is None:
                # the fused match's search is LF's: an event of a CRLF read that does not end
                # the read is read here only by a split at its blank lines (once a read)
                r1: _Read | None = layouts[0].info if layouts and not split else None
                f1 = r1.crfast if r1 is not None else None
                if r1 is None or f1 is None:
                    return pos
                split = True
                at = self._run_of(chunk, pos, layouts[0], r1, f1, BLANK_CRLF)
                if at == pos:
                    return pos
                pos = at
                continue
            r: _Read | None = layout.info
            assert r is not None
            if span is not None:  # the fused match: one string, chunk[start:stop]
                if not self._read_string(r, chunk, start, stop, span, kind):
                    return pos
                layout.hits += 1
                if r.model is not None:
                    self.model = r.model
                self.events += 1
                self.skimmed += 1
                pos = stop + len(r.cr.pieces[-1])  # (the read's end: a CRLF match has no search)
                continue
            if spans is None:
                return pos
            try:
                raw = _holes(chunk, spans, r)
            except ValueError:
                return pos
            layout.hits += 1
            if raw:
                (self._args if r.args else self._text).add(raw)
            if r.model is not None:
                self.model = r.model
            self.events += 1
            self.skimmed += 1
            pos = spans[-1] + len(r.cr.pieces[-1])
        return pos

    def _run_of(self, chunk: bytes, pos: int, layout: Layout, r: _Read, f: _Fast, blank: bytes) -> int:
        """The run of events from ``pos`` (the parser between events) that are each the usual
        event of ``layout``, the newest (``f``: its fused match in this framing, ``blank``
        its blank line): the rest of the read split once at its blank lines (one call,
        where a search per event costs a method call's argument parsing), each part read
        by :func:`~wire.fastread.event_string` as :meth:`_one` reads a read (a part is the
        event without its blank line, which holds no other: the same string, the same
        answer). The offset after the run (``pos``: none); the first part it does not
        read goes the caller's way, as does the unfinished tail."""
        parts = chunk[pos:].split(blank)
        first = f.first
        mids = f.mids
        body = f.body
        digest = self._args if r.args else self._text
        hashed = r.slot >= 0
        k = len(blank)
        got = 0
        for i in range(len(parts) - 1):  # (the last part: what follows the read's last blank line)
            part = parts[i]
            raw = event_string(part, first, mids, body)
            if raw is None:
                break
            if raw and hashed:
                digest.add(raw)
            pos += len(part) + k
            got += 1
        if got:
            layout.hits += got
            self.events += got
            self.skimmed += got
            if r.model is not None:
                self.model = r.model
        return pos

    def _read_string(self, r: _Read, chunk: bytes, start: int, end: int, span: bytes, kind: int) -> bool:
        """The string of a fused match (``span``, ``chunk[start:end]``; ``kind``: its
        :func:`_kind`) checked and hashed as :func:`_hole` does: False where the full
        path's parse fails."""
        raw = span
        try:
            if kind == 2:
                raw = _escaped(chunk, start, end, span)
            elif kind == 1:
                span.decode("utf-8")  # strict: what orjson rejects as UTF-8 raises
        except ValueError:
            return False
        if raw and r.slot >= 0:
            (self._args if r.args else self._text).add(raw)
        return True

    def _lf(self, chunk: bytes) -> bytes:
        """CR line ends made LF (a CR at the end kept for the next read: its LF may follow)."""
        if self._cr:
            chunk = b"\r" + chunk
        cr = chunk[-1] == 13  # a CR whose LF may come in the next read
        self._cr = cr
        if cr:
            chunk = chunk[:-1]
        chunk = chunk.replace(b"\r\n", b"\n")
        if 13 in chunk:  # CR alone as a line end (rare)
            chunk = chunk.replace(b"\r", b"\n")
        return chunk

    def _parse(self, chunk: bytes) -> None:
        """Bytes through the parser, each complete event through the full path."""
        parser = self._sse
        assert parser is not None
        for ev in parser.feed(chunk):
            if ev.complete and ev.data is not None:
                self._ev = ev
                self._frame(ev.event, ev.data)
        self._ev = None

    def _frame(self, event: str | None, data: bytes) -> None:
        d = data.strip()
        if not d:
            return
        self.events += 1
        if d == b"[DONE]":
            self.on_done()
            return
        if event is not None and self.repeats:
            head = self.repeats.get(event)
            if head is not None and d.startswith(head):
                return  # (a copy of what the deltas said, its type the event's name: nothing to read)
        try:
            obj = orjson.loads(d)
        except orjson.JSONDecodeError:
            self.bad += 1
            return
        if not isinstance(obj, dict):
            if isinstance(obj, list):  # a JSON array frame (Gemini without alt=sse): each element
                for o in obj:
                    if isinstance(o, dict):
                        self.on_event(event, self._unwrap(o))
                return
            self.bad += 1
            return
        self._top = obj
        inner = self._unwrap(obj) if self.sse_envelope else obj
        self._pre = ("response",) if inner is not obj else ()
        self.on_event(event, inner)
        self._top = None

    def _unwrap(self, obj: dict[str, Any]) -> dict[str, Any]:
        for env in self.envelopes:
            inner = obj.get(env.rstrip("."))
            if isinstance(inner, dict) and "error" not in obj:
                return inner
        return obj

    def _json_feed(self, chunk: bytes) -> None:
        if self._jdone:
            return
        try:
            self._jcoro.send(chunk)
        except ijson.JSONError:
            self._json_bad()
            return
        self._json_events()

    def _json_bad(self) -> None:
        """The body is not (or stops being) JSON: what was read before counts, the rest is
        not read, and the call did not end as a JSON body (a cut, whatever the chunking)."""
        self._json_events()
        self.bad += 1
        self.partial = True
        self._jdone = True

    def _json_events(self) -> None:
        evs = self._jevents
        if not evs:
            return
        self._jstarted = True
        for prefix, event, value in evs:
            self._json_event(prefix, event, value)
        del evs[:]

    def _json_event(self, prefix: str, event: str, value: Any) -> None:
        if self._build is not None:
            bprefix, builder = self._build
            builder.event(event, value)
            if prefix == bprefix and event in ("end_map", "end_array"):
                self._build = None
                self._json_item(bprefix, builder.value)
            return
        path = prefix
        for env in self.envelopes:
            if path == env[:-1]:
                return  # the envelope itself
            if path.startswith(env):
                path = path[len(env) :]
                break
        path = path.removeprefix("item.")
        if event == "start_map" and path in self.item_starts:
            self.on_json_start(path)
        if path not in self.json_items:
            return
        if event in ("start_map", "start_array"):
            builder = ObjectBuilder()
            builder.event(event, value)
            self._build = (prefix, builder)
        elif event not in ("map_key", "end_map", "end_array"):
            self._json_item(prefix, value)

    def _json_item(self, prefix: str, value: Any) -> None:
        path = prefix
        for env in self.envelopes:
            if path.startswith(env):
                path = path[len(env) :]
                break
        path = path.removeprefix("item.")
        self.events += 1
        self.on_json(path, value)

    # --- skimming: the common deltas without a JSON parse (wire/skim.py) -------------
    def learn(
        self, kind: str, obj: Any, holes: frozenset[tuple[Any, ...]], read: tuple[Any, ...] | None, args: bool
    ) -> None:
        """The event just parsed is a pure delta: learn its layout (``holes``: the values
        that change from event to event; ``read``: the hole whose string is hashed, as
        arguments when ``args``; None: nothing is hashed, e.g. thinking), so that the next
        events of that layout are read without a parse (:meth:`_feed_sse`). Only what the
        full path records of such an event is recorded of a skimmed one."""
        ev = self._ev
        if ev is None or not self.skimming:
            return
        top = self._top if self._top is not None else obj
        pre = self._pre
        layout = self._skim.learn(kind, ev.raw, ev.data, ev.event, top, frozenset(pre + h for h in holes))
        if layout is not None and layout.info is None:
            slot = layout.slot(*(pre + read)) if read is not None else -1
            if slot >= 0 and layout.holes[slot] != "s":
                slot = -1  # (a number where the text goes: the full path hashes nothing of it)
            m = layout.consts.get(pre + (self.model_key,)) if self.model_key else None
            r = _Read(slot, args, layout.strings(slot), _crlf(layout), m if isinstance(m, str) else None)
            if self.fused:
                r.fast = _Fast.of(layout, slot)
                r.crfast = _Fast.of(r.cr, slot)
            layout.info = r

    # --- what subclasses call ------------------------------------------------------
    def text(self, s: Any) -> None:
        if isinstance(s, str) and s:
            self._text.add(_utf8(s))

    def args(self, s: Any) -> None:
        if isinstance(s, str) and s:
            self._args.add(_utf8(s))
        elif isinstance(s, (dict, list)):
            self._args.add(orjson.dumps(s))

    def set_finish(self, value: str, says: Outcome | None) -> None:
        self.finish = value
        self.says = says

    def error(self, err: Any) -> None:
        self.errors.append(_error_tag(err))
        self.decided = True

    # --- per provider ------------------------------------------------------------------
    def on_event(self, event: str | None, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def on_done(self) -> None:
        """``data: [DONE]`` (or Interactions' ``event: done``): the provider says its stream
        is over, so the decision, whatever it is, is known; without a finish before it the
        call ended without one."""
        self.done = True
        self.decided = True

    def on_json(self, path: str, value: Any) -> None:
        raise NotImplementedError

    def on_json_start(self, path: str) -> None:
        """A JSON body: an object at one of :attr:`item_starts` begins."""

    def on_close(self) -> None:
        """The body ended: whatever a provider finalizes then (JSON bodies)."""

    # --- output -------------------------------------------------------------------------
    def close(self, cut: bool = False) -> CallResult:
        """End of the body (idempotent): ``cut`` when the connection failed before it."""
        if self.ended is None:
            try:
                if self._sse is not None:
                    self._unskip()  # (a repeat the body ended in: the parser says what it was)
                    if self._cr:
                        self._cr = False
                        self._feed_sse(b"\n")
                    for ev in self._sse.close():
                        if ev.complete and ev.data is not None:
                            self._frame(ev.event, ev.data)
                        elif ev.data is not None and ev.data.strip():
                            # the body stopped before the event's blank line: a whole JSON
                            # line is still read (CPA's line scanner does), half of one is a cut
                            try:
                                orjson.loads(ev.data)
                            except orjson.JSONDecodeError:
                                self.partial = True
                            else:
                                self._frame(ev.event, ev.data)
                elif not self._jdone:
                    try:
                        self._jcoro.close()
                        self._json_events()
                    except ijson.JSONError:
                        self._json_bad()
                if self.stopped is None:
                    self.on_close()
            except Exception as e:  # noqa: BLE001 - fail open
                self.stopped = self.stopped or f"{self.provider} decoder failed: {type(e).__name__}"
            if (cut and not self.done) or self.partial:  # after its [DONE] the provider cut nothing
                self.ended = "cut"
            else:
                self.ended = "finish" if self.finish is not None else "no_finish"
        return self.result()

    def digest(self) -> tuple[str, int, str, int]:
        return (self._text.hexdigest(), self._text.size, self._args.hexdigest(), self._args.size)

    def result(self) -> CallResult:
        ended = self.ended
        if ended is None and self.done:  # the provider's [DONE]: its stream is over, body end or not
            ended = "finish" if self.finish is not None else "no_finish"
        return CallResult(
            provider=self.provider,
            finish=self.finish,
            finish_field=self.finish_field,
            says=self.says,
            usage=self.usage,
            errors=tuple(self.errors),
            ended=ended,
            digest=self.digest(),
            events=self.events,
            bad=self.bad,
            framing=self.framing,
            declined=self.declined,
        )


# --- Gemini generateContent ------------------------------------------------------------


class GeminiDecoder(CallDecoder):
    """``GenerateContentResponse`` frames (SSE) or one body (JSON), plain or in the Gemini
    CLI / Antigravity ``{"response": ...}`` envelope."""

    provider = "gemini"
    finish_field = "finishReason"
    model_key = "modelVersion"
    envelopes: tuple[str, ...] = ("response.",)
    sse_envelope = True
    item_starts: tuple[str, ...] = ("candidates.item", "item")
    """A candidate's start (counted), and an element's of the JSON array that
    ``:streamGenerateContent`` answers without ``alt=sse`` (each element a chunk of its own,
    whose candidates are counted from 0 again)."""
    json_items: tuple[str, ...] = (
        "candidates.item.content.parts.item",
        "candidates.item.finishReason",
        "usageMetadata",
        "promptFeedback",
        "error",
        "modelVersion",
    )

    def __init__(self, json_body: bool = False) -> None:
        super().__init__(json_body)
        self.model = ""
        self._candidate = -1  # JSON: the candidate being read (only the first is hashed)

    def on_event(self, event: str | None, obj: dict[str, Any]) -> None:
        err = obj.get("error")
        if err is not None:
            self.error(err)
            return
        pure = self._pure(obj)
        if pure is not None:
            # a text (or thought) delta: hashed, its layout learned; the usageMetadata a
            # Gemini stream carries in each chunk counts from the finishing chunk (the first
            # is read: a call cut before its finish keeps its prompt count)
            part = pure[0]
            if not part.get("thought"):
                self.text(part.get("text"))
            if self.usage is None and isinstance(obj.get("usageMetadata"), dict):
                self._usage(obj["usageMetadata"])
            if isinstance(obj.get("modelVersion"), str):
                self.model = obj["modelVersion"]
            thought = bool(part.get("thought"))
            self.learn("thought" if thought else "text", obj, _GEMINI_HOLES, None if thought else _GEMINI_TEXT, False)
            return
        cands = obj.get("candidates")
        if isinstance(cands, list):
            for c in cands:
                if not isinstance(c, dict) or c.get("index", 0) not in (0, None):
                    continue
                content = c.get("content")
                parts = content.get("parts") if isinstance(content, dict) else None
                if isinstance(parts, list):
                    for p in parts:
                        self._part(p)
                fr = c.get("finishReason")
                if isinstance(fr, str) and fr:
                    self.set_finish(fr, GEMINI_FINISH.get(fr, "unknown"))
        pf = obj.get("promptFeedback")
        if isinstance(pf, dict) and isinstance(pf.get("blockReason"), str) and self.finish is None:
            self.finish_field = "promptFeedback.blockReason"
            self.set_finish(pf["blockReason"], GEMINI_BLOCK)
        um = obj.get("usageMetadata")
        if isinstance(um, dict):
            self._usage(um)
        mv = obj.get("modelVersion")
        if isinstance(mv, str):
            self.model = mv
        if self.finish is not None and self.usage is not None:
            self.decided = True

    @staticmethod
    def _pure(obj: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The parts of a chunk that is one text delta of one candidate, nothing else that
        counts (no finish, no call, no block, no error); else None."""
        cands = obj.get("candidates")
        if not isinstance(cands, list) or len(cands) != 1 or "promptFeedback" in obj:
            return None
        c = cands[0]
        if not isinstance(c, dict) or c.get("index", 0) != 0 or c.get("finishReason") is not None:
            return None
        content = c.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list) or len(parts) != 1:
            return None
        p = parts[0]
        if not isinstance(p, dict) or not isinstance(p.get("text"), str) or set(p) - {"text", "thought"}:
            return None
        return parts

    def _part(self, p: Any) -> None:
        if not isinstance(p, dict):
            return
        if "text" in p and not p.get("thought"):
            self.text(p.get("text"))
        fc = p.get("functionCall")
        if isinstance(fc, dict) and fc.get("args") is not None:
            self.args(fc.get("args"))

    def _usage(self, um: dict[str, Any]) -> None:
        prompt = _n(um.get("promptTokenCount"))
        cand = _n(um.get("candidatesTokenCount"))
        thoughts = _n(um.get("thoughtsTokenCount"))
        total = _n(um.get("totalTokenCount")) or prompt + cand + thoughts
        self.usage = UpstreamUsage(
            input_tokens=prompt,
            output_tokens=cand + thoughts,
            cached_tokens=_n(um.get("cachedContentTokenCount")),
            total_tokens=total,
            model=self.model,
            source="usageMetadata",
            reasoning_tokens=thoughts,
            authoritative=True,
        )

    def on_json_start(self, path: str) -> None:
        self._candidate = -1 if path == "item" else self._candidate + 1

    def on_json(self, path: str, value: Any) -> None:
        if path == "candidates.item.content.parts.item":
            if self._candidate <= 0:
                self._part(value)
        elif path == "candidates.item.finishReason":
            if self._candidate <= 0 and isinstance(value, str) and value:
                self.set_finish(value, GEMINI_FINISH.get(value, "unknown"))
        elif path == "usageMetadata" and isinstance(value, dict):
            self._usage(value)
        elif path == "modelVersion" and isinstance(value, str):
            self.model = value
        elif path == "error":
            self.error(value)
        elif path == "promptFeedback" and isinstance(value, dict):
            self.on_event(None, {"promptFeedback": value})

    def on_close(self) -> None:
        if self.usage is not None and self.model and not self.usage.model:
            self.usage = replace(self.usage, model=self.model)


# --- Gemini Interactions ---------------------------------------------------------------


class InteractionsDecoder(CallDecoder):
    """Interactions events (SSE) or one Interaction (JSON)."""

    provider = "interactions"
    finish_field = "status"
    envelopes: tuple[str, ...] = ("interaction.",)
    json_items: tuple[str, ...] = ("steps.item", "outputs.item", "status", "usage", "error", "model")

    def __init__(self, json_body: bool = False) -> None:
        super().__init__(json_body)
        self.model = ""

    def on_event(self, event: str | None, obj: dict[str, Any]) -> None:
        kind = obj.get("event_type")
        if kind == "step.delta":
            d = obj.get("delta")
            if isinstance(d, dict):
                t = d.get("type")
                if t == "text":
                    self.text(d.get("text"))
                    self.learn("text", obj, _INTERACTIONS_HOLES, ("delta", "text"), False)
                elif t == "arguments_delta":
                    self.args(d.get("arguments"))
                    self.learn("args", obj, _INTERACTIONS_HOLES, ("delta", "arguments"), True)
                elif t == "thought_summary":
                    self.learn("thought", obj, _INTERACTIONS_HOLES, None, False)
        elif kind == "step.start":
            step = obj.get("step")
            if isinstance(step, dict) and step.get("type") == "function_call":
                a = step.get("arguments")
                if a not in (None, {}, ""):
                    self.args(a)
        elif kind in ("interaction.completed", "interaction.complete", "finish"):
            inter = obj.get("interaction")
            if isinstance(inter, dict):
                self._interaction(inter)
            self.decided = True
        elif kind == "interaction.created":
            inter = obj.get("interaction")
            if isinstance(inter, dict) and isinstance(inter.get("model"), str):
                self.model = inter["model"]
        elif kind == "interaction.status_update":
            st = obj.get("status")
            if st in ("failed", "cancelled", "incomplete", "budget_exceeded") and isinstance(st, str):
                self.set_finish(st, INTERACTIONS_STATUS[st])
        elif kind == "error" or event == "error" or ("error" in obj and kind is None):
            self.error(obj.get("error", obj))

    def _interaction(self, inter: dict[str, Any]) -> None:
        st = inter.get("status")
        if isinstance(st, str) and st and st != "in_progress":
            self.set_finish(st, INTERACTIONS_STATUS.get(st, "unknown"))
        if isinstance(inter.get("model"), str):
            self.model = inter["model"]
        u = inter.get("usage")
        if isinstance(u, dict):
            self._usage(u)
        if inter.get("error") is not None and st == "failed":
            self.error(inter["error"])

    def _usage(self, u: dict[str, Any]) -> None:
        inp = _n(u.get("total_input_tokens", u.get("input_tokens")))
        out = _n(u.get("total_output_tokens", u.get("output_tokens")))
        thoughts = _n(u.get("total_thought_tokens", u.get("reasoning_tokens")))
        total = _n(u.get("total_tokens")) or inp + out + thoughts
        self.usage = UpstreamUsage(
            input_tokens=inp,
            output_tokens=out + thoughts,
            cached_tokens=_n(u.get("total_cached_tokens", u.get("cached_tokens"))),
            total_tokens=total,
            model=self.model,
            source="interaction.usage",
            reasoning_tokens=thoughts,
            authoritative=True,
        )

    def on_json(self, path: str, value: Any) -> None:
        if path in ("steps.item", "outputs.item") and isinstance(value, dict):
            t = value.get("type")
            if t == "model_output" or t == "text":
                content = value.get("content")
                if isinstance(content, list):
                    for c in content:
                        if isinstance(c, dict) and c.get("type") == "text":
                            self.text(c.get("text"))
                elif t == "text":
                    self.text(value.get("text"))
            elif t == "function_call":
                a = value.get("arguments")
                if a is not None:
                    self.args(a)
        elif path == "status" and isinstance(value, str) and value != "in_progress":
            self.set_finish(value, INTERACTIONS_STATUS.get(value, "unknown"))
        elif path == "usage" and isinstance(value, dict):
            self._usage(value)
        elif path == "model" and isinstance(value, str):
            self.model = value
        elif path == "error":
            self.error(value)


# --- Anthropic Messages ------------------------------------------------------------------


class AnthropicDecoder(CallDecoder):
    """Messages SSE events or one Message (JSON)."""

    provider = "anthropic"
    finish_field = "stop_reason"
    json_items: tuple[str, ...] = ("content.item", "stop_reason", "usage", "error", "model", "type")

    def __init__(self, json_body: bool = False) -> None:
        super().__init__(json_body)
        self._in: dict[str, int] = {}
        self._out = 0
        self.model = ""

    def on_event(self, event: str | None, obj: dict[str, Any]) -> None:
        t = obj.get("type")
        if t == "content_block_delta":
            d = obj.get("delta")
            if isinstance(d, dict):
                dt = d.get("type")
                if dt == "text_delta":
                    self.text(d.get("text"))
                    self.learn("text", obj, _ANTHROPIC_HOLES, ("delta", "text"), False)
                elif dt == "input_json_delta":
                    self.args(d.get("partial_json"))
                    self.learn("args", obj, _ANTHROPIC_HOLES, ("delta", "partial_json"), True)
                elif dt == "thinking_delta":
                    self.learn("thinking", obj, _ANTHROPIC_HOLES, None, False)
        elif t == "message_start":
            m = obj.get("message")
            if isinstance(m, dict):
                if isinstance(m.get("model"), str):
                    self.model = m["model"]
                if isinstance(m.get("usage"), dict):
                    self._usage(m["usage"])
        elif t == "message_delta":
            d = obj.get("delta")
            sr = d.get("stop_reason") if isinstance(d, dict) else None
            if isinstance(sr, str) and sr:
                self.set_finish(sr, ANTHROPIC_STOP.get(sr, "unknown"))
            if isinstance(obj.get("usage"), dict):
                self._usage(obj["usage"])
            if self.finish is not None:
                self.decided = True
        elif t == "message_stop":
            self.decided = True
        elif t == "error" or event == "error":
            self.error(obj.get("error", obj))

    def _usage(self, u: dict[str, Any]) -> None:
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            if k in u and u[k] is not None:
                self._in[k] = _n(u[k])
        if u.get("output_tokens") is not None:
            self._out = _n(u["output_tokens"])  # cumulative: the last one counts
        inp = sum(self._in.values())
        self.usage = UpstreamUsage(
            input_tokens=inp,
            output_tokens=self._out,
            cached_tokens=self._in.get("cache_read_input_tokens", 0),
            total_tokens=inp + self._out,
            model=self.model,
            source="usage",
            authoritative=True,
        )

    def on_json(self, path: str, value: Any) -> None:
        if path == "content.item" and isinstance(value, dict):
            if value.get("type") == "text":
                self.text(value.get("text"))
            elif value.get("type") == "tool_use":
                self.args(value.get("input"))
        elif path == "stop_reason" and isinstance(value, str):
            self.set_finish(value, ANTHROPIC_STOP.get(value, "unknown"))
        elif path == "usage" and isinstance(value, dict):
            self._usage(value)
        elif path == "model" and isinstance(value, str):
            self.model = value
        elif path == "error":
            self.error(value)


# --- OpenAI chat completions ----------------------------------------------------------------


class ChatDecoder(CallDecoder):
    """``chat.completion.chunk`` SSE or one ``chat.completion`` (JSON)."""

    provider = "openai_chat"
    finish_field = "finish_reason"
    model_key = "model"
    item_starts: tuple[str, ...] = ("choices.item",)
    json_items: tuple[str, ...] = ("choices.item.message", "choices.item.finish_reason", "usage", "error", "model")

    def __init__(self, json_body: bool = False) -> None:
        super().__init__(json_body)
        self.model = ""
        self._choice = -1

    def on_event(self, event: str | None, obj: dict[str, Any]) -> None:
        if obj.get("error") is not None:
            self.error(obj["error"])
            return
        if isinstance(obj.get("model"), str):
            self.model = obj["model"]
        choices = obj.get("choices")
        learn = _chat_pure(obj)
        if learn is not None:
            self.learn(learn[0], obj, _CHAT_HOLES, learn[1], learn[0] == "args")
        if isinstance(choices, list):
            for ch in choices:
                if not isinstance(ch, dict) or ch.get("index", 0) not in (0, None):
                    continue
                d = ch.get("delta")
                if isinstance(d, dict):
                    self.text(d.get("content"))
                    if d.get("refusal"):  # (never a pure delta: not skimmed)
                        self.declined = True
                    tcs = d.get("tool_calls")
                    if isinstance(tcs, list):
                        for tc in tcs:
                            f = tc.get("function") if isinstance(tc, dict) else None
                            if isinstance(f, dict):
                                self.args(f.get("arguments"))
                fr = ch.get("finish_reason")
                if isinstance(fr, str) and fr:
                    self.set_finish(fr, CHAT_FINISH.get(fr, "unknown"))
        u = obj.get("usage")
        if isinstance(u, dict):
            self._usage(u)
        if self.finish is not None and self.usage is not None:
            # the finish and its usage (stream_options.include_usage: the chunk after the
            # finish) are the decision: CPA's OpenAI -> Claude translator writes message_delta
            # and message_stop on that chunk, before it reads [DONE]
            self.decided = True

    def _usage(self, u: dict[str, Any]) -> None:
        inp, out = _n(u.get("prompt_tokens")), _n(u.get("completion_tokens"))
        pd, cd = u.get("prompt_tokens_details"), u.get("completion_tokens_details")
        self.usage = UpstreamUsage(
            input_tokens=inp,
            output_tokens=out,
            cached_tokens=_n(pd.get("cached_tokens")) if isinstance(pd, dict) else 0,
            total_tokens=_n(u.get("total_tokens")) or inp + out,
            model=self.model,
            source="usage",
            reasoning_tokens=_n(cd.get("reasoning_tokens")) if isinstance(cd, dict) else 0,
            authoritative=True,
        )

    def on_json_start(self, path: str) -> None:
        self._choice += 1

    def on_json(self, path: str, value: Any) -> None:
        if path == "choices.item.message" and isinstance(value, dict) and self._choice <= 0:
            self.text(value.get("content"))
            if value.get("refusal"):
                self.declined = True
            tcs = value.get("tool_calls")
            if isinstance(tcs, list):
                for tc in tcs:
                    f = tc.get("function") if isinstance(tc, dict) else None
                    if isinstance(f, dict):
                        self.args(f.get("arguments"))
        elif path == "choices.item.finish_reason" and isinstance(value, str) and self._choice <= 0:
            self.set_finish(value, CHAT_FINISH.get(value, "unknown"))
        elif path == "usage" and isinstance(value, dict):
            self._usage(value)
        elif path == "model" and isinstance(value, str):
            self.model = value
        elif path == "error" and value is not None:
            self.error(value)


# --- OpenAI / Codex Responses -----------------------------------------------------------------


class ResponsesDecoder(CallDecoder):
    """Responses SSE events or one Response object (JSON)."""

    provider = "responses"
    finish_field = "status"
    repeats = _RESPONSES_REPEATS
    repeat_lines = _repeat_lines(_RESPONSES_REPEATS)
    json_items: tuple[str, ...] = ("output.item", "status", "incomplete_details", "usage", "error", "model")

    def __init__(self, json_body: bool = False) -> None:
        super().__init__(json_body)
        self.model = ""
        self._status = ""
        self._reason = ""

    def on_event(self, event: str | None, obj: dict[str, Any]) -> None:
        t = obj.get("type")
        if t == "response.output_text.delta":
            self.text(obj.get("delta"))
            self.learn(t, obj, _RESPONSES_HOLES, ("delta",), False)
        elif t == "response.function_call_arguments.delta":
            self.args(obj.get("delta"))
            self.learn(t, obj, _RESPONSES_HOLES, ("delta",), True)
        elif isinstance(t, str) and t.startswith("response.reasoning") and t.endswith(".delta"):
            self.learn(t, obj, _RESPONSES_HOLES, None, False)
        elif t == "response.refusal.delta":
            self.declined = self.declined or bool(obj.get("delta"))
        elif t in ("response.completed", "response.incomplete", "response.failed", "response.done"):
            r = obj.get("response")
            if isinstance(r, dict):
                self._response(r, t)
            self.decided = True
        elif t == "error" or event == "error":
            err = obj.get("error")
            self.error(err if isinstance(err, dict) else obj)
        elif t == "response.created" and isinstance(obj.get("response"), dict):
            m = obj["response"].get("model")
            if isinstance(m, str):
                self.model = m

    def _response(self, r: dict[str, Any], typ: str) -> None:
        if isinstance(r.get("model"), str):
            self.model = r["model"]
        st = r.get("status")
        status = st if isinstance(st, str) else typ.removeprefix("response.")
        if isinstance(r.get("usage"), dict):
            self._usage(r["usage"])
        if status == "failed" or typ == "response.failed":
            self.set_finish("failed", "failed")
            self.error(r.get("error") or {"code": "response.failed"})
            return
        det = r.get("incomplete_details")
        reason = det.get("reason") if isinstance(det, dict) else None
        if status == "incomplete":
            rs = reason if isinstance(reason, str) else ""
            self.set_finish(f"incomplete/{rs}" if rs else "incomplete", RESPONSES_INCOMPLETE.get(rs, "unknown"))
        elif status in ("completed", "done"):
            self.set_finish(status, "complete")
        elif status:
            self.set_finish(status, "unknown")

    def _usage(self, u: dict[str, Any]) -> None:
        inp, out = _n(u.get("input_tokens")), _n(u.get("output_tokens"))
        idt, odt = u.get("input_tokens_details"), u.get("output_tokens_details")
        self.usage = UpstreamUsage(
            input_tokens=inp,
            output_tokens=out,
            cached_tokens=_n(idt.get("cached_tokens")) if isinstance(idt, dict) else 0,
            total_tokens=_n(u.get("total_tokens")) or inp + out,
            model=self.model,
            source="response.usage",
            reasoning_tokens=_n(odt.get("reasoning_tokens")) if isinstance(odt, dict) else 0,
            authoritative=True,
        )

    def on_json(self, path: str, value: Any) -> None:
        if path == "output.item" and isinstance(value, dict):
            t = value.get("type")
            if t == "message":
                for c in value.get("content") or ():
                    if isinstance(c, dict) and c.get("type") == "output_text":
                        self.text(c.get("text"))
                    elif isinstance(c, dict) and c.get("type") == "refusal" and c.get("refusal"):
                        self.declined = True
            elif t == "function_call":
                self.args(value.get("arguments"))
        elif path == "status" and isinstance(value, str):
            self._status = value
        elif path == "incomplete_details" and isinstance(value, dict):
            self._reason = _s(value.get("reason"))
        elif path == "usage" and isinstance(value, dict):
            self._usage(value)
        elif path == "model" and isinstance(value, str):
            self.model = value
        elif path == "error" and value is not None:
            self.errors.append(_error_tag(value))

    def on_close(self) -> None:
        if self.framing == "json" and self._status:
            r: dict[str, Any] = {"status": self._status}
            if self._reason:
                r["incomplete_details"] = {"reason": self._reason}
            if self._status == "failed" and self.errors:
                self.set_finish("failed", "failed")
                return
            self._response(r, "response." + self._status)


# --- the stream callable ------------------------------------------------------------------


class CallTap:
    """``flow.response.stream`` for a provider response: every read returned as it came (the
    same object: the upstream body is never changed) and fed, decompressed by ``inflate``
    when it is encoded, to ``decoder``; ``on_decided()`` once, the moment the decoder's
    decisive event has passed (before CPA can read it), ``on_end()`` at the end of the body
    (mitmproxy's last call, ``b""``). Compiled with the decoders, so that mitmproxy calls
    no interpreted code per read. Never raises: a failure stops the reading
    (:attr:`failed`) and the reads still go out. ``keep``: the reads are kept in
    :attr:`chunks` (bodies kept for mitmweb and ``-w``)."""

    __slots__ = ("chunks", "decoder", "failed", "inflate", "keep", "on_decided", "on_end", "sent")

    def __init__(self, decoder: CallDecoder, inflate: Decoder | None, keep: bool, on_decided: Any, on_end: Any) -> None:
        self.decoder = decoder
        self.inflate = inflate
        self.keep = keep
        self.chunks: list[bytes] = []
        self.on_decided = on_decided
        self.on_end = on_end
        self.sent = False
        self.failed: str | None = None

    def __call__(self, chunk: bytes) -> bytes | list[bytes]:
        if not chunk:
            if self.failed is None and self.inflate is not None:
                try:
                    self.decoder.feed(self.inflate.flush())
                except Exception as e:  # noqa: BLE001 - never raise into mitmproxy
                    self.failed = f"{type(e).__name__}: {e}"
            self.on_end()
            return []
        if self.keep:
            self.chunks.append(chunk)
        if self.failed is None:
            try:
                d = self.decoder
                d.feed(chunk if self.inflate is None else self.inflate.decode(chunk))
                if d.decided and not self.sent:
                    self.sent = True
                    self.on_decided()
            except Exception as e:  # noqa: BLE001 - never raise into mitmproxy: the read goes on
                self.failed = f"{type(e).__name__}: {e}"
        return chunk


# --- which decoder ---------------------------------------------------------------------------

_DECODERS: dict[str, type[CallDecoder]] = {
    "gemini": GeminiDecoder,
    "interactions": InteractionsDecoder,
    "anthropic": AnthropicDecoder,
    "openai_chat": ChatDecoder,
    "responses": ResponsesDecoder,
}


def provider_for_path(path: str) -> str | None:
    """The provider wire of a request path (query ignored), as CPA's executors call them:
    ``.../models/M:streamGenerateContent`` / ``:generateContent`` and ``/v1internal:...``
    (Gemini, Vertex, Gemini CLI, Antigravity), ``.../interactions``, ``.../messages``
    (Anthropic; not ``count_tokens``), ``.../chat/completions``, ``.../responses`` (not
    ``/responses/compact``). None for anything else (token counts, model lists, OAuth)."""
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith((":streamGenerateContent", ":generateContent")):
        return "gemini"
    if p.endswith("/interactions"):
        return "interactions"
    if p.endswith("/messages"):
        return "anthropic"
    if p.endswith("/chat/completions"):
        return "openai_chat"
    if p.endswith("/responses"):
        return "responses"
    return None


def decoder_for(provider: str, content_type: str) -> CallDecoder | None:
    """A decoder for a provider response with this content type: SSE for
    ``text/event-stream``, JSON for ``application/json`` (and Gemini's JSON array
    stream); None for anything else (left alone)."""
    cls = _DECODERS.get(provider)
    if cls is None:
        return None
    ct = content_type.split(";", 1)[0].strip().lower()
    if ct == "text/event-stream":
        return cls(json_body=False)
    if ct in ("application/json", "text/json") or ct.endswith("+json"):
        return cls(json_body=True)
    return None


# --- the request side ----------------------------------------------------------------------


class ProviderRequest:
    """What the correlator needs of a provider request (the shape of
    :class:`wire.devin.RequestInfo`): its prompt texts, its output cap, its model."""

    __slots__ = ("max_tokens", "model", "prompts")

    def __init__(self, prompts: tuple[tuple[int, str], ...], max_tokens: int | None, model: str) -> None:
        self.prompts = prompts
        """(0, text) for every string of the request body, in order: the client's texts
        are among them wherever the provider's request shape puts them."""
        self.max_tokens = max_tokens
        self.model = model


_CAPS = (
    ("generationConfig", "maxOutputTokens"),
    ("generation_config", "max_output_tokens"),
    (None, "max_output_tokens"),
    (None, "max_completion_tokens"),
    (None, "max_tokens"),
)
MAX_REQUEST_STRINGS = 20000
"""A request with more strings than this is read up to here (the last user texts of a
long conversation come last: the walk keeps the newest)."""


def read_json_request(provider: str, body: bytes) -> ProviderRequest | None:
    """A provider request body (JSON) for the correlator; None when it is not JSON."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    req = obj.get("request")  # the Gemini CLI / Antigravity envelope: {"model", "project", "request": {...}}
    inner: dict[str, Any] = req if provider == "gemini" and isinstance(req, dict) else obj
    strings: list[str] = []
    stack: list[Any] = [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if v:
                strings.append(v)
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))
    strings = strings[-MAX_REQUEST_STRINGS:]
    cap: int | None = None
    for outer, key in _CAPS:
        holder = inner.get(outer) if outer is not None else inner
        v = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            cap = v
            break
    model = inner.get("model") if isinstance(inner.get("model"), str) else obj.get("model")
    return ProviderRequest(tuple((0, s) for s in strings), cap, model if isinstance(model, str) else "")
