"""addons/upstream.py: the regular-mode (CPA -> Devin) glue, with taddons/tflow."""

from __future__ import annotations

import gzip
import logging
from types import SimpleNamespace

import pytest
from mitmproxy import exceptions, http, tls
from mitmproxy.proxy import context
from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons, tflow
from samples import SAMPLE, make_request
from streamfix.addons import shared
from streamfix.addons import upstream as mod
from streamfix.wire import devin_pb2 as pb
from streamfix.wire.connect import decode_body, encode_end_stream, encode_frame
from streamfix.wire.devin import CHAT_PATH, read_request
from streamfix.wire.upstream_decoders import CallTap
from streamfix.wire.verdict import Verdict

REVERSE = ProxyMode.parse("reverse:http://127.0.0.1:8317@127.0.0.1:8318")
REGULAR = ProxyMode.parse("regular@127.0.0.1:8080")
CT = {"content-type": "application/connect+proto"}


@pytest.fixture
def corr():
    return shared.reset()


@pytest.fixture
def addon(corr):
    a = mod.UpstreamLeg()
    with taddons.context(a) as tctx:
        a.tctx = tctx
        yield a


def devin_flow(body: bytes | None = None, host="server.codeium.com", path=CHAT_PATH, mode=REGULAR, resp_headers=CT):
    req = http.Request.make("POST", f"https://{host}{path}", body if body is not None else make_request(), CT)
    resp = http.Response.make(200, b"", resp_headers)
    f = tflow.tflow(req=req, resp=resp)
    f.client_conn.proxy_mode = mode
    f.response.raw_content = None  # live: not read yet at responseheaders
    return f


def drive(stream, chunks):
    out = []
    for c in [*chunks, b""]:
        r = stream(c)
        r = [r] if isinstance(r, bytes) else list(r)
        assert b"" not in r, "never an empty chunk (HTTP/1 terminator)"
        out += r
    return b"".join(out)


def clienthello(sni, mode=REGULAR, address=("server.codeium.com", 443)):
    client = tflow.tclient_conn()
    client.proxy_mode = mode
    ctx = context.Context(client, None)
    ctx.server.address = address
    return tls.ClientHelloData(ctx, SimpleNamespace(sni=sni))


# --- options and routing -------------------------------------------------------------


def test_options_defaults_and_validation(addon):
    assert addon.hosts[0] == "server.codeium.com"  # Devin's, then the providers' public API hosts
    assert {"generativelanguage.googleapis.com", "*-aiplatform.googleapis.com", "api.anthropic.com",
            "api.openai.com", "chatgpt.com", "cloudcode-pa.googleapis.com"} <= set(addon.hosts)  # fmt: skip
    addon.tctx.configure(addon, streamfix_upstream_hosts=["Devin.Example", "*.codeium.com", "127.0.0.1"])
    assert addon.hosts == ("devin.example", "*.codeium.com", "127.0.0.1")
    for bad in (["https://server.codeium.com"], ["a/b"], [""], ["a*.b"], ["*"], ["two words"]):
        with pytest.raises(exceptions.OptionsError):
            addon.tctx.configure(addon, streamfix_upstream_hosts=bad)
    assert addon.hosts == ("devin.example", "*.codeium.com", "127.0.0.1")  # rolled back


@pytest.mark.parametrize(
    "sni, address, mode, ignored",
    [
        ("server.codeium.com", ("server.codeium.com", 443), REGULAR, False),
        ("SERVER.codeium.com", ("x", 443), REGULAR, False),
        ("api.anthropic.com", ("api.anthropic.com", 443), REGULAR, False),  # a provider host: decoded
        ("us-central1-aiplatform.googleapis.com", ("x", 443), REGULAR, False),  # *-aiplatform...
        ("aiplatform.googleapis.com.evil.example", ("x", 443), REGULAR, True),
        ("api.example.com", ("api.example.com", 443), REGULAR, True),
        (None, ("server.codeium.com", 443), REGULAR, False),  # no SNI: the CONNECT host
        (None, ("10.0.0.1", 443), REGULAR, True),
        ("api.anthropic.com", ("api.anthropic.com", 443), REVERSE, False),  # client leg: not ours
    ],
)
def test_tls_passthrough_for_other_hosts(addon, sni, address, mode, ignored):
    data = clienthello(sni, mode, address)
    addon.tls_clienthello(data)
    assert data.ignore_connection is ignored


