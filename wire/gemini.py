"""Repairs for Gemini ``:streamGenerateContent?alt=sse`` and ``:generateContent``
(CPA's interactions -> Gemini output, cpa-wire.md §6).

CPA writes one ``data: {"candidates":[{"content":{"parts":[...],"role":"model"},
"index":0}],"modelVersion":...,"responseId":...}`` chunk per delta and a final chunk with
an empty text part, ``"finishReason":"STOP"`` (always) and ``usageMetadata``.

``truncation``
    At the chunk that carries a candidate's ``finishReason`` the verdict decides;
    truncated and not native -> ``finishReason: "MAX_TOKENS"`` (content_filter ->
    ``"SAFETY"``). Policy ``off`` leaves it. A gateway's own ``MAX_TOKENS`` is native
    (max_tokens); ``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``,
    ``SPII``, ``IMAGE_SAFETY`` are native content_filter; any other value except ``STOP``
    and ``FINISH_REASON_UNSPECIFIED`` (e.g. ``MALFORMED_FUNCTION_CALL``) is the gateway's
    own word and left alone (native, outcome unknown). If the finishing chunk has no
    ``usageMetadata`` it is held until the next data event or the end of the stream
    (bounded by :data:`HOLD_LIMIT`), in case usage follows. Only single-candidate streams
    are rewritten.

Evidence: non-thought ``text`` parts -> ``observe_text``; ``usageMetadata.
candidatesTokenCount`` plus ``thoughtsTokenCount`` (Gemini counts thinking against
``maxOutputTokens``; CPA's Devin path has no thought count) -> ``usage``; the cap is the
request's ``generationConfig.maxOutputTokens``. No ``tool_args``: CPA turns every Devin
``arguments_delta`` into its own ``functionCall`` part whose ``args`` is the fragment only
if that fragment alone is valid JSON, else ``{}``, so the arguments string is gone on
this leg (and a usage == cap with a call last therefore says ``max_tokens``).

Known and not repaired (open issue): that fragmentation itself. A call streamed in N
argument fragments reaches a Gemini client as N ``functionCall`` parts, mostly with
``args: {}`` and sometimes with a scalar (a fragment like ``"index.html"`` is valid JSON),
which google-genai's ``FunctionCall.args: dict`` rejects. The arguments cannot be
rebuilt from the client leg; only the Connect-RPC tap has them.

The non-streaming ``streamGenerateContent`` form (a JSON array, no ``alt=sse``) is not
SSE and passes through unrepaired. Errors (``{"error": ...}``) pass through; held events
are released first; nothing is synthesized. Cost: one orjson parse per event.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

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
_FINISH = {"max_tokens": "MAX_TOKENS", "content_filter": "SAFETY"}


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


class GeminiRepairer(ApiRepairer):
    api = "gemini"

    def __init__(self, rules: Rules, ctx: FlowContext, verdict: Verdict) -> None:
        super().__init__(rules, ctx, verdict)
        self._finish: tuple[Event, dict[str, Any], list[dict[str, Any]]] | None = None
        self._candidates: set[int] = set()
        self._usage_after = False  # the event settling a held finish carries usageMetadata
        self._late: Any = verdict.resolver  # upstream leg: the resolver, for a last look at the end

    def event(self, ev: Event) -> list[bytes]:
        obj = self.parse(ev)
        out: list[bytes] = []
        if obj is not None:
            if "error" in obj and "candidates" not in obj:
                self._errored = True
            else:
                has_usage = _usage(self.verdict, obj)
                finishing = []
                for cand in _candidates(obj):
                    i = cand.get("index", 0)
                    self._candidates.add(i if isinstance(i, int) else 0)
                    _observe(self.verdict, cand)
                    if cand.get("finishReason") is not None:
                        finishing.append(cand)
                if finishing and self._finish is None and self.decision is None:
                    self._finished = True
                    for cand in finishing:
                        _native(self.verdict, cand.get("finishReason"))
                    if (has_usage or self.rules.truncation == "off") and not self._upstream_open():
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
        return out + [ev.raw]

    def end(self) -> list[bytes]:
        if not self._finished and not self._errored:
            self.note("stream ended without a finishReason; passed through as it ended")
        out = self._settle()
        if self.decision is None or self._late_look():
            self.decision = self.verdict.decide()
        d = self.decision
        if d.failed and not d.native and self.rules.upstream_failure and not self._errored:
            out.append(self._failure(d.evidence[0].detail if d.evidence else "failed"))  # upstream leg
        return out

    def _late_look(self) -> bool:
        """Upstream leg (issue 28): a finish decided while the linked provider call was still
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
        """Rule upstream_failure (issue 28): the API's error object, one more event."""
        self.count("upstream_failure")
        self._errored = True
        self.note(f"ended with an error object: the upstream failed ({detail})")
        return format_event(orjson.dumps(gemini_error(detail)), eol=eol)

    def _upstream_open(self) -> bool:
        """Upstream leg (issue 28): the provider call the request side linked to this flow is
        still open (CPA wrote its finish before the provider's stream ended: its Claude
        translator does at a tool call's block stop): hold the finishing chunk until the
        next event or the end, when the resolver looks again (wire/correlate.py)."""
        v = self.verdict
        if v.resolver is None:
            return False
        v.decide()  # runs the resolver once; while waiting it puts itself back
        return bool(getattr(v.resolver, "waiting", False))

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
        dirty = False
        if self.rules.usage and self.verdict.upstream_counts is not None and not self._usage_after:
            note = fill_gemini_usage(obj, self.verdict)
            if note:
                self.note(note)
                self.fire("usage")
                dirty = True
        if d.failed and not d.native and self.rules.upstream_failure:
            # upstream leg (issue 28): the chunk keeps its content without the finish, the
            # error object follows it
            for cand in finishing:
                cand.pop("finishReason", None)
            return self._dump(ev, obj, True) + self._failure(d.evidence[0].detail if d.evidence else "failed", ev.eol)
        if not d.truncated or d.native or self.rules.truncation == "off" or len(self._candidates) > 1:
            if d.truncated and not d.native and self.rules.truncation != "off":
                self.note(f"{d.receipt()}; not applied: the stream has several candidates")
            return self._dump(ev, obj, dirty)
        new = _FINISH[d.outcome]
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
    _usage(verdict, obj)
    for cand in cands:
        _observe(verdict, cand)
        _native(verdict, cand.get("finishReason"))
    d = verdict.decide()
    filled = rules.usage and verdict.upstream_counts is not None and fill_gemini_usage(obj, verdict) is not None
    if filled and fired is not None:
        fired["usage"] += 1
    if not d.truncated or d.native or rules.truncation == "off" or len(cands) != 1:
        return filled
    if cands[0].get("finishReason") is None:
        return filled  # no finish to correct: never invent one
    new = _FINISH[d.outcome]
    if cands[0].get("finishReason") == new:
        return filled
    cands[0]["finishReason"] = new
    if fired is not None:
        fired["truncation"] += 1
    return True
