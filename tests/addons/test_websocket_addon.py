"""addons/websocket.py driven with taddons and twebsocketflow (no sockets).

A small stand-in for mitmproxy's WebSocket layer (:class:`Wire`) calls the hook per
message the way ``proxy/layers/websocket.py`` does: a message goes out unless dropped,
with the content the hook left; an injected message comes back through the hook later,
``injected=True``, possibly after later upstream messages (``inject.websocket`` schedules
each as a task of its own). Here the injections are delivered late and in reverse order,
the worst case, and the client must still see the repaired stream in order.
"""

from __future__ import annotations

import logging
import re

import orjson
import pytest
from mitmproxy import exceptions, http
from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons, tflow
from mitmproxy.websocket import WebSocketMessage
from streamfix.addons import repair as repair_mod
from streamfix.addons import shared
from streamfix.addons import websocket as mod
from streamfix.wire.responses import ResponsesRepairer
from support import pure_only
from wsproto.frame_protocol import Opcode
from wsturns import BUGGY, RESPONSES, expected

from streamfix.recordings import load
from streamfix.replay import ws_messages


class Wire:
    """What the client receives from one WebSocket flow, hooks called as mitmproxy does."""

    def __init__(self, ws: mod.WebSocketRepair, flow: http.HTTPFlow, late: bool = True) -> None:
        self.ws, self.flow, self.late = ws, flow, late
        self.sent: list[bytes] = []
        self.injected: list[bytes] = []
        ws._inject = lambda f, data, is_text=True: self.injected.append((data, is_text))

    def _hook(self, m: WebSocketMessage) -> None:
        self.flow.websocket.messages.append(m)
        self.ws.websocket_message(self.flow)

    def client(self, content: bytes) -> None:
        self._hook(WebSocketMessage(Opcode.TEXT, True, content))

    def server(self, content: bytes, opcode: Opcode = Opcode.TEXT) -> None:
        m = WebSocketMessage(opcode, False, content)
        self._hook(m)
        if not m.dropped:
            self.sent.append(m.content)
        if not self.late:
            self.flush()

    def flush(self) -> None:
        """The injected messages come back, last injected first."""
        pending, self.injected = self.injected, []
        for data, is_text in reversed(pending):
            m = WebSocketMessage(Opcode.TEXT if is_text else Opcode.BINARY, False, data, injected=True)
            self._hook(m)
            if not m.dropped:
                self.sent.append(m.content)


@pytest.fixture
def addons():
    shared.reset()
    r = repair_mod.Repair()
    ws = mod.WebSocketRepair(r, repair_mod.receipt)
    with taddons.context(r, ws) as tctx:
        yield r, ws, tctx


def ws_flow(path: str = "/v1/responses") -> http.HTTPFlow:
    f = tflow.twebsocketflow(messages=False)
    f.request.path = path
    return f


def create(name: str, **extra) -> bytes:
    body = {k: v for k, v in load(name).request.get("body", {}).items() if k != "stream"}
    return orjson.dumps({"type": "response.create", **body, **extra})


def turn(w: Wire, name: str, **extra) -> list[bytes]:
    """One turn of recording ``name``; the messages the client got for it."""
    w.client(create(name, **extra))
    n = len(w.sent)
    for m in ws_messages(load(name).body):
        w.server(m)
    w.flush()
    return w.sent[n:]


@pytest.mark.parametrize("late", [True, False], ids=["injections-late-reversed", "injections-at-once"])
@pytest.mark.parametrize("name", RESPONSES)
def test_each_recording_repaired_in_order(addons, name: str, late: bool) -> None:
    _, ws, _ = addons
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f, late)
    got = turn(w, name)
    want = expected(load(name), got, (f.request.timestamp_start, 2**40))
    assert [m.decode() for m in got] == [m.decode() for m in want]


def test_injections_overtaken_by_later_messages(addons) -> None:
    """Later upstream messages handled before the injected ones came back: they wait in
    the outbox, the client sees the repaired order."""
    _, ws, _ = addons
    name = "responses-devin-two-calls"
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f, late=True)
    w.client(create(name))
    raw = ws_messages(load(name).body)
    for m in raw:
        w.server(m)
    assert w.injected, "this stream needs inserted events"
    w.flush()
    assert not ws.sockets[f.id].outbox
    assert [m.decode() for m in w.sent] == [m.decode() for m in expected(load(name), w.sent, (0, 2**40))]


