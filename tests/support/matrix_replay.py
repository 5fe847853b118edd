"""A captured cell of the real-CPA matrix through the sidecar's client leg, in process.

HTTP cells go through the repair addon itself (``addons/repair.py``'s ``Repair``, driven with
mitmproxy's ``taddons``/``tflow`` as mitmproxy's HTTP layer drives it: the request hook, the
response headers, one call of the stream callable per read, ``b""`` at the end), so a
replayed cell meets every rule the live sidecar applied, SSE framing and check mode
included. WebSocket cells go message by message through the same
:class:`wire.stream.StreamRepair` over a :class:`wire.responses.ResponsesRepairer` with the
rules ``addons/websocket.py`` uses for a turn (its SSE-only rules off), each message wrapped
as one SSE event and every event that comes out one message again.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import orjson

_LOCK = threading.Lock()
"""mitmproxy's ``ctx`` is one per process: one in-process replay at a time."""


def chunks(body: bytes, size: int | None) -> list[bytes]:
    """``body`` in reads of ``size`` bytes (None: one read)."""
    if not size:
        return [body] if body else []
    return [body[i : i + size] for i in range(0, len(body), size)]


def replay_http(
    meta: dict[str, Any],
    body: bytes,
    *,
    mode: str = "repair",
    chunk: int | None = None,
    options: dict[str, Any] | None = None,
) -> tuple[bytes, list[str]]:
    """The body the client gets of a recorded HTTP cell through the sidecar (and the
    comments the addon left on the flow: its receipt, check mode's report)."""
    from mitmproxy import http
    from mitmproxy.test import taddons, tflow
    from streamfix.addons import repair as mod

    addon = mod.Repair()
    req = meta["request"]
    with taddons.context(addon) as tctx, _quiet(tctx.master):
        tctx.configure(addon, streamfix_mode=mode, **(options or {}))
        headers = {"content-type": "application/json", **req.get("headers", {})}
        r = http.Request.make(req["method"], "http://127.0.0.1:8317" + req["path"], orjson.dumps(req["body"]), headers)
        r.timestamp_start = float(meta.get("started_at", 0)) or r.timestamp_start
        resp = http.Response.make(meta["response"]["status"], b"", meta["response"]["headers"])
        f = tflow.tflow(req=r, resp=resp)
        f.response.raw_content = None
        addon.request(f)
        addon.responseheaders(f)
        if not callable(f.response.stream):  # not streamed (JSON, an HTTP error): buffered
            f.response.raw_content = body
            addon.response(f)
            return f.response.raw_content or b"", [f.comment]
        out: list[bytes] = []
        for c in [*chunks(body, chunk), b""]:
            out += f.response.stream(c)
        addon.response(f)
        return b"".join(out), [f.comment]


class _quiet:
    """While a context's master lives, its log handler stays installed; taken off at the
    end (each context closes its own event loop, so a handler left behind fails the next
    log line of the next context)."""

    def __init__(self, master: Any) -> None:
        self.master = master

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self.master._legacy_log_events.uninstall()


def ws_messages(body: bytes) -> list[bytes]:
    """A WebSocket cell's messages (``response.body`` holds one SSE event per message)."""
    from streamfix.wire.sse import SseParser

    p = SseParser()
    return [ev.data for ev in p.feed(body) + p.close() if ev.data is not None]


def replay_ws(meta: dict[str, Any], body: bytes) -> bytes:
    """A recorded WebSocket turn through the WebSocket turn's repair; its messages, as SSE."""
    from realcpa_matrix import ws_sse
    from streamfix.wire.responses import ResponsesRepairer
    from streamfix.wire.rules import FlowContext, Rules
    from streamfix.wire.sse import SseParser
    from streamfix.wire.stream import StreamRepair
    from streamfix.wire.verdict import Verdict

    req = meta["request"]["body"]
    fctx = FlowContext(model=req.get("model"), request=req)
    fctx.started_at = int(meta.get("started_at", fctx.started_at))
    verdict = Verdict()
    verdict.request(req)
    rules = replace(Rules(), nonstandard=False, eof_terminal=False, no_events=False, cr_end=False, vendor_events=False)
    s = StreamRepair(ResponsesRepairer(rules, fctx, verdict))
    out: list[bytes] = []
    for msg in ws_messages(body):
        wrapped = b"data: " + msg.replace(b"\n", b"\ndata: ") + b"\n\n"
        got = s.feed(wrapped)
        if got == wrapped:
            out.append(msg)
        else:
            p = SseParser()
            out += [ev.data for ev in p.feed(got) + p.close() if ev.data is not None]
    assert s.error is None, s.error
    return ws_sse(out)


def replay(meta: dict[str, Any], body: bytes, **kw: Any) -> bytes:
    with _LOCK:
        if meta.get("transport") == "websocket":
            return replay_ws(meta, body)
        return replay_http(meta, body, **kw)[0]
