"""OpenAI Responses API stream repair (``/v1/responses``): CPA's events in, spec events out.

What CPA (router-for-me/CLIProxyAPI) gets wrong here, and the rule that repairs it (each
switchable in :class:`~wire.rules.Rules`):

1. ``status``: function_call items carry no ``status`` (interactions path). They get
   ``in_progress`` on ``output_item.added`` and ``completed`` on ``output_item.done`` and in
   the terminal ``response.output[]``, also on truncation (an ``incomplete`` call is dropped
   by AI SDK 2.0.50 / 3.0.88). An existing status is left alone.
2. ``item_order``: an item still open when the next ``output_item.added`` arrives is closed
   first, from what was streamed (message: ``output_text.done``, ``content_part.done``,
   ``output_item.done``; function_call: ``function_call_arguments.done``,
   ``output_item.done``; reasoning: ``output_item.done``). Later events for a closed item
   (the gateway's late closes, stray deltas) are dropped with a note. Items still open at
   the terminal event are closed before it. Claude/Kiro path (message closed after the
   function call, CPA v7.1.64..v7.2.89) and the Devin path (function calls closed only at
   the end of the stream, so two calls overlap).
   Continuation: a message this rule closed early that then gets new content (a non-empty
   ``output_text.delta`` or a ``content_part.added``) is continued, not cut. On the same
   Claude path a text block after a tool_use streams into the message CPA never closed
   (same ``item_id``, ``output_index`` 0, ``content_index`` 0, no new ``output_item.added``
   or ``content_part.added``), and its late closes and the terminal's message carry both
   texts concatenated. So: open items are closed, a message ``<id>_2`` (``_3``, … for
   further ones) is announced at the next dense index (``output_item.added`` in_progress,
   role assistant, content ``[]``; ``content_part.added`` in the gateway's part shape when
   a delta opened it), and every later event for the original id or raw index is sent to
   it (``item_id``, ``output_index``, ``content_index`` rewritten). The gateway's late
   ``output_text.done``/``content_part.done``/``output_item.done`` become the
   continuation's, with the text streamed into it; the terminal ``output`` lists the first
   part with its own text, then the continuation with its own (rule 5). A message the
   gateway closed itself (its ``output_item.done`` came, even late) gets no continuation:
   later content for it is dropped.
3. ``output_index``: dense, the item's position in the final ``output`` (order of
   ``output_item.added``). Events are mapped to items by ``item_id`` (``item.id``), else by
   the raw ``output_index`` of the most recently added item with that index (the Claude path
   gives a thinking block and the message both index 0).
4. ``sequence``: ``sequence_number`` strictly increasing across inserted and dropped events:
   ``max(original, last_sent + 1)``; inserted events take ``last_sent + 1``.
5. ``terminal_output``: ``response.output`` of ``response.completed``/``.incomplete`` lists
   the announced items in announced order, as they were closed; given entries are matched
   by ``id`` (function calls also by ``call_id``) and kept as given, except a continued
   message (rule 2), which stands for its first part only, as closed here; unannounced
   extras are kept at the end (with a note).
6. ``usage``: integer ``input_tokens``/``output_tokens``/``total_tokens`` always (``{}``,
   null, missing or partial usage is completed with zeros, total = input + output; a
   missing ``output_tokens`` takes the upstream's count when the verdict has one, see
   ``Verdict.output_tokens_best``); ``*_details`` objects hold integers.
7. ``response_id``: ``response.id`` of every lifecycle event equals the first one.
8. ``schema_fill``: fields the AI SDK chunk schema requires and CPA leaves out (below).
9. truncation: evidence goes to the :class:`~wire.verdict.Verdict`; at a success terminal
   its decision may turn ``response.completed`` into ``response.incomplete``
   (``rules.truncation``). Never after ``response.failed``/``error``, never without a
   terminal.

Everything else (comments, ``data: [DONE]``, non-JSON data, JSON without a string
``type``, types outside ``response.*``/``error``) passes as its original bytes. A
``response.*`` type this module does not model gets only rules 3 and 4. An event that
needs no repair goes out as ``ev.raw``; a changed one is re-serialized once with
``orjson.dumps`` (key order kept, new keys appended). Nothing is held back but by rule
``replay``: every other repair is decided from the events seen so far, so the first byte of
an event is never delayed.

10. ``replay`` (LiteLLM #41109; :func:`wire.contract.repeat` defines it): the text of a
    content part sent twice. One delta equal to the whole text so far is dropped. A second
    run of deltas that begins, at a delta boundary, with the text's first characters is
    held (with whatever passes between, a comment, in its place) while it is still a
    prefix of the text as it was, and released, numbered then, at the first divergence,
    at any other Responses event, at the end of the stream or when the upstream fails
    (:meth:`ResponsesRepairer.salvage`); when it completes the whole text its deltas are
    dropped and the doubled done texts (``output_text.done``, ``content_part.done``,
    ``output_item.done``, the terminal's ``output``) list the text once. Bounded by the
    text so far and :data:`~wire.holding.REPLAY_HOLD_LIMIT` events.

Cost per event: one ``orjson.loads``, O(1) dictionary work, at most one ``orjson.dumps``.
Per stream: the streamed text/arguments of items not yet closed are kept, each as one
UTF-8 buffer grown in place (:class:`~wire.stream.Streamed`; needed to synthesize their
closes), and dropped when the item closes; each
closed item is kept as closed (for the terminal's ``output``); a continuation keeps a map
of its content indexes (one entry per part). A closing or terminal event
costs O(items + size of what it carries).

What the AI SDK requires (read in ``@ai-sdk/openai`` 4.0.118 from npm,
``src/responses/openai-responses-api.ts`` and ``openai-responses-language-model.ts``; the
vercel/ai git HEAD is 4.0.46 and lacks the refine):

- ``openaiResponsesChunkSchema`` is a ``z.union``; its catch-all member refines away every
  type in ``openaiResponsesModeledChunkTypes``, so a *modeled* event that misses a required
  field is a parse failure ("Known response chunk failed schema validation"): an ``error``
  stream part, finish reason ``error``. Unmodeled types (``content_part.*``,
  ``output_text.done``, ``reasoning_summary_text.done``) are ignored.
- Required fields: ``response.created``/``.in_progress``: ``response.id`` (string),
  ``response.created_at`` (number), ``response.model`` (string). ``output_item.added``/
  ``.done``: ``output_index`` (number); message/reasoning ``item.id``; function_call
  ``id``, ``call_id``, ``name``, ``arguments`` and on done ``status`` in
  {in_progress, completed, incomplete}. ``output_text.delta``: ``item_id``, ``delta``.
  ``function_call_arguments.delta``/``.done``: ``item_id``, ``output_index``,
  ``delta``/``arguments``. ``reasoning_summary_part.added``/``.done`` and
  ``reasoning_summary_text.delta``: ``item_id``, ``summary_index`` (number).
  ``response.completed``/``.incomplete``: ``usage`` nullish, but if present
  ``input_tokens`` and ``output_tokens`` numbers; ``incomplete_details`` null or
  ``{reason}``. ``response.failed``/``error``: ``sequence_number``.
- Unfixed CPA misses: ``created_at`` on ``response.created`` (Devin path) and ``model`` on
  ``response.created``/``.in_progress`` (Claude/Kiro path before v7.2.117), ``item_id`` and
  ``summary_index`` on ``reasoning_summary_text.delta`` (Devin path), ``status`` on
  function_call done. Filled with the truthful value: ``ctx.started_at`` (or an earlier
  lifecycle event's ``created_at``), the earlier lifecycle ``model`` or ``ctx.model``, the
  mapped item's ``id``.
- ``summary_index``: doStream starts reasoning part ``<item id>:0`` on the reasoning
  ``output_item.added`` and keys each ``reasoning_summary_text.delta`` as
  ``<item_id>:<summary_index>``. Index k > 0 is started only by a
  ``reasoning_summary_part.added`` with ``summary_index`` k; a delta for a part never
  started makes the ``ai`` core emit an error part ("reasoning part … not found"). The
  reasoning ``output_item.done`` ends every active part. So a delta lacking
  ``summary_index`` gets the index of the item's last ``reasoning_summary_part.added``, or 0
  when there was none (Devin: one summary part per reasoning item, all deltas index 0, no
  ``reasoning_summary_part.added`` needed). CPA's Devin reasoning ``output_item.done``
  lists one ``summary_text`` per upstream chunk; the SDK ignores that list while streaming
  and it is left as sent.
- ``output_index`` matters: doStream keys tool calls by ``output_index`` and resolves
  ``item_id`` through the ``output_index`` of the added item; openai-python's stream helper
  raises "Duplicate response output index" on the Claude path's double index 0.
- Checked by running: ``tests/test_responses.py`` feeds every repaired recording through
  the real ``doStream`` of ``@ai-sdk/openai`` 2.0.131, 3.0.88 and 4.0.118 (no error part,
  every call emitted, finish ``tool-calls``/``stop``/``length`` as the terminal says); the
  unrepaired Devin streams give 4.0.118 an error part and lose the calls on 2.x/3.x.

Non-streaming bodies: :func:`repair_responses_json` (same rules on the response object).

The items' bookkeeping (what each announced item is, what was streamed into it, how
events name it) is in :mod:`wire.response_items`, usage arithmetic in
:mod:`wire.response_usage`; this module holds the rules, i.e. which events are rewritten,
dropped or inserted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

import orjson

from . import stops, usage_math
from .contract import MIN_REPEAT, power
from .foreign import commented, foreign, vendor
from .hidden import COMPLETED_WITHOUT_USAGE, failed_response, synthetic_completion
from .holding import REPLAY_HOLD_LIMIT
from .response_items import HEAD, Item, Items, Part
from .response_usage import _int, fill_upstream_usage, fix_usage
from .rules import FlowContext, Rules
from .skim import Layout, Rewrite, Skim, Skimmed
from .sse import Event, _whole, format_event
from .stream import ApiRepairer, Streamed
from .upstream_terminal import responses_failed
from .verdict import Decision, Outcome, Verdict

__all__ = [
    "ResponsesRepairer",
    "fix_usage",
    "repair_responses_body",
    "repair_responses_json",
]

_LIFECYCLE: Final = frozenset({"response.created", "response.in_progress", "response.queued"})
_SUCCESS_TERMINAL: Final = frozenset({"response.completed", "response.incomplete"})
_FAILURE: Final = frozenset({"response.failed", "error"})

# item-scoped events this module models: type -> (closes what, accumulates what)
_TEXT_DELTA: Final = "response.output_text.delta"
_TEXT_DONE: Final = "response.output_text.done"
_PART_ADDED: Final = "response.content_part.added"
_PART_DONE: Final = "response.content_part.done"
_ARGS_DELTA: Final = "response.function_call_arguments.delta"
_ARGS_DONE: Final = "response.function_call_arguments.done"
_SUMMARY_PART_ADDED: Final = "response.reasoning_summary_part.added"
_SUMMARY_PART_DONE: Final = "response.reasoning_summary_part.done"
_SUMMARY_DELTA: Final = "response.reasoning_summary_text.delta"
_SUMMARY_DONE: Final = "response.reasoning_summary_text.done"
_ITEM_EVENTS: Final = frozenset(
    {
        _TEXT_DELTA,
        _TEXT_DONE,
        _PART_ADDED,
        _PART_DONE,
        _ARGS_DELTA,
        _ARGS_DONE,
        _SUMMARY_PART_ADDED,
        _SUMMARY_PART_DONE,
        _SUMMARY_DELTA,
        _SUMMARY_DONE,
    }
)
_CONTENT_EVENTS: Final = frozenset({_TEXT_DELTA, _TEXT_DONE, _PART_ADDED, _PART_DONE})
_SUMMARY_EVENTS: Final = frozenset({_SUMMARY_PART_ADDED, _SUMMARY_PART_DONE, _SUMMARY_DELTA, _SUMMARY_DONE})
_OUTPUT_INDEX_REQUIRED: Final = frozenset({_ARGS_DELTA, _ARGS_DONE})

_REASON = {"max_tokens": "max_output_tokens", "content_filter": "content_filter"}
_NATIVE: dict[Any, Outcome] = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}


_SKIM_HOLES: Final = frozenset({("sequence_number",), ("delta",), ("obfuscation",)})
"""What changes from one delta to the next (wire.skim): the rest of a layout is literal."""


class _Holes:
    """Where a delta layout (:mod:`wire.skim`) holds its number and its text (-1: none; a
    number that is no integer or a text that is no string: -1 for the text, not for
    skimming), the string holes nothing reads (checked only), and the item's id and
    indexes it holds literally (what the parsed path reads with ``obj.get``: a hole where
    a literal is expected reads as missing, so the checks send such events the full way).
    Computed once per layout (:attr:`wire.skim.Layout.info`)."""

    __slots__ = ("ci", "delta_slot", "gid", "oi", "others", "seq_slot", "si")

    def __init__(self, layout: Layout) -> None:
        holes = layout.holes
        self.seq_slot = layout.slot("sequence_number")
        self.delta_slot = layout.slot("delta")
        if (self.seq_slot >= 0 and holes[self.seq_slot] != "i") or (
            self.delta_slot >= 0 and holes[self.delta_slot] != "s"
        ):
            self.delta_slot = -1
        self.others = layout.strings(self.delta_slot)
        c = layout.consts
        self.gid: Any = c.get(("item_id",))
        self.oi: Any = c.get(("output_index",))
        self.ci: Any = c.get(("content_index",))
        self.si: Any = c.get(("summary_index",))


class _Summary(_Holes):
    """A reasoning summary delta layout (:meth:`ResponsesRepairer._skimmed_summary`): also
    the item and part it was learned for, and, when the full path filled ids in, its
    rewrite as a template (:meth:`wire.skim.Skim.rewrite`)."""

    __slots__ = ("it", "item_id", "out", "part", "rewrites")

    def __init__(self, layout: Layout, it: Item, part: int) -> None:
        super().__init__(layout)
        self.it = it
        self.item_id = it.id
        self.part = part
        self.rewrites = type(self.gid) is not str or type(self.si) is not int
        self.out: Rewrite | None = None


class _Run:
    """Rule replay: a second run of text deltas of one part that may be repeating its
    whole text: the held events (a delta: ``(ev, obj, dirty, fired rules, delta)``; the
    bytes of an event that passes between, a comment) and how many bytes of the text the
    deltas matched."""

    __slots__ = ("ci", "deltas", "entries", "it", "nbytes", "p")

    def __init__(self, it: Item, ci: int, p: Part) -> None:
        self.it = it
        self.ci = ci
        self.p = p
        self.entries: list[Any] = []
        self.nbytes = 0
        self.deltas = 0


class ResponsesRepairer(ApiRepairer):
    """Repairs one ``/v1/responses`` SSE stream; see the module docstring for the rules.

    After the terminal event :attr:`decision` holds the verdict's :class:`Decision`
    (None if the stream failed or ended without a terminal).
    """

    api = "responses"

    def __init__(self, rules: Rules, ctx: FlowContext, verdict: Verdict) -> None:
        super().__init__(rules, ctx, verdict)
        self.items = Items()
        self._last_seq: int | None = None
        self._seq_last_key: bool | None = None  # where this stream puts sequence_number
        self._response_id: str | None = None
        self._created_at: Any = None
        self._model: str | None = None
        self._noted: set[tuple[str, int]] = set()
        self._framing: Event | bytes | None = (
            None  # the last response event, or a skimmed one's bytes (a terminal's framing)
        )
        self._unannounced = False  # events for an item never added passed as they came
        self._rotated: set[int] = set()  # rule item_id: items whose events carried other ids
        self._replayed: set[int] = set()  # rule replay: items whose done text was doubled
        self._run: _Run | None = None  # rule replay: deltas that may repeat a part's text, held
        self._routed = False  # event() called by _run_event
        self.skim = Skim()

    # --- driver interface ---------------------------------------------------------
    def _run_event(self, ev: Event, run: _Run) -> list[bytes]:
        """:meth:`event` while deltas of a possible repeat are held (rule replay)."""
        how = self._in_run(ev, run)
        if how == "end":
            return self._end_run() + self.event(ev)
        self._routed = True
        try:
            out = self.event(ev)
        finally:
            self._routed = False
        if how == "delta" or self._run is not run:
            return out  # held, dropped with the run, or released by it (_replay)
        # a comment (or an event no client reads) between held deltas keeps its place
        self.held.append(ev)
        run.entries.extend(out)
        if len(self.held) >= REPLAY_HOLD_LIMIT:
            self.note(f"released a possible repeat of a text: more than {REPLAY_HOLD_LIMIT} events held")
            return self._end_run()
        return []

    def _in_run(self, ev: Event, run: _Run) -> str:
        """While deltas are held (rule replay): ``delta`` for the next text delta of the
        same part, ``end`` for any other Responses event (the run is no repeat), ``pass``
        for what is none (a comment, a non-standard event, data that is not JSON): it keeps
        its place among the held deltas (none of these is numbered)."""
        if not ev.complete or ev.data is None:
            return "pass"
        if self.rules.nonstandard and foreign("responses", ev) is not None:
            return "pass"
        try:
            obj = ev.json()
        except orjson.JSONDecodeError:
            return "pass"
        typ = obj.get("type") if isinstance(obj, dict) else None
        if not isinstance(typ, str) or not (typ.startswith(("response.", "codex.")) or typ == "error"):
            return "pass"
        if typ == _TEXT_DELTA and self.items.lookup(obj) is run.it:
            ci = obj.get("content_index")
            if run.it.root is not None and type(ci) is int:
                ci = run.it.ci_map.get(ci)
            if ci == run.ci:
                return "delta"
        return "end"

    def event(self, ev: Event) -> list[bytes]:
        if self._run is not None and not self._routed:
            return self._run_event(ev, self._run)
        if self.rules.nonstandard and ev.complete:
            why = foreign("responses", ev)
            if why is not None:
                self.count("nonstandard")
                if ("nonstandard", 0) not in self._noted:
                    self._noted.add(("nonstandard", 0))
                    self.note(f"turned a non-standard event into an SSE comment ({why[1]})")
                return [commented(ev).raw]
        if not ev.complete and self.rules.eof_terminal and not self._finished and self._framing is not None:
            # the stream stops inside an event and a failure terminal follows (end): kept
            # as a comment, so that its half cannot glue onto the failure or reach a parser
            raw = commented(ev).raw
            self.count("eof_terminal")
            return [raw + (b"" if raw.endswith((b"\n", b"\r")) else ev.eol) + ev.eol]
        if self._finished or not ev.complete or ev.data is None:
            return [ev.raw]
        obj = self.parse(ev)
        if obj is None:
            return [ev.raw]
        typ = obj.get("type")
        if not isinstance(typ, str) or not (typ.startswith("response.") or typ == "error"):
            if not isinstance(typ, str):
                self.note("JSON event without a string type, passed through")
            elif self.rules.vendor_events and vendor(typ) and self.ctx.client != "codex":
                return [self._vendor_event(ev, typ)]
            return [ev.raw]
        self._framing = ev
        if self._seq_last_key is None and "sequence_number" in obj:
            keys = list(obj)
            self._seq_last_key = keys[-1] == "sequence_number" and keys.index("sequence_number") > 1
        if typ == _TEXT_DELTA or typ == _ARGS_DELTA:
            fast = self._delta(ev, obj, typ)
            if fast is not None:
                return fast
        elif typ == _SUMMARY_DELTA:
            fast = self._summary_delta(ev, obj)
            if fast is not None:
                return fast
        if typ == "response.output_item.added":
            return self._item_added(ev, obj)
        if typ == "response.output_item.done":
            return self._item_done(ev, obj)
        if typ in _ITEM_EVENTS:
            return self._item_event(ev, obj, typ)
        if typ in _LIFECYCLE:
            return [self._out(ev, obj, self._lifecycle(obj))]
        if typ in _SUCCESS_TERMINAL:
            return self._terminal(ev, obj, typ)
        if typ in _FAILURE:
            return [self._failure(ev, obj, typ)]
        return [self._out(ev, obj, self._remap_index(obj, self.items.lookup(obj)))]

    @property
    def finished(self) -> bool:
        """A terminal event (success or failure) went out: the stream is over."""
        return self._finished

    def fault(self) -> str | None:
        if not self._finished:
            return "stream ended without a terminal event"
        if self.decision is None:  # response.failed / error (a gateway's or rule eof_terminal's)
            return "the stream ended with a failure event"
        return None

    def end(self) -> list[bytes]:
        out = self._end_run()  # a possible repeat cut by the end: text
        out += super().end()
        if not self._finished:
            self.note("stream ended without a terminal event")
            framing = self._framing
            if self.rules.eof_terminal and framing is not None:
                if isinstance(framing, bytes):  # a skimmed event: the Event the parser makes of it
                    framing = _whole(framing) or Event(framing)
                out.append(self._eof_failure(framing))
        return out

    def salvage(self) -> list[bytes]:
        """The upstream failed mid-body: held deltas of a possible repeat go out as the
        text they are so far (numbered; a repeat cannot be proved of a cut stream)."""
        return self._end_run() + super().salvage()

    def _vendor_event(self, ev: Event, typ: str) -> bytes:
        """Rule vendor_events: a vendor's own event (``codex.rate_limits``...) becomes an SSE
        comment for a client that is not the vendor's (every byte kept; every client
        ignores comments, a strict one rejects the event)."""
        self.count("vendor_events")
        if ("vendor_events", 0) not in self._noted:
            self._noted.add(("vendor_events", 0))
            self.note(f"turned the vendor's own {typ} into an SSE comment (the client is not Codex)")
        return commented(ev).raw

    def _upstream_says_failed(self) -> bool:
        """The upstream leg's call failed (rule upstream_failure): the terminal becomes
        ``response.failed`` with the provider's evidence below, not rule hidden_failure's."""
        if not self.rules.upstream_failure:
            return False
        d = self.verdict.decide()
        return d.failed and not d.native

    def _hidden_failure(self, ev: Event, obj: dict[str, Any], resp: dict[str, Any]) -> bytes:
        """Rule hidden_failure (:mod:`wire.hidden`): CPA's Gemini-family translator ended a
        stream whose provider body never finished with ``response.completed`` without
        usage; the client gets it as ``response.failed`` (same id and number, its output as
        the gateway listed it, no verdict: a failure is not a truncation)."""
        self._response_identity(resp)
        self._terminal_output(resp)
        failed_response(resp)
        obj["type"] = "response.failed"
        self.fire("hidden_failure")
        self.note(f"{COMPLETED_WITHOUT_USAGE}: ended it as response.failed")
        return self._out(ev, obj, True, event="response.failed" if ev.event is not None else None)

    def _round_rules(self, resp: dict[str, Any], typ: str) -> bool:
        """This round's rules on a success terminal's response object, before the verdict
        reads it: usage that does not add up (rule usage_math) and an incomplete reason
        from another API's vocabulary (rule finish_reason)."""
        dirty = False
        if self.rules.usage_math:
            fixed = usage_math.repair("responses", resp.get("usage"))
            if fixed:
                dirty = True
                self.fire("usage_math")
                self.note(f"usage made to add up: {'; '.join(fixed)}")
        details = resp.get("incomplete_details")
        if self.rules.finish_reason and typ == "response.incomplete" and isinstance(details, dict):
            reason = details.get("reason")
            new = stops.foreign("responses", reason)
            if new is not None:
                details["reason"] = new
                dirty = True
                self.fire("finish_reason")
                self.note(f"incomplete_details.reason {reason!r} (not a Responses reason) written as {new!r}")
        return dirty

    def _eof_failure(self, ev: Event) -> bytes:
        """Rule eof_terminal: the gateway's stream stopped without a terminal event; the
        client gets ``response.failed`` (same response id, the next ``sequence_number``),
        never a success. Open items stay open (no done event: a call the gateway never
        closed is not run); the failure's ``output`` lists every announced item (rule
        terminal_output), an open one as ``incomplete`` with what was streamed into it."""
        self._finished = True
        if self._last_seq is None:
            self._last_seq = -1  # clients require sequence_number on response.failed
        resp = {
            "id": self._response_id,
            "object": "response",
            "created_at": self._created_at if self._created_at is not None else self.ctx.started_at,
            "status": "failed",
            "error": {"code": "server_error", "message": "The upstream stream ended without a terminal event."},
            "incomplete_details": None,
            "model": self._model or self.ctx.model,
            "output": self._failure_output(),
            "usage": None,
        }
        self.note("stream ended without a terminal event: ended it with response.failed")
        return self._synth(ev, "response.failed", {"response": resp}, "eof_terminal")

    def _failure_output(self) -> list[dict[str, Any]]:
        """A synthesized failure's ``output``: every announced item, as closed, or (still
        open) as streamed so far with ``status: "incomplete"``; rule terminal_output off:
        the closed ones only."""
        if not self.rules.terminal_output:
            return self.items.finals()
        out: list[dict[str, Any]] = []
        for it in self.items:
            if it.final is not None:
                out.append(it.final)
                continue
            item = dict(it.item)
            if it.type == "message":
                content = []
                for ci in sorted(it.parts):
                    part = dict(it.parts[ci].part)
                    if part.get("type") == "output_text":
                        part["text"] = it.parts[ci].full_text()
                    content.append(part)
                item["content"] = content
            elif it.type == "function_call":
                item["arguments"] = it.arguments()
            elif it.type == "reasoning" and it.summary:
                item["summary"] = self._summary(it)
            item["status"] = "incomplete"
            out.append(item)
        if len(out) > len(self.items.finals()):
            self.fired["terminal_output"] += 1  # the failure event lists what only it lists
        return out

    # --- output and numbering -----------------------------------------------------
    def _renumber(self, seq: int) -> int:
        """Rule sequence: the number an event numbered ``seq`` goes out with (the next one
        after the last, if ``seq`` is not above it), now the last."""
        last = self._last_seq
        if self.rules.sequence and last is not None and seq <= last:
            seq = last + 1
            self.fire("sequence")
        self._last_seq = seq
        return seq

    def _out(self, ev: Event, obj: dict[str, Any], dirty: bool, event: str | None = None) -> bytes:
        """The event's bytes after the sequence rule: raw if nothing changed."""
        seq = obj.get("sequence_number")
        if type(seq) is int:
            new = self._renumber(seq)
            if new != seq:
                obj["sequence_number"] = new
                dirty = True
        if not dirty:
            self._firing.clear()
            return ev.raw
        self.count()
        return ev.with_data(orjson.dumps(obj), event=event)

    def _synth(self, ev: Event, typ: str, fields: dict[str, Any], rule: str = "item_order") -> bytes:
        """A new event in this stream's framing (``event:`` line, line end, key layout)."""
        obj: dict[str, Any] = {"type": typ}
        seq = None
        if self._last_seq is not None:
            seq = self._last_seq + 1
            self._last_seq = seq
        if seq is not None and not self._seq_last_key:
            obj["sequence_number"] = seq
        obj.update(fields)
        if seq is not None and self._seq_last_key:
            obj["sequence_number"] = seq
        self.changed += 1
        self.fired[rule] += 1  # item_order: closes an open item or opens a continuation
        return format_event(orjson.dumps(obj), event=typ if ev.event is not None else None, eol=ev.eol)

    def _note_once(self, what: str, item: Item) -> None:
        key = (what, id(item))
        if key not in self._noted:
            self._noted.add(key)
            self.note(f"{what} (item {item.index}, {item.type})")

    # --- items ----------------------------------------------------------------------
    def _index(self, it: Item) -> Any:
        return it.index if self.rules.output_index else it.raw_index

    def _remap_index(self, obj: dict[str, Any], it: Item | None) -> bool:
        if it is None or not self.rules.output_index or "output_index" not in obj:
            return False
        if obj["output_index"] == it.index:
            return False
        obj["output_index"] = it.index
        self.fire("output_index")
        return True

    def _close_open(self, ev: Event) -> list[bytes]:
        out: list[bytes] = []
        for it in self.items:
            if it.open:
                out += self._close(ev, it)
        return out

    def _close(self, ev: Event, it: Item) -> list[bytes]:
        """Synthesize the closing events of an open item from what was streamed."""
        out: list[bytes] = []
        idx = self._index(it)
        item = dict(it.item)
        if it.type == "message":
            content = []
            for ci in sorted(it.parts):
                p = it.parts[ci]
                part = dict(p.part)
                if part.get("type") == "output_text":
                    text = p.full_text()
                    part["text"] = text
                    if not p.text_done:
                        out.append(
                            self._synth(
                                ev,
                                _TEXT_DONE,
                                {
                                    "item_id": it.id,
                                    "output_index": idx,
                                    "content_index": ci,
                                    "text": text,
                                    "logprobs": [],
                                },
                            )
                        )
                if not p.part_done:
                    out.append(
                        self._synth(
                            ev, _PART_DONE, {"item_id": it.id, "output_index": idx, "content_index": ci, "part": part}
                        )
                    )
                content.append(part)
            item["status"] = "completed"
            item["content"] = content
        elif it.type == "function_call":
            args = it.arguments()
            if not it.args_done:
                out.append(self._synth(ev, _ARGS_DONE, {"item_id": it.id, "output_index": idx, "arguments": args}))
            item["arguments"] = args
            item["status"] = "completed"
            self.verdict.tool_args(args)
        elif it.type == "reasoning":
            if "status" in item:
                item["status"] = "completed"
            item["summary"] = [{"type": "summary_text", "text": it.summary[si].text()} for si in sorted(it.summary)]
        elif "status" in item:
            item["status"] = "completed"
        out.append(self._synth(ev, "response.output_item.done", {"output_index": idx, "item": item}))
        it.close(item)
        it.early = True
        self._note_once("closed an open item before the next one", it)
        return out

    @staticmethod
    def _opens_content(typ: str, obj: dict[str, Any]) -> bool:
        """New content for a message: a content part, or a non-empty text delta (an empty
        one carries nothing and is dropped like any late event)."""
        if typ == _PART_ADDED:
            return True
        delta = obj.get("delta")
        return typ == _TEXT_DELTA and isinstance(delta, str) and delta != ""

    def _continue(self, ev: Event, obj: dict[str, Any], typ: str, prev: Item) -> tuple[list[bytes], Item]:
        """Rule 2, continuation: content for a message this repairer closed early (CPA's
        Claude path streams a text block after a tool_use into the message it never closed)
        opens a new message item instead of being dropped. It gets the next dense index and
        the id ``<id>_<n>``; the original's id and raw index now lead to it."""
        root = prev.root or prev
        out = self._close_open(ev)  # nothing may be open when an item is added
        root.continuations += 1
        n = root.continuations + 1
        index = len(self.items)
        base = root.id if isinstance(root.id, str) else f"item_{index}"
        cid = f"{base}_{n}"
        while cid in self.items.by_id:
            n += 1
            cid = f"{base}_{n}"
        item = dict(root.item)
        item["id"] = cid
        item["status"] = "in_progress"
        item["content"] = []
        item["role"] = "assistant"
        cont = Item(index, index, item)
        cont.root = root
        self.items.add(cont)
        self.items.by_id[cid] = cont
        if isinstance(root.id, str):
            self.items.by_id[root.id] = cont
        if type(root.raw_index) is int and self.items.by_raw.get(root.raw_index) in (root, prev):
            self.items.by_raw[root.raw_index] = cont
        idx = self._index(cont)
        out.append(self._synth(ev, "response.output_item.added", {"output_index": idx, "item": item}))
        if typ == _TEXT_DELTA:
            part: dict[str, Any] = {"type": "output_text", "annotations": [], "text": ""}
            content = (prev.final or {}).get("content")
            if isinstance(content, list) and content and isinstance(content[0], dict):
                part = dict(content[0])  # the shape of the gateway's own parts
                for key in ("annotations", "logprobs"):
                    if key in part:
                        part[key] = []
                part["text"] = ""
            ci = obj.get("content_index")
            cont.ci_map[ci if type(ci) is int else 0] = 0
            cont.parts[0] = Part(part, announced=True)
            out.append(
                self._synth(
                    ev, _PART_ADDED, {"item_id": cid, "output_index": idx, "content_index": 0, "part": dict(part)}
                )
            )
        self._note_once("opened a continuation message for content after the item was closed", root)
        return out, cont

    def _retarget(self, obj: dict[str, Any], it: Item) -> bool:
        """An event of a continued message, told about its continuation: ``item_id``,
        ``output_index`` and ``content_index`` (the gateway's part -> the continuation's)."""
        dirty = False
        if obj.get("item_id") != it.id:
            obj["item_id"] = it.id
            dirty = True
        idx = self._index(it)
        if "output_index" in obj and obj["output_index"] != idx:
            obj["output_index"] = idx
            dirty = True
        ci = obj.get("content_index")
        if type(ci) is int:
            mapped = it.ci_map.get(ci)
            if mapped is None:
                mapped = it.ci_map[ci] = len(it.ci_map)
            if mapped != ci:
                obj["content_index"] = mapped
                dirty = True
        if dirty:
            self.fire("item_order")
        return dirty

    def _item_added(self, ev: Event, obj: dict[str, Any]) -> list[bytes]:
        item = obj.get("item")
        if not isinstance(item, dict):
            self.note("output_item.added without an item object, passed through")
            return [self._out(ev, obj, False)]
        out: list[bytes] = []
        iid = item.get("id")
        dup = self.items.by_id.get(iid) if isinstance(iid, str) else None
        if dup is not None and dup.open and dup.type == item.get("type") and self.rules.item_order:
            self._note_once("dropped a repeated output_item.added", dup)
            self.count("item_order")
            return []
        if self.rules.item_order:
            out += self._close_open(ev)
        dirty = False
        raw = obj.get("output_index")
        index = len(self.items)
        if self._unannounced and type(raw) is int and raw > index:
            index = raw  # an unannounced item sits below: dense would move this one onto it
        it = Item(index, raw, item)
        if self.rules.output_index and raw != it.index:
            obj["output_index"] = it.index
            dirty = True
            self.fire("output_index")
        if self.rules.schema_fill and not isinstance(item.get("id"), str):
            # a function call's id is its call_id (CPA's own choice); other items get
            # CPA's fallback name item_<index>
            fill = (
                item.get("call_id") if it.type == "function_call" else f"item_{raw if type(raw) is int else it.index}"
            )
            if isinstance(fill, str):
                item["id"] = it.id = fill
                dirty = True
                self.fire("schema_fill")
        if it.type == "reasoning" and self.rules.reasoning_summary and not isinstance(item.get("summary"), list):
            item["summary"] = []  # codex-acp #266: Codex drops every delta after such an item
            dirty = True
            self.fire("reasoning_summary")
        if it.type == "function_call":
            if self.rules.schema_fill and not isinstance(item.get("arguments"), str):
                item["arguments"] = ""
                dirty = True
                self.fire("schema_fill")
            if self.rules.status and "status" not in item:
                item["status"] = "in_progress"
                dirty = True
                self.fire("status")
        self.items.add(it)
        if isinstance(it.id, str):
            self.items.by_id[it.id] = it
        if type(raw) is int:
            self.items.by_raw[raw] = it
        out.append(self._out(ev, obj, dirty))
        return out

    def _item_done(self, ev: Event, obj: dict[str, Any]) -> list[bytes]:
        item = obj.get("item")
        if not isinstance(item, dict):
            self.note("output_item.done without an item object, passed through")
            return [self._out(ev, obj, False)]
        it = self.items.lookup(obj, item.get("id"))
        if it is not None and it.type != item.get("type"):
            it = None
        if it is not None and not it.open and self.rules.item_order:
            self._note_once("dropped a late output_item.done", it)
            it.early = False  # the gateway closed it too: later content for it is stray
            self.count("item_order")
            return []
        dirty = self._continuation_done(obj, item, it) if it is not None and it.root is not None else False
        if self.rules.item_id and it is not None and it.root is None and isinstance(it.id, str):
            gid = item.get("id")
            if isinstance(gid, str) and gid != it.id:
                self.items.aliases[gid] = it
                self._rotated.add(it.index)
                item["id"] = it.id
                dirty = True
                self.fire("item_id")
                self._note_once("pinned a changed item id to the announced one", it)
        dirty |= self._remap_index(obj, it)
        if self.rules.schema_fill:
            filled = self._fill_done_item(item, it)
            if it is not None and type(obj.get("output_index")) is not int:
                obj["output_index"] = self._index(it)
                filled = True
            if filled:
                dirty = True
                self.fire("schema_fill")
        if item.get("type") == "function_call":
            if self.rules.status and "status" not in item:
                item["status"] = "completed"
                dirty = True
                self.fire("status")
            args = item.get("arguments")
            if not isinstance(args, str) and it is not None:
                args = it.arguments()
            if isinstance(args, str):
                self.verdict.tool_args(args)
        summary = item.get("summary")
        if item.get("type") == "reasoning" and self.rules.reasoning_summary and not isinstance(summary, list):
            # codex-acp #266: a gateway that strips an empty summary strips it here too, and
            # Codex reads the done item: what was streamed into it, else []
            item["summary"] = self._summary(it)
            dirty = True
            self.fire("reasoning_summary")
        if it is not None and self.rules.replay and it.type == "message" and self._unreplay(it, item):
            dirty = True
            self.fire("replay")
        if it is None:
            self.note("output_item.done for an item never added, passed through")
        else:
            it.close(item)
        return [self._out(ev, obj, dirty)]

    @staticmethod
    def _summary(it: Item | None) -> list[dict[str, Any]]:
        """Rule reasoning_summary: a reasoning item's summary list from what was streamed
        into it (none: ``[]``)."""
        if it is None:
            return []
        return [{"type": "summary_text", "text": it.summary[si].text()} for si in sorted(it.summary)]

    def _summaries(self, output: list[Any]) -> bool:
        """Rule reasoning_summary on a terminal's ``output``: a reasoning entry without a
        summary list gets its item's, as closed (else ``[]``)."""
        dirty = False
        for e in output:
            if isinstance(e, dict) and e.get("type") == "reasoning" and not isinstance(e.get("summary"), list):
                it = self.items.by_id.get(e["id"]) if isinstance(e.get("id"), str) else None
                final = it.final.get("summary") if it is not None and it.final is not None else None
                e["summary"] = list(final) if isinstance(final, list) else []
                dirty = True
                self.fire("reasoning_summary")
        return dirty

    def _unreplay(self, it: Item, item: dict[str, Any]) -> bool:
        """Rule replay on a message's done item: a part whose full-text replay was dropped
        lists its text once, as streamed (the gateway's lists it twice)."""
        content = item.get("content")
        if not isinstance(content, list):
            return False
        dirty = False
        for ci, p in it.parts.items():
            if not p.replayed or not (0 <= ci < len(content)) or not isinstance(content[ci], dict):
                continue
            self._replayed.add(it.index)
            text = p.chunks.text()
            if content[ci].get("text") == text * 2:
                content[ci]["text"] = text
                dirty = True
        return dirty

    def _replay(
        self, ev: Event, obj: dict[str, Any], dirty: bool, it: Item, ci: int, p: Part, delta: str
    ) -> tuple[list[bytes], bool]:
        """Rule replay (LiteLLM #41109; :func:`wire.contract.repeat`): what goes out before
        this delta (a run it ends), and whether the delta was taken: held in a possible
        repeat, or dropped with one (else the caller streams it as text)."""
        enc = delta.encode("utf-8", "surrogatepass")
        buf = p.chunks.view()
        out: list[bytes] = []
        run = self._run
        if run is not None:  # this delta is the part's next (event() ended the run otherwise)
            if buf.startswith(enc, run.nbytes) and run.nbytes + len(enc) <= len(buf):
                self._hold(run, ev, obj, dirty, delta)
                run.nbytes += len(enc)
                if run.nbytes < len(buf):
                    if len(self.held) >= REPLAY_HOLD_LIMIT:
                        self.note(f"released a possible repeat of a text: more than {REPLAY_HOLD_LIMIT} events held")
                        return self._end_run(), True
                    return out, True
                if power(buf):  # the text is a phrase said over and over: text
                    return self._end_run(), True
                return self._drop_run(), True
            out = self._end_run()  # diverged: its text is the part's; this delta may start another
            buf = p.chunks.view()
        if p.chunks.pieces >= 2 and len(enc) <= len(buf) and buf.startswith(enc):
            if len(enc) == len(buf):
                p.replayed = True
                self.count("replay")
                self._note_once("dropped a delta replaying the whole text", it)
                return out, True
            if p.size >= MIN_REPEAT:
                run = self._run = _Run(it, ci, p)
                self._hold(run, ev, obj, dirty, delta)
                run.nbytes = len(enc)
                return out, True
        return out, False

    def _hold(self, run: _Run, ev: Event, obj: dict[str, Any], dirty: bool, delta: str) -> None:
        """A delta of a possible repeat, kept with the rules that fired for it."""
        run.entries.append((ev, obj, dirty, frozenset(self._firing), delta))
        run.deltas += 1
        self._firing.clear()
        self.held.append(ev)

    def _end_run(self) -> list[bytes]:
        """The held deltas are no repeat: they go out (numbered now, in order) as the
        part's text."""
        run, self._run = self._run, None
        if run is None:
            return []
        saved = set(self._firing)  # the event being repaired, if any
        self._firing.clear()
        out: list[bytes] = []
        for e in run.entries:
            if isinstance(e, bytes):
                out.append(e)
                continue
            ev, obj, dirty, fired, delta = e
            run.p.add(delta)
            self.verdict.observe_text(delta)
            self._firing.update(fired)
            out.append(self._out(ev, obj, dirty))
        self.held.clear()
        self._firing.update(saved)
        return out

    def _drop_run(self) -> list[bytes]:
        """The held deltas repeat the part's whole text: dropped (what passed between them
        goes out); the done text the gateway doubled is listed once (``p.replayed``)."""
        run, self._run = self._run, None
        assert run is not None
        saved = set(self._firing)
        self._firing.clear()
        out: list[bytes] = []
        for e in run.entries:
            if isinstance(e, bytes):
                out.append(e)
            else:
                self._firing.update(e[3])
                self.count("replay")
        run.p.replayed = True
        self.held.clear()
        self._firing.update(saved)
        self.note(f"dropped a second run of {run.deltas} deltas repeating the whole text (item {run.it.index})")
        return out

    def _announce(self, ev: Event, obj: dict[str, Any], typ: str) -> tuple[list[bytes], Item | None]:
        """Rule announce: a message's (or reasoning item's) first event came without its
        ``output_item.added`` (LiteLLM #22102, cc-switch #387: Codex drops the item and
        its tools). The item is announced before it, in progress, with the event's
        ``item_id`` (else ``msg_<index>``/``rs_<index>``). A function call cannot be
        announced (its name and call_id are unknown): passed through, noted."""
        if typ in _CONTENT_EVENTS:
            kind = "message"
        elif typ in _SUMMARY_EVENTS:
            kind = "reasoning"
        else:
            return [], None
        out = self._close_open(ev) if self.rules.item_order else []
        index = len(self.items)
        raw = obj.get("output_index")
        iid = obj.get("item_id")
        if not isinstance(iid, str):
            iid = f"{'msg' if kind == 'message' else 'rs'}_{index}"
        item: dict[str, Any] = {"id": iid, "type": kind, "status": "in_progress"}
        if kind == "message":
            item.update(content=[], role="assistant")
        else:
            item["summary"] = []
        it = Item(index, raw, item)
        self.items.add(it)
        self.items.by_id[iid] = it
        if type(raw) is int:
            self.items.by_raw[raw] = it
        added = {"output_index": self._index(it), "item": dict(item)}
        out.append(self._synth(ev, "response.output_item.added", added, "announce"))
        self._note_once("announced an item the gateway never added", it)
        return out, it

    def _alias_pos(self, it: Item, given: list[Any], by_id: dict[str, int], used: set[int]) -> int | None:
        """Rule item_id at the terminal: where an item whose ids rotated sits in the
        gateway's ``output`` (under an id its done event carried, else the first unused
        entry of its type that names no announced item)."""
        for alias, owner in self.items.aliases.items():
            if owner is it and alias in by_id and by_id[alias] not in used:
                return by_id[alias]
        for pos, e in enumerate(given):
            if pos in used or not isinstance(e, dict) or e.get("type") != it.type:
                continue
            eid = e.get("id")
            if not (isinstance(eid, str) and eid in self.items.by_id):
                return pos
        return None

    def _continuation_done(self, obj: dict[str, Any], item: dict[str, Any], it: Item) -> bool:
        """The gateway's close of a continued message, made the continuation's: its id,
        index and parts, each with the text streamed into it (the gateway's lists the
        whole message's text)."""
        dirty = False
        if item.get("id") != it.id:
            item["id"] = it.id
            dirty = True
        idx = self._index(it)
        if obj.get("output_index") != idx:
            obj["output_index"] = idx
            dirty = True
        given = item.get("content")
        given = given if isinstance(given, list) else []
        back = {mine: theirs for theirs, mine in it.ci_map.items()}
        content = []
        for ci in sorted(it.parts):
            p = it.parts[ci]
            theirs = back.get(ci)
            src = given[theirs] if theirs is not None and 0 <= theirs < len(given) else None
            part = dict(src) if isinstance(src, dict) else dict(p.part)
            part["text"] = p.full_text()
            content.append(part)
        if given != content:
            item["content"] = content
            dirty = True
        if dirty:
            self.fire("item_order")
        return dirty

    @staticmethod
    def _fill_done_item(item: dict[str, Any], it: Item | None) -> bool:
        """Fields a done item must carry, taken from the announced item (or, for a call's
        id and arguments, from its call_id and what was streamed)."""
        dirty = False
        known = it.item if it is not None else {}
        if not isinstance(item.get("id"), str):
            fill = it.id if it is not None and isinstance(it.id, str) else None
            if fill is None and item.get("type") == "function_call":
                fill = item.get("call_id")
            if isinstance(fill, str):
                item["id"] = fill
                dirty = True
        if item.get("type") == "function_call":
            for key in ("call_id", "name"):
                if not isinstance(item.get(key), str) and isinstance(known.get(key), str):
                    item[key] = known[key]
                    dirty = True
            if not isinstance(item.get("arguments"), str) and it is not None:
                item["arguments"] = it.arguments()
                dirty = True
        return dirty

    def _delta(self, ev: Event, obj: dict[str, Any], typ: str) -> list[bytes] | None:
        """The common path of :meth:`_item_event` (issue 12: most events of a turn): a text
        or arguments delta of an open item, naming it by its announced id and index
        (:meth:`_takes_delta`); None, and the caller takes the full path, otherwise. A
        handled event's layout is learned for skimming (:mod:`wire.skim`)."""
        if not self._takes_delta(
            typ, obj.get("item_id"), obj.get("output_index"), obj.get("content_index"), obj.get("delta")
        ):
            return None
        out = self._out(ev, obj, False)  # rule sequence; else its own bytes
        skim = self.skim
        if skim is not None:
            skim.learn(typ, ev.raw, ev.data, ev.event, obj, _SKIM_HOLES)
        return [out]

    def _takes_delta(self, typ: str, gid: Any, oi: Any, ci: Any, delta: Any, utf8: bytes | None = None) -> bool:
        """A text or arguments delta the common path serves, recorded (the streamed text or
        arguments, the verdict's digest); False, having changed nothing, for one that must
        take the full path. Read from the parsed event (:meth:`_delta`) or from a skimmed
        one's values (:meth:`skimmed`): one test for both.

        Under these checks the full path does exactly what this does: each check rules out
        one rule that could touch the event (said beside it), and what is left is the
        bookkeeping and rule ``sequence`` (:meth:`_out`), which the caller applies.
        """
        if self._firing or self._run is not None:
            return False  # a rule already fired for this event: the full path counts it; held deltas: rule replay
        if type(gid) is not str:
            return False  # schema_fill may add the id, announce may open an item for it
        it = self.items.by_id.get(gid)
        # the item Items.lookup finds too (a known id wins over output_index); gid == it.id:
        # rule item_id has nothing to pin (an alias of a rotated id goes the full way);
        # open and no continuation: rule item_order neither drops nor retargets it
        if it is None or gid != it.id or not it.open or it.root is not None:
            return False
        if type(oi) is not int:
            return False  # schema_fill adds it
        index: int = oi  # (compiled: compared as a native int)
        if index != it.index:
            return False  # rule output_index renumbers it
        if type(delta) is not str:
            return False
        if typ == _TEXT_DELTA:
            if type(ci) is not int:
                return False  # schema_fill
            p = it.parts.get(ci)
            # a part not yet announced: rule announce opens it; a delta that agrees with
            # the text's beginning may repeat it (rule replay compares the text)
            if p is None or (self.rules.announce and not p.announced):
                return False
            head = p.head  # Part.may_repeat and Part.add, inline (the hot path)
            if (
                self.rules.replay
                and delta
                and p.chunks.pieces >= 2
                and (head.startswith(delta) if len(delta) <= len(head) else delta.startswith(head))
            ):
                return False
            if utf8 is None:
                utf8 = delta.encode("utf-8", "surrogatepass")  # once, for the text and the digest
            p.chunks.append(delta, utf8)
            p.size += len(delta)
            if len(head) < HEAD:
                p.head = (head + delta)[:HEAD]
            self.verdict.observe_text(delta, utf8)
        elif typ == _ARGS_DELTA:
            if utf8 is None:
                utf8 = delta.encode("utf-8", "surrogatepass")
            it.args.append(delta, utf8)
            self.verdict.observe_args(delta, utf8)
        else:
            return False
        return True

    def skimmed(self, s: Skimmed) -> bytes | None:
        """A skimmed text or arguments delta (:mod:`wire.skim`), through :meth:`_takes_delta`
        and rule ``sequence`` as :meth:`_delta` takes the parsed one; None for the full path.
        The item's id and indexes are the layout's (literal in it); the text and the number
        are the holes."""
        if self._finished or self._seq_last_key is None:
            return None
        layout = s.layout
        if layout.kind == _SUMMARY_DELTA:
            return self._skimmed_summary(s, layout.info)
        if layout.info is None:
            layout.info = _Holes(layout)
        h: _Holes = layout.info
        if h.delta_slot < 0:
            return None
        try:
            for i in h.others:  # checked only (the full path's loads would fail on them)
                s.text(i)
            delta = s.text(h.delta_slot)  # last: s.plain is its bytes
        except ValueError:
            return None  # not what orjson would decode: the full path says so
        if not self._takes_delta(layout.kind, h.gid, h.oi, h.ci, delta, s.plain):
            return None
        return self._skim_out(s, h.seq_slot, h.delta_slot, delta, None)

    def _skim_out(self, s: Skimmed, seq_slot: int, delta_slot: int, delta: str, out: Rewrite | None) -> bytes:
        """A taken skimmed event's bytes: rule sequence on its number (as :meth:`_out`),
        and the rewrite ``out`` learned with its layout (rule schema_fill), if any; counted
        as :meth:`count` counts a parsed one."""
        self._framing = s.raw
        if seq_slot < 0:  # (only without a rewrite: a template needs the number)
            return s.raw  # nothing fired: the checks take an event only while none has
        seq = s.number(seq_slot)
        new = self._renumber(seq)
        if out is None and new == seq:
            return s.raw
        if out is not None:
            self.fire("schema_fill")  # (and _renumber fired sequence if it moved the number)
        self.count()
        if out is not None:
            return s.rewrite(out, seq_slot, new, delta_slot, delta)
        return s.render(seq_slot, new, delta_slot, delta)

    # --- reasoning summary deltas (Devin's: no item_id, no summary_index) ---------------
    def _summary_target(self, gid: Any, oi: Any, si: Any, delta: Any) -> tuple[Item, int] | None:
        """The item and summary part a reasoning summary delta goes to when the common path
        serves it (:meth:`_summary_delta`, :meth:`_skimmed_summary`), else None; changes
        nothing. As for :meth:`_takes_delta`, each check rules out a rule of the full path
        (:meth:`_item_event`) that could touch the event; what is left is rule
        schema_fill naming the item and part (a missing ``item_id`` is the item's at
        ``output_index``, a missing ``summary_index`` the item's current part), the
        summary's bookkeeping, and rule ``sequence``."""
        if self._firing or self._run is not None:
            return None
        if type(oi) is not int or type(delta) is not str:
            return None
        fill = self.rules.schema_fill
        if type(gid) is str:
            it = self.items.by_id.get(gid)
            if it is None or gid != it.id:
                return None  # Items.lookup would fall back to output_index; rule item_id pins
        elif gid is None and fill:
            it = self.items.by_raw.get(oi)
            if it is None or type(it.id) is not str:
                return None  # announce, or no id to fill in
        else:
            return None
        if not it.open or it.root is not None or oi != it.index:
            return None  # item_order, a continuation, rule output_index
        if si is None and fill:
            si = it.summary_index
        elif type(si) is not int:
            return None
        return it, si

    def _add_summary(self, it: Item, si: int, delta: str, utf8: bytes | None = None) -> None:
        """A summary delta's text, kept for the item's close (rule reasoning_summary)."""
        acc = it.summary.get(si)
        if acc is None:
            acc = it.summary[si] = Streamed()
        acc.append(delta, utf8)

    def _summary_delta(self, ev: Event, obj: dict[str, Any]) -> list[bytes] | None:
        """A reasoning summary delta the common path serves (:meth:`_summary_target`; None:
        the full path): its layout is learned, then :meth:`_item_event` repairs it (rule
        schema_fill fills its ids in, its text is kept, rule sequence), and when ids were
        filled in, the rewrite it made becomes the layout's template."""
        delta = obj.get("delta")
        t = self._summary_target(obj.get("item_id"), obj.get("output_index"), obj.get("summary_index"), delta)
        if t is None or not isinstance(delta, str):  # (a str: the target checked it)
            return None
        skim = self.skim
        layout = None
        if skim is not None:  # learned before the rewrite changes obj
            layout = skim.learn(_SUMMARY_DELTA, ev.raw, ev.data, ev.event, obj, _SKIM_HOLES)
        out = self._item_event(ev, obj, _SUMMARY_DELTA)
        if layout is not None and skim is not None and len(out) == 1:
            it, part = t
            known: _Summary | None = layout.info
            if known is None or known.it is not it or known.part != part or known.item_id != it.id:
                # first learned, or learned for another item or part (the ids a rewrite
                # fills in are the template's literals): this event's facts
                info = layout.info = _Summary(layout, it, part)
                if info.rewrites and info.seq_slot >= 0 and info.delta_slot >= 0:
                    seq = obj["sequence_number"]
                    info.out = skim.rewrite(
                        layout, ev.raw, out[0], obj, ev.event, info.seq_slot, seq, info.delta_slot, delta
                    )
        return out

    def _skimmed_summary(self, s: Skimmed, info: _Summary | None) -> bytes | None:
        """A skimmed reasoning summary delta: :meth:`_summary_target` on the layout's ids,
        which must name the item and part its template was learned with; then what
        :meth:`_item_event` does with the parsed one (the ids it fills in are the
        template's literals)."""
        if info is None or info.delta_slot < 0 or info.seq_slot < 0:
            return None
        if info.rewrites and info.out is None:
            return None  # a rewrite without a template
        try:
            for i in info.others:
                s.text(i)
            delta = s.text(info.delta_slot)
        except ValueError:
            return None
        t = self._summary_target(info.gid, info.oi, info.si, delta)
        if t is None or t[0] is not info.it or t[1] != info.part or info.it.id != info.item_id:
            return None
        self._add_summary(info.it, info.part, delta, s.plain)
        return self._skim_out(s, info.seq_slot, info.delta_slot, delta, info.out)

    def _item_event(self, ev: Event, obj: dict[str, Any], typ: str) -> list[bytes]:
        it = self.items.lookup(obj)
        out: list[bytes] = []
        if it is None and self.rules.announce:
            out, it = self._announce(ev, obj, typ)
        if it is None:
            self._unannounced = True
            self.note(f"{typ} for an unknown item, passed through")
            return out + [self._out(ev, obj, False)]
        if not it.open and self.rules.item_order:
            if not (it.early and it.type == "message" and self._opens_content(typ, obj)):
                self._note_once(f"dropped {typ} after the item was closed", it)
                self.count("item_order")
                return []
            out, it = self._continue(ev, obj, typ, it)
        dirty = self._retarget(obj, it) if it.root is not None else False
        if self.rules.item_id and it.root is None and isinstance(it.id, str):
            gid = obj.get("item_id")
            if isinstance(gid, str) and gid != it.id:
                obj["item_id"] = it.id
                self._rotated.add(it.index)
                dirty = True
                self.fire("item_id")
                self._note_once("pinned a changed item id to the announced one", it)
        dirty |= self._remap_index(obj, it)
        fill = self.rules.schema_fill
        if fill:
            if not isinstance(obj.get("item_id"), str) and isinstance(it.id, str):
                obj["item_id"] = it.id
                dirty = True
                self.fire("schema_fill")
            if typ in _OUTPUT_INDEX_REQUIRED and type(obj.get("output_index")) is not int:
                obj["output_index"] = self._index(it)
                dirty = True
                self.fire("schema_fill")
        if typ in _CONTENT_EVENTS:
            ci = obj.get("content_index")
            if type(ci) is not int:
                ci = max(it.parts) if it.parts else 0
                if fill:
                    obj["content_index"] = ci
                    dirty = True
                    self.fire("schema_fill")
            if self.rules.announce and typ in (_TEXT_DELTA, _TEXT_DONE):
                p = it.parts.get(ci)
                if p is None or not p.announced:
                    p = it.part(ci)
                    p.announced = True
                    shape = {"type": "output_text", "annotations": [], "text": ""}
                    idx = self._index(it)
                    fields = {"item_id": it.id, "output_index": idx, "content_index": ci, "part": shape}
                    out.append(self._synth(ev, _PART_ADDED, fields, "announce"))
                    self._note_once("announced a content part the gateway never added", it)
            if typ == _PART_ADDED:
                part = obj.get("part")
                shape = dict(part) if isinstance(part, dict) else {"type": "output_text", "text": ""}
                it.parts[ci] = Part(shape, announced=True)
            elif typ == _TEXT_DELTA:
                delta = obj.get("delta")
                if isinstance(delta, str):
                    p = it.part(ci)
                    if self.rules.replay and (delta or self._run is not None):  # an empty one: held too
                        pre, taken = self._replay(ev, obj, dirty, it, ci, p, delta)
                        out += pre
                        if taken:
                            return out
                    p.add(delta)
                    self.verdict.observe_text(delta)
            elif typ == _TEXT_DONE:
                p = it.part(ci)
                p.text_done = True
                if it.root is not None:
                    # the gateway's text is the whole message's: the continuation's own is
                    # what was streamed into it
                    p.text = p.chunks.text()
                    if obj.get("text") != p.text:
                        obj["text"] = p.text
                        dirty = True
                        self.fire("item_order")
                elif isinstance(obj.get("text"), str):
                    if p.replayed and obj["text"] == p.chunks.text() * 2:
                        obj["text"] = p.chunks.text()  # the replay doubled the done text too
                        dirty = True
                        self.fire("replay")
                    p.text = obj["text"]
            else:  # content_part.done
                p = it.part(ci)
                p.part_done = True
                part = obj.get("part")
                if isinstance(part, dict):
                    if p.replayed and part.get("text") == p.chunks.text() * 2:
                        part["text"] = p.chunks.text()
                        dirty = True
                        self.fire("replay")
                    if it.root is not None:
                        text = p.text if p.text is not None else p.chunks.text()
                        if part.get("text") != text:
                            part["text"] = text
                            dirty = True
                            self.fire("item_order")
                    p.part = part
                    if isinstance(part.get("text"), str):
                        p.text = part["text"]
        elif typ == _ARGS_DELTA:
            delta = obj.get("delta")
            if isinstance(delta, str):
                it.args.append(delta)
                self.verdict.observe_args(delta)
        elif typ == _ARGS_DONE:
            it.args_done = True
            if isinstance(obj.get("arguments"), str):
                it.args.set(obj["arguments"])
        else:  # reasoning summary events
            si = obj.get("summary_index")
            if type(si) is not int:
                si = it.summary_index
                if fill:
                    obj["summary_index"] = si
                    dirty = True
                    self.fire("schema_fill")
            if typ == _SUMMARY_PART_ADDED:
                it.summary_index = si
                if si not in it.summary:
                    it.summary[si] = Streamed()
            elif typ == _SUMMARY_DELTA:
                delta = obj.get("delta")
                if isinstance(delta, str):
                    self._add_summary(it, si, delta)
            elif typ == _SUMMARY_DONE and isinstance(obj.get("text"), str):
                it.summary[si] = Streamed(obj["text"])
        out.append(self._out(ev, obj, dirty))
        return out

    # --- lifecycle ----------------------------------------------------------------------
    def _response_identity(self, resp: dict[str, Any]) -> bool:
        """Rule 7 (and the id fill of rule 8): the first lifecycle id, kept."""
        rid = resp.get("id")
        if self._response_id is None:
            if isinstance(rid, str):
                self._response_id = rid
            return False
        if rid == self._response_id:
            return False
        if (self.rules.response_id and isinstance(rid, str)) or (self.rules.schema_fill and rid is None):
            resp["id"] = self._response_id
            self.fire("response_id" if isinstance(rid, str) else "schema_fill")
            return True
        return False

    def _lifecycle(self, obj: dict[str, Any]) -> bool:
        resp = obj.get("response")
        if not isinstance(resp, dict):
            return False
        dirty = self._response_identity(resp)
        created_at, model = resp.get("created_at"), resp.get("model")
        if self._created_at is None and isinstance(created_at, (int, float)) and not isinstance(created_at, bool):
            self._created_at = created_at
        if self._model is None and isinstance(model, str):
            self._model = model
        if self.rules.schema_fill:
            if not isinstance(created_at, (int, float)) or isinstance(created_at, bool):
                resp["created_at"] = self._created_at if self._created_at is not None else self.ctx.started_at
                dirty = True
                self.fire("schema_fill")
            if not isinstance(model, str):
                fill = self._model or self.ctx.model
                if fill is not None:
                    resp["model"] = fill
                    dirty = True
                    self.fire("schema_fill")
        return dirty

    def _terminal(self, ev: Event, obj: dict[str, Any], typ: str) -> list[bytes]:
        out = self._close_open(ev) if self.rules.item_order else []
        self._finished = True
        resp = obj.get("response")
        if not isinstance(resp, dict):
            self.note(f"{typ} without a response object, passed through")
            self.decision = self.verdict.decide()
            return out + [self._out(ev, obj, False)]
        # --- this round's rules (hidden_failure, usage_math, finish_reason): wire/hidden.py,
        # wire/usage_math.py, wire/stops.py
        if typ == "response.completed" and self.rules.hidden_failure and not self._upstream_says_failed():
            ids = [it.id for it in self.items if it.type in ("message", "reasoning")]
            if synthetic_completion(resp, ids):
                return out + [self._hidden_failure(ev, obj, resp)]
        dirty = self._round_rules(resp, typ)
        # ---
        dirty |= self._response_identity(resp)
        usage = resp.get("usage")
        if isinstance(usage, dict):
            self.verdict.usage(_int(usage.get("output_tokens")))
        dirty |= self._terminal_output(resp)
        details = resp.get("incomplete_details")
        if typ == "response.incomplete" or isinstance(details, dict):
            reason = details.get("reason") if isinstance(details, dict) else None
            self.verdict.native(_NATIVE.get(reason, "unknown"), f"{typ}, incomplete_details.reason {reason!r}")
        # ``incomplete_details: null`` is no evidence: CPA's templates write it unconditionally
        self.decision = d = self.verdict.decide()
        if self.rules.usage:
            usage, filled = fill_upstream_usage(usage, self.verdict)
            if filled:
                self.note(filled)
            usage, changed = fix_usage(usage, self._upstream_output_tokens(usage))
            changed |= bool(filled)
            if changed:
                resp["usage"] = usage
                dirty = True
                self.fire("usage")
        rename = None
        # --- upstream leg (issue 28): the provider's call failed: the API's failure ---
        if d.failed and not d.native and self.rules.upstream_failure and typ in _SUCCESS_TERMINAL:
            obj["type"] = rename = "response.failed"
            responses_failed(resp, d.evidence[0].detail if d.evidence else "failed")
            dirty = True
            self.fire("upstream_failure")
            self.note(f"terminal rewritten to response.failed ({d.evidence[0].detail if d.evidence else 'upstream'})")
        # --- end upstream leg ---
        if typ == "response.completed" and d.truncated and not d.native and self.rules.truncation == "incomplete":
            obj["type"] = rename = "response.incomplete"
            resp["status"] = "incomplete"
            resp["incomplete_details"] = {"reason": _REASON[d.outcome]}
            dirty = True
            self.fire("truncation")
            self.note(f"terminal rewritten to response.incomplete ({d.outcome})")
        out.append(self._out(ev, obj, dirty, event=rename if ev.event is not None else None))
        return out

    def _upstream_output_tokens(self, usage: Any) -> int | None:
        """The upstream's output token count, when the client leg's usage has none (the
        verdict's correlated Devin usage): known, so it fills instead of a zero."""
        if isinstance(usage, dict) and _int(usage.get("output_tokens")) is not None:
            return None
        tokens, where = self.verdict.output_tokens_best
        if where != "upstream":
            return None
        self.note(f"usage.output_tokens filled from the upstream's count ({tokens})")
        return tokens

    def _terminal_output(self, resp: dict[str, Any]) -> bool:
        """Rules 1 and 5 on ``response.output``."""
        given = resp.get("output")
        dirty = False
        if isinstance(given, list) and self.rules.reasoning_summary:
            dirty = self._summaries(given)
        if not isinstance(given, list):
            if not self.rules.terminal_output:
                return False
            given = []  # also a turn with no item at all (CPA's Claude and Gemini paths): output []
            dirty = True
            self.fire("terminal_output")
        if self.rules.status:
            for e in given:
                if isinstance(e, dict) and e.get("type") == "function_call" and "status" not in e:
                    e["status"] = "completed"
                    dirty = True
                    self.fire("status")
        if not self.rules.terminal_output:
            return dirty
        by_id: dict[str, int] = {}
        by_call: dict[str, int] = {}
        for k, e in enumerate(given):
            if isinstance(e, dict):
                if isinstance(e.get("id"), str):
                    by_id.setdefault(e["id"], k)
                if e.get("type") == "function_call" and isinstance(e.get("call_id"), str):
                    by_call.setdefault(e["call_id"], k)
        used: set[int] = set()
        want: list[Any] = []
        if self._unannounced:
            self.note("terminal output left in the gateway's order: items were never announced")
            return dirty
        for it in self.items:
            pos = by_id.get(it.id) if isinstance(it.id, str) else None
            if pos is None and self.rules.item_id and it.index in self._rotated:
                pos = self._alias_pos(it, given, by_id, used)
                if pos is not None and isinstance(given[pos], dict) and given[pos].get("id") != it.id:
                    given[pos] = {**given[pos], "id": it.id}
                    dirty = True
                    self.fire("item_id")
            if it.continuations or it.index in self._replayed:
                # the gateway lists a continued message with the text of all its
                # continuations: each part stands for itself, as it was closed
                if pos is not None:
                    used.add(pos)
                want.append(it.snapshot())
                continue
            if (pos is None or pos in used) and it.type == "function_call":
                cid = it.item.get("call_id")
                pos = by_call.get(cid) if isinstance(cid, str) else None
            if pos is not None and pos not in used:
                used.add(pos)
                want.append(given[pos])
            else:
                snap = it.snapshot()
                if it.type == "function_call" and self.rules.status and "status" not in snap:
                    snap = dict(snap)
                    snap["status"] = "completed"
                    self.fire("status")
                want.append(snap)
        extra = [e for pos, e in enumerate(given) if pos not in used]
        if extra:
            self.note(f"terminal output lists {len(extra)} item(s) never announced; kept at the end")
            want += extra
        if want != given or dirty:
            if want != given:
                self.fire("terminal_output")
            resp["output"] = want
            return True
        return False

    def _failure(self, ev: Event, obj: dict[str, Any], typ: str) -> bytes:
        """``response.failed`` / ``error``: pass (numbered, id kept); nothing synthesized."""
        self._finished = True
        dirty = False
        if self.rules.schema_fill and type(obj.get("sequence_number")) is not int and self._last_seq is not None:
            obj["sequence_number"] = self._last_seq + 1
            dirty = True
            self.fire("schema_fill")
        resp = obj.get("response")
        if typ == "response.failed" and isinstance(resp, dict):
            dirty |= self._response_identity(resp)
            if self.rules.usage and isinstance(resp.get("usage"), dict):
                _usage, changed = fix_usage(resp["usage"])
                dirty |= changed
                if changed:
                    self.fire("usage")
        return self._out(ev, obj, dirty)


