"""A fake Gemini ``generateContent`` provider: what a real CPA's ``gemini-api-key`` (AI Studio,
``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`` / ``:generateContent``)
and ``vertex-api-key`` (``POST {base}/v1/publishers/google/models/{model}:...``) entries call.

Written from Google's documented wire (the Gemini API reference, ``GenerateContentResponse``,
``Candidate``, ``FinishReason``, ``UsageMetadata``; the Vertex AI reference for the same
messages), not from CPA:

- ``:streamGenerateContent?alt=sse``: ``text/event-stream``, one ``GenerateContentResponse``
  per frame, ``data: {json}`` and a blank line, CRLF line ends as Google's servers write
  them; no ``[DONE]``: the stream's end is the end of the body. Each chunk has
  ``candidates[0].content`` (``role: "model"``, ``parts``), ``index: 0``, ``modelVersion``
  and ``responseId``; every chunk but the last carries a partial ``usageMetadata``
  (``promptTokenCount``, ``totalTokenCount``). A thought summary is a part with
  ``"thought": true``; a function call is a part ``{"functionCall": {"name", "args"}}``
  whose ``args`` is a whole JSON object (Gemini never streams arguments in pieces) and
  several calls may share one chunk (the parallel turn sends ``[A]``, then ``[B, C]``).
  The last chunk carries ``finishReason`` (``STOP``, ``MAX_TOKENS``, ``SAFETY`` with
  ``safetyRatings`` and no content: "when streaming, content is empty if content filters
  block the output", ``RECITATION``) and the whole ``usageMetadata``:
  ``promptTokenCount`` (cached tokens included), ``cachedContentTokenCount``,
  ``candidatesTokenCount`` (the answer, *without* thoughts), ``thoughtsTokenCount``,
  ``totalTokenCount`` = prompt + candidates + thoughts. A failure inside a 200 stream is a
  frame ``{"error": {"code", "message", "status"}}`` (Google's error object), then the end.
- without ``alt=sse``, ``:streamGenerateContent`` answers a JSON array of the same chunks;
- ``:generateContent``: one ``GenerateContentResponse`` with every part of the turn;
- ``:countTokens``: ``{"totalTokens": N}``;
- the Code Assist envelope of the same chunks (``v1internal:streamGenerateContent``, the
  Gemini CLI's and Antigravity's API): ``{"response": <chunk>, "traceId": ...}`` per frame,
  an error object unwrapped (:func:`code_assist_frames`).

The scripts (``fake_providers.Script``) say what the turn holds; this module only writes
it in Gemini's terms. Stops Gemini has no word for (a refusal, a context-window stop, a
paused turn) are not written here: ``fake_providers.SUPPORTS`` says so per script.
"""

from __future__ import annotations

from typing import Any

import orjson

from standins.frames import Frames

OVERLOADED = {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}
FINISH = {"": "STOP", "max_tokens": "MAX_TOKENS", "safety": "SAFETY", "recitation": "RECITATION"}
"""A script's stop -> Gemini's ``finishReason``."""
SAFETY_RATINGS = [
    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
]


