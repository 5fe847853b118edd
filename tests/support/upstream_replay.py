"""A captured cell of the upstream-leg matrix through BOTH legs of the sidecar, in process.

The addons are the ones the sidecar loads (``streamfix.cli.SCRIPTS``: ``addons/repair.py``'s
list, the client leg with its WebSocket repair, receipts and turn log, and
``addons/upstream.py``'s, the upstream leg), in one mitmproxy ``taddons`` context configured
as the sidecar runs (a reverse listener for the clients, a regular one for CPA's provider
calls, ``streamfix_upstream_hosts=127.0.0.1``). Every hook goes to every addon in their
order, as mitmproxy's addon manager calls them, in the order the live sidecar met them:

1. the client's request on the reverse listener (the client leg notes its prompts);
2. each provider call CPA made, on the regular listener: its request (the upstream leg
   links it to the client request by prompt), its response headers, its body read by
   read, then its end (``b""`` and the response hook) or, for a body the provider cut,
   mitmproxy's error hook with the error mitmproxy reports for it;
3. CPA's client response: its headers, its body read by read (an HTTP stream), or its
   messages one by one (a Responses WebSocket, with injected messages coming back
   through the hook as mitmproxy's WebSocket layer sends them), then its end.

The provider's decisive event is thus read before the client's terminal event, as live
(the correlator links the two by prompt and by content digest: wire/correlate.py).
"""

from __future__ import annotations

import importlib
import inspect
import threading
from typing import Any

import matrix_replay
import orjson

_LOCK = threading.Lock()
"""mitmproxy's ``ctx`` is one per process: one in-process replay at a time."""
REVERSE = "reverse:http://127.0.0.1:8317@127.0.0.1:8318"
REGULAR = "regular@127.0.0.1:8080"
CUT_ERROR = "peer closed connection without sending complete message body: incomplete chunked read"
"""What mitmproxy's HTTP/1 layer reports when the provider closes inside a chunk."""
READ = 512
"""Bytes per read of a replayed body (any reads give the same bytes: the repairs are chunking-proof)."""


def sidecar_addons() -> list[Any]:
    """The addon objects of the scripts the sidecar loads (those that have an ``addons`` list)."""
    from streamfix.cli import SCRIPTS

    out: list[Any] = []
    for script in SCRIPTS:
        mod = importlib.import_module(f"streamfix.addons.{script.removesuffix('.py')}")
        out += list(getattr(mod, "addons", []))
    return out


def _fire(master: Any, event: Any) -> None:
    """``event`` to every addon, in the chain's order; a coroutine hook runs to its end."""
    for addon in master.addons.chain:
        for _a, func in master.addons._iter_hooks(addon, event):
            res = func(*event.args())
            if inspect.iscoroutine(res):
                master.event_loop.run_until_complete(res)


def _provider_flow(call: dict[str, Any], body: bytes) -> Any:
    from mitmproxy import http
    from mitmproxy.proxy import mode_specs
    from mitmproxy.test import tflow

    req = http.Request.make(call["method"], "http://127.0.0.1:9" + call["path"], orjson.dumps(call["body"]),
                            {"content-type": "application/json", **call.get("headers", {})})  # fmt: skip
    resp = http.Response.make(call["status"], b"", call["response_headers"])
    f = tflow.tflow(req=req, resp=resp)
    f.client_conn.proxy_mode = mode_specs.ProxyMode.parse(REGULAR)
    f.response.raw_content = None
    f.response.headers.pop("content-length", None)
    return f


def _provider_call(master: Any, call: dict[str, Any], body: bytes) -> Any:
    from mitmproxy.flow import Error
    from mitmproxy.proxy.layers import http as lh

    f = _provider_flow(call, body)
    resp = f.response
    f.response = None
    _fire(master, lh.HttpRequestHook(f))
    f.response = resp
    _fire(master, lh.HttpResponseHeadersHook(f))
    if callable(f.response.stream):
        for c in matrix_replay.chunks(body, READ):
            f.response.stream(c)
        if call["ended"] == "cut":
            f.error = Error(CUT_ERROR)
            _fire(master, lh.HttpErrorHook(f))
            return f
        f.response.stream(b"")
    else:
        f.response.raw_content = body
    _fire(master, lh.HttpResponseHook(f))
    return f


def _client_http(master: Any, meta: dict[str, Any], body: bytes, calls: list[tuple[dict, bytes]]) -> bytes:
    from mitmproxy import http
    from mitmproxy.proxy import mode_specs
    from mitmproxy.proxy.layers import http as lh
    from mitmproxy.test import tflow

    req = meta["request"]
    r = http.Request.make(req["method"], "http://127.0.0.1:8317" + req["path"], orjson.dumps(req["body"]),
                          {"content-type": "application/json", **req.get("headers", {})})  # fmt: skip
    r.timestamp_start = float(meta.get("started_at", 0)) or r.timestamp_start
    resp = http.Response.make(meta["response"]["status"], b"", meta["response"]["headers"])
    f = tflow.tflow(req=r, resp=resp)
    f.client_conn.proxy_mode = mode_specs.ProxyMode.parse(REVERSE)
    f.response.raw_content = None
    f.response.headers.pop("content-length", None)
    f.response = None
    _fire(master, lh.HttpRequestHook(f))
    for call, cbody in calls:
        _provider_call(master, call, cbody)
    f.response = resp
    _fire(master, lh.HttpResponseHeadersHook(f))
    if not callable(f.response.stream):  # not streamed (JSON, an HTTP error): buffered
        f.response.raw_content = body
        _fire(master, lh.HttpResponseHook(f))
        return f.response.raw_content or b""
    out: list[bytes] = []
    for c in [*matrix_replay.chunks(body, READ), b""]:
        got = f.response.stream(c)
        out += [got] if isinstance(got, bytes) else list(got)
    _fire(master, lh.HttpResponseHook(f))
    return b"".join(out)


