"""Repairs for Anthropic ``/v1/messages``: a gateway's Claude events in, spec events out.

:class:`MessagesRepairer` repairs a stream event by event, :func:`repair_messages_json` a
whole body: a tool_use block whose name comes late is held until it does (rule
tool_header), usage filled from the upstream leg (rule usage), and a truncation verdict
makes ``message_delta``'s ``stop_reason`` ``max_tokens``. What CPA's Claude translator
emits, what is harmless and left alone, what is broken and how each is repaired:
docs/messages.md.

Cost: one orjson parse per event at most (none for a skimmed delta); the common deltas
take one short path, :meth:`MessagesRepairer._takes_delta`, parsed or skimmed.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Final

import orjson

from . import hidden, stops, usage_math
from .foreign import commented
from .holding import HOLD_LIMIT, HoldingRepairer, Rec
from .rules import FlowContext, Rules
from .skim import Layout, Skim, Skimmed
from .sse import Event, SseParser, format_event, glued_at
from .stream import Streamed
from .toolcalls import unique_ids
from .upstream_terminal import messages_error
from .verdict import Outcome, Verdict

__all__ = ["HOLD_LIMIT", "MessagesRepairer", "repair_messages_json"]


_NATIVE: dict[str, Outcome] = {
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "content_filter",
}
_FALLBACK_ID = re.compile(r"toolu_(interactions|\d+)")
_VALUE = {"text_delta": "text", "input_json_delta": "partial_json", "thinking_delta": "thinking"}
"""The deltas the common path serves (:meth:`MessagesRepairer._takes_delta`), by type: the
key of the value each carries."""
_SKIM_HOLES: Final = frozenset({("index",)} | {("delta", key) for key in _VALUE.values()})
"""What changes from one delta to the next (wire.skim): the rest of a layout is literal."""

_BLANK = Layout("blank", [b"\n"], [], [], {})
"""The layout of a blank line where an event would start (:class:`_Skim`)."""
_BLANK_LINE = Skimmed(_BLANK, b"\n", [])
"""Every skimmed blank line (nothing in it is read or changed: one object for all)."""


class _Skim(Skim):
    """A :class:`~wire.skim.Skim` that also skims blank lines: CPA's "three newlines" make
    every event's third LF an event of its own (``b"\n"``, no fields), as many as there
    are deltas. The driver asks for a match only between events on the parser's fast path
    (:meth:`wire.sse.SseParser.idle`), where an LF is exactly such an event (the parser's
    ``_fast`` makes ``Event(b"\n")`` of it, ``seam`` ends it after one byte) and leaves the
    parser as it was; the repairer takes it skimmed as :meth:`MessagesRepairer.event`
    takes it parsed (:meth:`MessagesRepairer._passes_dataless`)."""

    __slots__ = ()

    def match(self, chunk: bytes, pos: int) -> Skimmed | None:
        if chunk[pos] == 10:
            return _BLANK_LINE
        return super().match(chunk, pos)


def _blank(v: Any) -> bool:
    return not isinstance(v, str) or not v.strip()


def _parses(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


class _Block:
    __slots__ = ("args", "closed_by", "id", "name", "out", "start", "type")

    def __init__(self, out: int, type_: str, id_: Any, name: Any) -> None:
        self.out = out
        self.type = type_
        self.id = id_
        self.name = name
        self.args = Streamed()
        self.start: Rec | None = None  # its start event, while held for a name
        self.closed_by: int | None = None  # rule block_order: stopped early, before this block (out index) started


class MessagesRepairer(HoldingRepairer):
    api = "messages"

    def __init__(self, rules: Rules, ctx: FlowContext, verdict: Verdict) -> None:
        super().__init__(rules, ctx, verdict)
        self._blocks: dict[int, _Block] = {}  # raw index -> block
        self._order: list[_Block] = []
        self._next_out = 0
        self._stopped: tuple[Rec, _Block] | None = None  # a held tool_use stop
        self._nameless: _Block | None = None
        self._upstream_failed = False  # rule upstream_failure: the stop became an error event
        self._delta_held: tuple[Rec, dict[str, Any]] | None = None  # message_delta waiting for the upstream leg
        self.skim = _Skim()
        self._started = False  # message_start came: a Messages stream (rule eof_terminal)
        self._stopped_msg = False  # message_stop came
        self._hidden_stop: Rec | None = None  # rule hidden_failure: a message_stop without message_delta, held
        self._hidden_delta: Rec | None = None  # rule hidden_failure: CPA's Antigravity end (hidden.synthetic_delta)
        self._start_input = 0  # message_start's input_tokens (hidden.synthetic_delta)
        self._line_end = b"\n"  # the stream's line end (an error event it ends with)
        self._open: _Block | None = None  # the block the client sees open (rule block_order)
        self._early: list[Rec] = []  # rule block_order: stops to send before this event

    # --- EventRepairer -----------------------------------------------------------
    def event(self, ev: Event) -> list[bytes]:
        if ev.data is None and self._passes_dataless():
            return [ev.raw]
        if self.rules.glued_event and ev.data is not None and len(ev.fields) > 2:
            at = self._glued(ev)
            if at is not None:
                return self._unglue(ev, at)
        if not ev.complete and self._fails_at_eof():
            # the stream stops inside an event and an error event follows (end): kept as a
            # comment, so that its half cannot glue onto the error or reach a parser
            c = commented(ev)
            ev = Event(c.raw + (b"" if c.raw.endswith((b"\n", b"\r")) else ev.eol) + ev.eol, c.fields, ev.eol)
            self.count("eof_terminal")
        obj = self.parse(ev)
        rec = Rec(ev, obj)
        kind = obj.get("type") if obj is not None else None
        if self._delta_held is not None and ev.data is not None:
            self._settle_delta()  # the event after a held message_delta: the resolver looks again
        if ev.data is not None:
            self._line_end = ev.eol
        if ev.data is not None and self._hidden_due(kind):
            self._end_hidden_stop(drop=kind == "error")
        if kind == "message_start":
            self._started = True
            self._start_input = hidden.start_input(obj)
        elif kind == "message_stop":
            self._message_stop(rec)
        if ev.data is not None and self._stopped is not None:
            srec, sblock = self._stopped
            self._stopped = None
            srec.wait = None
            if kind == "content_block_start" and obj is not None and self._resend(rec, obj, srec, sblock):
                kind = None  # merged: nothing more to do with it
        if obj is None:
            pass
        elif kind == "content_block_start":
            self._block_start(rec, obj)
        elif kind == "content_block_delta":
            self._block_delta(rec, obj)
        elif kind == "content_block_stop":
            self._block_stop(rec, obj)
        elif kind == "message_delta":
            self._message_delta(rec, obj)
        elif kind == "message_stop":
            self._upstream_stop(rec)
        elif kind == "error":
            self._errored = True
            self._release("an error event")
        if self._early:  # rule block_order: the open block's stop, before this start
            out: list[bytes] = []
            for r in self._early:
                out += self._queue(r)
            self._early.clear()
            return out + self._queue(rec)
        return self._queue(rec)

    def end(self) -> list[bytes]:
        fails = self._fails_at_eof() and self._hidden_delta is None and not self._upstream_failed
        self._release(None)  # (a held message_stop without message_delta: an error event now)
        if not self._finished and not self._errored and not fails:
            self.note("stream ended without message_delta; passed through as it ended")
        if self.decision is None:
            self._report_args()
            self.decision = self.verdict.decide()
        d = self.decision
        upstream = (
            d.failed and not d.native and self.rules.upstream_failure and not (self._errored or self._upstream_failed)
        )
        out = self._flush()
        if upstream:
            # upstream leg: the stream ended with neither message_delta nor
            # message_stop and the provider's call failed: the API's error event, with the
            # provider's evidence (in eof_terminal's place)
            detail = d.evidence[0].detail if d.evidence else "failed"
            self.note(f"ended with an error event: the upstream failed ({detail})")
            self.count("upstream_failure")
            self._upstream_failed = self._errored = True
            out.append(format_event(orjson.dumps(messages_error(detail)), event="error", eol=self._line_end))
        elif fails:
            # rule eof_terminal: the stream stopped without message_stop (nor an error): an
            # error event, as Anthropic ends a stream that fails; never a success
            self._errored = True
            out.append(self._error_event(self._line_end))
            self.count("eof_terminal")
            self.note("stream ended without message_stop: ended it with an error event")
        return out

    # --- this round's rules (hidden_failure, eof_terminal on Messages): wire/hidden.py ----
    def _fails_at_eof(self) -> bool:
        """Rule eof_terminal ends this stream with an error event at its end: a Messages
        stream (message_start came) with neither message_stop nor an error event."""
        return self.rules.eof_terminal and self._started and not self._stopped_msg and not self._errored

    @staticmethod
    def _error_event(eol: bytes) -> bytes:
        return format_event(orjson.dumps(hidden.MESSAGES_ERROR), event="error", eol=eol)

    def _message_stop(self, rec: Rec) -> None:
        """message_stop without a message_delta before it, and no error: the upstream never
        finished (rule hidden_failure). Held until the next data event (an error event
        from the gateway tells the failure itself) or the end."""
        self._stopped_msg = True
        if self.rules.hidden_failure and not self._finished and not self._errored and not self._upstream_failed:
            rec.wait = "hidden_failure"
            self._hidden_stop = rec

    def _hidden_due(self, kind: Any) -> bool:
        """Does this data event end what rule hidden_failure holds? Any, but the
        message_stop that follows a held synthetic message_delta (held with it)."""
        if self._hidden_delta is not None:
            return not (kind == "message_stop" and self._hidden_stop is None)
        return self._hidden_stop is not None

    def _synthetic_delta(self, rec: Rec, obj: dict[str, Any]) -> bool:
        """CPA's Antigravity translator's message_delta at the end of a body without a
        finish (hidden.synthetic_delta): held with the message_stop that follows, until
        the next data event or the end (rule hidden_failure)."""
        if not self.rules.hidden_failure or self._errored or not hidden.synthetic_delta(obj, self._start_input):
            return False
        self._give_up_name("message_delta")
        rec.wait = "hidden_failure"
        self._hidden_delta = rec
        return True

    def _end_hidden_stop(self, drop: bool) -> None:
        """The held message_stop goes: dropped before the gateway's own error event
        (``drop``), else sent as an error event in its place. A held synthetic
        message_delta goes the same way, its message_stop dropped with it."""
        rec, self._hidden_stop = self._hidden_stop, None
        delta, self._hidden_delta = self._hidden_delta, None
        if delta is not None:
            self._errored = True
            for r in (delta, rec):
                if r is not None:
                    r.wait = None
                    r.drop, r.drop_rule = True, "hidden_failure"
            if drop:
                self.note(f"{hidden.SYNTHETIC_DELTA}: dropped it before the gateway's error event")
                return
            rec = delta
            rec.drop = False
            why = hidden.SYNTHETIC_DELTA
        elif rec is None:
            return
        else:
            why = hidden.STOP_WITHOUT_DELTA
        rec.wait = None
        self._errored = True
        if drop:
            rec.drop, rec.drop_rule = True, "hidden_failure"
            self.note(f"{why}: dropped it before the gateway's error event")
            return
        p = SseParser()
        rec.ev = (p.feed(self._error_event(rec.ev.eol)) + p.close())[0]
        rec.obj, rec.dirty = None, False
        self.count("hidden_failure")
        self.note(f"{why}: sent an error event in its place")

    # --- rule glued_event: LiteLLM's event written onto a cut provider line ----------
    @staticmethod
    def _glued(ev: Event) -> int | None:
        """Where a second event starts inside this one (:func:`wire.sse.glued_at`), when
        its data is not JSON; None for every event that parses (one shared loads)."""
        try:
            ev.json()
        except orjson.JSONDecodeError:
            return glued_at(ev.raw)
        return None

    def _unglue(self, ev: Event, at: int) -> list[bytes]:
        """Rule glued_event: the half event before ``at`` goes out as an SSE comment (kept
        visible, never parsed; a blank line ends it), the rest is repaired as the event it
        is (LiteLLM's ping or error), and whatever is glued onto that in turn."""
        c = commented(Event(ev.raw[:at], eol=ev.eol))
        comment = Rec(Event(c.raw + ev.eol, c.fields, ev.eol), None)
        p = SseParser()
        rest = p.feed(ev.raw[at:]) + p.close()
        self.count("glued_event")
        self.note("an event glued onto a half one (no blank line between): the half sent as a comment")
        out = self._queue(comment)
        for e in rest:
            out += self.event(e)
        return out

    # --- rule block_order: one content block open at a time -------------------------
    def _close_early(self, open_: _Block, new: _Block, eol: bytes) -> None:
        """A block starts while ``open_`` is still open: its stop (at the index the client
        saw) goes out before the start; the gateway's own stop for it, later, is withheld
        (:meth:`_block_stop`)."""
        open_.closed_by = new.out
        p = SseParser()
        data = orjson.dumps({"type": "content_block_stop", "index": open_.out})
        stop = (p.feed(format_event(data, event="content_block_stop", eol=eol)) + p.close())[0]
        self._early.append(Rec(stop, None))
        self.count("block_order")
        self.note(f"block {new.out} started while block {open_.out} was open: sent block {open_.out}'s stop first")

    # --- the rules -------------------------------------------------------------
    def _index(self, rec: Rec, obj: dict[str, Any]) -> _Block | None:
        raw = obj.get("index")
        if not isinstance(raw, int) or isinstance(raw, bool):
            return None
        block = self._blocks.get(raw)
        if block is not None and block.out != raw:
            obj["index"] = block.out
            rec.mark("tool_header")
        return block

    def _block_start(self, rec: Rec, obj: dict[str, Any]) -> None:
        raw = obj.get("index")
        cb = obj.get("content_block")
        if not isinstance(raw, int) or isinstance(raw, bool) or not isinstance(cb, dict):
            return
        block = _Block(self._next_out, str(cb.get("type")), cb.get("id"), cb.get("name"))
        self._next_out += 1
        if self._open is not None and self.rules.block_order:
            self._close_early(self._open, block, rec.ev.eol)
        self._open = block
        self._blocks[raw] = block
        self._order.append(block)
        self._index(rec, obj)
        if block.type == "tool_use" and _blank(block.name) and self.rules.tool_header:
            block.start = rec
            rec.wait = "name"
            self._nameless = block

    def _resend(self, rec: Rec, obj: dict[str, Any], srec: Rec, prev: _Block) -> bool:
        """Is this tool_use start a re-send of the block whose stop is held? Merge it."""
        cb = obj.get("content_block")
        raw = obj.get("index")
        if not isinstance(cb, dict) or cb.get("type") != "tool_use" or not isinstance(raw, int):
            return False
        id_, name = cb.get("id"), cb.get("name")
        late_id = _blank(prev.name) and isinstance(prev.id, str) and _FALLBACK_ID.fullmatch(prev.id) and not _blank(id_)
        if not (id_ == prev.id or late_id) or not (_blank(prev.name) or name == prev.name):
            return False
        if _parses(prev.args.text()):
            return False  # the previous call is whole: this is a second call
        srec.drop = rec.drop = True
        self._blocks[raw] = prev
        self._open = prev  # its stop is dropped: still open
        if prev.start is not None and not _blank(name):
            start = prev.start
            pcb = start.obj["content_block"] if start.obj is not None else None
            if isinstance(pcb, dict):
                pcb["name"] = name
                if late_id:
                    pcb["id"] = id_
                    prev.id = id_
                start.mark("tool_header")
            prev.name = name
            prev.start = None
            start.wait = None
            if self._nameless is prev:
                self._nameless = None
        return True

    def _block_delta(self, rec: Rec, obj: dict[str, Any]) -> None:
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            self._index(rec, obj)
            return
        t = delta.get("type")
        if not isinstance(t, str) or t not in _VALUE:
            self._index(rec, obj)  # a delta that is no evidence (signature_delta)
            return
        value = delta.get(_VALUE[t])
        if self._takes_delta(obj.get("index"), t, value):
            skim = self.skim  # handled the way a skim of its layout would be: learn it
            if skim is not None:
                skim.learn(t, rec.ev.raw, rec.ev.data, rec.ev.event, obj, _SKIM_HOLES)
            return
        block = self._index(rec, obj)
        if block is not None and block.closed_by is not None:
            # rule block_order closed it: passed as it came (dropped, the model's output
            # would be lost; Anthropic's SDKs add a delta to content[index] either way)
            self.note(f"a delta for block {block.out} after its stop (sent early): passed as it came")
        self._observe(block, t, value)

    def _takes_delta(self, index: Any, t: str, value: Any, utf8: bytes | None = None) -> bool:
        """A delta (type ``t`` of :data:`_VALUE`, ``value`` its field there) of an open
        block that goes out as it came, at once, recorded (:meth:`_observe`); False,
        having changed nothing, for one that must take the full path. Read from the
        parsed event (:meth:`_block_delta`) or from a skimmed one's values
        (:meth:`skimmed`): one test for both.

        Each check rules out what else the full path could do with the event: a held
        stop (rule tool_header: this data event decides it) or a queued event (this one
        would wait behind it), a rule already fired, an index that is no integer (passed
        on, unmapped) or that names no block or one whose index rule tool_header shifts.
        """
        if self._stopped is not None or self._recs or self._firing:
            return False
        if type(index) is not int or type(value) is not str:
            return False
        block = self._blocks.get(index)
        if block is None or block.out != index or block.closed_by is not None:
            return False
        self._observe(block, t, value, utf8)
        return True

    def _observe(self, block: _Block | None, t: str, value: Any, utf8: bytes | None = None) -> None:
        """A delta's evidence: a text delta's text for the verdict, a tool_use block's
        argument delta for the verdict and the block's input (a thinking delta: none);
        ``utf8``: the value's UTF-8, if the caller has it."""
        if t == "text_delta":
            if isinstance(value, str):
                self.verdict.observe_text(value, utf8)
        elif t == "input_json_delta" and isinstance(value, str) and value:
            if utf8 is None:
                utf8 = value.encode("utf-8", "surrogatepass")  # once, for the verdict and the block
            self.verdict.observe_args(value, utf8)
            if block is not None:
                block.args.append(value, utf8)

    def _passes_dataless(self) -> bool:
        """An event without data (CPA's third newline, a blank line of its own; a comment)
        goes out as it came, at once: nothing in it to parse or decide, and nothing queued
        to wait behind (what :meth:`_queue` does with it). For the parsed event
        (:meth:`event`) and the skimmed blank line (:meth:`skimmed`): one test for both."""
        return not self._recs

    def skimmed(self, s: Skimmed) -> bytes | None:
        """A skimmed event (:mod:`wire.skim`): a content_block_delta through
        :meth:`_takes_delta`, as :meth:`_block_delta` takes the parsed one, or a blank line
        (:class:`_Skim`) through :meth:`_passes_dataless`, as :meth:`event` takes it: its
        bytes as they came, or None for the full path. Every string of a delta is decoded
        first (one that orjson would not decode makes the full path pass the event with a
        note)."""
        layout = s.layout
        if layout is _BLANK:
            return s.raw if self._passes_dataless() else None
        if layout.info is None:  # its reading, once per layout (False: none)
            layout.info = self._plan(layout) or False
        if layout.info is False:
            return None
        plan: tuple[str, int, int, tuple[int, ...]] = layout.info
        t, islot, vslot, others = plan
        try:
            for i in others:
                s.text(i)
            value = s.text(vslot)  # last: s.plain is its bytes
        except ValueError:
            return None
        if not self._takes_delta(s.number(islot), t, value, s.plain):
            return None
        return s.raw

    @staticmethod
    def _plan(layout: Layout) -> tuple[str, int, int, tuple[int, ...]] | None:
        """A delta layout's reading for :meth:`skimmed`: its delta type, the holes of the
        ``index`` (an integer) and of the delta's value (a string), and its other string
        holes (decoded too, never used); None for a layout that holds none of these."""
        t = layout.kind
        key = _VALUE.get(t)
        if key is None:
            return None
        holes = layout.holes
        islot = layout.slot("index")
        vslot = layout.slot("delta", key)
        if islot < 0 or vslot < 0 or holes[islot] != "i" or holes[vslot] != "s":
            return None
        return t, islot, vslot, layout.strings(vslot)

    def _block_stop(self, rec: Rec, obj: dict[str, Any]) -> None:
        raw = obj.get("index")
        early = self._blocks.get(raw) if type(raw) is int else None
        if early is not None and early.closed_by is not None:
            # rule block_order: its stop went out before the next block started
            eol = rec.ev.eol
            why = f": content_block_stop {early.out} withheld: sent before block {early.closed_by} started"
            rec.ev = Event(why.encode() + eol + eol, [(b"", why[2:].encode())], eol)
            rec.obj, rec.dirty = None, False
            self.count("block_order")
            return
        block = self._index(rec, obj)
        if block is not None and block is self._open:
            self._open = None
        # held until the next data event, which may re-send this block's start; only a
        # block whose input is not yet whole JSON can be re-sent (see _resend), so a
        # finished call's stop is not held (a held event is lost if the upstream is cut)
        if block is not None and block.type == "tool_use" and self.rules.tool_header and not _parses(block.args.text()):
            rec.wait = "stop"
            self._stopped = (rec, block)

    def _message_delta(self, rec: Rec, obj: dict[str, Any]) -> None:
        if self._synthetic_delta(rec, obj):
            return
        self._finished = True
        self._give_up_name("message_delta")
        delta = obj.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        sr = delta.get("stop_reason")
        new = stops.foreign("messages", sr) if self.rules.finish_reason else None
        if new is not None:  # rule finish_reason: another API's value (wire/stops.py)
            delta["stop_reason"] = new
            rec.mark("finish_reason")
            self.note(f"stop_reason {sr!r} (not a Messages value) written as {new!r}")
            sr = new
        if isinstance(sr, str) and sr in _NATIVE:  # a list or object here is not hashable
            self.verdict.native(_NATIVE[sr], f"stop_reason {sr!r}")
        usage = obj.get("usage")
        if self.rules.usage_math and usage_math.repair("messages", usage):
            rec.mark("usage_math")
            self.note("usage: a negative count written as 0")
        if isinstance(usage, dict):
            self.verdict.usage(usage.get("output_tokens"))
        if self.decision is not None or self._delta_held is not None:
            self.note("a second message_delta, passed through")
            return
        if self.verdict.upstream_open():
            # upstream leg: the provider call linked to this flow is still open
            # (CPA wrote message_delta before the provider's stream ended): held until the
            # next event (message_stop comes after that end), then decided
            rec.wait = "upstream"
            self._delta_held = (rec, obj)
            return
        self._decide_delta(rec, obj)

    def _settle_delta(self) -> None:
        held = self._delta_held
        if held is not None:
            self._delta_held = None
            held[0].wait = None
            self._decide_delta(*held)

    def _decide_delta(self, rec: Rec, obj: dict[str, Any]) -> None:
        delta = obj.get("delta")
        sr = delta.get("stop_reason") if isinstance(delta, dict) else None
        usage = obj.get("usage")
        self._report_args()
        d = self.decision = self.verdict.decide()
        if d.failed and not d.native and self.rules.upstream_failure:
            self._fail(rec, d.evidence[0].detail if d.evidence else "failed")  # upstream leg
            return
        if self.rules.usage and self.verdict.upstream_counts is not None:
            u = usage if isinstance(usage, dict) else {}
            filled = fill_messages_usage(u, self.verdict, self._start_input)
            if filled:
                obj["usage"] = u
                rec.mark("usage")
                self.note(filled)
        new = d.word("messages")
        if new is not None and not d.native and self.rules.truncation != "off" and sr != new and isinstance(obj.get("delta"), dict):  # fmt: skip
            obj["delta"]["stop_reason"] = new
            rec.mark("truncation")

    # --- upstream leg: the provider's call failed -----------------------
    def _upstream_stop(self, rec: Rec) -> None:
        """``message_stop`` (rule upstream_failure): withheld (an SSE comment) after the
        message_delta became the error event; with no message_delta at all (CPA's Gemini
        path ends a cut turn so) and the upstream leg proving the call failed, it becomes
        the error event."""
        if not self.rules.upstream_failure:
            return
        if self._upstream_failed:
            rec.ev = Event(b": message_stop withheld: the upstream failed" + rec.ev.eol + rec.ev.eol, eol=rec.ev.eol)
            rec.obj = None
            return
        if self.decision is not None or self._errored:
            return
        self._report_args()
        d = self.decision = self.verdict.decide()
        if d.failed and not d.native:
            if self._hidden_stop is rec:  # the provider's evidence instead of hidden_failure's
                rec.wait = None
                self._hidden_stop = None
            self._fail(rec, d.evidence[0].detail if d.evidence else "failed")

    def _fail(self, rec: Rec, detail: str) -> None:
        eol = rec.ev.eol
        rec.ev = Event(format_event(orjson.dumps(messages_error(detail)), event="error", eol=eol), eol=eol)
        rec.obj = None
        rec.dirty = False
        self.count("upstream_failure")
        self._upstream_failed = True
        self.note(f"ended with an error event: the upstream failed ({detail})")

    # --- end upstream leg ---

    def _report_args(self) -> None:
        for b in self._order:
            if b.type == "tool_use":
                self.verdict.tool_args(b.args.text(), b.name)

    # --- the out queue -----------------------------------------------------------
    def _give_up_name(self, why: str) -> None:
        b = self._nameless
        if b is not None and b.start is not None:
            self.note(f"tool_use name never arrived before {why}; block passed as it came")
            b.start.wait = None
            b.start = None
        self._nameless = None

    def _release(self, why: str | None) -> None:
        if why is not None and (self._nameless is not None or self._stopped is not None):
            self.note(f"released held events early: {why}")
        if (self._hidden_stop is not None or self._hidden_delta is not None) and why != "an error event":
            self._end_hidden_stop(drop=False)
        self._give_up_name(why or "the end of the stream")
        if self._stopped is not None:
            self._stopped[0].wait = None
            self._stopped = None
        self._settle_delta()


def fill_messages_usage(usage: dict[str, Any], verdict: Verdict, start_input: int = 0) -> str | None:
    """Fill missing or zero counts of a ``message_delta`` (or message) ``usage`` in place
    from the verdict's upstream counts, in Anthropic's terms: ``input_tokens`` is the
    input not read from a cache (Devin 7.2), ``cache_read_input_tokens`` the cache read
    (7.5), so that their sum is CPA's total input; ``output_tokens`` is 7.3. When the
    gateway already wrote a non-zero ``input_tokens`` (CPA writes its *total* input
    there), no cache read is added beside it: it would count the cached part twice.
    ``start_input``: the stream's ``message_start`` ``input_tokens``; when it already said
    the provider's input and this usage leaves input out (Anthropic's own ``message_delta``
    does), the input is not restated here: a correct pass-through stays byte for byte.
    Returns the note for the receipt, or None when nothing was filled."""
    fields = {"output_tokens": "output_tokens"}
    c = verdict.upstream_counts
    told = c is not None and "input_tokens" not in usage and start_input == c.uncached_input_tokens
    if not told and (not _count(usage.get("input_tokens")) or (c is not None and c.authoritative)):
        fields = {"input_tokens": "uncached_input_tokens", "cache_read_input_tokens": "cached_tokens", **fields}
    filled = verdict.fill_usage(usage, fields)
    return verdict.upstream_counts.note(filled) if filled and verdict.upstream_counts else None


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v != 0


def repair_messages_json(
    obj: dict[str, Any], rules: Rules, ctx: FlowContext, verdict: Verdict, fired: Counter[str] | None = None
) -> bool:
    """Repair a non-streaming Anthropic ``message`` body in place; True if it changed.

    - ``truncation``: ``stop_reason`` from the verdict. Evidence is usage (and a native
      stop_reason) only: CPA's non-stream translator keeps a tool_use ``input`` only if
      the whole arguments string parsed and writes ``{}`` otherwise, so a cut call looks
      like a valid empty one and the arguments cannot speak.
    - ``tool_index``: duplicate ``tool_use`` ids (CPA's fallback ``toolu_interactions``
      for every id-less call) are made unique: later duplicates become
      ``toolu_<ordinal>`` (position among the tool_use blocks; suffixed if taken).

    ``fired`` (if given) counts each rule that changed the body once.
    """
    if verdict.cap is None and ctx.request:
        verdict.request(ctx.request)
    if obj.get("type") not in (None, "message"):
        return False
    changed = False
    content = obj.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    for b in blocks:
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            verdict.observe_text(b["text"])
    if rules.tool_index and unique_ids([b for b in blocks if b.get("type") == "tool_use"], "toolu_"):
        changed = True
        if fired is not None:
            fired["tool_index"] += 1
    sr = obj.get("stop_reason")
    new = stops.foreign("messages", sr) if rules.finish_reason else None
    if new is not None:
        obj["stop_reason"] = sr = new
        changed = True
        if fired is not None:
            fired["finish_reason"] += 1
    if isinstance(sr, str) and sr in _NATIVE:  # a list or object here is not hashable
        verdict.native(_NATIVE[sr], f"stop_reason {sr!r}")
    usage = obj.get("usage")
    if rules.usage_math and usage_math.repair("messages", usage):
        changed = True
        if fired is not None:
            fired["usage_math"] += 1
    if isinstance(usage, dict):
        verdict.usage(usage.get("output_tokens"))
    d = verdict.decide()
    if rules.usage and verdict.upstream_counts is not None:
        u = usage if isinstance(usage, dict) else {}
        if fill_messages_usage(u, verdict):
            obj["usage"] = u
            changed = True
            if fired is not None:
                fired["usage"] += 1
    new = d.word("messages")
    if new is not None and not d.native and rules.truncation != "off" and "stop_reason" in obj and sr != new:
        obj["stop_reason"] = new
        changed = True
        if fired is not None:
            fired["truncation"] += 1
    return changed
