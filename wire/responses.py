"""OpenAI Responses API stream repair (``/v1/responses``): a gateway's events in, spec events out.

:class:`ResponsesRepairer` takes one stream's SSE events and returns the bytes to send: an
event that needs no repair as it came, a changed one re-serialized once (key order
kept), closes and announcements synthesized in the stream's framing. Its rules, each
switchable in :class:`~wire.rules.Rules` (status, item_order, output_index, sequence,
usage, schema_fill, terminal_output, response_id, announce, item_id, reasoning_summary,
replay, nonstandard, eof_terminal, hidden_failure, usage_math, finish_reason, vendor_events,
upstream_failure, truncation), what the AI SDK requires of each event and
how that was checked: docs/responses.md. Unknown events, bad JSON and types outside
``response.*``/``error`` pass as their original bytes; nothing is held back but by rule
replay, so the first byte of an event is never delayed.

Cost per event: one ``orjson.loads`` (none for a skimmed delta), O(1) dictionary work, at
most one ``orjson.dumps``. Per stream: the text and arguments of the items not yet closed,
each one UTF-8 buffer grown in place (:class:`~wire.stream.Streamed`), and each closed item
as closed; a closing or terminal event costs O(items + what it carries).

This module holds the rules event by event (``event``: the dispatch; ``ITEM_HANDLERS``:
one handler per item event type); the layers below it are :mod:`wire.response_base`
(state, numbering, closing items), :mod:`wire.response_continuation`,
:mod:`wire.response_replay`, :mod:`wire.response_skim` (the fast path) and
:mod:`wire.response_terminal` (how a stream ends); the items' bookkeeping is :mod:`wire.response_items`, usage arithmetic :mod:`wire.response_usage`,
non-streaming bodies :mod:`wire.response_json`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .foreign import commented, foreign, vendor
from .response_base import (
    ARGS_DELTA,
    ARGS_DONE,
    CONTENT_EVENTS,
    FAILURE,
    LIFECYCLE,
    OUTPUT_INDEX_REQUIRED,
    PART_ADDED,
    PART_DONE,
    SUCCESS_TERMINAL,
    SUMMARY_DELTA,
    SUMMARY_DONE,
    SUMMARY_EVENTS,
    SUMMARY_PART_ADDED,
    SUMMARY_PART_DONE,
    TEXT_DELTA,
    TEXT_DONE,
)
from .response_items import Item, Part
from .response_json import repair_responses_body, repair_responses_json
from .response_terminal import Terminals
from .response_usage import fix_usage
from .sse import Event, whole_event
from .stream import Streamed

__all__ = [
    "ITEM_HANDLERS",
    "ResponsesRepairer",
    "fix_usage",
    "repair_responses_body",
    "repair_responses_json",
]


class ResponsesRepairer(Terminals):
    """Repairs one ``/v1/responses`` SSE stream; see docs/responses.md for the rules.

    After the terminal event :attr:`decision` holds the verdict's :class:`Decision`
    (None if the stream failed or ended without a terminal).
    """

    api = "responses"

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
        if typ == TEXT_DELTA or typ == ARGS_DELTA:
            fast = self._delta(ev, obj, typ)
            if fast is not None:
                return fast
        elif typ == SUMMARY_DELTA:
            fast = self._summary_delta(ev, obj)
            if fast is not None:
                return fast
        if typ == "response.output_item.added":
            return self._item_added(ev, obj)
        if typ == "response.output_item.done":
            return self._item_done(ev, obj)
        if typ in ITEM_HANDLERS:
            return self._item_event(ev, obj, typ)
        if typ in LIFECYCLE:
            return [self._out(ev, obj, self._lifecycle(obj))]
        if typ in SUCCESS_TERMINAL:
            return self._terminal(ev, obj, typ)
        if typ in FAILURE:
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
            framing = self._framing
            if self.rules.eof_terminal and framing is not None:
                if isinstance(framing, bytes):  # a skimmed event: the Event the parser makes of it
                    framing = whole_event(framing) or Event(framing)
                out.append(self._eof_failure(framing))  # its note says the same, and what was done
            else:
                self.note("stream ended without a terminal event")
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
                self.verdict.tool_args(args, item.get("name"))
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

    def _announce(self, ev: Event, obj: dict[str, Any], typ: str) -> tuple[list[bytes], Item | None]:
        """Rule announce: a message's (or reasoning item's) first event came without its
        ``output_item.added`` (LiteLLM #22102, cc-switch #387: Codex drops the item and
        its tools). The item is announced before it, in progress, with the event's
        ``item_id`` (else ``msg_<index>``/``rs_<index>``). A function call cannot be
        announced (its name and call_id are unknown): passed through, noted."""
        if typ in CONTENT_EVENTS:
            kind = "message"
        elif typ in SUMMARY_EVENTS:
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

    # --- item events: the shared steps, then one handler per type (ITEM_HANDLERS) -----
    def _item_event(self, ev: Event, obj: dict[str, Any], typ: str) -> list[bytes]:
        """An item-scoped event (a key of :data:`ITEM_HANDLERS`): the item it names (rule
        announce opens one never added; rule item_order drops a late event or continues a
        message), the rules every item event shares (item_id, output_index, schema_fill),
        then its type's handler."""
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
        if self.rules.schema_fill:
            if not isinstance(obj.get("item_id"), str) and isinstance(it.id, str):
                obj["item_id"] = it.id
                dirty = True
                self.fire("schema_fill")
            if typ in OUTPUT_INDEX_REQUIRED and type(obj.get("output_index")) is not int:
                obj["output_index"] = self._index(it)
                dirty = True
                self.fire("schema_fill")
        taken = ITEM_HANDLERS[typ](self, ev, obj, typ, it, out)
        if taken is None:
            return out  # held or dropped (rule replay)
        out.append(self._out(ev, obj, dirty or taken))
        return out

    # Each handler: (event, object, type, item, what goes out before it) -> whether it
    # changed the object, or None when it took the event (nothing more goes out for it).

    def _content_index(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> tuple[int, bool]:
        """A content event's part: its ``content_index`` (rule schema_fill: the item's last
        part when missing), and, rule announce, a ``content_part.added`` synthesized before
        the first text of a part never added."""
        dirty = False
        ci = obj.get("content_index")
        if type(ci) is not int:
            ci = max(it.parts) if it.parts else 0
            if self.rules.schema_fill:
                obj["content_index"] = ci
                dirty = True
                self.fire("schema_fill")
        if self.rules.announce and typ in (TEXT_DELTA, TEXT_DONE):
            p = it.parts.get(ci)
            if p is None or not p.announced:
                p = it.part(ci)
                p.announced = True
                shape = {"type": "output_text", "annotations": [], "text": ""}
                idx = self._index(it)
                fields = {"item_id": it.id, "output_index": idx, "content_index": ci, "part": shape}
                out.append(self._synth(ev, PART_ADDED, fields, "announce"))
                self._note_once("announced a content part the gateway never added", it)
        return ci, dirty

    def _part_added(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> bool | None:
        ci, dirty = self._content_index(ev, obj, typ, it, out)
        part = obj.get("part")
        shape = dict(part) if isinstance(part, dict) else {"type": "output_text", "text": ""}
        it.parts[ci] = Part(shape, announced=True)
        return dirty

    def _text_delta(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> bool | None:
        ci, dirty = self._content_index(ev, obj, typ, it, out)
        delta = obj.get("delta")
        if isinstance(delta, str):
            p = it.part(ci)
            if self.rules.replay and (delta or self._run is not None):  # an empty one: held too
                pre, taken = self._replay(ev, obj, dirty, it, ci, p, delta)
                out += pre
                if taken:
                    return None
            p.add(delta)
            self.verdict.observe_text(delta)
        return dirty

    def _text_done(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> bool | None:
        ci, dirty = self._content_index(ev, obj, typ, it, out)
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
        return dirty

    def _part_done(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> bool | None:
        ci, dirty = self._content_index(ev, obj, typ, it, out)
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
        return dirty

    def _args_delta(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> bool | None:
        delta = obj.get("delta")
        if isinstance(delta, str):
            it.args.append(delta)
            self.verdict.observe_args(delta)
        return False

    def _args_done(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> bool | None:
        it.args_done = True
        if isinstance(obj.get("arguments"), str):
            it.args.set(obj["arguments"])
        return False

    def _summary_index(self, obj: dict[str, Any], it: Item) -> tuple[int, bool]:
        """A reasoning summary event's part: its ``summary_index`` (rule schema_fill: the
        item's current part when missing)."""
        si = obj.get("summary_index")
        if type(si) is int:
            return si, False
        si = it.summary_index
        if not self.rules.schema_fill:
            return si, False
        obj["summary_index"] = si
        self.fire("schema_fill")
        return si, True

    def _summary_part_added(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> bool | None:
        si, dirty = self._summary_index(obj, it)
        it.summary_index = si
        if si not in it.summary:
            it.summary[si] = Streamed()
        return dirty

    def _summary_text_delta(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> bool | None:
        si, dirty = self._summary_index(obj, it)
        delta = obj.get("delta")
        if isinstance(delta, str):
            self._add_summary(it, si, delta)
        return dirty

    def _summary_text_done(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> bool | None:
        si, dirty = self._summary_index(obj, it)
        if isinstance(obj.get("text"), str):
            it.summary[si] = Streamed(obj["text"])
        return dirty

    def _summary_part_done(self, ev: Event, obj: dict[str, Any], typ: str, it: Item, out: list[bytes]) -> bool | None:
        return self._summary_index(obj, it)[1]

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


ItemHandler = Callable[[ResponsesRepairer, Event, dict[str, Any], str, Item, list[bytes]], bool | None]

ITEM_HANDLERS: Final[dict[str, ItemHandler]] = {
    PART_ADDED: ResponsesRepairer._part_added,
    TEXT_DELTA: ResponsesRepairer._text_delta,
    TEXT_DONE: ResponsesRepairer._text_done,
    PART_DONE: ResponsesRepairer._part_done,
    ARGS_DELTA: ResponsesRepairer._args_delta,
    ARGS_DONE: ResponsesRepairer._args_done,
    SUMMARY_PART_ADDED: ResponsesRepairer._summary_part_added,
    SUMMARY_DELTA: ResponsesRepairer._summary_text_delta,
    SUMMARY_DONE: ResponsesRepairer._summary_text_done,
    SUMMARY_PART_DONE: ResponsesRepairer._summary_part_done,
}
"""The item-scoped event types the rules model, and each one's handler (after the steps
every item event shares, :meth:`ResponsesRepairer._item_event`)."""