def test_wildcard_hosts(addon):
    addon.tctx.configure(addon, streamfix_upstream_hosts=["*.codeium.com"])
    for host, ok in (("server.codeium.com", True), ("a.b.codeium.com", True), ("codeium.com", False),
                     ("evilcodeium.com", False)):  # fmt: skip
        data = clienthello(host)
        addon.tls_clienthello(data)
        assert data.ignore_connection is not ok, host


def test_only_regular_mode_devin_chat_flows_are_read(addon, corr):
    for f in (devin_flow(mode=REVERSE), devin_flow(host="example.com"), devin_flow(path="/exa.x/GetUserStatus")):
        addon.request(f)
        addon.responseheaders(f)
        assert f.id not in corr.records and not callable(f.response.stream)
    addon.tctx.configure(addon, streamfix_upstream=False)
    f = devin_flow()
    addon.request(f)
    addon.responseheaders(f)
    assert f.id not in corr.records and not callable(f.response.stream)


def test_other_streams_on_the_regular_listener_are_streamed_not_buffered(addon):
    f = devin_flow(host="example.com", resp_headers={"content-type": "text/event-stream"})
    addon.request(f)
    addon.responseheaders(f)
    assert f.response.stream is True


# --- the response tap ---------------------------------------------------------------


def test_stream_passes_bytes_unchanged_and_records_at_end_of_stream(addon, corr):
    f = devin_flow()
    addon.request(f)
    addon.responseheaders(f)
    stream = f.response.stream
    assert isinstance(stream, mod.UpstreamStream)
    cut = len(SAMPLE) - 7  # the trailer is the last 7 bytes
    chunks = [SAMPLE[:100], SAMPLE[100:cut], SAMPLE[cut:]]
    out = []
    for c in chunks:
        r = stream(c)
        assert r is c  # the very same bytes object goes on
        out.append(r)
        if c is chunks[1]:
            assert corr.records[f.id].finished is None
    rec = corr.records[f.id]
    assert rec.finished is not None, "recorded at the trailer, before the body's end"
    assert rec.result.stop_reason == 3
    assert stream(b"") == []
    assert b"".join(out) == SAMPLE
    addon.response(f)
    assert f.response.raw_content == SAMPLE  # kept for the Connect frames view
    md = f.metadata["streamfix.devin"]
    assert md["stop_reason_name"] == "MAX_TOKENS" and md["outcome"] == "max_tokens"
    assert md["usage"]["input_tokens"] == 12850 and md["usage"]["output_tokens"] == 400
    assert "Devin StopReason 3 MAX_TOKENS" in f.comment
    assert f.id not in addon.streams


@pytest.mark.parametrize("cut", [1, 5, 6, 200, 488])
def test_any_chunking_through_the_stream(addon, corr, cut):
    f = devin_flow()
    addon.request(f)
    addon.responseheaders(f)
    assert drive(f.response.stream, [SAMPLE[:cut], SAMPLE[cut:]]) == SAMPLE
    assert corr.records[f.id].result.stop_reason == 3


def test_client_verdict_finds_the_upstream_result(addon, corr):
    f = devin_flow()
    addon.request(f)
    addon.responseheaders(f)
    drive(f.response.stream, [SAMPLE])
    v = Verdict()
    for t in ("Writing index.html", " now."):
        v.observe_text(t)
    v.observe_args(
        '{"path":"index.html","content":"<!doctype html>\\n<html lang=\\"en\\">\\n<head>\\n  <title>Acme'
        ' Rockets</title>\\n</head>\\n<body>\\n  <section class=\\"hero\\">\\n    <h1>Launch'
    )
    v.resolver = r = mod.resolver_for("client-1")
    d = v.decide()
    assert d.outcome == "max_tokens" and d.evidence[0].detail == "Devin StopReason 3 MAX_TOKENS"
    assert r.record.flow_id == f.id and r.record.claimed_by == "client-1"


