"""addons/repair.py: receipts, partial streams kept on error, client <-> upstream links."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from mitmproxy import exceptions, http
from mitmproxy import flow as mflow
from mitmproxy.addons.view import View
from mitmproxy.test import taddons, tflow
from streamfix.addons import flowstream
from streamfix.addons import repair as mod

from streamfix.recordings import load

REC = "responses-devin-truncated"


def client_flow(rec):
    req = http.Request.make(
        "POST", "http://127.0.0.1:8317" + rec.request["path"], rec.request_body, {"content-type": "application/json"}
    )
    f = tflow.tflow(req=req, resp=http.Response.make(rec.status, b"", rec.headers))
    f.response.raw_content = None
    return f


def start(addon, f):
    addon.request(f)
    addon.responseheaders(f)
    assert f.response.stream


def split_events(body: bytes) -> list[bytes]:
    return [e + b"\n\n" for e in body.split(b"\n\n") if e]


class TestPartialStreams:
    def test_client_abort_keeps_both_bodies_and_says_so(self, caplog):
        rec = load(REC)
        evs = split_events(rec.body)
        addon = mod.Repair()
        with taddons.context(addon) as tctx:
            tctx.configure(addon, streamfix_keep_bodies=True)
            f = client_flow(rec)
            start(addon, f)
            for e in evs[:4]:
                f.response.stream(e)
            # a client abort: mitmproxy sets the error and calls the error hook, never b""
            f.error = mflow.Error("Client disconnected.")
            with caplog.at_level(logging.INFO, logger="streamfix"):
                addon.error(f)
        assert f.metadata[mod.ORIGINAL] == b"".join(evs[:4])
        assert f.response.raw_content and f.response.raw_content.startswith(b"event: response.created")
        assert f.comment == (
            "ended early after 4 events, no terminal event; client aborted (Client disconnected.); "
            "fixed so far: schema_fill 2"
        )  # created (created_at) and the reasoning delta (item_id, summary_index) were fixed
        assert "ended early after 4 events" in caplog.text
        assert not addon.flows

    def test_upstream_reset_without_kept_bodies_counts_bytes(self):
        rec = load(REC)
        evs = split_events(rec.body)
        addon = mod.Repair()
        with taddons.context(addon):
            f = client_flow(rec)
            start(addon, f)
            f.response.stream(evs[0][:30])
            f.error = mflow.Error("HTTP/1 protocol error: peer closed connection without sending complete message body")
            addon.error(f)
        assert f.response.raw_content is None and mod.ORIGINAL not in f.metadata
        assert f.comment.startswith("ended early after 30 bytes, no terminal event; upstream reset (HTTP/1 protocol")

    def test_error_before_the_response_leaves_no_comment(self):
        rec = load(REC)
        addon = mod.Repair()
        with taddons.context(addon):
            f = client_flow(rec)
            addon.request(f)
            f.response = None
            f.error = mflow.Error("Connection refused")
            addon.error(f)
        assert not f.comment and not addon.flows


class Found:
    """A stand-in for wire.correlate.Resolver that found upstream flow ``uid``."""

    def __init__(self, uid: str) -> None:
        self.record = SimpleNamespace(flow_id=uid)

    def __call__(self, verdict) -> None:
        pass


class TestLinks:
    def test_client_and_upstream_flows_link_both_ways_and_commands_jump(self):
        rec = load(REC)
        addon = mod.Repair()
        view = View()
        with taddons.context(addon, view) as tctx:
            up = tflow.tflow(resp=True)
            view.add([up])
            f = client_flow(rec)
            start(addon, f)
            st = addon.flows[f.id]
            st.verdict.resolver = st.resolver = Found(up.id)
            for e in split_events(rec.body):
                f.response.stream(e)
            f.response.stream(b"")
            addon.response(f)
            view.add([f])
            lines = f.comment.split("\n")
            assert lines[0] == "verdict max_tokens; fixed status 3, schema_fill 2, truncation 1 (5 events, responses)"
            assert f"upstream flow {up.id}" in lines[1:]
            assert f.metadata[mod.UPSTREAM_FLOW] == up.id
            assert up.metadata[mod.CLIENT_FLOW] == f.id and up.comment == f"client flow {f.id}"
            assert {"streamfix.upstream", "streamfix.client"} <= set(tctx.master.commands.commands)
            assert addon.upstream_of([f]) == up.id
            assert view.focus.flow is up
            assert addon.client_of([up]) == f.id
            assert view.focus.flow is f

    def test_unlinked_flow_command_says_why(self):
        addon = mod.Repair()
        with taddons.context(addon):
            f = tflow.tflow(resp=True)
            with pytest.raises(exceptions.CommandError, match="not linked"):
                addon.upstream_of([f])


def test_a_stream_in_progress_shows_what_has_arrived(monkeypatch):
    """With kept bodies, the flow's body grows while the stream runs (for mitmweb)."""
    monkeypatch.setattr(flowstream, "LIVE_INTERVAL", 0.0)
    rec = load(REC)
    evs = split_events(rec.body)
    addon = mod.Repair()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, streamfix_keep_bodies=True)
        f = client_flow(rec)
        start(addon, f)
        sent = b""
        for e in evs[:3]:
            sent += b"".join(f.response.stream(e))
            assert f.response.raw_content == sent
            assert f.metadata[mod.ORIGINAL] == rec.body[: len(f.metadata[mod.ORIGINAL])]
        assert sent.count(b"\n\n") == 3


def test_no_progress_body_without_kept_bodies(monkeypatch):
    monkeypatch.setattr(flowstream, "LIVE_INTERVAL", 0.0)
    rec = load(REC)
    addon = mod.Repair()
    with taddons.context(addon):
        f = client_flow(rec)
        start(addon, f)
        f.response.stream(split_events(rec.body)[0])
        assert f.response.raw_content is None


def test_json_body_receipt_names_the_rules():
    rec = load("chat-devin-nonstream")
    addon = mod.Repair()
    with taddons.context(addon):
        req = http.Request.make("POST", "http://127.0.0.1:8317" + rec.request["path"], rec.request_body,
                                {"content-type": "application/json"})  # fmt: skip
        f = tflow.tflow(req=req, resp=http.Response.make(rec.status, rec.body, rec.headers))
        addon.request(f)
        addon.responseheaders(f)
        addon.response(f)
    lines = f.comment.split("\n")
    assert lines[0] == "verdict max_tokens; fixed truncation (body, chat)"
    assert lines[1].startswith("why: ") and "300" in lines[1]
