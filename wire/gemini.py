"""Repairs for Gemini ``:streamGenerateContent?alt=sse`` and ``:generateContent``.

:class:`GeminiRepairer` and :func:`repair_gemini_json`: a truncation verdict makes the
finishing candidate's ``finishReason`` ``MAX_TOKENS`` (a content filter ``SAFETY``), the
gateway's own finish reasons are native evidence and left alone, usage is filled from the
upstream leg. A finishing chunk without ``usageMetadata`` is held until the next data
event, bounded (:data:`HOLD_LIMIT`). The evidence each chunk gives and why: docs/gemini.md.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

import orjson

from . import stops, usage_math
from .rules import FlowContext, Rules
from .sse import Event, format_event
from .stream import ApiRepairer
from .upstream_terminal import gemini_error
from .verdict import Verdict

__all__ = ["HOLD_LIMIT", "GeminiRepairer", "repair_gemini_json"]

HOLD_LIMIT = 64
"""Most (comment) events held behind a finishing chunk that awaits usage."""

_FILTER = ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY")
_NOT_A_VERDICT = ("STOP", "FINISH_REASON_UNSPECIFIED")


def _native(verdict: Verdict, fr: Any) -> None:
    if not isinstance(fr, str) or fr in _NOT_A_VERDICT:
        return
    if fr == "MAX_TOKENS":
        verdict.native("max_tokens", f"finishReason {fr!r}")
    elif fr in _FILTER:
        verdict.native("content_filter", f"finishReason {fr!r}")
    else:
        verdict.native("unknown", f"finishReason {fr!r}")


def _usage(verdict: Verdict, obj: dict[str, Any]) -> bool:
    um = obj.get("usageMetadata")
    if not isinstance(um, dict):
        return False
    n = um.get("candidatesTokenCount")
    t = um.get("thoughtsTokenCount")
    if isinstance(n, int) and not isinstance(n, bool):
        if isinstance(t, int) and not isinstance(t, bool):
            n += t
        verdict.usage(n)
    return True


def _candidates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    c = obj.get("candidates")
    return [x for x in c if isinstance(x, dict)] if isinstance(c, list) else []


def _observe(verdict: Verdict, cand: dict[str, Any]) -> None:
    content = cand.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list):
        return
    for p in parts:
        if isinstance(p, dict) and not p.get("thought") and isinstance(p.get("text"), str):
            verdict.observe_text(p["text"])
        fc = p.get("functionCall") if isinstance(p, dict) else None
        if isinstance(fc, dict) and isinstance(fc.get("args"), dict):
            # the upstream leg's digest (wire/upstream_decoders.py) hashes the same bytes
            verdict.observe_args(orjson.dumps(fc["args"]).decode())


ERROR: Final = {
    "error": {"code": 500, "message": "The upstream stream ended without a finishReason.", "status": "INTERNAL"}
}
"""The error object a Gemini stream that stopped without a finish gets (rule eof_terminal)."""


def _final_usage(obj: dict[str, Any]) -> bool:
    """A chunk that carries the turn's whole usage (the candidates' count: Gemini sends it
    with the finish only) and no finishReason."""
    um = obj.get("usageMetadata")
    if not isinstance(um, dict) or type(um.get("candidatesTokenCount")) is not int:
        return False
    return not any(c.get("finishReason") is not None for c in _candidates(obj))


def _early_stop(finishing: list[dict[str, Any]], nxt: dict[str, Any]) -> bool:
    """Held finishing candidates that all say ``STOP``, and a next chunk with a candidate
    that has content: that STOP was not the turn's end."""
    if any(cand.get("finishReason") != "STOP" for cand in finishing):
        return False
    for cand in _candidates(nxt):
        content = cand.get("content")
        if isinstance(content, dict) and content.get("parts"):
            return True
    return False