def test_tap_failure_fails_open(addon, corr, monkeypatch, caplog):
    f = devin_flow()
    addon.request(f)
    addon.responseheaders(f)
    stream = f.response.stream

    def boom(chunk):
        raise RuntimeError("tap bug")

    monkeypatch.setattr(stream.tap, "feed", boom)
    with caplog.at_level(logging.WARNING):
        assert drive(stream, [SAMPLE[:50], SAMPLE[50:]]) == SAMPLE
    assert "upstream tap failed" in caplog.text and "tap bug" in caplog.text
    assert corr.records[f.id].finished is None  # nothing claimed from a broken tap


def test_truncated_stream_and_error_hook(addon, corr):
    f = devin_flow()
    addon.request(f)
    addon.responseheaders(f)
    f.response.stream(SAMPLE[:200])
    addon.error(f)
    rec = corr.records[f.id]
    assert rec.finished is not None and rec.result.error.startswith("truncated")
    assert rec.result.outcome == "failed"  # Devin's body stopped before its end-of-stream envelope
    assert f.response.raw_content == SAMPLE[:200]


@pytest.mark.parametrize("msg, outcome", [("Server disconnected.", "failed"), ("Client disconnected.", None)])
def test_devin_flow_cut_by_devin_or_abandoned_by_cpa(addon, corr, msg, outcome):
    """Devin's connection failing before the trailer is a failed call; CPA going away
    first (its client aborted) proves nothing of what Devin sent."""
    f = devin_flow()
    addon.request(f)
    addon.responseheaders(f)
    f.response.stream(SAMPLE[:200])
    f.error = mitmproxy_error(msg)
    addon.error(f)
    r = corr.records[f.id].result
    assert r.outcome == outcome and r.trailer is None
    assert f.metadata["streamfix.devin"]["outcome"] == outcome


def test_error_trailer_is_recorded(addon, corr):
    body = encode_frame(pb.GetChatMessageResponse(text=b"x").SerializeToString())
    body += encode_end_stream("resource_exhausted", "quota")
    f = devin_flow()
    addon.request(f)
    addon.responseheaders(f)
    drive(f.response.stream, [body])
    addon.response(f)
    assert f.metadata["streamfix.devin"]["trailer_error"] == "resource_exhausted"
    assert corr.records[f.id].result.outcome == "failed"
    assert f.metadata["streamfix.devin"]["outcome"] == "failed"


def test_http_error_or_non_connect_response_is_dropped(addon, corr):
    f = devin_flow(resp_headers={"content-type": "application/json"})
    f.response.status_code = 401
    addon.request(f)
    assert f.id in corr.records
    addon.responseheaders(f)
    assert f.id not in corr.records and not callable(f.response.stream)


def test_gzip_content_encoding_is_inflated_for_the_tap_only(addon, corr):
    gz = gzip.compress(SAMPLE)
    f = devin_flow(resp_headers={**CT, "content-encoding": "gzip"})
    addon.request(f)
    addon.responseheaders(f)
    assert drive(f.response.stream, [gz[:30], gz[30:]]) == gz
    assert corr.records[f.id].result.stop_reason == 3
    assert f.response.headers["content-encoding"] == "gzip"


def test_buffered_body_is_read_in_response(addon, corr):
    f = devin_flow()
    f.response.raw_content = SAMPLE  # replayed flow: the body is there at responseheaders
    addon.request(f)
    addon.responseheaders(f)
    assert not callable(f.response.stream)
    addon.response(f)
    assert corr.records[f.id].result.stop_reason == 3


# --- the request patch --------------------------------------------------------------


