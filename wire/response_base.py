"""The Responses repairer's first layer: one stream's state and the steps every rule uses.

:class:`wire.responses.ResponsesRepairer` is built in layers, a module each, one concern
each: this one (the state; numbering, rule ``sequence``; an event's bytes after the
rules; a synthesized event in the stream's framing; the closing events of an open item),
:mod:`wire.response_continuation` (a message continued after an early close),
:mod:`wire.response_replay` (rule replay's held run), :mod:`wire.response_skim` (the fast
path: the common deltas, parsed or skimmed), :mod:`wire.response_terminal` (how a stream
ends) and :mod:`wire.responses` (the rules, event by event). The event types they name are here. What the rules do and why:
docs/responses.md.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from .response_items import Item, Items
from .rules import FlowContext, Rules
from .skim import Skim
from .sse import Event, format_event
from .stream import ApiRepairer, Streamed
from .verdict import Outcome, Verdict

__all__ = [
    "ARGS_DELTA",
    "ARGS_DONE",
    "CONTENT_EVENTS",
    "FAILURE",
    "LIFECYCLE",
    "NATIVE",
    "OUTPUT_INDEX_REQUIRED",
    "PART_ADDED",
    "PART_DONE",
    "SUCCESS_TERMINAL",
    "SUMMARY_DELTA",
    "SUMMARY_DONE",
    "SUMMARY_EVENTS",
    "SUMMARY_PART_ADDED",
    "SUMMARY_PART_DONE",
    "TEXT_DELTA",
    "TEXT_DONE",
    "ResponsesCore",
]

LIFECYCLE: Final = frozenset({"response.created", "response.in_progress", "response.queued"})
SUCCESS_TERMINAL: Final = frozenset({"response.completed", "response.incomplete"})
FAILURE: Final = frozenset({"response.failed", "error"})

# the item-scoped events the rules model
TEXT_DELTA: Final = "response.output_text.delta"
TEXT_DONE: Final = "response.output_text.done"
PART_ADDED: Final = "response.content_part.added"
PART_DONE: Final = "response.content_part.done"
ARGS_DELTA: Final = "response.function_call_arguments.delta"
ARGS_DONE: Final = "response.function_call_arguments.done"
SUMMARY_PART_ADDED: Final = "response.reasoning_summary_part.added"
SUMMARY_PART_DONE: Final = "response.reasoning_summary_part.done"
SUMMARY_DELTA: Final = "response.reasoning_summary_text.delta"
SUMMARY_DONE: Final = "response.reasoning_summary_text.done"
CONTENT_EVENTS: Final = frozenset({TEXT_DELTA, TEXT_DONE, PART_ADDED, PART_DONE})
SUMMARY_EVENTS: Final = frozenset({SUMMARY_PART_ADDED, SUMMARY_PART_DONE, SUMMARY_DELTA, SUMMARY_DONE})
OUTPUT_INDEX_REQUIRED: Final = frozenset({ARGS_DELTA, ARGS_DONE})

NATIVE: dict[Any, Outcome] = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}
"""A gateway's own ``incomplete_details.reason`` -> the outcome it says (native evidence)."""


class ResponsesCore(ApiRepairer):
    """One ``/v1/responses`` stream's state and the steps every rule uses (the module docstring)."""

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
        self.skim = Skim()

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
                                TEXT_DONE,
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
                            ev, PART_DONE, {"item_id": it.id, "output_index": idx, "content_index": ci, "part": part}
                        )
                    )
                content.append(part)
            item["status"] = "completed"
            item["content"] = content
        elif it.type == "function_call":
            args = it.arguments()
            if not it.args_done:
                out.append(self._synth(ev, ARGS_DONE, {"item_id": it.id, "output_index": idx, "arguments": args}))
            item["arguments"] = args
            item["status"] = "completed"
            self.verdict.tool_args(args, item.get("name"))
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
    def _summary(it: Item | None) -> list[dict[str, Any]]:
        """Rule reasoning_summary: a reasoning item's summary list from what was streamed
        into it (none: ``[]``)."""
        if it is None:
            return []
        return [{"type": "summary_text", "text": it.summary[si].text()} for si in sorted(it.summary)]

    def _add_summary(self, it: Item, si: int, delta: str, utf8: bytes | None = None) -> None:
        """A summary delta's text, kept for the item's close (rule reasoning_summary)."""
        acc = it.summary.get(si)
        if acc is None:
            acc = it.summary[si] = Streamed()
        acc.append(delta, utf8)

    def _item_event(self, ev: Event, obj: dict[str, Any], typ: str) -> list[bytes]:
        """An item-scoped event through the rules (:meth:`wire.responses.ResponsesRepairer._item_event`)."""
        raise NotImplementedError
