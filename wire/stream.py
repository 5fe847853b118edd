"""Drives an event repairer over a byte stream, failing open.

:class:`StreamRepair` is what the mitmproxy addon installs as ``flow.response.stream``
(through a thin wrapper): ``feed(chunk) -> bytes`` per upstream read, ``close() -> bytes``
at the end. If the repairer raises, the flow switches to passthrough: every byte not yet
sent (held events, the event being repaired, the parser's buffer, all later chunks) goes
out as it came, and :attr:`StreamRepair.error` says why. Nothing is lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from .empty import no_events_failure
from .fired import Fired
from .foreign import foreign
from .skim import Skim, Skimmed
from .sse import Event, SseParser, cr_cut

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # only mypyc reads the decorator (a test extra); without it, a no-op

    def mypyc_attr(*_args: Any, **_kwargs: Any) -> Any:  # type: ignore[misc]
        return lambda cls: cls


if TYPE_CHECKING:
    from collections.abc import Iterable

    from .rules import FlowContext, Rules
    from .verdict import Decision, Verdict


class Streamed:
    """Text streamed in deltas (a message's text, a call's arguments), kept for the close
    that needs it whole: one UTF-8 buffer grown in place (amortized O(1) per delta, about
    one byte per character, nothing per delta), not a list of delta strings (a pointer
    and a string object, ~60 bytes, per delta). :meth:`text` decodes it once; a whole
    value from the gateway (``set``) is kept as the string it came as. :attr:`pieces`
    counts the deltas (and whole values) it holds.
    """

    __slots__ = ("_buf", "_str", "pieces")

    def __init__(self, text: str = "") -> None:
        self._buf: bytearray | None = None
        self._str = text
        self.pieces = 1 if text else 0

    def append(self, delta: str, utf8: bytes | None = None) -> None:
        """One more delta; ``utf8``, if given, is its UTF-8 (the caller encoded it once
        for all its uses, or a skimmed event's bytes are it)."""
        buf = self._buf
        if buf is None:
            buf = self._buf = bytearray(self._str.encode("utf-8", "surrogatepass"))
            self._str = ""
        buf += delta.encode("utf-8", "surrogatepass") if utf8 is None else utf8
        self.pieces += 1

    def set(self, text: str) -> None:
        self._buf = None
        self._str = text
        self.pieces = 1

    def view(self) -> bytearray:
        """The text as UTF-8 bytes, the buffer itself (not a copy; do not change it): a
        prefix test of a string costs O(that string), a string being a prefix of another
        exactly when its UTF-8 bytes are."""
        buf = self._buf
        if buf is None:
            buf = self._buf = bytearray(self._str.encode("utf-8", "surrogatepass"))
            self._str = ""
        return buf

    def text(self) -> str:
        buf = self._buf
        if buf is not None:  # decoded once; a later append re-encodes (rare: closes come last)
            self._str = buf.decode("utf-8", "surrogatepass")
            self._buf = None
        return self._str

    def __bool__(self) -> bool:
        return bool(self._buf) or bool(self._str)


@mypyc_attr(allow_interpreted_subclasses=True)  # the compiled core: tests subclass it
class EventRepairer:
    """Base for the per-API repairers: fed parsed SSE events, returns bytes to send.

    A subclass implements :meth:`event` and :meth:`end`. An event it holds back (to
    decide later) goes into :attr:`held`, so that on an error the driver can still send
    its original bytes. :attr:`notes` collects log lines about bad input (never content).
    """

    def __init__(self) -> None:
        self.held: list[Event] = []
        self.notes: list[str] = []
        self.changed = 0
        """How many events were rewritten, inserted or dropped (for receipts)."""
        self.fired: Fired = Fired()
        """Which rule changed how many events, keyed by the :class:`~wire.rules.Rules`
        field name (``"status"``, ``"item_order"``, ``"truncation"``...). An event changed
        by two rules counts once for each."""
        self._firing: set[str] = set()
        self.skim: Skim | None = None
        """The layouts this repairer learned (:mod:`wire.skim`), if it skims: the driver
        hands it matching events as :meth:`skimmed`."""

    def skimmed(self, s: Skimmed) -> bytes | None:
        """A matched event (:mod:`wire.skim`): its bytes after the rules, or None, having
        changed nothing, when it must take the full path (:meth:`event`)."""
        return None

    def fire(self, rule: str) -> None:
        """``rule`` changed the event being repaired (counted once, by :meth:`count`)."""
        self._firing.add(rule)

    def count(self, *rules: str) -> None:
        """One more event rewritten, inserted or dropped: by ``rules`` and the fired ones."""
        self.changed += 1
        # each distinct rule once, as Counter.update(set) would count it, without the
        # union's new set and Counter.update's Mapping check (called per changed event)
        firing = self._firing
        fired = self.fired
        if not firing:  # the usual cases: one rule named, or one fired
            if len(rules) == 1:
                fired[rules[0]] += 1
                return
            if not rules:
                return
        elif not rules and len(firing) == 1:
            fired[firing.pop()] += 1
            return
        if rules:
            firing.update(rules)
        for rule in firing:
            fired[rule] += 1
        firing.clear()

    def event(self, ev: Event) -> list[bytes]:
        raise NotImplementedError

    def end(self) -> list[bytes]:
        """The stream ended (after the last event): flush what is held."""
        out = [e.raw for e in self.held]
        self.held.clear()
        return out

    def salvage(self) -> list[bytes]:
        """The upstream failed mid-body: the held events, each through every rule that a
        stream cut here can still satisfy (what they waited for will not come). Nothing
        is synthesized that claims an ending (no terminal, no finish). This base has
        none: the held events as they came."""
        out = [e.raw for e in self.held]
        self.held.clear()
        return out

    def note(self, text: str) -> None:
        if len(self.notes) < 100:
            self.notes.append(text)

    def parse(self, ev: Event) -> dict[str, Any] | None:
        """The event's data as a JSON object, or None (with a note) if it is not one."""
        data = ev.data
        if data is None or data == b"[DONE]":
            return None
        try:
            obj = ev.json()  # one loads per event, shared with the checks before (foreign)
        except orjson.JSONDecodeError:
            self.note(f"event data is not JSON ({len(data)} bytes), passed through")
            return None
        if not isinstance(obj, dict):
            self.note("event data is JSON but not an object, passed through")
            return None
        return obj


class ApiRepairer(EventRepairer):
    """Base of the per-API repairers: the rules, the flow's facts, its verdict.

    :attr:`decision` is the verdict's :class:`~wire.verdict.Decision` once the terminal
    event was seen (None if the stream failed or ended without one); the addon's receipt
    reads it.
    """

    api = ""
    """The API this repairer speaks (``responses``, ``chat``, ``messages``, ``gemini``)."""

    def __init__(self, rules: Rules, ctx: FlowContext, verdict: Verdict) -> None:
        super().__init__()
        self.rules = rules
        self.ctx = ctx
        self.verdict = verdict
        if verdict.cap is None and ctx.request:
            verdict.request(ctx.request)  # the addon does it too; harmless twice
        self.decision: Decision | None = None
        self._finished = False
        """The API's terminal went out (Responses: success or failure terminal; chat: a
        finish_reason; messages: message_delta; Gemini: a finishReason)."""
        self._errored = False
        """An error event came (chat, messages, Gemini; Responses counts it a terminal)."""

    def fault(self) -> str | None:
        """After the end: why the stream did not end well (an error event, no terminal
        event), or None. The turn log's ``ended`` field reads it."""
        if self._errored:
            return "the stream carried an error event"
        if not self._finished:
            return "stream ended without a terminal event"
        return None

    def no_events(self, eol: bytes) -> bytes:
        """Rule no_events: the stream ended and the upstream sent no event at all (an
        empty body, or only comments and keep-alives): the API's failure event
        (:mod:`wire.empty`), so the client sees a failure, never a blank success."""
        if not self.rules.no_events or not self.api:
            return b""
        self.count("no_events")
        self.note("the upstream sent no event: ended the stream with a failure event")
        return no_events_failure(self.api, self.ctx, eol)

    def dump(self, ev: Event, obj: dict[str, Any], rules: Iterable[str] = ()) -> bytes:
        """A rewritten event's bytes (one ``orjson.dumps``), counted for ``rules``; its
        original bytes if the object cannot be serialized."""
        try:
            data = orjson.dumps(obj)
        except (TypeError, orjson.JSONEncodeError):
            self.note("a repaired event could not be serialized; sent as it came")
            self._firing.clear()
            return ev.raw
        self.count(*rules)
        return ev.with_data(data)


class StreamRepair:
    """Bytes in, repaired bytes out; any repairer exception switches to passthrough."""

    __slots__ = ("_last", "_tail", "bytes_in", "bytes_out", "error", "events", "parser", "quiet", "repairer", "skimmed")

    def __init__(self, repairer: EventRepairer) -> None:
        self.repairer = repairer
        self.parser: SseParser | None = SseParser()
        self.error: BaseException | None = None
        self.bytes_in = 0
        self.bytes_out = 0
        self.events = 0
        """SSE events parsed (while repairing; passthrough after an error is not counted)."""
        self.skimmed = 0
        """Of :attr:`events`, those the repairer took skimmed (:mod:`wire.skim`: no JSON parse)."""
        self.quiet = True
        """No event of the API has come yet (only comments and keep-alives, if anything):
        at the end, rule no_events adds a failure (:meth:`ApiRepairer.no_events`)."""
        self._tail: Event | None = None  # the last event while quiet (its line end, its end)
        self._last = b""  # the last bytes fed out (rule cr_end reads how the stream ends)

    def feed(self, chunk: bytes) -> bytes:
        self.bytes_in += len(chunk)
        parser = self.parser
        if parser is None:
            out = chunk
        else:
            skim = self.repairer.skim
            # event by event while skimming, and in the first read, whose first events
            # teach the layouts that serve the rest of it
            if skim is not None and (parser.fast() and skim.active or parser.start(chunk)):
                out = self._skim(chunk, skim, parser)
            else:
                out = self._run(parser.feed(chunk), eof=False)
            if out:
                self._last = out
        self.bytes_out += len(out)
        return out

    def _skim(self, chunk: bytes, skim: Skim, parser: SseParser) -> bytes:
        """The read event by event: one with a learned layout that the repairer takes
        skimmed (:mod:`wire.skim`), any other through the parser and the full path, one
        event at a time so that a layout learned on it serves the next (the parser makes
        the same events of bytes in any cuts). The parser stays on its fast path between
        events, so a skimmed event is exactly the event it would have made of these
        bytes; once it holds an unfinished event, or leaves the fast path (a CR), it takes
        the rest of the read."""
        rep = self.repairer
        n = len(chunk)
        pos = 0
        outs: list[bytes] = []
        if not parser.idle():  # an event begun in an earlier read, which this one ends
            pos = parser.seam(chunk)
            if pos < 0:
                return self._run(parser.feed(chunk), eof=False)
            out = None if self.quiet else self._seamed(chunk, pos, skim, parser)
            if out is None:  # not skimmed: the parser ends it (failed over: the loop sends the rest)
                outs.append(self._run(parser.feed(chunk[:pos]), eof=False))
            elif self.parser is None:  # the repairer failed on it: this is all of the read, raw
                return out
            else:
                outs.append(out)
        while pos < n:
            if self.parser is None or not parser.idle():  # failed over, or off the fast path
                outs.append(self._run(parser.feed(chunk[pos:]), eof=False) if self.parser is not None else chunk[pos:])
                break
            # (until the API's first event, every event takes the full path: rule no_events listens there)
            s = None if self.quiet else skim.match(chunk, pos)
            if s is not None:
                try:
                    out = rep.skimmed(s)
                except Exception as e:  # noqa: BLE001 - fail open: this event, the rest of the read and what is held, raw
                    self.error = e
                    outs.append(self._unsent([], eof=False))
                    outs.append(chunk[pos:] if pos else chunk)
                    break
                if out is not None:
                    self.events += 1
                    self.skimmed += 1
                    pos += len(s.raw)
                    if pos == n and not outs:
                        return out
                    outs.append(out)
                    continue
            end = parser.seam(chunk, pos)  # this one event the full way
            if end < 0:
                end = n
            elif s is None and not self.quiet:
                skim.missed()
            outs.append(self._run(parser.feed(chunk[pos:end] if pos or end < n else chunk), eof=False))
            pos = end
        return outs[0] if len(outs) == 1 else b"".join(outs)

    def _seamed(self, chunk: bytes, pos: int, skim: Skim, parser: SseParser) -> bytes | None:
        """The event the parser holds unfinished, which ``chunk[:pos]`` ends, skimmed if it
        has a learned layout and the repairer takes it that way (else None: the parser
        ends it). Its bytes are the parser's and this read's, joined once; they hold one
        blank line, at their end, so a match is all of them (up to
        :data:`wire.sse.SEAMED_MAX`: a larger one is the parser's)."""
        raw = parser.pending(chunk, pos)
        if raw is None:
            return None
        s = skim.match(raw, 0)
        if s is None:
            skim.missed()
            return None
        if len(s.raw) != len(raw):  # (cannot be, as said; were it, taken() would lose the rest)
            return None
        try:
            out = self.repairer.skimmed(s)
        except Exception as e:  # noqa: BLE001 - fail open, as in _skim: what is held, the unfinished event, this read
            self.error = e
            return self._unsent([], eof=False) + chunk
        if out is None:
            return None
        parser.taken()
        self.events += 1
        self.skimmed += 1
        return out

    def undelivered(self) -> tuple[int, int, int]:
        """(held events, their bytes, bytes of the unfinished event): what was received
        and not yet sent, i.e. what is lost if the stream ends without :meth:`close`
        (mitmproxy's path for an upstream that fails mid-body)."""
        held = self.repairer.held
        return len(held), sum(len(e.raw) for e in held), self.parser.buffered if self.parser is not None else 0

    def salvage(self) -> bytes:
        """The stream failed mid-body (the upstream reset or closed): what was received and
        not yet sent, and passthrough from here on. The held events go out repaired as far
        as a cut stream allows (:meth:`EventRepairer.salvage`: every rule a prefix can
        satisfy; no terminal added, nothing decided that waited for what will not come),
        then the unfinished event's bytes as they came (half an event cannot be judged).
        If the repairer fails here, the held events go out as they came."""
        if self.parser is None:
            return b""
        tail = self.parser.close()
        self.parser = None
        # an event a held-back CR ended (a CR-only stream): no LF can follow it now, so it
        # is whole and goes through the rules (a CR-only message_delta is judged, not passed)
        whole = [ev for ev in tail if ev.complete]
        half = b"".join(ev.raw for ev in tail if not ev.complete)
        out = self._run(whole, eof=False) if whole and self.error is None else b"".join(ev.raw for ev in whole)
        if self.error is None:
            try:
                out += b"".join(self.repairer.salvage())
            except Exception as e:  # noqa: BLE001 - fail open: what salvage held goes out raw below
                self.error = e
        out += self._unsent([], eof=True) + half  # (what is still held, raw; the half event as it came)
        self.bytes_out += len(out)
        return out

    def close(self) -> bytes:
        if self.parser is None:
            return b""
        out = self._run(self.parser.close(), eof=True)
        self.parser = None
        rep = self.repairer
        if self.error is None and isinstance(rep, ApiRepairer) and rep.rules.cr_end:
            tail = out[-3:] if len(out) >= 3 else (self._last + out)[-3:]
            if cr_cut(tail):  # rule cr_end: one more CR, so the last event is not held back
                out += b"\r"
                rep.count("cr_end")
                rep.note("a CR-only stream ended right after its last event: added one CR (a blank line)")
        self._last = b""
        self.bytes_out += len(out)
        return out

    def _run(self, events: list[Event], eof: bool) -> bytes:
        rep = self.repairer
        self.events += len(events)
        if self.quiet and events:
            self._listen(events)
        if len(events) == 1 and not eof:  # one event per read, the usual case: no loop, no list
            try:
                outs = rep.event(events[0])
            except Exception as e:  # noqa: BLE001 - fail open: this read raw from the failed event on
                return self._fail(e, events, eof)
            return outs[0] if len(outs) == 1 else b"".join(outs)
        out: list[bytes] = []
        for i, ev in enumerate(events):
            try:
                out += rep.event(ev)
            except Exception as e:  # noqa: BLE001 - fail open: everything not yet sent goes out raw
                return b"".join(out) + self._fail(e, events[i:], eof)
        if eof:
            try:
                out += rep.end()
                if self.quiet and isinstance(rep, ApiRepairer):
                    out += self._no_events(rep)
            except Exception as e:  # noqa: BLE001 - fail open: the end of the stream as it came
                return b"".join(out) + self._fail(e, [], eof)
        return b"".join(out)

    def _listen(self, events: list[Event]) -> None:
        """Until the first event of the API (rule no_events): is this one? Comments and
        keep-alives (:func:`wire.foreign.foreign`; Anthropic's ``ping``) are not."""
        api = getattr(self.repairer, "api", "")
        for ev in events:
            # (Anthropic's own keep-alive is an event of its API: ``event: ping``)
            if (
                ev.is_comment_only
                or (api and foreign(api, ev) is not None)
                or (api == "messages" and ev.event == "ping")
            ):
                self._tail = ev
            else:
                self.quiet = False
                self._tail = None
                return

    def _no_events(self, rep: ApiRepairer) -> list[bytes]:
        """The failure for a stream without events, after what came (comments), in its
        line end; a last comment the stream stopped inside is terminated first."""
        tail = self._tail
        eol = tail.eol if tail is not None else b"\n"
        failure = rep.no_events(eol)
        if not failure:
            return []
        if tail is not None and not tail.complete:
            # its bytes went out as they came (or as a comment): end its line, then the event
            end = b"" if tail.raw.endswith((b"\n", b"\r")) else eol
            return [end + eol, failure]
        return [failure]

    def _fail(self, e: BaseException, rest: list[Event], eof: bool) -> bytes:
        self.error = e
        return self._unsent(rest, eof)

    def _unsent(self, rest: list[Event], eof: bool) -> bytes:
        """Passthrough from here on: everything received and not yet sent, as it came (the
        held events, then ``rest``, then the parser's unfinished event unless at the end)."""
        held = b"".join(ev.raw for ev in self.repairer.held)
        self.repairer.held.clear()
        tail = b""
        if not eof and self.parser is not None:
            tail = b"".join(ev.raw for ev in self.parser.close())
        self.parser = None
        return held + b"".join(ev.raw for ev in rest) + tail


class Reads:
    """``flow.response.stream`` for a plain stream (no decoder, no usage reader, no kept
    bodies): every read but the first straight into :meth:`StreamRepair.feed`, compiled
    with it, instead of through the addon's interpreted callable. The first read and the
    end (``b""``) go to ``owner``, the addon's callable (the first byte's time, the close,
    the report); a failure of the repair is the owner's ``failed`` and the read goes out
    as it came, as the owner does it."""

    __slots__ = ("owner", "repair", "started")

    def __init__(self, repair: StreamRepair, owner: Any) -> None:
        self.repair = repair
        self.owner = owner
        self.started = False

    def __call__(self, chunk: bytes) -> list[bytes]:
        if not chunk or not self.started:
            self.started = True
            out: list[bytes] = self.owner(chunk)
            return out
        try:
            data = self.repair.feed(chunk)
        except Exception as e:  # noqa: BLE001 - never raise into mitmproxy: the read goes out as it came
            self.owner.failed = e
            data = chunk
        return [data] if data else []

    def salvage(self) -> list[bytes]:
        """The upstream failed mid-body (``addons/salvage.py`` asks the stream callable):
        the owner's salvage, what the repair still holds."""
        out: list[bytes] = self.owner.salvage()
        return out


def repair_body(repairer: EventRepairer, body: bytes) -> tuple[bytes, BaseException | None]:
    """A whole buffered SSE body (replay, ``mitmdump -nr``): same path, one chunk."""
    s = StreamRepair(repairer)
    out = s.feed(body) + s.close()
    return out, s.error