class _Socket:
    """What the client receives from one WebSocket flow, the hook called per message as
    mitmproxy's WebSocket layer calls it: a message goes out unless dropped, with the
    content the hooks left; an injected message comes back through the hook after the
    message that caused it (``inject.websocket`` queues it)."""

    def __init__(self, master: Any, flow: Any) -> None:
        self.master, self.flow = master, flow
        self.sent: list[bytes] = []
        self.injected: list[tuple[bytes, bool]] = []

    def inject(self, _flow: Any, data: bytes, is_text: bool = True) -> None:
        self.injected.append((data, is_text))

    def _hook(self, m: Any) -> None:
        from mitmproxy.proxy.layers import websocket as lw

        self.flow.websocket.messages.append(m)
        _fire(self.master, lw.WebsocketMessageHook(self.flow))

    def client(self, content: bytes) -> None:
        from mitmproxy.websocket import WebSocketMessage
        from wsproto.frame_protocol import Opcode

        self._hook(WebSocketMessage(Opcode.TEXT, True, content))

    def server(self, content: bytes) -> None:
        from mitmproxy.websocket import WebSocketMessage
        from wsproto.frame_protocol import Opcode

        m = WebSocketMessage(Opcode.TEXT, False, content)
        self._hook(m)
        if not m.dropped:
            self.sent.append(m.content)
        while self.injected:
            data, is_text = self.injected.pop(0)
            inj = WebSocketMessage(Opcode.TEXT if is_text else Opcode.BINARY, False, data, injected=True)
            self._hook(inj)
            if not inj.dropped:
                self.sent.append(inj.content)


def _client_ws(master: Any, meta: dict[str, Any], body: bytes, calls: list[tuple[dict, bytes]]) -> bytes:
    from mitmproxy.proxy import mode_specs
    from mitmproxy.proxy.layers import http as lh
    from mitmproxy.proxy.layers import websocket as lw
    from mitmproxy.test import tflow
    from streamfix.addons.websocket import WebSocketRepair

    f = tflow.twebsocketflow(messages=False)
    f.request.path = meta["request"]["path"]
    f.client_conn.proxy_mode = mode_specs.ProxyMode.parse(REVERSE)
    sock = _Socket(master, f)
    for a in master.addons.chain:
        if isinstance(a, WebSocketRepair):
            a._inject = sock.inject  # mitmproxy's inject.websocket, which needs a live connection
    _fire(master, lh.HttpRequestHook(f))
    _fire(master, lw.WebsocketStartHook(f))
    create = {k: v for k, v in meta["request"]["body"].items() if k != "stream"} | {"type": "response.create"}
    sock.client(orjson.dumps(create))
    for call, cbody in calls:
        _provider_call(master, call, cbody)
    for m in matrix_replay.ws_messages(body):
        sock.server(m)
    _fire(master, lw.WebsocketEndHook(f))
    return ws_sse(sock.sent)


def ws_sse(messages: list[bytes]) -> bytes:
    """WebSocket messages as tests/support/upstream_matrix.py's ``turn`` gives them (one SSE
    event per message, its type as the event name), the form ``truth`` reads."""
    return b"".join(b"event: " + orjson.loads(m).get("type", "").encode() + b"\ndata: " + m + b"\n\n" for m in messages)


def replay(meta: dict[str, Any], body: bytes, calls: list[tuple[dict[str, Any], bytes]]) -> bytes:
    """What the client hears of a captured cell through both legs (a WebSocket turn: its
    messages as SSE events); ``calls``: the provider calls (their record, their body)."""
    from mitmproxy.test import taddons
    from streamfix.addons import shared

    with _LOCK:
        shared.reset()
        from mitmproxy.addons.proxyserver import Proxyserver  # its options (mode, connection_strategy); never running
        from mitmproxy.addons.script import ScriptLoader  # its ``scripts`` option: what options.Guard reads

        with taddons.context(Proxyserver(), ScriptLoader(), *sidecar_addons()) as tctx:
            try:
                tctx.options.update(mode=[REVERSE, REGULAR], streamfix_upstream_hosts=["127.0.0.1"])
                if meta["transport"] == "websocket":
                    return _client_ws(tctx.master, meta, body, calls)
                return _client_http(tctx.master, meta, body, calls)
            finally:
                tctx.master._legacy_log_events.uninstall()
                shared.reset()
