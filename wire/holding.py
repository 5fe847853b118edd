"""The out-queue chat and messages repairers share: events held until a later event
decides them, sent in order.

Both APIs hold an event only while a rule waits for something still to come (chat: a
nameless tool-call header for its name, a finish chunk for a usage chunk; messages: a
nameless tool_use start for its name, a tool_use stop for whole input JSON). Everything
after a held event queues behind it, so the client sees the stream in order; at most
:data:`HOLD_LIMIT` events wait, then the subclass gives up waiting (:meth:`_release`).
Each queued event is a :class:`Rec`, parallel to :attr:`EventRepairer.held` (which the
driver sends as it came if the repairer fails; if the upstream fails, ``addons/salvage.py``
sends them through :meth:`HoldingRepairer.salvage`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .sse import Event
from .stream import ApiRepairer

if TYPE_CHECKING:
    from .rules import FlowContext, Rules
    from .verdict import Verdict

HOLD_LIMIT = 64
"""Most events held behind one that waits."""
REPLAY_HOLD_LIMIT = 1024
"""Most events held while a text may be being sent twice (rule replay, chat and
Responses): a possible repeat never holds more text than was streamed before it, and
goes out at its first divergence; past this many events it goes out as it came."""


class Rec:
    """An event in the out queue: its parsed data, whether it changed, what it waits for."""

    __slots__ = ("dirty", "drop", "drop_rule", "ev", "obj", "rules", "sent", "wait")

    def __init__(self, ev: Event, obj: dict[str, Any] | None) -> None:
        self.ev = ev
        self.obj = obj
        self.dirty = False
        self.rules: tuple[str, ...] = ()  # the rules that changed it (EventRepairer.fired)
        self.drop = False  # not sent at all (by rule drop_rule)
        self.drop_rule = "tool_header"
        self.wait: str | None = None  # what it waits for (the subclass's word), None: ready
        self.sent = False  # flushed to the client

    def mark(self, rule: str) -> None:
        self.dirty = True
        self.rules += (rule,)


class HoldingRepairer(ApiRepairer):
    """Base of :class:`~wire.chat.ChatRepairer` and :class:`~wire.messages.MessagesRepairer`."""

    def __init__(self, rules: Rules, ctx: FlowContext, verdict: Verdict) -> None:
        super().__init__(rules, ctx, verdict)
        self._recs: list[Rec] = []  # parallel to self.held
        self.dropped = 0
        """Events a rule took out of the stream (a merged re-sent header, a message_stop
        after the failure it hid): an event the upstream sent that no client gets, on purpose."""

    def _queue(self, rec: Rec) -> list[bytes]:
        """The event handled: sent at once if nothing is held and it waits for nothing
        (no queue round trip), else queued, and what is ready goes out."""
        if not self._recs and rec.wait is None:
            b = self._bytes(rec)
            return [] if b is None else [b]
        limit = self._hold_limit()
        if len(self._recs) >= limit:
            self._release(f"more than {limit} events held")
        # nothing below raises: an event in self.held is never also re-sent by the driver
        self.held.append(rec.ev)
        self._recs.append(rec)
        return self._flush()

    def _hold_limit(self) -> int:
        """How many events may wait now (:data:`HOLD_LIMIT`; a subclass may allow more)."""
        return HOLD_LIMIT

    def _release(self, why: str | None) -> None:
        """Stop waiting (``why``: the reason for the note; None at the end of the stream)."""
        raise NotImplementedError

    def salvage(self) -> list[bytes]:
        """The upstream failed mid-body: stop waiting (what the held events wait for will
        not come) and send them in order, each with the rules already applied to it (a
        renumbered tool-call index, a shifted block index, a resent header merged); a
        held finish is decided on the evidence seen. As at the end of the stream, minus
        what :meth:`end` adds for a stream that ended without a terminal."""
        self._release("the upstream failed")
        return self._flush()

    def _flush(self) -> list[bytes]:
        """The events at the head of the queue that wait for nothing, in order."""
        out: list[bytes] = []
        recs = self._recs
        n = 0
        while n < len(recs) and recs[n].wait is None:
            b = self._bytes(recs[n])
            if b is not None:
                out.append(b)
            n += 1
        if n:
            del recs[:n]
            del self.held[:n]
        return out

    def _bytes(self, r: Rec) -> bytes | None:
        """An event's bytes as it goes out (None: dropped), re-serialized if changed."""
        r.sent = True
        if r.drop:
            self.count(r.drop_rule, *r.rules)
            self.dropped += 1
            return None
        return self.dump(r.ev, r.obj, r.rules) if r.dirty and r.obj is not None else r.ev.raw