class GeminiRepairer(ApiRepairer):
    api = "gemini"

    def __init__(self, rules: Rules, ctx: FlowContext, verdict: Verdict) -> None:
        super().__init__(rules, ctx, verdict)
        self._finish: tuple[Event, dict[str, Any], list[dict[str, Any]]] | None = None
        self._candidates: set[int] = set()
        self._usage_after = False  # the event settling a held finish carries usageMetadata
        self._late: Any = verdict.resolver  # upstream leg: the resolver, for a last look at the end
        self._remapped = False  # rule finish_reason changed the finishing chunk's reason
        self._final: tuple[Event, dict[str, Any]] | None = None  # a usage chunk with no finish, held
        self._streamed = False  # a candidate chunk came: a Gemini stream (rule eof_terminal)
        self._line_end = b"\n"

    def event(self, ev: Event) -> list[bytes]:
        obj = self.parse(ev)
        out: list[bytes] = []
        if self._final is not None and ev.data is None:
            self.held.append(ev)  # a comment after a held usage chunk keeps its place
            return out
        if ev.data is not None:
            self._line_end = ev.eol
            if self._final is not None:  # more came after the usage chunk: it was no end
                out += [e.raw for e in self.held]
                self._final = None
                self.held.clear()
        renamed: bytes | None = None
        if obj is not None:
            if self._finish is not None and self.rules.finish_reason and _early_stop(self._finish[2], obj):
                out += self._early()
            if "error" in obj and "candidates" not in obj:
                self._errored = True
                if ev.event is not None and self.rules.nonstandard:
                    # Gemini's stream has no event: lines; a named event is not a message
                    # event to an EventSource ("error" is even its own failure event):
                    # the error object as a plain data event
                    self.count("nonstandard")
                    self.note(f"dropped the event name {ev.event!r} of an error object")
                    renamed = format_event(ev.data or b"", eol=ev.eol)
            elif (
                self.rules.finish_reason and not self._finished and self._finish is None and _final_usage(obj)
            ):  # maybe the last chunk of a turn whose finishReason never comes (rule finish_reason)
                self._streamed = True
                _usage(self.verdict, obj)
                self._final = (ev, obj)
                self.held.append(ev)
                return out
            else:
                has_usage = _usage(self.verdict, obj)
                finishing = []
                for cand in _candidates(obj):
                    self._streamed = True
                    i = cand.get("index", 0)
                    self._candidates.add(i if isinstance(i, int) else 0)
                    _observe(self.verdict, cand)
                    if cand.get("finishReason") is not None:
                        finishing.append(cand)
                if finishing and self._finish is None and self.decision is None:
                    self._finished = True
                    for cand in finishing:
                        self._spec_finish(cand)
                        _native(self.verdict, cand.get("finishReason"))
                    early = self.rules.finish_reason and all(c.get("finishReason") == "STOP" for c in finishing)
                    if (
                        (has_usage and not early) or self.rules.truncation == "off"
                    ) and not self.verdict.upstream_open():
                        # (a STOP is held until the next chunk shows whether more content
                        # follows it: rule finish_reason, _early; and while the upstream
                        # leg's call is still open)
                        return out + [self._apply(ev, obj, finishing)]
                    self._finish = (ev, obj, finishing)
                    self.held.append(ev)
                    return out
        if ev.data is not None or len(self.held) >= HOLD_LIMIT:
            self._usage_after = obj is not None and isinstance(obj.get("usageMetadata"), dict)
            out += self._settle()
            self._usage_after = False
        if self._finish is not None:
            self.held.append(ev)
            return out
        return out + [renamed if renamed is not None else ev.raw]

    def _early(self) -> list[bytes]:
        """Rule finish_reason: the held chunk's ``STOP`` came before more of the turn's
        content (CPA's OpenAI -> Gemini translator puts one on its first, empty chunk; its
        Claude -> Gemini one on every functionCall chunk): no finish; the chunk goes out
        without it, with what was held after it, and the turn's own finish (or its failure)
        is still to come. A client that ends the turn at the first finishReason would lose
        the rest."""
        assert self._finish is not None
        ev, obj, finishing = self._finish
        self._finish = None
        for cand in finishing:
            cand.pop("finishReason", None)
        rest = [e.raw for e in self.held[1:]]
        self.held.clear()
        self._finished = False
        self.fire("finish_reason")
        self.note("dropped a finishReason STOP that more content followed (not the turn's end)")
        return [self._dump(ev, obj, True), *rest]

    def end(self) -> list[bytes]:
        out = self._settle()
        if self._final is not None and not self._finished and not self._errored:
            out.append(self._finished_by_usage())
        if self.decision is None or self._late_look():
            self.decision = self.verdict.decide()
        d = self.decision
        if d.failed and not d.native and self.rules.upstream_failure and not self._errored:
            # upstream leg: the provider's own failure, with its evidence (before eof_terminal's
            # generic one)
            out.append(self._failure(d.evidence[0].detail if d.evidence else "failed", self._line_end))
        if not self._finished and not self._errored:
            if self.rules.eof_terminal and self._streamed:
                # rule eof_terminal: chunks came, then the end without a finishReason or an
                # error: an error object, as Gemini sends a failure; never a finish
                self._errored = True
                out.append(format_event(orjson.dumps(ERROR), eol=self._line_end))
                self.count("eof_terminal")
                self.note("stream ended without a finishReason: ended it with an error object")
            else:
                self.note("stream ended without a finishReason; passed through as it ended")
        return out

    def _late_look(self) -> bool:
        """Upstream leg: a finish decided while the linked provider call was still
        open and never matched (CPA's OpenAI -> Gemini translator writes its ``STOP`` with
        the first chunk): at the end of the stream, which comes after the provider's, the
        resolver looks once more; True when it found the call now."""
        late = self._late
        if late is None or getattr(late, "record", None) is not None or self._errored or self.decision is None:
            return False
        if self.decision.native or self.decision.failed:
            return False
        try:
            rec = late.correlator.resolve(self.verdict, late.client_flow_id, final=True)
        except Exception:  # noqa: BLE001 - bookkeeping never breaks the stream
            return False
        late.record = rec
        return rec is not None

    def _failure(self, detail: str, eol: bytes = b"\n") -> bytes:
        """Rule upstream_failure: the API's error object, one more event."""
        self.count("upstream_failure")
        self._errored = True
        self.note(f"ended with an error object: the upstream failed ({detail})")
        return format_event(orjson.dumps(gemini_error(detail)), eol=eol)

    # --- this round's rules (finish_reason, usage_math on Gemini): wire/stops.py ---------
    def _spec_finish(self, cand: dict[str, Any]) -> None:
        """Rule finish_reason: a finishReason from another API's vocabulary (a lower-cased
        ``max_tokens``, chat's ``length``...) becomes Gemini's (wire/stops.py)."""
        fr = cand.get("finishReason")
        new = stops.foreign("gemini", fr) if self.rules.finish_reason else None
        if new is not None:
            cand["finishReason"] = new
            self._remapped = True
            self.fire("finish_reason")
            self.note(f"finishReason {fr!r} (not a Gemini value) written as {new!r}")

    def _finished_by_usage(self) -> bytes:
        """The stream ended on a chunk with the turn's whole usage and no finishReason
        (CPA's Codex -> Gemini translator on a turn without a call): the turn finished, and
        its finish is written where the provider's was, ``STOP``, on that chunk."""
        assert self._final is not None
        ev, obj = self._final
        self._final = None
        rest = b"".join(e.raw for e in self.held[1:])
        self.held.clear()
        if not _candidates(obj):
            return ev.raw + rest
        self._finished = True
        for cand in _candidates(obj):
            cand["finishReason"] = "STOP"
        self.fire("finish_reason")
        self.note("stream ended on the turn's usage without a finishReason: STOP written on that chunk")
        self.decision = self.verdict.decide()
        return self._dump(ev, obj, True) + rest

    def _settle(self) -> list[bytes]:
        """Decide a held finishing chunk and release it with what was held after it."""
        if self._finish is None:
            return []
        ev, obj, finishing = self._finish
        first = self._apply(ev, obj, finishing)  # may raise: self.held is still whole then
        self._finish = None
        rest = self.held[1:]
        self.held.clear()
        return [first] + [e.raw for e in rest]

    def _apply(self, ev: Event, obj: dict[str, Any], finishing: list[dict[str, Any]]) -> bytes:
        d = self.decision = self.verdict.decide()
        dirty, self._remapped = self._remapped, False
        if self.rules.usage_math and usage_math.repair("gemini", obj.get("usageMetadata")):
            dirty = True
            self.fire("usage_math")
            self.note("usageMetadata made to add up (a negative count, or cached above the prompt)")
        if self.rules.usage and self.verdict.upstream_counts is not None and not self._usage_after:
            note = fill_gemini_usage(obj, self.verdict)
            if note:
                self.note(note)
                self.fire("usage")
                dirty = True
        if d.failed and not d.native and self.rules.upstream_failure:
            # upstream leg: the chunk keeps its content without the finish, the
            # error object follows it
            for cand in finishing:
                cand.pop("finishReason", None)
            return self._dump(ev, obj, True) + self._failure(d.evidence[0].detail if d.evidence else "failed", ev.eol)
        new = d.word("gemini")
        if new is None or d.native or self.rules.truncation == "off" or len(self._candidates) > 1:
            if new is not None and not d.native and self.rules.truncation != "off":
                self.note(f"{d.receipt()}; not applied: the stream has several candidates")
            return self._dump(ev, obj, dirty)
        for cand in finishing:
            if cand.get("finishReason") != new:
                cand["finishReason"] = new
                self.fire("truncation")
                dirty = True
        return self._dump(ev, obj, dirty)

    def _dump(self, ev: Event, obj: dict[str, Any], dirty: bool) -> bytes:
        if not dirty:
            return ev.raw
        self.count()
        return ev.with_data(orjson.dumps(obj))