def test_request_patch_uses_the_matched_client_cap(addon, corr):
    mod.note_client_request(
        "client-9", "/v1/responses",
        {"input": [{"role": "user", "content": "now the CSS"}], "max_output_tokens": 400},
    )  # fmt: skip
    f = devin_flow()
    before = len(f.request.raw_content)
    addon.request(f)
    assert read_request(f.request.raw_content).max_tokens == 400
    assert f.request.headers["content-length"] == str(len(f.request.raw_content))
    assert len(f.request.raw_content) < before
    frames, end = decode_body(f.request.raw_content)
    assert len(frames) == 1 and end.pending == 0
    rec = corr.records[f.id]
    assert (rec.client_flow_id, rec.max_tokens_sent, rec.max_tokens_original) == ("client-9", 400, 128000)
    assert f.metadata["streamfix.devin_request"] == {
        "client_flow": "client-9", "max_tokens": 400, "max_tokens_original": 128000,
    }  # fmt: skip


def test_request_patch_can_be_switched_off(addon, corr):
    addon.tctx.configure(addon, streamfix_upstream_patch_max_tokens=False)
    mod.note_client_request("c", "/v1/responses", {"input": "now the CSS", "max_output_tokens": 400})
    f = devin_flow()
    body = f.request.raw_content
    addon.request(f)
    assert f.request.raw_content == body
    assert corr.records[f.id].client_flow_id == "c"  # still linked


def test_unmatched_or_uncapped_requests_are_not_patched(addon, corr):
    mod.note_client_request("c1", "/v1/responses", {"input": "something else", "max_output_tokens": 400})
    mod.note_client_request("c2", "/v1/responses", {"input": "now the CSS"})  # no cap
    f = devin_flow()
    body = f.request.raw_content
    addon.request(f)
    assert f.request.raw_content == body
    assert corr.records[f.id].client_flow_id == "c2"


def test_garbage_request_body_goes_out_unchanged(addon, corr):
    mod.note_client_request("c", "/v1/responses", {"input": "x", "max_output_tokens": 1})
    f = devin_flow(body=b"\x00\x00\x00\x00\x09not proto")
    addon.request(f)
    assert f.request.raw_content == b"\x00\x00\x00\x00\x09not proto"
    assert f.id in corr.records


def test_module_functions_share_one_correlator(corr):
    assert mod.shared_correlator() is corr is shared.correlator()
    assert mod.note_client_request("c", "/v1/responses", {"input": "hi"}).flow_id == "c"
    mod.forget_client("c")
    assert "c" not in corr.pending
    assert mod.note_client_request("c", "/v1/responses", object()) is None
    assert mod.resolver_for("c").correlator is corr


# --- the other providers (wire/upstream_decoders.py) ------------------------------------


def provider_flow(
    path: str, req_body: bytes, ctype="text/event-stream", host="127.0.0.1", status=200, resp_headers=None
):
    req = http.Request.make("POST", f"http://{host}:9{path}", req_body, {"content-type": "application/json"})
    resp = http.Response.make(status, b"", {"content-type": ctype, **(resp_headers or {})})
    f = tflow.tflow(req=req, resp=resp)
    f.client_conn.proxy_mode = REGULAR
    f.response.raw_content = None
    return f


