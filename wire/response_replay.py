"""Rule ``replay`` on a Responses stream: the held run of deltas that may repeat a part's text.

:func:`wire.replay.step` decides what each text delta is; this layer holds the deltas of a
possible repeat (with whatever passes between them, a comment, in its place), releases
them, numbered then, as the part's text at the first divergence, at any other Responses
event, at the end or when the upstream fails, and drops them when they complete the whole
text (the doubled done texts then list it once). Bounded by the text so far and
:data:`~wire.holding.REPLAY_HOLD_LIMIT` events. A layer of
:class:`wire.responses.ResponsesRepairer` (:mod:`wire.response_base` lists them).
"""

from __future__ import annotations

from typing import Any

import orjson

from .foreign import foreign
from .holding import REPLAY_HOLD_LIMIT
from .replay import DIVERGED, HOLD, PHRASE, START, WHOLE, step
from .response_base import TEXT_DELTA
from .response_continuation import Continuations
from .response_items import Item, Part
from .rules import FlowContext, Rules
from .sse import Event
from .verdict import Verdict

__all__ = ["Replays", "Run"]


class Run:
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


class Replays(Continuations):
    """Rule replay's held run (the module docstring)."""

    def __init__(self, rules: Rules, ctx: FlowContext, verdict: Verdict) -> None:
        super().__init__(rules, ctx, verdict)
        self._replayed: set[int] = set()  # items whose done text was doubled
        self._run: Run | None = None  # deltas that may repeat a part's text, held
        self._routed = False  # event() called by _run_event

    # --- driver interface ---------------------------------------------------------
    def _run_event(self, ev: Event, run: Run) -> list[bytes]:
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

    def _in_run(self, ev: Event, run: Run) -> str:
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
        if typ == TEXT_DELTA and self.items.lookup(obj) is run.it:
            ci = obj.get("content_index")
            if run.it.root is not None and type(ci) is int:
                ci = run.it.ci_map.get(ci)
            if ci == run.ci:
                return "delta"
        return "end"

    def _replay(
        self, ev: Event, obj: dict[str, Any], dirty: bool, it: Item, ci: int, p: Part, delta: str
    ) -> tuple[list[bytes], bool]:
        """Rule replay (LiteLLM #41109; :func:`wire.replay.step`): what goes out before
        this delta (a run it ends), and whether the delta was taken: held in a possible
        repeat, or dropped with one (else the caller streams it as text)."""
        enc = delta.encode("utf-8", "surrogatepass")
        buf = p.chunks.view()
        out: list[bytes] = []
        run = self._run
        if run is not None:  # this delta is the part's next (event() ended the run otherwise)
            what = step(buf, len(buf), run.nbytes, p.chunks.pieces, p.size, enc)
            if what != DIVERGED:
                self._hold(run, ev, obj, dirty, delta)
                run.nbytes += len(enc)
                if what == HOLD:
                    if len(self.held) >= REPLAY_HOLD_LIMIT:
                        self.note(f"released a possible repeat of a text: more than {REPLAY_HOLD_LIMIT} events held")
                        return self._end_run(), True
                    return out, True
                if what == PHRASE:  # the text is a phrase said over and over: text
                    return self._end_run(), True
                return self._drop_run(), True
            out = self._end_run()  # diverged: its text is the part's; this delta may start another
            buf = p.chunks.view()
        what = step(buf, len(buf), -1, p.chunks.pieces, p.size, enc)
        if what == WHOLE:
            p.replayed = True
            self.count("replay")
            self._note_once("dropped a delta replaying the whole text", it)
            return out, True
        if what == START:
            run = self._run = Run(it, ci, p)
            self._hold(run, ev, obj, dirty, delta)
            run.nbytes = len(enc)
            return out, True
        return out, False

    def _hold(self, run: Run, ev: Event, obj: dict[str, Any], dirty: bool, delta: str) -> None:
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