def test_turns_share_nothing(addons, caplog) -> None:
    """Three turns on one socket: each its own verdict (from its own response.create),
    sequence numbering, receipt and correlation key."""
    _, ws, _ = addons
    caplog.set_level(logging.INFO, "streamfix")
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f)
    t1 = turn(w, "responses-devin-truncated")
    t2 = turn(w, "responses-devin-toolcall")
    t3 = turn(w, "responses-devin-truncated")
    assert orjson.loads(t1[-1])["type"] == "response.incomplete"
    assert orjson.loads(t2[-1])["type"] == "response.completed"
    # the same turn again gives the same messages (created_at, filled from each turn's own
    # clock second, may differ by a second boundary)
    mask = lambda msgs: [re.sub(rb'"created_at":\d+', b'"created_at":0', m) for m in msgs]
    assert mask(t3) == mask(t1)
    for got, name in ((t1, "responses-devin-truncated"), (t2, "responses-devin-toolcall")):
        assert got == expected(load(name), got, (0, 2**40))
    heads = [line for line in f.comment.splitlines() if line.startswith("WebSocket turn")]
    assert [h.split(":")[0] for h in heads] == ["WebSocket turn 1", "WebSocket turn 2", "WebSocket turn 3"]
    assert heads[0].startswith("WebSocket turn 1: verdict max_tokens; fixed ")
    assert "verdict" not in heads[1]
    assert heads[2].startswith("WebSocket turn 3: verdict max_tokens; fixed ")
    assert f.comment.count("why: ") == 2
    assert not shared.correlator().pending, "each turn forgets its correlation key at its terminal"


def test_request_facts_per_turn(addons) -> None:
    """The model a turn's response.create names fills what the gateway left out."""
    _, ws, _ = addons
    name = "responses-claude-text-then-tool"
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f)
    models = []
    for model in ("model-a", "model-b"):
        got = turn(w, name, model=model)
        models.append(orjson.loads(got[0])["response"]["model"])
    assert models == ["model-a", "model-b"]


def test_response_append_keeps_the_earlier_facts(addons) -> None:
    _, ws, _ = addons
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f)
    w.client(create("responses-devin-truncated"))
    w.client(orjson.dumps({"type": "response.append", "input": [{"role": "user", "content": "more"}]}))
    s = ws.sockets[f.id]
    assert [b.get("max_output_tokens") for b in s.pending] == [400, 400]
    assert s.pending[1]["input"] == [{"role": "user", "content": "more"}]


@pure_only
def test_repairer_error_passes_the_rest_of_the_socket(addons, caplog, monkeypatch) -> None:
    _, ws, _ = addons
    name = "responses-devin-two-calls"
    raw = ws_messages(load(name).body)
    k = len(raw) // 2
    real = ResponsesRepairer.event
    calls = {"n": 0}

    def event(self, ev):
        calls["n"] += 1
        if calls["n"] == k + 1:
            raise RuntimeError("repairer bug")
        return real(self, ev)

    monkeypatch.setattr(ResponsesRepairer, "event", event)
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f)
    got = turn(w, name)
    assert got[-(len(raw) - k) :] == raw[k:], "from the failing message on, every message as it came"
    assert len(got) >= len(raw) - k
    again = turn(w, name)
    assert again == raw, "the rest of the socket passes through"
    errors = [r for r in caplog.records if "repairer failed" in r.getMessage()]
    assert len(errors) == 1
    assert "repairer failed" in f.comment


