"""Repairs for ``/v1/chat/completions``: a gateway's chat chunks in, spec chunks out.

:class:`ChatRepairer` repairs a stream chunk by chunk, :func:`repair_chat_json` a whole
body; rules ``tool_index`` (calls numbered 0..n-1 per choice), ``tool_header`` (a re-sent
or late-named header), ``finish_reason`` (non-standard values mapped), ``replay`` (the
text sent twice), ``usage_chunk``, ``truncation`` (``finish_reason: "length"`` on a
verdict), ``error_finish`` (a finish_reason naming an error ends as an error chunk),
``done_marker`` (the ``[DONE]`` a finished stream lacks), ``tool_finish`` (``stop``
after whole tool calls is ``tool_calls``) and ``error_last`` (nothing but comments after
an error chunk written here). A chunk that waits for a decision (a nameless header, a finish without usage,
a possible repeat) is held with everything after it, in order, and bounded
(:data:`HOLD_LIMIT`); an error is never turned into a success and no finish is ever
synthesized. Each rule, why, and how clients fail without it: docs/chat.md.

Cost: at most one orjson parse per chunk (none for a skimmed one); per call its arguments
in one growing buffer; the common chunks take one short path, :meth:`ChatRepairer._takes`,
whether parsed or skimmed (:mod:`wire.skim`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

import orjson

from . import hidden, stops, usage_math
from .foreign import commented, foreign
from .holding import HOLD_LIMIT, REPLAY_HOLD_LIMIT, HoldingRepairer, Rec
from .replay import DIVERGED, PHRASE, REPEATED, START, WHOLE, pure_content, step
from .rules import FlowContext, Rules
from .skim import Layout, Skim, Skimmed
from .sse import Event, format_event
from .stream import Streamed
from .toolcalls import forced_call, unique_ids, whole_calls
from .upstream_terminal import chat_error, json_failure
from .verdict import Outcome, Verdict

__all__ = ["HOLD_LIMIT", "ChatRepairer", "repair_chat_json"]

_NATIVE: dict[str, Outcome] = {"length": "max_tokens", "content_filter": "content_filter"}


def spec_finish(ch: dict[str, Any], rules: Rules) -> str | None:
    """Rule finish_reason on one choice, in place: a ``finish_reason`` from another API's
    vocabulary becomes chat's (CPA's Gemini ``max_tokens`` -> ``length``, a lower-cased
    ``safety`` -> ``content_filter``, Anthropic's ``refusal`` -> ``content_filter``,
    ``model_context_window_exceeded`` and ``pause_turn`` -> ``length``: :mod:`wire.stops`),
    and a normal end (``stop``, ``tool_calls``) beside a ``native_finish_reason`` that says
    otherwise takes what it says (CPA: ``stop`` with ``native_finish_reason: "safety"``).
    Returns the original value when it changed (the gateway's own, native, signal), else
    None. Values with no chat equivalent (Gemini's ``malformed_function_call``) pass."""
    fr = ch.get("finish_reason")
    if not rules.finish_reason or not isinstance(fr, str):
        return None
    new = stops.foreign("chat", fr) or stops.native_disagrees(fr, ch.get("native_finish_reason"))
    if new is None or new == fr:
        return None
    ch["finish_reason"] = new
    return fr


def _carries_output(obj: dict[str, Any]) -> bool:
    """Rule error_finish: a chunk whose choices stream something (content, reasoning, a
    tool call) besides the finish."""
    for ch in obj.get("choices") or ():
        delta = ch.get("delta") if isinstance(ch, dict) else None
        if isinstance(delta, dict) and any(
            delta.get(k) for k in ("content", "reasoning_content", "reasoning", "tool_calls", "refusal")
        ):
            return True
    return False


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _blank(v: Any) -> bool:
    return not isinstance(v, str) or not v.strip()


class _Call:
    __slots__ = ("args", "id", "name", "named", "ordinal", "raw")

    def __init__(self, ordinal: int, raw: int, id_: str | None, name: str | None) -> None:
        self.ordinal = ordinal
        self.raw = raw
        self.id = id_
        self.name = name
        self.args = Streamed()
        self.named = not _blank(name)
        """A header with a non-blank name has gone (or will go) out for this call."""


class _Said:
    """Rule replay: the content a choice streamed, as one UTF-8 buffer grown in place
    (about a byte per character; a prefix test of a delta costs O(delta): a string is a
    prefix of another exactly when its UTF-8 bytes are)."""

    __slots__ = ("buf", "chars", "deltas")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.chars = 0
        self.deltas = 0

    def add(self, content: str, enc: bytes) -> None:
        self.buf += enc
        self.chars += len(content)
        self.deltas += 1

    def may_repeat(self, enc: bytes) -> bool:
        """A delta (``enc``, its UTF-8) that rule replay must compare with the content so
        far: two deltas came, and it is the content's beginning (what :func:`wire.replay.step`
        may hold or drop; the fast path's cheap test)."""
        return self.deltas >= 2 and len(enc) <= len(self.buf) and self.buf.startswith(enc)


class _Run:
    """Rule replay: a second run of deltas that may be repeating a choice's content: its
    held chunks (each with its delta and content) and how many bytes of the content it
    matched."""

    __slots__ = ("ci", "nbytes", "recs", "said")

    def __init__(self, ci: int, said: _Said) -> None:
        self.ci = ci
        self.said = said
        self.recs: list[tuple[Rec, dict[str, Any], str]] = []
        self.nbytes = 0


def _placeholders(obj: dict[str, Any]) -> bool:
    """A usage chunk whose choices carry nothing: each one without a finish_reason or
    logprobs, its delta absent or with every field null or empty (rule usage_chunk)."""
    if not isinstance(obj.get("usage"), dict):
        return False
    for ch in obj["choices"]:
        if not isinstance(ch, dict) or ch.get("finish_reason") is not None or ch.get("logprobs"):
            return False
        delta = ch.get("delta")
        if delta is not None and not (isinstance(delta, dict) and not any(delta.values())):
            return False
    return True


_NOT = -2
""":meth:`ChatRepairer._takes`: not the common case (nothing changed; the full path)."""
_SAME = -1
""":meth:`ChatRepairer._takes`: taken, the chunk goes out as it came."""
_TEXT_KIND: Final = "chat.text:"
"""Skim layout kinds (:mod:`wire.skim`): a chunk without tool calls, and one tool call's
argument delta, each followed by the keys of its delta (its call entry), so that each
shape of a stream (role, reasoning, content...) has its own few tries at learning."""
_CALL_KIND: Final = "chat.call:"
_CHOICE = ("choices", 0)
_DELTA = ("choices", 0, "delta")
_ENTRY = ("choices", 0, "delta", "tool_calls", 0)


class _Holes:
    """Where a learned chunk layout (:mod:`wire.skim`) holds what :meth:`ChatRepairer._takes`
    reads (-1: not in the layout, so absent or null), and the layout's other holes."""

    __slots__ = (
        "args",
        "c_args",
        "c_ci",
        "c_content",
        "c_id",
        "c_name",
        "call",
        "ci",
        "content",
        "id",
        "index",
        "name",
        "ok",
        "strs",
    )

    def __init__(self, layout: Layout) -> None:
        kind = layout.kind
        holes = layout.holes
        self.call = kind.startswith(_CALL_KIND)
        self.ci = layout.slot(*_CHOICE, "index")
        self.content = layout.slot(*_DELTA, "content")
        self.index = layout.slot(*_ENTRY, "index")
        self.id = layout.slot(*_ENTRY, "id")
        self.name = layout.slot(*_ENTRY, "function", "name")
        self.args = layout.slot(*_ENTRY, "function", "arguments")
        c = layout.consts  # the values the layout holds literally (the learned chunk's: _common accepted them)
        self.c_ci: Any = c.get((*_CHOICE, "index"), 0)
        self.c_content: Any = c.get((*_DELTA, "content"))
        self.c_id: Any = c.get((*_ENTRY, "id"))
        self.c_name: Any = c.get((*_ENTRY, "function", "name"))
        self.c_args: Any = c.get((*_ENTRY, "function", "arguments"))
        self.strs = layout.strings(self.content, self.id, self.name, self.args)
        """String holes the chunk's rules do not read: decoded only as a check."""

        # what _common found when it learned the layout (a guard: it learns only those)
        self.ok = (
            (self.call or kind.startswith(_TEXT_KIND))
            and _typed(holes, self.ci, "i")
            and _typed(holes, self.content, "s")
            and (
                not self.call
                or (
                    self.index >= 0
                    and _typed(holes, self.index, "i")
                    and _typed(holes, self.id, "s")
                    and _typed(holes, self.name, "s")
                    and _typed(holes, self.args, "s")
                )
            )
        )


def _typed(holes: list[str], slot: int, t: str) -> bool:
    return slot < 0 or holes[slot] == t


_SKIM_HOLES: Final = frozenset(
    {
        (*_DELTA, "content"),
        (*_DELTA, "reasoning_content"),
        (*_DELTA, "reasoning"),
        (*_ENTRY, "index"),
        (*_ENTRY, "function", "arguments"),
    }
)
"""What changes from one chunk to the next (wire.skim): the text, a call's index and its
arguments. The rest of a layout is literal: the id, model and created of the stream, the
choice's index, a call entry's id and name."""


class ChatRepairer(HoldingRepairer):
    api = "chat"

    def __init__(self, rules: Rules, ctx: FlowContext, verdict: Verdict) -> None:
        super().__init__(rules, ctx, verdict)
        self._calls: dict[int, dict[int, _Call]] = {}  # choice -> raw index -> current call
        self._ordinals: dict[int, int] = {}  # choice -> calls seen
        self._order: list[_Call] = []  # all calls, in order of first appearance
        self._awaiting: dict[_Call, tuple[Rec, dict[str, Any]]] = {}  # nameless headers
        self._finish: tuple[Rec, list[dict[str, Any]]] | None = None
        self._usage: tuple[Rec, dict[str, Any]] | None = None  # the last usage object seen
        self._settled = False
        self._choices: set[int] = set()
        self._done = False  # data: [DONE] came
        self._eol: bytes | None = None  # the stream's line end (a synthesized error chunk)
        self._said: dict[int, _Said] = {}  # rule replay: choice -> what it streamed
        self._run: _Run | None = None  # rule replay: a run of deltas that may repeat the content
        self._noted_foreign = False
        self._upstream_failed = False  # rule upstream_failure: the finish became an error chunk
        self._error_at: Rec | None = None  # rule error_last: the error chunk this repairer wrote
        self._withhold_done: str | None = None  # rule error_finish: why the [DONE] is withheld
        self._after_call: set[int] = set()  # rule tool_finish: the choices whose last output was a call
        self._by_choice: dict[int, list[_Call]] = {}  # rule tool_finish: choice -> its calls, in order
        self._whole = True  # rule done_marker: the last event was whole (the stream ends at a boundary)
        self.skim = Skim()

    # --- EventRepairer -----------------------------------------------------------
    def event(self, ev: Event) -> list[bytes]:
        ev = self._foreign(ev)
        self._whole = ev.complete
        if ev.data is not None:
            # the substring test first: no copy of every chunk's data by strip()
            self._done = self._done or (b"[DONE]" in ev.data and ev.data.strip() == b"[DONE]")
        obj = self.parse(ev)
        if obj is None and self._done and self._hides_failure() and not self._upstream_proves_failure():
            return self._hidden_failure(ev)
        if obj is not None:
            if self._eol is None and isinstance(obj.get("choices"), list):
                # a chat stream (rule eof_terminal ends only those: a body that never was
                # one, e.g. garbage or another API's events, passes as it came)
                self._eol = ev.eol
            out = self._common(ev, obj)
            if out is not None:
                return [out]
        rec = Rec(ev, obj)
        if self._run is not None and ev.data is not None:
            pure = pure_content(obj) if obj is not None else None
            if pure is None or pure[0] != self._run.ci:
                self._end_run()  # any other chunk: no repeat (chat.py docstring, replay)
        if obj is not None:
            if "error" in obj and "choices" not in obj:
                self._errored = True
                self._release("an error event")
            else:
                self._chunk(rec, obj)
        elif ev.data is not None and self._finish is not None and not self._settled:
            self._settle()  # [DONE] (or any other data) after the finish: no usage is coming
        if obj is None and self._done and ev.data is not None and ev.data.strip() == b"[DONE]":
            self._upstream_done(rec)
            if self._withhold_done is not None:  # rule error_finish (after the error chunk it wrote)
                rec.ev = Event(b": [DONE] withheld: " + self._withhold_done.encode() + rec.ev.eol + rec.ev.eol,
                               eol=rec.ev.eol)  # fmt: skip
                self.count("error_finish")
                self._withhold_done = None
        elif self._error_at is not None and self._error_at is not rec and ev.data is not None:
            self._after_error(rec)
        return self._queue(rec)

    def _after_error(self, rec: Rec) -> None:
        """Rule error_last: a data chunk after the error chunk this repairer wrote goes out
        as an SSE comment (LiteLLM's usage chunk after the failed finish): the failure is
        the last thing the client reads."""
        if not self.rules.error_last:
            return
        rec.ev = commented(rec.ev)
        rec.obj = None
        rec.dirty = False
        rec.wait = None
        self.count("error_last", *rec.rules)
        rec.rules = ()
        self.note("a data chunk after the error chunk withheld (an SSE comment)")

    # --- upstream leg: the provider's call failed -----------------------
    def _upstream_done(self, rec: Rec) -> None:
        """``[DONE]`` (rule upstream_failure): after a finish turned into the error chunk it
        is withheld (an SSE comment: OpenAI ends a failed stream without it); with no
        finish at all and the upstream leg proving the call failed, it becomes the error
        chunk."""
        if not self.rules.upstream_failure:
            return
        if self._upstream_failed:
            rec.ev = Event(b": [DONE] withheld: the upstream failed" + rec.ev.eol + rec.ev.eol, eol=rec.ev.eol)
            return
        if self._finish is not None or self._errored or len(self._choices) > 1:
            return
        self._report_args()
        d = self.decision = self.verdict.decide()
        if d.failed and not d.native:
            self._fail(rec, d.evidence[0].detail if d.evidence else "failed")

    def _upstream_proves_failure(self) -> bool:
        """At a ``[DONE]`` without a finish: does the verdict (the upstream leg's call) say
        the turn failed? Then :meth:`_upstream_done` ends it with the provider's evidence
        instead of rule hidden_failure's generic error chunk."""
        if not self.rules.upstream_failure or self._finish is not None or self._errored or len(self._choices) > 1:
            return False
        return self.verdict.upstream_failed()  # (no client-leg heuristics: no parse of the arguments here)

    def _fail(self, rec: Rec, detail: str) -> None:
        rec.obj = chat_error(detail)
        rec.mark("upstream_failure")
        self._upstream_failed = True
        self._error_at = rec
        self.note(f"ended with an error chunk: the upstream failed ({detail})")

    # --- end upstream leg ---

    # --- the common chunks: content deltas, argument deltas (parsed or skimmed) ----
    def _common(self, ev: Event, obj: dict[str, Any]) -> bytes | None:
        """The common path of :meth:`event`: a chunk of one choice, no finish, no usage,
        whose delta has text (or nothing :meth:`_chunk` reads: a role, reasoning) and at
        most one tool call entry without a header (an arguments delta of a known call);
        its bytes if :meth:`_takes` takes it, else None and the full path. A taken
        chunk's layout is learned for skimming (:mod:`wire.skim`).

        The checks here are on the chunk's shape only (keys, types, nulls): what a
        layout learned of it fixes for every chunk it matches (:meth:`skimmed`); every
        check on a value is in :meth:`_takes`, which both paths call."""
        if "error" in obj or obj.get("usage") is not None:
            return None  # an error event; usage (the verdict counts it, rule usage fills it)
        choices = obj.get("choices")
        if type(choices) is not list or len(choices) != 1:
            return None
        ch = choices[0]
        if type(ch) is not dict or ch.get("finish_reason") is not None:
            return None  # a finish: rules truncation, finish_reason, the verdict
        ci = ch.get("index", 0)
        delta = ch.get("delta")
        if type(ci) is not int or type(delta) is not dict:
            return None
        content = delta.get("content")
        if content is not None and type(content) is not str:
            return None
        tcs = delta.get("tool_calls")
        entry: dict[str, Any] | None = None
        raw: Any = 0
        id_: Any = None
        name: Any = None
        args: Any = None
        if tcs is not None:
            if type(tcs) is not list or len(tcs) != 1 or type(tcs[0]) is not dict:
                return None
            entry = tcs[0]
            raw = entry.get("index")
            fn = entry.get("function")
            id_ = entry.get("id")
            if type(raw) is not int or type(fn) is not dict or not (id_ is None or type(id_) is str):
                return None
            name = fn.get("name")
            args = fn.get("arguments")
            if not (name is None or type(name) is str) or not (args is None or type(args) is str):
                return None
        index = self._takes(ci, content, entry is not None, raw, id_, name, args)
        if index == _NOT:
            return None
        skim = self.skim
        if skim is not None:
            kind = _CALL_KIND + ",".join(entry) if entry is not None else _TEXT_KIND + ",".join(delta)
            skim.learn(kind, ev.raw, ev.data, ev.event, obj, _SKIM_HOLES)
        if index == _SAME or entry is None:
            return ev.raw
        entry["index"] = index
        return self.dump(ev, obj, ("tool_index",))

    def _takes(
        self,
        ci: int,
        content: str | None,
        call: bool,
        raw: int,
        id_: str | None,
        name: str | None,
        args: str | None,
        enc: bytes | None = None,
    ) -> int:
        """A common chunk (:meth:`_common`), from the parsed chunk or a skimmed one's values
        (:meth:`skimmed`): one test for both. :data:`_NOT`, having changed nothing, when
        it must take the full path; else recorded (what :meth:`_chunk`, :meth:`_replay`
        and :meth:`_tool_entry` record of it: the choice, the streamed text and arguments,
        the verdict's evidence) and :data:`_SAME` (its bytes as they came) or the index
        its call entry goes out with (rule tool_index). ``enc``: the content's UTF-8, if
        the caller has it.

        Under these checks the full path does exactly this: each rules out what could
        do more (said beside it)."""
        if self._recs or self._run is not None or self._eol is None:
            return _NOT  # events held (a name, a possible repeat): it queues behind them
        if self._error_at is not None:
            return _NOT  # rule error_last: after the error chunk this repairer wrote
        if self._finish is not None and not self._settled:
            return _NOT  # a held finish: this chunk settles it
        said: _Said | None = None
        if content:
            if enc is None:
                enc = content.encode("utf-8", "surrogatepass")  # once, for replay and the verdict
            if self.rules.replay:
                said = self._said.get(ci)
                if said is not None and said.may_repeat(enc):
                    return _NOT  # rule replay compares it with the text so far
        found: _Call | None = None
        if call:
            if not _blank(id_) or not _blank(name):
                return _NOT  # a header: rule tool_header, index reuse
            calls = self._calls.get(ci)
            found = calls.get(raw) if calls is not None else None
            if found is None:
                return _NOT  # a new call: rule tool_index numbers it
        self._choices.add(ci)
        if content:
            if self._after_call:  # (empty on a turn of text: one test per delta)
                self._after_call.discard(ci)  # rule tool_finish: content after the calls
        elif found is not None:
            self._after_call.add(ci)
        if content and enc is not None:  # (enc: encoded above)
            if self.rules.replay:
                if said is None:
                    said = self._said[ci] = _Said()
                said.add(content, enc)
            self.verdict.observe_text(content, enc)
        if found is None:
            return _SAME
        if args:
            found.args.append(args)
            self.verdict.observe_args(args)
        if self.rules.tool_index and raw != found.ordinal:
            return found.ordinal
        return _SAME

    def skimmed(self, s: Skimmed) -> bytes | None:
        """A skimmed common chunk (:mod:`wire.skim`), through :meth:`_takes` as
        :meth:`_common` takes the parsed one; None for the full path."""
        layout = s.layout
        if layout.info is None:  # where the layout holds what _takes reads: once per layout
            layout.info = _Holes(layout)
        h: _Holes = layout.info
        if not h.ok:
            return None
        try:
            for i in h.strs:  # the strings nothing reads: valid, as the full path's loads needs
                s.text(i)
            content: str | None = h.c_content
            enc: bytes | None = None
            if h.content >= 0:
                content = s.text(h.content)
                enc = s.plain  # its UTF-8 as it came (decoded strictly above), if no escape
            raw = 0
            id_: str | None = None
            name: str | None = None
            args: str | None = None
            if h.call:
                raw = s.number(h.index)
                id_ = s.text(h.id) if h.id >= 0 else h.c_id
                name = s.text(h.name) if h.name >= 0 else h.c_name
                args = s.text(h.args) if h.args >= 0 else h.c_args
        except ValueError:
            return None  # not what orjson would decode: the full path says so
        ci = s.number(h.ci) if h.ci >= 0 else h.c_ci
        index = self._takes(ci, content, h.call, raw, id_, name, args, enc)
        if index == _NOT:
            return None
        if index == _SAME:
            return s.raw
        self.count("tool_index")
        return s.render(h.index, index, h.args, args if args is not None else "")

    def end(self) -> list[bytes]:
        if not self._finished and not self._errored:
            self.note("stream ended without a finish_reason; passed through as it ended")
        self._release(None)
        if self.decision is None:
            self._report_args()
            self.decision = self.verdict.decide()
        out = self._flush()
        if self._cut_short():
            # rule eof_terminal: an error chunk as OpenAI sends one mid-stream (openai-python
            # raises APIError on it, the AI SDK ends with finish reason "error"); never a finish
            err = {
                "error": {
                    "message": "The upstream stream ended without a finish_reason.",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
            out.append(format_event(orjson.dumps(err), eol=self._eol or b"\n"))
            self.count("eof_terminal")
            self.note("stream ended without a finish_reason: ended it with an error chunk")
        elif self._ends_without_done():
            eol = self._eol or b"\n"  # (set: _ends_without_done)
            out.append(b"data: [DONE]" + eol + eol)
            self.count("done_marker")
            self.note("stream ended after its finish without data: [DONE]: added it")
        return out

    def _ends_without_done(self) -> bool:
        """Rule done_marker: a chat stream that had its finish, no error (its own or one
        written here) and ended cleanly at an event boundary, without ``data: [DONE]``."""
        return (
            self.rules.done_marker
            and self._eol is not None
            and self._whole
            and self._finished
            and not (self._done or self._errored or self._upstream_failed or self._error_at is not None)
        )

    def _hides_failure(self) -> bool:
        """Rule hidden_failure (:mod:`wire.hidden`): ``[DONE]`` ends a chat stream whose
        chunks carried no finish_reason and no error: the upstream never finished."""
        return self.rules.hidden_failure and self._eol is not None and not self._finished and not self._errored

    def _hidden_failure(self, ev: Event) -> list[bytes]:
        """The held events, an error chunk as OpenAI sends one mid-stream, then the ``[DONE]``
        as it came: the client sees the failure (openai-python raises APIError, the AI SDK
        finishes ``error``), never a finish."""
        self._errored = True
        self._error_at = Rec(ev, None)  # rule error_last: nothing but comments after it
        self._release("a [DONE] without a finish_reason")
        out = self._flush()
        out.append(format_event(orjson.dumps(hidden.CHAT_ERROR), eol=self._eol or b"\n"))
        self.count("hidden_failure")
        self.note(f"{hidden.DONE_WITHOUT_FINISH}: an error chunk before it")
        out.append(ev.raw)
        return out

    def _cut_short(self) -> bool:
        """Rule eof_terminal applies: chunks came, then the end without a finish_reason,
        an error or [DONE]."""
        return self.rules.eof_terminal and self._eol is not None and not (self._finished or self._errored or self._done)

    def _foreign(self, ev: Event) -> Event:
        """Rule nonstandard (an event chat does not define becomes a comment) and, when
        rule eof_terminal will end the stream, the half event it stops in (kept as a
        comment, terminated, so it cannot glue onto the error chunk)."""
        if self.rules.nonstandard and ev.complete:
            why = foreign("chat", ev)
            if why is not None:
                self.count("nonstandard")
                if not self._noted_foreign:
                    self._noted_foreign = True
                    self.note(f"turned a non-standard event into an SSE comment ({why[1]})")
                return commented(ev)
        if not ev.complete and self._cut_short():
            c = commented(ev)
            raw = c.raw + (b"" if c.raw.endswith((b"\n", b"\r")) else ev.eol) + ev.eol
            self.count("eof_terminal")
            return Event(raw, c.fields, ev.eol)
        return ev

    def _replay(self, rec: Rec, ci: int, delta: dict[str, Any], content: str, obj: dict[str, Any]) -> bool:
        """Rule replay (LiteLLM #41109; :func:`wire.replay.step`): True when the delta
        is not (yet) text for the client: held in a possible repeat, or dropped as part of
        one (its ``content`` emptied)."""
        said = self._said.get(ci)
        if said is None:
            said = self._said[ci] = _Said()
        enc = content.encode("utf-8", "surrogatepass")
        buf = said.buf
        run = self._run
        if run is not None:  # this pure chunk continues it (event() ended it otherwise)
            what = step(buf, len(buf), run.nbytes, said.deltas, said.chars, enc)
            if what != DIVERGED:
                run.recs.append((rec, delta, content))
                run.nbytes += len(enc)
                if what == PHRASE:
                    self._end_run()  # the content is a phrase said over and over: text
                elif what == REPEATED:
                    self._run = None
                    for r, d, _ in run.recs:
                        d["content"] = ""
                        r.mark("replay")
                        r.wait = None
                    n = len(run.recs)
                    self.note(f"dropped a second run of {n} content deltas repeating the whole text (choice {ci})")
                else:
                    rec.wait = "replay"
                return True
            self._end_run()  # diverged: its text is the client's; this delta may start another
        what = step(buf, len(buf), -1, said.deltas, said.chars, enc)
        if what == WHOLE:
            delta["content"] = ""
            rec.mark("replay")
            self.note(f"dropped a content delta replaying the whole text (choice {ci})")
            return True
        if what == START and pure_content(obj) is not None:  # only a pure chunk starts a run
            run = self._run = _Run(ci, said)
            run.recs.append((rec, delta, content))
            run.nbytes = len(enc)
            rec.wait = "replay"
            return True
        said.add(content, enc)
        return False

    def _end_run(self) -> None:
        """A possible repeat is not one: its chunks go out unchanged, their text is the
        choice's."""
        run, self._run = self._run, None
        if run is None:
            return
        for r, _, content in run.recs:
            r.wait = None
            run.said.add(content, content.encode("utf-8", "surrogatepass"))
            self.verdict.observe_text(content)

    def _hold_limit(self) -> int:
        """A possible repeat may hold more than a name or a finish waits for, but only
        while nothing else waits (else HOLD_LIMIT bounds the other wait as it would)."""
        if self._run is None or self._awaiting or (self._finish is not None and not self._settled):
            return HOLD_LIMIT
        return REPLAY_HOLD_LIMIT

    # --- the rules -------------------------------------------------------------
    def _chunk(self, rec: Rec, obj: dict[str, Any]) -> None:
        choices = obj.get("choices")
        if self._finished and self.rules.usage_chunk and isinstance(choices, list) and choices and _placeholders(obj):
            # rule usage_chunk (LiteLLM #28735): the usage chunk after the finish carries
            # placeholder choices; the spec's is choices: [] (clients that tell the usage
            # chunk by its empty choices count it as content too, and its usage twice)
            obj["choices"] = choices = []
            rec.mark("usage_chunk")
            self.note("gave the usage chunk after the finish the spec's choices: [] (it carried placeholders)")
        finishing: list[dict[str, Any]] = []
        if isinstance(choices, list):
            for ch in choices:
                if not isinstance(ch, dict):
                    continue
                ci = ch.get("index", 0)
                ci = ci if isinstance(ci, int) else 0
                self._choices.add(ci)
                delta = ch.get("delta")
                if isinstance(delta, dict):
                    content = _text(delta.get("content"))
                    if content and self.rules.replay and self._replay(rec, ci, delta, content, obj):
                        content = None
                    if content:
                        self.verdict.observe_text(content)
                        self._after_call.discard(ci)
                    tcs = delta.get("tool_calls")
                    if isinstance(tcs, list):
                        for entry in tcs:
                            if isinstance(entry, dict):
                                self._tool_entry(rec, ci, entry)
                                self._after_call.add(ci)
                if ch.get("finish_reason") is not None:
                    finishing.append(ch)
        usage = obj.get("usage")
        has_usage = isinstance(usage, dict)
        if isinstance(usage, dict):
            if self.rules.usage_math:  # before the verdict counts it (wire/usage_math.py)
                fixed = usage_math.repair("chat", usage)
                if fixed:
                    rec.mark("usage_math")
                    self.note(f"usage made to add up: {'; '.join(fixed)}")
            self.verdict.usage(usage.get("completion_tokens"))
            self._usage = (rec, usage)
        if self._finish is not None and not self._settled and rec.ev.data is not None:
            self._settle()  # the event after a held finish chunk (usage counted above)
        if finishing and self._error_finish(rec, finishing):
            return
        if finishing:
            self._finished = True
            self._on_finish(rec, finishing, has_usage)

    def _error_finish(self, rec: Rec, finishing: list[dict[str, Any]]) -> bool:
        """Rule error_finish: a finish_reason that names an error (``error``, ``..._error``:
        Portkey's Anthropic in-band ``overloaded_error``) is a failure: the chunk becomes
        the error chunk (the gateway's word in its message) and the ``[DONE]`` after it is
        withheld. Left to rule upstream_failure when the upstream leg proves the failure
        (its evidence is the better message)."""
        if not self.rules.error_finish or self._errored:
            return False
        word = next((fr for ch in finishing if stops.names_error(fr := ch.get("finish_reason"))), None)
        if word is None or (self.rules.upstream_failure and self.verdict.upstream_failed()):
            return False
        why = f"the gateway ended the stream with finish_reason {word!r}"
        err = {"error": {"message": f"The upstream provider failed: {why}.", "type": "server_error",
                         "param": None, "code": None}}  # fmt: skip
        if rec.obj is not None and _carries_output(rec.obj):
            # what the chunk streamed stays the client's: the chunk without its finish, then
            # the error chunk, as one queued event (its bytes final: no rule changes it now)
            for ch in finishing:
                ch["finish_reason"] = None
            eol = rec.ev.eol
            raw = rec.ev.with_data(orjson.dumps(rec.obj)) + format_event(orjson.dumps(err), eol=eol)
            rec.ev, rec.obj, rec.dirty = Event(raw, eol=eol), None, False
            self.count("error_finish", *rec.rules)
            rec.rules = ()
        else:
            rec.obj = err
            rec.mark("error_finish")
        self._errored = True
        self._error_at = rec
        self._withhold_done = why
        self._release("an error finish_reason")
        self.note(f"finish_reason {word!r} names an error: ended with an error chunk")
        return True

    def _tool_entry(self, rec: Rec, ci: int, entry: dict[str, Any]) -> None:
        raw = entry.get("index")
        if not isinstance(raw, int) or isinstance(raw, bool):
            self.note("tool_calls entry without an integer index, passed through")
            return
        fn = entry.get("function")
        fn = fn if isinstance(fn, dict) else None
        name = fn.get("name") if fn is not None else None
        id_ = entry.get("id")
        calls = self._calls.setdefault(ci, {})
        call = calls.get(raw)
        is_header = not _blank(id_) or not _blank(name)
        if call is not None and is_header and self._is_new_call(call, id_, name):
            call = None
        if call is None:
            call = self._new_call(ci, raw, id_, name)
            calls[raw] = call
            looks_header = "id" in entry or "type" in entry or (fn is not None and "name" in fn)
            if not call.named and self.rules.tool_header and looks_header:
                rec.wait = "name"  # a header without a usable name: wait for it
                self._awaiting[call] = (rec, entry)
        elif is_header and self.rules.tool_header:
            self._resent_header(rec, call, entry, fn, id_, name)
        if self.rules.tool_index and raw != call.ordinal:
            entry["index"] = call.ordinal
            rec.mark("tool_index")
        args = _text(fn.get("arguments")) if fn is not None else None
        if args:
            call.args.append(args)
            self.verdict.observe_args(args)

    def _is_new_call(self, call: _Call, id_: Any, name: Any) -> bool:
        if _blank(id_) or id_ == call.id:
            return False
        if not _blank(name) and call.named and name != call.name:
            return True  # another call reusing the index
        return not (_blank(call.id) or call.id == f"call_{call.raw}")  # else: CPA's late id

    def _new_call(self, ci: int, raw: int, id_: Any, name: Any) -> _Call:
        n = self._ordinals.get(ci, 0)
        self._ordinals[ci] = n + 1
        call = _Call(n, raw, _text(id_), _text(name))
        self._order.append(call)
        self._by_choice.setdefault(ci, []).append(call)
        return call

    def _resent_header(
        self, rec: Rec, call: _Call, entry: dict[str, Any], fn: dict[str, Any] | None, id_: Any, name: Any
    ) -> None:
        held = self._awaiting.get(call)
        if held is not None:  # the first header is still here: complete it
            hrec, hentry = held
            if not _blank(id_) and (_blank(call.id) or call.id == f"call_{call.raw}"):
                hentry["id"] = id_
                call.id = id_
                hrec.mark("tool_header")
            if not _blank(name):
                hfn = hentry.get("function")
                if not isinstance(hfn, dict):
                    hfn = hentry["function"] = {}
                hfn["name"] = name
                call.name, call.named = name, True
                hrec.mark("tool_header")
                hrec.wait = None
                del self._awaiting[call]
            strip_name = True
        else:
            strip_name = call.named  # a nameless header went out: the name must still come
            if not _blank(name) and not call.named:
                call.name, call.named = name, True
        if isinstance(id_, str):
            del entry["id"]
            rec.mark("tool_header")
        if "type" in entry:
            del entry["type"]
            rec.mark("tool_header")
        if strip_name and fn is not None and isinstance(fn.get("name"), str):
            del fn["name"]
            rec.mark("tool_header")

    def _on_finish(self, rec: Rec, finishing: list[dict[str, Any]], has_usage: bool) -> None:
        for ch in finishing:
            orig = spec_finish(ch, self.rules)
            if orig is not None:
                rec.mark("finish_reason")
                why = (f"beside native_finish_reason {ch.get('native_finish_reason')!r}" if orig in stops.OWN["chat"]
                       else "(not in the spec)")  # fmt: skip
                self.note(f"finish_reason {orig!r} {why} written as {ch['finish_reason']!r}")
            fr = ch.get("finish_reason")
            if isinstance(fr, str) and fr in _NATIVE:  # a list or object here is not hashable
                self.verdict.native(_NATIVE[fr], f"finish_reason {orig or fr!r}")
        self._give_up_names("the finish chunk")
        if self._finish is not None:
            if len(self._choices) <= 1:
                self.note("a second finishing chunk, passed through")
            return
        self._finish = (rec, finishing)
        if has_usage or self.rules.truncation == "off" or not self._usage_can_matter(finishing):
            self._settle()
        else:
            rec.wait = "finish"  # usage may follow in a usage-only chunk

    def _usage_can_matter(self, finishing: list[dict[str, Any]]) -> bool:
        """Can a usage chunk still to come change the verdict, or need the upstream's
        counts (rule usage: they go into that chunk, not onto the finish)? The verdict: only
        with a request cap and usage evidence on (it compares usage with the cap, nothing
        else), and not after a gateway's own ``length``/``content_filter`` (native wins).
        Otherwise the finish chunk goes out at once: a held event is lost if the upstream
        is cut (mitmproxy 12.3.1 ends the flow without a last call of the stream
        callable), so nothing is held that cannot change."""
        v = self.verdict
        if v.resolver is not None and (self.rules.usage or "upstream" in v.enabled):
            v.decide()  # runs the resolver: the upstream leg's record is known now, unless...
        if getattr(v.resolver, "waiting", False):
            # ...the linked upstream call is still open (the gateway wrote its finish
            # before reading the upstream's trailer): hold the finish until the next
            # event ([DONE] comes after that trailer), then look again
            return True
        if self.rules.usage and v.upstream_counts is not None:
            return True  # rule usage fills them into a usage-only chunk if one follows
        if v.cap is None or "usage" not in v.enabled:
            return False
        return not any(isinstance(fr := ch.get("finish_reason"), str) and fr in _NATIVE for ch in finishing)

    def _settle(self) -> None:
        assert self._finish is not None
        rec, finishing = self._finish
        self._settled = True
        rec.wait = None
        self._report_args()
        d = self.decision = self.verdict.decide()
        self._fill_usage(rec)
        if d.failed and not d.native and self.rules.upstream_failure and len(self._choices) <= 1 and rec.obj:
            rec.obj.clear()  # upstream leg: the finish chunk becomes the error chunk
            self._fail(rec, d.evidence[0].detail if d.evidence else "failed")
            return
        new = d.word("chat")
        if new is None and not d.failed:
            self._tool_finish(rec, finishing)
        if new is None or d.native or self.rules.truncation == "off":
            return
        if len(self._choices) > 1:
            self.note(f"{d.receipt()}; not applied: the stream has {len(self._choices)} choices")
            return
        for ch in finishing:
            if ch.get("finish_reason") != new:
                ch["finish_reason"] = new
                rec.mark("truncation")

    def _tool_finish(self, rec: Rec, finishing: list[dict[str, Any]]) -> None:
        """Rule tool_finish: a choice finishing ``stop`` whose last output was whole tool
        calls (no content after them, every call's arguments a JSON object) finishes
        ``tool_calls`` (Portkey's Gemini STOP on a function-call turn)."""
        if not self.rules.tool_finish or forced_call(self.ctx.request):
            return
        for ch in finishing:
            ci = ch.get("index", 0)
            ci = ci if isinstance(ci, int) else 0
            if ch.get("finish_reason") != "stop" or ci not in self._after_call:
                continue
            if whole_calls([c.args.text() for c in self._by_choice.get(ci, ())]):
                ch["finish_reason"] = "tool_calls"
                rec.mark("tool_finish")
                self.note(f"finish_reason 'stop' right after whole tool calls written as 'tool_calls' (choice {ci})")

    def _fill_usage(self, finish: Rec) -> None:
        """Missing or zero usage counts from the upstream's (``usage`` rule): in the usage
        object still held (on the finish chunk, or the usage-only chunk that settled it),
        or, when the stream had none, a new one on the finish chunk, where CPA puts it."""
        if self.verdict.upstream_counts is None or not self.rules.usage:
            return
        usage: dict[str, Any]
        if self._usage is None:
            if finish.obj is None:
                return
            rec, usage = finish, {}
        else:
            rec, usage = self._usage
            if rec.sent:
                return  # a usage object already sent (before the finish): not ours to change
        filled = fill_chat_usage(usage, self.verdict)
        if filled and rec.obj is not None:  # rec.obj: the chunk object in either branch
            if usage is not rec.obj.get("usage"):
                rec.obj["usage"] = usage
            rec.mark("usage")
            self.note(filled)

    def _report_args(self) -> None:
        for call in self._order:
            self.verdict.tool_args(call.args.text(), call.name)

    # --- the out queue -----------------------------------------------------------
    def _give_up_names(self, why: str) -> None:
        if self._awaiting:
            self.note(f"tool call name never arrived before {why}; header passed as it came")
            for hrec, _ in self._awaiting.values():
                hrec.wait = None
            self._awaiting.clear()

    def _release(self, why: str | None) -> None:
        if why is not None and (self._awaiting or (self._finish and not self._settled) or self._run):
            self.note(f"released held events early: {why}")
        self._end_run()
        self._give_up_names(why or "the end of the stream")
        if self._finish is not None and not self._settled:
            self._settle()


USAGE_FIELDS = {
    "prompt_tokens": "input_tokens",
    "completion_tokens": "output_tokens",
    "prompt_tokens_details.cached_tokens": "cached_tokens",
    "completion_tokens_details.reasoning_tokens": "reasoning_tokens",
}
"""Chat usage key -> :class:`wire.verdict.UpstreamUsage` attribute (CPA's mapping)."""


def fill_chat_usage(usage: dict[str, Any], verdict: Verdict) -> str | None:
    """Fill missing or zero counts of ``usage`` (in place) from the verdict's upstream
    counts; the note for the receipt, or None when nothing was filled."""
    filled = verdict.fill_usage(usage, USAGE_FIELDS, "total_tokens", ("prompt_tokens", "completion_tokens"))
    return verdict.upstream_counts.note(filled) if filled and verdict.upstream_counts else None


def repair_chat_json(
    obj: dict[str, Any], rules: Rules, ctx: FlowContext, verdict: Verdict, fired: Counter[str] | None = None
) -> bool:
    """Repair a non-streaming ``chat.completion`` body in place; True if it changed.

    - ``tool_index``: ``message.tool_calls[].id`` made unique. CPA's non-stream fallback
      gives every call without an id ``call_0``; the client would answer two calls with
      the same ``tool_call_id``. The first occurrence keeps its id, each later duplicate
      becomes ``call_<ordinal>`` (its position in ``tool_calls``; suffixed if taken), the
      fallback CPA's fix uses. Unique ids are never touched.
    - ``finish_reason``: a non-standard one mapped to the spec's, as for streams.
    - ``truncation``: as for streams; the finish_reason comes from the verdict (usage,
      the last call's arguments, a native ``length``/``content_filter``).
    - ``tool_finish``: ``stop`` beside ``message.tool_calls`` whose arguments are all JSON
      objects becomes ``tool_calls`` (never against a truncation verdict).

    - ``hidden_failure``: an empty completion with id, model and usage zeroed (CPA #2193,
      :func:`wire.hidden.zeroed_completion`) becomes the OpenAI error object, in place; the
      addon answers it with HTTP 502 (:func:`is_error_body`).

    ``fired`` (if given) counts each rule that changed the body once.
    """
    if verdict.cap is None and ctx.request:
        verdict.request(ctx.request)
    if rules.hidden_failure and hidden.zeroed_completion(obj):
        obj.clear()
        obj.update(json_failure("chat", hidden.ZEROED_COMPLETION)[1])
        if fired is not None:
            fired["hidden_failure"] += 1
        return True
    choices = obj.get("choices")
    if not isinstance(choices, list):
        return False
    changed = ids_fixed = mapped = False
    usage = obj.get("usage")
    if rules.usage_math and usage_math.repair("chat", usage):
        changed = True
        if fired is not None:
            fired["usage_math"] += 1
    if isinstance(usage, dict):
        verdict.usage(usage.get("completion_tokens"))
    dicts = [ch for ch in choices if isinstance(ch, dict)]
    for ch in dicts:
        orig = spec_finish(ch, rules)
        mapped |= orig is not None
        fr = ch.get("finish_reason")
        if isinstance(fr, str) and fr in _NATIVE:  # a list or object here is not hashable
            verdict.native(_NATIVE[fr], f"finish_reason {orig or fr!r}")
        msg = ch.get("message")
        if not isinstance(msg, dict):
            continue
        content = _text(msg.get("content"))
        if content:
            verdict.observe_text(content)
        tcs = msg.get("tool_calls")
        if not isinstance(tcs, list):
            continue
        calls = [tc for tc in tcs if isinstance(tc, dict)]
        for tc in calls:
            fn = tc.get("function")
            args = _text(fn.get("arguments")) if isinstance(fn, dict) else None
            if args is not None:
                verdict.observe_args(args)
                verdict.tool_args(args, fn.get("name") if isinstance(fn, dict) else None)
        if rules.tool_index and unique_ids(calls, "call_"):
            changed = ids_fixed = True
    changed |= mapped
    if fired is not None:
        if mapped:
            fired["finish_reason"] += 1
        if ids_fixed:
            fired["tool_index"] += 1
    d = verdict.decide()
    if rules.usage and verdict.upstream_counts is not None:
        u = usage if isinstance(usage, dict) else {}
        if fill_chat_usage(u, verdict):
            obj["usage"] = u
            changed = True
            if fired is not None:
                fired["usage"] += 1
    new = d.word("chat")
    if new is not None and not d.native and rules.truncation != "off" and len(dicts) == 1 and dicts[0].get("finish_reason") != new:  # fmt: skip
        dicts[0]["finish_reason"] = new
        changed = True
        if fired is not None:
            fired["truncation"] += 1
    if rules.tool_finish and new is None and not d.failed and not forced_call(ctx.request):
        tooled = False
        for ch in dicts:
            msg = ch.get("message")
            tcs = msg.get("tool_calls") if isinstance(msg, dict) else None
            if ch.get("finish_reason") == "stop" and isinstance(tcs, list) and _json_calls(tcs):
                ch["finish_reason"] = "tool_calls"
                tooled = True
        if tooled:
            changed = True
            if fired is not None:
                fired["tool_finish"] += 1
    return changed


def _json_calls(tcs: list[Any]) -> bool:
    """Rule tool_finish on a JSON body: every entry of ``message.tool_calls`` a call whose
    arguments are a JSON object."""
    args: list[str] = []
    for tc in tcs:
        fn = tc.get("function") if isinstance(tc, dict) else None
        a = fn.get("arguments") if isinstance(fn, dict) else None
        if not isinstance(a, str):
            return False
        args.append(a)
    return whole_calls(args)