# --- non-streaming ------------------------------------------------------------------------


def _repair_json(
    obj: dict[str, Any], rules: Rules, ctx: FlowContext, verdict: Verdict, fired: Counter[str] | None = None
) -> tuple[bool, Decision | None]:
    if verdict.cap is None and ctx.request:
        verdict.request(ctx.request)
    changed = False
    hit: set[str] = set()  # the rules that changed the body (counted once each in fired)
    if rules.schema_fill:
        # the AI SDK's response schema needs both (its generateText builds a Date from
        # created_at: "Invalid time value" without it); unfixed CPA sends neither
        created_at = obj.get("created_at")
        if not isinstance(created_at, (int, float)) or isinstance(created_at, bool):
            obj["created_at"] = ctx.started_at
            changed = True
            hit.add("schema_fill")
        if not isinstance(obj.get("model"), str) and ctx.model:
            obj["model"] = ctx.model
            changed = True
            hit.add("schema_fill")
    output = obj.get("output")
    if isinstance(output, list):
        for i, item in enumerate(output):
            if not isinstance(item, dict):
                continue
            typ = item.get("type")
            if rules.schema_fill and not isinstance(item.get("id"), str):
                fill = item.get("call_id") if typ == "function_call" else f"item_{i}"
                if typ in ("function_call", "message", "reasoning") and isinstance(fill, str):
                    item["id"] = fill
                    changed = True
                    hit.add("schema_fill")
            if typ == "function_call":
                if rules.status and "status" not in item:
                    item["status"] = "completed"
                    changed = True
                    hit.add("status")
                if isinstance(item.get("arguments"), str):
                    verdict.observe_args(item["arguments"])
                    verdict.tool_args(item["arguments"])
            elif typ == "reasoning" and rules.reasoning_summary and not isinstance(item.get("summary"), list):
                item["summary"] = []  # codex-acp #266, as on the stream's items
                changed = True
                hit.add("reasoning_summary")
            elif typ == "message" and isinstance(item.get("content"), list):
                for part in item["content"]:
                    if not isinstance(part, dict) or part.get("type") != "output_text":
                        continue
                    if isinstance(part.get("text"), str):
                        verdict.observe_text(part["text"])  # the digest the upstream leg matches
                    if rules.schema_fill and "annotations" not in part:
                        part["annotations"] = []
                        changed = True
                        hit.add("schema_fill")
    if rules.terminal_output and obj.get("object") == "response" and not isinstance(output, list):
        obj["output"] = []  # a response with no item at all
        changed = True
        hit.add("terminal_output")
    if rules.usage_math and usage_math.repair("responses", obj.get("usage")):
        changed = True
        hit.add("usage_math")
    usage = obj.get("usage")
    if isinstance(usage, dict):
        verdict.usage(_int(usage.get("output_tokens")))
    details = obj.get("incomplete_details")
    if rules.finish_reason and obj.get("status") == "incomplete" and isinstance(details, dict):
        new = stops.foreign("responses", details.get("reason"))
        if new is not None:
            details["reason"] = new
            changed = True
            hit.add("finish_reason")
    if obj.get("status") == "incomplete" or isinstance(details, dict):
        reason = details.get("reason") if isinstance(details, dict) else None
        verdict.native(_NATIVE.get(reason, "unknown"), f"status {obj.get('status')!r}, reason {reason!r}")
    failed = obj.get("status") == "failed" or bool(obj.get("error"))
    d = None if failed else verdict.decide()
    if rules.usage:
        usage, filled = fill_upstream_usage(usage, verdict)
        if filled:
            obj["usage"] = usage
            changed = True
            hit.add("usage")
        known = None
        if not (isinstance(usage, dict) and _int(usage.get("output_tokens")) is not None):
            tokens, where = verdict.output_tokens_best
            known = tokens if where == "upstream" else None
        usage, fixed = fix_usage(usage, known)
        if fixed:
            obj["usage"] = usage
            changed = True
            hit.add("usage")
    if d is not None and d.truncated and not d.native and rules.truncation == "incomplete":
        obj["status"] = "incomplete"
        obj["incomplete_details"] = {"reason": _REASON[d.outcome]}
        changed = True
        hit.add("truncation")
    if fired is not None:
        for rule in hit:
            fired[rule] += 1
    return changed, d