def test_binary_and_client_messages_untouched(addons) -> None:
    _, ws, _ = addons
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f)
    w.server(b"\x00\x01 binary", Opcode.BINARY)
    w.server(b"not json")
    w.server(b'{"type":"codex.rate_limits","x":1}')
    assert w.sent == [b"\x00\x01 binary", b"not json", b'{"type":"codex.rate_limits","x":1}']
    c = WebSocketMessage(Opcode.TEXT, True, create(BUGGY[0]))
    f.websocket.messages.append(c)
    ws.websocket_message(f)
    assert c.content == create(BUGGY[0]) and not c.dropped


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/ws", "/v1/responses/compact"])
def test_other_paths_untouched(addons, path: str) -> None:
    _, ws, _ = addons
    f = ws_flow(path)
    ws.websocket_start(f)
    assert f.id not in ws.sockets
    w = Wire(ws, f)
    raw = ws_messages(load(BUGGY[0]).body)
    for m in raw:
        w.server(m)
    assert w.sent == raw


@pytest.mark.parametrize("option", [{"streamfix_websocket": "pass"}, {"streamfix": False}])
def test_pass_and_master_switch(addons, option) -> None:
    _, ws, tctx = addons
    tctx.configure(ws, **option)
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f)
    assert turn(w, BUGGY[0]) == ws_messages(load(BUGGY[0]).body)


def test_upstream_listener_is_not_the_client_leg(addons) -> None:
    r, ws, tctx = addons
    tctx.configure(r, mode=["reverse:http://127.0.0.1:8317@8318", "regular@8080"])
    f = ws_flow()
    ws.websocket_start(f)
    assert f.id not in ws.sockets
    f = ws_flow()
    f.client_conn.proxy_mode = ProxyMode.parse("reverse:http://127.0.0.1:8317@8318")
    ws.websocket_start(f)
    assert f.id in ws.sockets


def test_refuse_answers_the_upgrade_with_426(addons) -> None:
    _, ws, tctx = addons
    tctx.configure(ws, streamfix_websocket="refuse")
    f = ws_flow()
    f.response = None
    ws.request(f)
    assert f.response is not None and f.response.status_code == 426
    for path, upgrade in (("/v1/chat/completions", "websocket"), ("/v1/responses", "")):
        g = ws_flow(path)
        g.response = None
        if not upgrade:
            del g.request.headers["upgrade"]
        ws.request(g)
        assert g.response is None
    tctx.configure(ws, streamfix_websocket="repair")
    g = ws_flow()
    g.response = None
    ws.request(g)
    assert g.response is None


def test_bad_policy_rejected(addons) -> None:
    _, ws, tctx = addons
    with pytest.raises(exceptions.OptionsError):
        tctx.configure(ws, streamfix_websocket="maybe")


def test_socket_end_reports_an_unfinished_turn(addons, caplog) -> None:
    _, ws, _ = addons
    caplog.set_level(logging.INFO, "streamfix")
    name = "responses-devin-two-calls"
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f)
    w.client(create(name))
    for m in ws_messages(load(name).body)[:-1]:
        w.server(m)
    w.flush()
    ws.websocket_end(f)
    assert f.id not in ws.sockets
    ours = [r.getMessage() for r in caplog.records if r.getMessage().startswith("streamfix: GET ")]
    assert len(ours) == 1, ours  # the turn's one line: receipt, then the notes
    assert "stream ended without a terminal event" in ours[0]
    assert not shared.correlator().pending


def test_each_turn_goes_to_the_turn_log(addons) -> None:
    _, ws, _ = addons
    records: list[dict] = []
    shared.add_turn_sink(records.append)
    try:
        f = ws_flow()
        ws.websocket_start(f)
        w = Wire(ws, f)
        turn(w, "responses-devin-truncated")
        turn(w, "responses-devin-toolcall", model="model-b")
        w.client(create("responses-devin-two-calls"))
        for m in ws_messages(load("responses-devin-two-calls").body)[:3]:
            w.server(m)
        w.flush()
        ws.websocket_end(f)
    finally:
        shared.remove_turn_sink(records.append)
    assert [r["transport"] for r in records] == ["websocket"] * 3
    assert [r["ended"] for r in records] == ["truncated", "complete", "upstream_error"]
    assert records[1]["model"] == "model-b"
    assert all(r["flow"] == f.id and r["api"] == "responses" for r in records)
    # what the client read against what the gateway sent: the truncation told, a clean
    # turn as it came, a turn the socket closed mid-way with no ending from either
    assert [r["finish"] for r in records] == [
        {"client": ["max_output_tokens"], "gateway": ["completed"]},
        {"client": ["completed"], "gateway": ["completed"]},
        {"client": None, "gateway": None},
    ]
    assert records[0]["response"]["model"] == "devin/swe-2" and records[0]["response"]["id"]


