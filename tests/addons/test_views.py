"""addons/views.py: the "Connect frames" content view."""

from __future__ import annotations

import pytest
from mitmproxy import contentviews, http
from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons, tflow
from samples import SAMPLE, make_request
from streamfix.addons import (
    shared,
    views,  # noqa: F401  (registers the view)
)
from streamfix.addons import upstream as upstream_mod
from streamfix.wire import devin_pb2 as pb
from streamfix.wire.connect import encode_end_stream, encode_frame
from streamfix.wire.devin import CHAT_PATH

CT = {"content-type": "application/connect+proto"}


@pytest.fixture(autouse=True)
def tctx():
    with taddons.context() as t:  # prettify_message reads ctx.options
        yield t


def flow(resp_body=SAMPLE, req_body=None, path=CHAT_PATH, ctype=CT):
    req = http.Request.make("POST", f"https://server.codeium.com{path}", req_body or make_request(), CT)
    return tflow.tflow(req=req, resp=http.Response.make(200, resp_body, ctype))


def show(message, f, view="auto"):
    r = contentviews.prettify_message(message, f, view)
    return r.view_name, r.text


def test_view_is_chosen_for_connect_proto_and_decodes_the_sample():
    f = flow()
    name, text = show(f.response, f)
    assert name == "Connect frames"
    lines = text.splitlines()
    assert lines[0] == "# frame 0: message flags=0x00 len=33"
    assert [ln for ln in lines if ln.startswith("# frame")][-1] == "# frame 11: end-of-stream flags=0x02 len=2"
    assert 'output_id: "bot-7c1d5e9a"' in lines and "  seconds: 1789012345" in lines
    assert 'thinking: "Need an HTML page"' in lines
    assert 'text: "Writing index.html"' in lines
    assert '  - id: "write_file_0#a1"' in lines and '    name: "write_file"' in lines
    assert "stop_reason: MAX_TOKENS (3)" in lines and "delta_tokens: 400" in lines
    assert "  prompt_tokens: 1210" in lines and '  model: "swe-2"' in lines
    assert '  - title: "Token Usage"' in lines
    assert lines[-1] == "trailer: {}"


def test_request_view_redacts_the_session_token_and_lists_unknown_fields():
    body = make_request(extra=b"\xf2\x06\x04keep")
    f = flow(req_body=body)
    name, text = show(f.request, f)
    assert name == "Connect frames"
    assert "secret" not in text and "api_key: <redacted, 6 chars>" in text
    assert "  max_tokens: 128000" in text and "    source: USER (1)" in text
    assert "# unknown field 110 (bytes): 0x6b656570" in text
    assert "truncated" not in text  # a request body has no end-of-stream envelope


def test_gzip_error_trailer_unknown_enum_and_bad_payload():
    body = (
        encode_frame(pb.GetChatMessageResponse(text=b"zip").SerializeToString(), compress=True)
        + encode_frame(b"\x28\x07")  # StopReason 7: not in the enum
        + encode_frame(b"\xff\xff")  # not protobuf
        + encode_end_stream("resource_exhausted", "quota", compress=True)
    )
    _, text = show(flow(body).response, flow(body))
    assert "# frame 0: message flags=0x01 len=" in text and "gzip" in text
    assert 'text: "zip"' in text
    assert "stop_reason: 7 (unknown)" in text
    assert "# not a GetChatMessageResponse" in text and "0xffff" in text
    assert 'trailer: {"error":{"code":"resource_exhausted","message":"quota"}}' in text
    assert "# stream failed: resource_exhausted: quota" in text


def test_truncated_response_is_said():
    f = flow(SAMPLE[:120])
    _, text = show(f.response, f)
    assert text.rstrip().endswith("(4 bytes of an incomplete envelope)")
    assert "truncated: body ended without an end-of-stream envelope" in text


def test_other_connect_services_use_the_schemaless_protobuf_view():
    f = flow(path="/some.Service/Method")
    name, text = show(f.response, f)
    assert name == "Connect frames"
    assert "1: bot-7c1d5e9a" in text and "stop_reason" not in text
    assert "trailer: {}" in text


def test_render_priority():
    v = contentviews.registry["connect frames"]
    f = flow(ctype={"content-type": "application/json"})
    assert show(f.response, f)[0] != "Connect frames"
    md = contentviews.Metadata(content_type="application/connect+proto")
    assert v.render_priority(b"", md) == 2
    assert v.render_priority(b"", contentviews.Metadata(content_type="application/grpc")) == -1


def test_streamed_upstream_flow_keeps_its_body_for_the_view():
    shared.reset()
    addon = upstream_mod.UpstreamLeg()
    with taddons.context(addon):
        f = flow()
        f.client_conn.proxy_mode = ProxyMode.parse("regular@127.0.0.1:8080")
        f.response.raw_content = None
        addon.request(f)
        addon.responseheaders(f)
        for c in (SAMPLE[:300], SAMPLE[300:], b""):
            f.response.stream(c)
        assert show(f.response, f)[1] == "Content is missing."
        addon.response(f)
        name, text = show(f.response, f)
    assert name == "Connect frames" and "stop_reason: MAX_TOKENS (3)" in text