def repair_responses_json(
    obj: dict[str, Any], rules: Rules, ctx: FlowContext, verdict: Verdict, fired: Counter[str] | None = None
) -> bool:
    """Repair a non-streaming ``/v1/responses`` body in place; True if anything changed.

    ``created_at`` (the request's time) and ``model`` (the request's) when missing;
    function_call output items get ``status: "completed"`` and ``id`` (= ``call_id``) when
    missing; message/reasoning items an ``id`` (``item_<position>``, CPA's own scheme) and
    ``output_text`` parts ``annotations: []`` (both required by the AI SDK's response
    schema); ``usage`` as in the stream; a truncation verdict sets ``status: "incomplete"``
    and ``incomplete_details``. The output order is left as sent: a JSON body carries no
    announcement order to compare with. ``fired`` (if given) counts each rule that
    changed the body once.
    """
    return _repair_json(obj, rules, ctx, verdict, fired)[0]


def repair_responses_body(
    body: bytes, rules: Rules, ctx: FlowContext, verdict: Verdict
) -> tuple[bytes, Decision | None]:
    """:func:`repair_responses_json` on raw bytes: the body itself if it is not a JSON
    object or needs no change (byte-identical), else the repaired JSON."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body, None
    if not isinstance(obj, dict):
        return body, None
    changed, decision = _repair_json(obj, rules, ctx, verdict)
    return (orjson.dumps(obj) if changed else body), decision