def test_check_mode_reports_and_changes_nothing(addons) -> None:
    r, ws, tctx = addons
    tctx.configure(r, streamfix_mode="check")
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f)
    name = "responses-devin-two-calls"
    assert turn(w, name) == ws_messages(load(name).body)
    assert turn(w, "responses-openai-clean") == ws_messages(load("responses-openai-clean").body)
    assert not w.injected
    receipts = [line for line in f.comment.splitlines() if "check:" in line]
    assert len(receipts) == 2
    assert "violation" in receipts[0] and "no violation" in receipts[1]


def test_binary_message_keeps_its_place_and_type_in_the_outbox(addons) -> None:
    """A binary message that arrives while injected events are pending waits its turn
    and is injected as binary."""
    _, ws, _ = addons
    name = "responses-devin-two-calls"
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f, late=True)
    w.client(create(name))
    raw = ws_messages(load(name).body)
    k = next(i for i in range(len(raw)) if (w.server(raw[i]) or w.injected))
    w.server(b"\x00binary", Opcode.BINARY)
    assert w.injected[-1] == (b"\x00binary", False)
    for m in raw[k + 1 :]:
        w.server(m)
    w.flush()
    want = expected(load(name), w.sent, (0, 2**40))
    assert b"\x00binary" in w.sent
    assert [m for m in w.sent if m != b"\x00binary"] == want


def test_mitmweb_view_shows_what_was_done_to_each_message(addons) -> None:
    """With streamfix_keep_bodies, each message the repair touched is annotated, and the
    "streamfix message" view (picked automatically) shows it: changed fields, inserted,
    dropped, held."""
    from mitmproxy import contentviews

    r, ws, tctx = addons
    tctx.configure(r, streamfix_keep_bodies=True)
    name = "responses-devin-two-calls"
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f, late=False)
    turn(w, name)
    notes = f.metadata[mod.WS_NOTES]
    msgs = f.websocket.messages
    texts = {}
    for i, note in notes.items():
        res = contentviews.prettify_message(msgs[int(i)], f)
        assert res.view_name == "streamfix message"
        kind = "changed" if isinstance(note, dict) else note
        texts.setdefault(kind, res.text)
    assert set(texts) >= {"changed", "inserted", "dropped"}
    assert texts["inserted"].startswith("# inserted by streamfix\n{")
    assert texts["dropped"].startswith("# dropped by streamfix")
    assert texts["changed"].startswith("# changed by streamfix:\n#   ")
    assert "status" in texts["changed"] or "sequence_number" in texts["changed"]
    untouched = next(m for i, m in enumerate(msgs) if str(i) not in notes and not m.from_client)
    assert contentviews.prettify_message(untouched, f).view_name != "streamfix message"


def test_no_notes_without_keep_bodies(addons) -> None:
    _, ws, _ = addons
    f = ws_flow()
    ws.websocket_start(f)
    turn(Wire(ws, f), "responses-devin-two-calls")
    assert mod.WS_NOTES not in f.metadata


@pytest.mark.parametrize("name", ["responses-eof-no-terminal", "responses-keepalive-ping"])
def test_sse_only_rules_stay_off(addons, name: str) -> None:
    """A foreign message (``{"type":"keepalive"}``) has no comment form on a WebSocket: it
    passes as it came (SSE turns it into a comment); a turn without a terminal gets no
    synthesized response.failed (the socket's close ends it). The other rules still apply."""
    _, ws, _ = addons
    f = ws_flow()
    ws.websocket_start(f)
    w = Wire(ws, f, late=False)
    raw = ws_messages(load(name).body)
    assert any(orjson.loads(m).get("type") == "keepalive" for m in raw) or name.endswith("no-terminal")
    # both streams are otherwise spec-correct: every message passes byte for byte
    assert turn(w, name) == raw