def tokens_of(parts: tuple[str, ...]) -> int:
    from standins.fake_providers import CHARS_PER_TOKEN

    n = sum(len(p) for p in parts)
    return -(-n // CHARS_PER_TOKEN) if n else 0


def usage(s: Any, out_tokens: int) -> dict[str, Any]:
    """Gemini's ``usageMetadata`` for a turn of ``out_tokens`` output tokens (thoughts
    included, as the scripts count them): candidates exclude the thoughts."""
    uncached, cached = s.usage_in
    prompt = uncached + cached
    thoughts = s.reasoning_tokens if s.reasoning_tokens is not None else tokens_of(s.thinking)
    thoughts = min(thoughts, out_tokens) if s.thinking else 0
    cand = out_tokens - thoughts
    um: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": cand,
        "totalTokenCount": prompt + cand + thoughts,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if cached:
        um["cachedContentTokenCount"] = cached
    if thoughts:
        um["thoughtsTokenCount"] = thoughts
    return um


def _args(c: Any) -> Any:
    return orjson.loads("".join(c.args))


def _groups(s: Any) -> list[tuple[Any, ...]]:
    """The calls in the chunks they arrive in (``s.groups``: calls per chunk; default one each)."""
    sizes = list(s.groups) or [1] * len(s.calls)
    out, i = [], 0
    for n in sizes:
        out.append(tuple(s.calls[i : i + n]))
        i += n
    if i < len(s.calls):
        out.append(tuple(s.calls[i:]))
    return [g for g in out if g]


def gemini_chunks(s: Any, model: str, cut: bool, out_tokens: int, rid: str) -> Frames:
    """The turn as ``GenerateContentResponse`` chunks (objects); ``content_end`` marks the
    last chunk with content. An in-band error ends the list with the error object."""
    prompt = s.usage_in[0] + s.usage_in[1]
    partial = {"promptTokenCount": prompt, "totalTokenCount": prompt}
    ev = Frames()
    deltas = 0

    def chunk(parts: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}],
            "usageMetadata": partial,
            "modelVersion": model,
            "responseId": rid,
        }

    def failed() -> bool:
        return s.error_after is not None and deltas >= s.error_after

    pieces: list[list[dict[str, Any]]] = [[{"text": t, "thought": True}] for t in s.thinking]
    pieces += [[{"text": t}] for t in s.text]
    pieces += [[{"functionCall": {"name": c.name, "args": _args(c)}} for c in g] for g in _groups(s)]
    pieces += [[{"text": t}] for t in s.text_after]
    for parts in pieces:
        if failed():
            ev.append({"error": OVERLOADED})
            return ev
        ev.append(chunk(parts))
        deltas += 1
        ev.mark()
    if failed():
        ev.append({"error": OVERLOADED})
        return ev
    stop = "max_tokens" if cut else s.stop
    cand: dict[str, Any] = {
        "content": {"parts": [{"text": ""}], "role": "model"},
        "finishReason": FINISH[stop],
        "index": 0,
    }
    if stop == "safety":
        cand = {"finishReason": "SAFETY", "index": 0, "safetyRatings": SAFETY_RATINGS}
    elif not pieces:  # no parts at all: a STOP with an empty content
        cand["content"] = {"role": "model"}
    last: dict[str, Any] = {"candidates": [cand], "modelVersion": model, "responseId": rid}
    if s.usage:
        last["usageMetadata"] = usage(s, out_tokens)
    if s.joined and pieces and stop != "safety":  # the finish on the chunk with the last parts
        ev[-1]["candidates"][0]["finishReason"] = cand["finishReason"]
        if s.usage:
            ev[-1]["usageMetadata"] = last["usageMetadata"]
        else:
            ev[-1].pop("usageMetadata", None)
        ev.content_end = len(ev) - 1
        return ev
    ev.append(last)
    return ev


def gemini_frames(chunks: list[dict[str, Any]]) -> list[bytes]:
    """Chunks as ``alt=sse`` frames (CRLF, as Google's servers frame them)."""
    return [b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks]


def code_assist_frames(chunks: list[dict[str, Any]], trace: str) -> list[bytes]:
    """Chunks as the Gemini Code Assist API streams them (``POST {base}/v1internal:
    streamGenerateContent?alt=sse``, what CPA's Antigravity path calls): each
    ``GenerateContentResponse`` under ``response``, beside a ``traceId``; an error object
    as it is, at the top level."""
    return [
        b"data: " + orjson.dumps(c if "error" in c else {"response": c, "traceId": trace}) + b"\r\n\r\n" for c in chunks
    ]


def gemini_array(chunks: list[dict[str, Any]]) -> list[bytes]:
    """Chunks as the JSON array ``:streamGenerateContent`` answers without ``alt=sse``, in
    the pieces it streams in, framed as Google's servers frame it: each chunk pretty-printed
    (LF line ends, two-space indent), ``\\n,\\r\\n`` between two, ``[`` before the first and
    ``\\n]`` after the last. (A reader that splits at CRLF, as Portkey's Gemini reader does,
    gets one chunk per piece, with a ``[``, a trailing ``,`` or a ``\\n]`` to strip.)"""
    out = [b"["]
    for i, c in enumerate(chunks):
        out.append((b"\n,\r\n" if i else b"") + orjson.dumps(c, option=orjson.OPT_INDENT_2))
    out.append(b"\n]")
    return out


def gemini_json(s: Any, model: str, cut: bool, out_tokens: int, rid: str) -> dict[str, Any]:
    """The turn as one ``:generateContent`` response."""
    parts: list[dict[str, Any]] = []
    if s.thinking:
        parts.append({"text": "".join(s.thinking), "thought": True})
    if s.text:
        parts.append({"text": "".join(s.text)})
    parts += [{"functionCall": {"name": c.name, "args": _args(c)}} for c in s.calls]
    if s.text_after:
        parts.append({"text": "".join(s.text_after)})
    stop = "max_tokens" if cut else s.stop
    cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "finishReason": FINISH[stop], "index": 0}
    if stop == "safety":
        cand = {"finishReason": "SAFETY", "index": 0, "safetyRatings": SAFETY_RATINGS}
    elif not parts:
        cand["content"] = {"role": "model"}
    body: dict[str, Any] = {"candidates": [cand], "modelVersion": model, "responseId": rid}
    if s.usage:
        body["usageMetadata"] = usage(s, out_tokens)
    return body
