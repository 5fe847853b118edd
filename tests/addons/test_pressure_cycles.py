"""addons/repair.py leaves no reference cycle and no per-flow state behind, whichever
way a flow ends (end of stream, ``response``, ``error`` after an upstream cut or a client
abort, an undecodable body).

The proof is reference counting alone: with the cyclic garbage collector off, the last
reference to an ended flow going away must free it (a weak reference to it is dead). A
cycle through the flow (flow -> response.stream -> FlowStream -> on_eof closure -> flow)
keeps it alive until a full collection.

mitmproxy's own message constructors leave cycles too (in ``__debug__`` mode,
``typecheck.check_option_type`` keeps a caught ``TypeError`` whose traceback holds the
frames that built the message, with their locals): each flow is built first and those
cycles are collected once before the collector is switched off, so what is measured is
the addon alone.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator

import orjson
import pytest
from mitmproxy import ctx, http
from mitmproxy.test import taddons, tflow
from streamfix.addons import repair as mod
from streamfix.addons import shared

REQUEST = {
    "model": "devin/swe-2",
    "stream": True,
    "input": [{"role": "user", "content": "Write the landing page."}],  # a correlator needle
}
BODY = (
    b'event: response.created\ndata: {"type":"response.created","sequence_number":1,'
    b'"response":{"id":"r1","object":"response","status":"in_progress","output":[]}}\n\n'
    b'event: response.output_item.added\ndata: {"type":"response.output_item.added","sequence_number":2,'
    b'"output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":""}}\n\n'
    b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta",'
    b'"sequence_number":3,"output_index":0,"item_id":"fc_1","delta":"{}"}\n\n'
)


def _messages(ctype: str) -> tuple[http.Request, http.Response]:
    req = http.Request.make("POST", "http://127.0.0.1:8317/v1/responses", orjson.dumps(REQUEST), {})
    req.headers["content-type"] = "application/json"
    resp = http.Response.make(200, b"", {"content-type": ctype})
    resp.raw_content = None  # not yet read: responseheaders of a live flow
    return req, resp


def _flow(ctype: str = "text/event-stream") -> http.HTTPFlow:
    f = http.HTTPFlow(tflow.tclient_conn(), tflow.tserver_conn())
    f.request, f.response = _messages(ctype)
    return f


@pytest.fixture
def addon() -> Iterator[mod.Repair]:
    shared.reset()
    a = mod.Repair()
    with taddons.context(a):
        yield a
    shared.reset()


def _eof_and_response(a: mod.Repair, f: http.HTTPFlow) -> None:
    a.responseheaders(f)
    f.response.stream(BODY)
    f.response.stream(b"")
    a.response(f)


def _upstream_cut(a: mod.Repair, f: http.HTTPFlow) -> None:
    """The upstream resets mid-stream: mitmproxy calls ``error`` and never ``stream(b"")``."""
    a.responseheaders(f)
    f.response.stream(BODY[:150])
    f.error = tflow.terr()
    a.error(f)


def _client_abort_before_headers(a: mod.Repair, f: http.HTTPFlow) -> None:
    f.error = tflow.terr()
    a.error(f)


def _client_abort_mid_stream(a: mod.Repair, f: http.HTTPFlow) -> None:
    a.responseheaders(f)
    f.response.stream(BODY)
    f.error = tflow.terr()
    a.error(f)


def _undecodable(a: mod.Repair, f: http.HTTPFlow) -> None:
    f.response.headers["content-encoding"] = "x-unknown"
    a.responseheaders(f)
    a.response(f)


ENDINGS: dict[str, Callable[[mod.Repair, http.HTTPFlow], None]] = {
    "eof+response": _eof_and_response,
    "upstream-cut": _upstream_cut,
    "client-abort-before-headers": _client_abort_before_headers,
    "client-abort-mid-stream": _client_abort_mid_stream,
    "undecodable-encoding": _undecodable,
}


@pytest.mark.parametrize("mode", ["repair", "check"])
@pytest.mark.parametrize("ending", ENDINGS)
def test_ended_flow_is_freed_without_the_cycle_collector(addon: mod.Repair, ending: str, mode: str) -> None:
    ctx.options.update(streamfix_mode=mode)
    f = _flow()
    addon.request(f)
    assert f.id in addon.flows and f.id in shared.correlator().pending, "the flow has state to forget"
    gc.collect()  # mitmproxy's own constructor cycles (module docstring), not the addon's
    gc.disable()
    try:
        ENDINGS[ending](addon, f)
        ref = weakref.ref(f)
        stream = f.response.stream
        del f
        assert ref() is None, f"{ending}: the flow outlived its last reference (a cycle holds it)"
        if callable(stream):
            assert stream.on_eof is None, "the stream still points back to the flow"
    finally:
        gc.enable()
    assert addon.flows == {}
    assert not shared.correlator().pending


def test_many_aborted_flows_leave_nothing(addon: mod.Repair) -> None:
    """The per-flow state of 500 flows cut at different points is all gone."""
    cuts = list(ENDINGS.values())
    for i in range(500):
        f = _flow()
        addon.request(f)
        cuts[i % len(cuts)](addon, f)
    assert addon.flows == {}
    assert not shared.correlator().pending


def test_stream_finishes_once_even_if_called_again(addon: mod.Repair) -> None:
    """The end-of-stream callback runs once: a second ``b""`` (never sent by mitmproxy,
    but harmless) does not log the flow twice."""
    f = _flow()
    addon.request(f)
    addon.responseheaders(f)
    calls = []
    stream = f.response.stream
    owner = getattr(stream, "owner", stream)  # a plain stream's Reads hands the end to its FlowStream
    owner.on_eof = calls.append
    stream(BODY)
    stream(b"")
    stream(b"")
    assert calls == [owner]


# --- what hangs on a flow is freed when the flow is not ------------------------------------
# mitmproxy keeps every ended flow in reference cycles of its own (connection handler,
# layers, contexts: measured with the collector off, a plain passthrough too) until a full
# collection. What the addon hung on the flow (the stream callable, its StreamRepair,
# repairer, parser, verdict, kept chunks) must not wait for that: after the flow's last
# hook it is freed by reference counting while the flow itself is still referenced.


def _client_abort_after_headers(a: mod.Repair, f: http.HTTPFlow) -> None:
    a.responseheaders(f)
    f.error = tflow.terr("Client disconnected.")
    a.error(f)


def _upstream_cut_mid_event(a: mod.Repair, f: http.HTTPFlow) -> None:
    a.responseheaders(f)
    f.response.stream(BODY)
    f.response.stream(b'event: response.output_item.done\ndata: {"type":"resp')
    f.error = tflow.terr("Connection reset by peer")
    a.error(f)


KEPT_ENDINGS = {
    **ENDINGS,
    "client-abort-after-headers": _client_abort_after_headers,
    "upstream-cut-mid-event": _upstream_cut_mid_event,
}


PER_FLOW = (
    "FlowStream", "FlowState", "StreamRepair", "SseParser", "ResponsesRepairer", "Verdict", "FlowContext",
    "StreamChecker", "CheckStream", "Items", "Resolver", "Told",
)  # fmt: skip
"""The types of what the client leg keeps per flow (repair and check mode)."""


_BEFORE: list[object] = []
"""Objects of the per-flow types alive before the test began (module globals of other
test modules, e.g. tests/support/fuzz.py's parser): held here, so their ids stay theirs."""


@pytest.fixture(autouse=True)
def _baseline() -> Iterator[None]:
    gc.collect()
    names = {*PER_FLOW, "Socket", "SocketTurn"}
    _BEFORE[:] = [o for o in gc.get_objects() if type(o).__name__ in names]
    yield
    _BEFORE.clear()


def _alive(names=PER_FLOW) -> list[str]:
    """Per-flow objects still alive (the collector is off: nothing was collected since),
    not counting those alive before the test."""
    before = {id(o) for o in _BEFORE}
    return sorted(type(o).__name__ for o in gc.get_objects() if type(o).__name__ in names and id(o) not in before)


@pytest.mark.parametrize("keep", [False, True], ids=["bodies-not-kept", "bodies-kept"])
@pytest.mark.parametrize("mode", ["repair", "check"])
@pytest.mark.parametrize("ending", KEPT_ENDINGS)
def test_what_the_addon_hung_on_a_flow_outlives_it_not(addon: mod.Repair, ending: str, mode: str, keep: bool) -> None:
    ctx.options.update(streamfix_mode=mode, streamfix_keep_bodies=keep)
    f = _flow()
    addon.request(f)
    gc.collect()
    gc.disable()
    try:
        assert _alive(), "the flow has per-flow state to begin with"
        KEPT_ENDINGS[ending](addon, f)
        if f.response is not None and f.response.stream is not None:
            assert not callable(f.response.stream), f"{ending}: the stream callable is still on the flow"
        assert _alive() == [], f"{ending}: alive while the flow is"
        assert f.response is not None  # the flow itself is still here (mitmproxy's cycles hold it)
    finally:
        gc.enable()


def test_a_streamed_flow_still_says_it_was_streamed(addon: mod.Repair) -> None:
    f = _flow()
    addon.request(f)
    _eof_and_response(addon, f)
    assert f.response.stream is True


# --- WebSocket: a socket's state is freed at its end, however it ends --------------------


def _ws_setup():
    from streamfix.addons import websocket as wsmod

    shared.reset()
    r = mod.Repair()
    ws = wsmod.WebSocketRepair(r, mod.receipt)
    return r, ws, wsmod


@pytest.mark.parametrize("ending", ["close", "client-abort", "upstream-reset", "before-any-turn"])
def test_websocket_state_is_freed_at_its_end_without_the_collector(ending: str) -> None:
    from mitmproxy.websocket import WebSocketMessage
    from wsproto.frame_protocol import Opcode

    r, ws, _ = _ws_setup()
    names = (*PER_FLOW, "Socket", "SocketTurn")
    with taddons.context(r, ws):
        f = tflow.twebsocketflow(messages=False)
        f.request.path = "/v1/responses"
        ws._inject = lambda *a, **k: None
        ws.websocket_start(f)
        assert f.id in ws.sockets
        if ending != "before-any-turn":
            create = orjson.dumps({"type": "response.create", **REQUEST})
            f.websocket.messages.append(WebSocketMessage(Opcode.TEXT, True, create))
            ws.websocket_message(f)
            for ev in BODY.split(b"\n\n")[:-1]:
                data = ev.split(b"data: ", 1)[1]
                f.websocket.messages.append(WebSocketMessage(Opcode.TEXT, False, data))
                ws.websocket_message(f)
            assert "SocketTurn" in _alive(names), "a turn was started"
        gc.collect()
        gc.disable()
        try:
            if ending != "close":
                f.error = tflow.terr("Client disconnected." if ending == "client-abort" else "Connection reset")
            ws.websocket_end(f)
            assert f.id not in ws.sockets
            assert _alive(names) == [], f"{ending}: alive while the flow is"
            ref = weakref.ref(f)
            del f
            assert ref() is None, f"{ending}: the WebSocket flow outlived its last reference (a cycle holds it)"
        finally:
            gc.enable()
    shared.reset()