USAGE_FIELDS = {
    "promptTokenCount": "input_tokens",
    "candidatesTokenCount": "candidates_tokens",
    "thoughtsTokenCount": "reasoning_tokens",
    "cachedContentTokenCount": "cached_tokens",
}
"""Gemini ``usageMetadata`` key -> :class:`wire.verdict.UpstreamUsage` attribute (CPA's
mapping: ``promptTokenCount`` includes the cached part, as Gemini's does)."""


def fill_gemini_usage(obj: dict[str, Any], verdict: Verdict) -> str | None:
    """Fill missing or zero ``usageMetadata`` counts of a finishing chunk (or body) in
    place from the verdict's upstream counts; the note, or None when nothing was filled."""
    um = obj.get("usageMetadata")
    u = um if isinstance(um, dict) else {}
    parts = ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount")
    filled = verdict.fill_usage(u, USAGE_FIELDS, "totalTokenCount", parts)
    if not filled:
        return None
    obj["usageMetadata"] = u
    return verdict.upstream_counts.note(filled) if verdict.upstream_counts else None


def repair_gemini_json(
    obj: dict[str, Any], rules: Rules, ctx: FlowContext, verdict: Verdict, fired: Counter[str] | None = None
) -> bool:
    """Repair a non-streaming ``generateContent`` body in place; True if it changed.
    ``fired`` (if given) counts each rule that changed the body once."""
    if verdict.cap is None and ctx.request:
        verdict.request(ctx.request)
    cands = _candidates(obj)
    if not cands:
        return False
    remapped = False
    if rules.usage_math and usage_math.repair("gemini", obj.get("usageMetadata")):
        remapped = True
        if fired is not None:
            fired["usage_math"] += 1
    _usage(verdict, obj)
    for cand in cands:
        _observe(verdict, cand)
        new = stops.foreign("gemini", cand.get("finishReason")) if rules.finish_reason else None
        if new is not None:
            cand["finishReason"] = new
            remapped = True
            if fired is not None:
                fired["finish_reason"] += 1
        _native(verdict, cand.get("finishReason"))
    d = verdict.decide()
    filled = rules.usage and verdict.upstream_counts is not None and fill_gemini_usage(obj, verdict) is not None
    if filled and fired is not None:
        fired["usage"] += 1
    filled = filled or remapped
    new = d.word("gemini")
    if new is None or d.native or rules.truncation == "off" or len(cands) != 1:
        return filled
    if cands[0].get("finishReason") is None:
        return filled  # no finish to correct: never invent one
    if cands[0].get("finishReason") == new:
        return filled
    cands[0]["finishReason"] = new
    if fired is not None:
        fired["truncation"] += 1
    return True
