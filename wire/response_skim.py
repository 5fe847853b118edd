"""The Responses repairer's fast path: the common deltas, parsed or skimmed, on the same rules.

Most events of a turn are text or arguments deltas of the one open item, named by its
announced id and index. :meth:`FastPath._takes_delta` serves such a delta, from the
parsed event (:meth:`FastPath._delta`) or from a skimmed one's values
(:meth:`FastPath.skimmed`, :mod:`wire.skim`): each of its checks rules out one rule that
could touch the event (said beside it), and what is left is the bookkeeping and rule
``sequence``. Devin's reasoning summary deltas (no ``item_id``, no ``summary_index``) get
their ids filled in by the full path once, then by a template learned from it. A layer of
:class:`wire.responses.ResponsesRepairer` (:mod:`wire.response_base` lists them).
"""

from __future__ import annotations

from typing import Any, Final

from .response_base import ARGS_DELTA, SUMMARY_DELTA, TEXT_DELTA
from .response_items import HEAD, Item
from .response_replay import Replays
from .skim import Layout, Rewrite, Skimmed
from .sse import Event

__all__ = ["FastPath", "Holes", "SummaryHoles"]

SKIM_HOLES: Final = frozenset({("sequence_number",), ("delta",), ("obfuscation",)})
"""What changes from one delta to the next (wire.skim): the rest of a layout is literal."""


class Holes:
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


class SummaryHoles(Holes):
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


class FastPath(Replays):
    """The common deltas (the module docstring)."""

    def _delta(self, ev: Event, obj: dict[str, Any], typ: str) -> list[bytes] | None:
        """The common path of :meth:`_item_event` (most events of a turn): a text
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
            skim.learn(typ, ev.raw, ev.data, ev.event, obj, SKIM_HOLES)
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
        if typ == TEXT_DELTA:
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
        elif typ == ARGS_DELTA:
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
        if layout.kind == SUMMARY_DELTA:
            return self._skimmed_summary(s, layout.info)
        if layout.info is None:
            layout.info = Holes(layout)
        h: Holes = layout.info
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
            layout = skim.learn(SUMMARY_DELTA, ev.raw, ev.data, ev.event, obj, SKIM_HOLES)
        out = self._item_event(ev, obj, SUMMARY_DELTA)
        if layout is not None and skim is not None and len(out) == 1:
            it, part = t
            known: SummaryHoles | None = layout.info
            if known is None or known.it is not it or known.part != part or known.item_id != it.id:
                # first learned, or learned for another item or part (the ids a rewrite
                # fills in are the template's literals): this event's facts
                info = layout.info = SummaryHoles(layout, it, part)
                if info.rewrites and info.seq_slot >= 0 and info.delta_slot >= 0:
                    seq = obj["sequence_number"]
                    info.out = skim.rewrite(
                        layout, ev.raw, out[0], obj, ev.event, info.seq_slot, seq, info.delta_slot, delta
                    )
        return out

    def _skimmed_summary(self, s: Skimmed, info: SummaryHoles | None) -> bytes | None:
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