def test_provider_flows_are_decoded_unchanged_and_decide_the_client_flow(addon, corr):
    from upstream_samples import SAMPLES

    addon.tctx.configure(addon, streamfix_upstream_hosts=["127.0.0.1"])
    client_body = {"model": "m", "stream": True, "input": "Please do it [conv:1]"}
    corr.note_client_request("client-1", "/v1/responses", client_body)
    up = b'{"contents":[{"role":"user","parts":[{"text":"Please do it [conv:1]"}]}]}'
    f = provider_flow("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", up)
    addon.request(f)
    assert f.metadata["streamfix.upstream_request"] == {
        "provider": "gemini",
        "client_flow": "client-1",
        "max_tokens": None,
    }
    addon.responseheaders(f)
    assert isinstance(f.response.stream, CallTap) and isinstance(addon.streams[f.id], mod.ProviderStream)
    body = SAMPLES[("gemini", "sse", "thoughts_max")]
    chunks = [body[i : i + 13] for i in range(0, len(body), 13)]
    stream = f.response.stream
    for c in chunks:
        assert stream(c) is c  # the same object: the upstream body is never changed
    assert corr.records[f.id].finished is not None  # at the decisive chunk, before the end
    assert stream(b"") == []
    addon.response(f)
    assert f.metadata["streamfix.upstream"]["finish"] == "MAX_TOKENS"
    assert f.metadata["streamfix.upstream"]["usage"]["output_tokens"] == 55
    assert "streamfix: Gemini finishReason MAX_TOKENS; outcome max_tokens" in f.comment
    assert f.response.raw_content is None  # bodies are not kept unless asked (keep_bodies, -w)
    v = Verdict()
    v.resolver = corr.resolver("client-1")
    d = v.decide()
    assert (d.outcome, d.evidence[0].detail) == (
        "max_tokens",
        "Gemini finishReason MAX_TOKENS, matched by prompt (content digest differs)",
    )
    assert v.upstream_counts.reasoning_tokens == 50 and v.upstream_counts.authoritative


def test_provider_flow_cut_by_the_provider_or_abandoned_by_cpa(addon, corr):
    from upstream_samples import SAMPLES

    addon.tctx.configure(addon, streamfix_upstream_hosts=["127.0.0.1"])
    for msg, ended in (("Server disconnected.", "cut"), ("Client disconnected.", "no_finish")):
        f = provider_flow("/v1/messages?beta=true", b'{"messages":[]}')
        addon.request(f)
        addon.responseheaders(f)
        f.response.stream(SAMPLES[("anthropic", "sse", "no_finish")])
        f.error = mitmproxy_error(msg)
        addon.error(f)
        assert f.metadata["streamfix.upstream"]["ended"] == ended
        assert f.metadata["streamfix.upstream"]["outcome"] == "failed"


def mitmproxy_error(msg):
    from mitmproxy.flow import Error

    return Error(msg)


def test_provider_http_errors_and_unlisted_hosts_decide_nothing(addon, corr, caplog):
    addon.tctx.configure(addon, streamfix_upstream_hosts=["127.0.0.1"])
    f = provider_flow("/v1/chat/completions", b"{}", ctype="application/json", status=503)
    addon.request(f)
    with caplog.at_level(logging.INFO, logger="streamfix.upstream"):
        addon.responseheaders(f)
    assert f.id not in corr.records and "openai_chat call answered HTTP 503" in caplog.text
    g = provider_flow("/v1/chat/completions", b"{}", host="api.example.com")
    addon.request(g)
    assert g.id not in corr.records
    h = provider_flow("/v1/messages/count_tokens", b"{}")
    addon.request(h)
    assert h.id not in corr.records


def test_provider_json_body_gzip_and_buffered(addon, corr):
    from upstream_samples import SAMPLES

    addon.tctx.configure(addon, streamfix_upstream_hosts=["127.0.0.1"])
    body = SAMPLES[("anthropic", "json", "max_tokens")]
    f = provider_flow(
        "/v1/messages", b'{"messages":[]}', ctype="application/json", resp_headers={"content-encoding": "gzip"}
    )
    addon.request(f)
    addon.responseheaders(f)
    z = gzip.compress(body)
    assert drive(f.response.stream, [z[:10], z[10:]]) == z
    addon.response(f)
    assert f.metadata["streamfix.upstream"]["finish"] == "max_tokens"
    g = provider_flow("/v1/messages", b'{"messages":[]}', ctype="application/json")
    addon.request(g)
    g.response.raw_content = body  # a replayed flow: already buffered
    addon.responseheaders(g)
    addon.response(g)
    assert g.metadata["streamfix.upstream"]["usage"]["cached_tokens"] == 5
