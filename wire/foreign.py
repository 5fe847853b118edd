"""Events a stream's API does not define, and how to keep them harmlessly.

``foreign(api, ev)`` says why an SSE event is not one of the API's own *and* carries
nothing of it (an ``event: ping`` without data, an empty ``data:``, a
``{"type":"keepalive"}``), or None. Such an event can become an SSE comment
(``commented``): every byte is kept (each line gets a leading ``:``), and every client
ignores comments, while strict ones reject the event itself (vercel/ai #20574, CPA
#2460, opencode #40171). Used by the contract (rule ``sse.nonstandard``/``sse.empty_data``)
and by the repairers (rule ``nonstandard``).
"""

from __future__ import annotations

import re

import orjson

from .sse import Event

_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def foreign(api: str, ev: Event) -> tuple[str, str] | None:
    """(rule, reason) when ``ev`` is foreign to ``api`` and carries nothing of it."""
    if ev.is_comment_only:
        return None
    data = ev.data
    if data is None:
        name = ev.event
        if name is None:
            return None  # id:/retry: only: framing, not an event
        return "sse.nonstandard", f"event {name!r} without data"
    if not data.strip():
        return "sse.empty_data", "data field is empty"
    if api not in ("responses", "chat", "messages"):
        return None
    try:
        obj = ev.json()  # shared with the repairer's parse: one loads per event
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    t = obj.get("type")
    if api == "responses":
        if isinstance(t, str) and not (t.startswith("response.") or t == "error"):
            return "sse.nonstandard", f"type {t!r} is not a Responses stream event"
    elif api == "chat" and "type" in obj and "choices" not in obj and "error" not in obj:
        return "sse.nonstandard", f"type {t!r} is not a chat completion chunk"
    return None


def commented(ev: Event) -> Event:
    """The event as SSE comment lines: each line prefixed with ``:``, the blank line kept."""
    out = []
    for m in _LINE.finditer(ev.raw):
        line = m.group()
        if line.rstrip(b"\r\n") and not line.startswith(b":"):
            line = b":" + line
        out.append(line)
    return Event(b"".join(out), [(b"", b"")], ev.eol, ev.complete)
