"""Events a stream's API does not define, and how to keep them harmlessly.

``foreign(api, ev)`` says why an SSE event is not one of the API's own *and* carries
nothing of it (an ``event: ping`` without data, an empty ``data:``, a keep-alive object
such as ``{"type":"keepalive"}`` or ``{"type":"ping"}``), or None. Other types outside the
API (``codex.rate_limits``, which Codex reads) are not foreign in this sense: the contract
reports them (rule ``sse.nonstandard``), the repair leaves them. Such an event can become an SSE comment
(``commented``): every byte is kept (each line gets a leading ``:``), and every client
ignores comments, while strict ones reject the event itself (vercel/ai #20574, CPA
#2460, opencode #40171). Used by the contract (rule ``sse.nonstandard``/``sse.empty_data``)
and by the repairers (rule ``nonstandard``).
"""

from __future__ import annotations

import re

import orjson

from .sse import Event

KEEPALIVE = frozenset({"ping", "keepalive", "keep_alive", "keep-alive", "heartbeat"})
"""Types gateways send to keep a connection alive (opencode #40171, vercel/ai #20574)."""

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
    if not data or data.isspace():  # = not data.strip() (same ASCII whitespace), without its copy
        return "sse.empty_data", "data field is empty"
    if api not in ("responses", "chat"):  # Anthropic's own stream has ping events
        return None
    try:
        obj = ev.json()  # shared with the repairer's parse: one loads per event
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    t = obj.get("type")
    if not isinstance(t, str) or t not in KEEPALIVE or "choices" in obj or "error" in obj:
        return None
    what = "a Responses stream event" if api == "responses" else "a chat completion chunk"
    return "sse.nonstandard", f"type {t!r} is not {what}"


def commented(ev: Event) -> Event:
    """The event as SSE comment lines: each line prefixed with ``:``, the blank line kept."""
    out = []
    for m in _LINE.finditer(ev.raw):
        line = m.group()
        if line.rstrip(b"\r\n") and not line.startswith(b":"):
            line = b":" + line
        out.append(line)
    return Event(b"".join(out), [(b"", b"")], ev.eol, ev.complete)


VENDOR_PREFIXES = ("codex.", "responsesapi.")
"""Event types of a vendor's own on ``/v1/responses``: the Codex backend's ``codex.rate_limits``,
``codex.response.metadata`` and ``responsesapi.websocket_timing`` (CPA v7.2.x passes them
to every client; strict Responses clients reject a type the API does not define, Codex
reads them)."""


def vendor(typ: object) -> bool:
    """Is a Responses event type a vendor's own (:data:`VENDOR_PREFIXES`)?"""
    return isinstance(typ, str) and typ.startswith(VENDOR_PREFIXES)


def codex_client(originator: str | None, user_agent: str | None) -> bool:
    """Did Codex send the request? Codex names itself in ``originator`` (``codex_cli_rs``,
    ``codex_exec``, ``codex_vscode``...) and its ``User-Agent`` starts with the same name."""
    for v in (originator, user_agent):
        if isinstance(v, str) and v.strip().lower().startswith("codex"):
            return True
    return False
