"""Redaction: wire/redact.py (pure) and addons/redact.py (when, on which flows)."""

from __future__ import annotations

import io as _io

import orjson
import pytest
from mitmproxy import http, io
from mitmproxy.test import taddons, tflow
from streamfix.addons import redact as mod
from streamfix.addons import shared
from streamfix.wire import devin_pb2 as pb
from streamfix.wire import redact
from streamfix.wire.connect import encode_frame
from streamfix.wire.devin import CHAT_PATH, read_request

KEY = "sk-test-SECRET-0123456789"
TOKEN = "devin-session-SECRET-token"


def devin_body(token: str = TOKEN) -> bytes:
    req = pb.GetChatMessageRequest(
        metadata=pb.ClientMetadata(ide_name="chisel", api_key=token),
        prompts=[pb.ChatMessagePrompt(source=1, prompt="hello")],
        configuration=pb.CompletionConfiguration(max_tokens=400),
        chat_model_uid="swe-2",
    )
    return encode_frame(req.SerializeToString())


# --- pure ---------------------------------------------------------------------------------
def test_header_keeps_scheme_and_id_not_key():
    v = redact.redact_header("Authorization", f"Bearer {KEY}")
    assert v == f"Bearer <redacted:{redact.key_id(KEY)}>"
    assert KEY not in v
    assert redact.redact_header("authorization", v) == v  # idempotent
    assert redact.redact_header("x-api-key", KEY) == f"<redacted:{redact.key_id(KEY)}>"
    assert redact.redact_header("cookie", "a=1; session=xyz").startswith("<redacted:")


def test_key_id_is_stable_short_and_distinct():
    assert redact.key_id(KEY) == redact.key_id(KEY)
    assert len(redact.key_id(KEY)) == 12
    assert redact.key_id(KEY) != redact.key_id(KEY + "x")


@pytest.mark.parametrize(
    ("path", "want"),
    [
        (
            "/v1beta/models/g:streamGenerateContent?alt=sse&key=" + KEY,
            "/v1beta/models/g:streamGenerateContent?alt=sse&key=<redacted:",
        ),
        ("/x?auth_token=" + KEY + "&b=2", "/x?auth_token=<redacted:"),
        ("/x?ACCESS_TOKEN=" + KEY, "/x?ACCESS_TOKEN=<redacted:"),
    ],
)
def test_query_values(path, want):
    out = redact.redact_query(path)
    assert out.startswith(want) and KEY not in out
    assert redact.redact_query(out) == out


def test_query_without_secrets_is_untouched():
    for p in ("/v1/responses", "/x?alt=sse", "/x?keys=1&monkey=2", "/x?key=", "/x?a=1#frag"):
        assert redact.redact_query(p) == p


def test_query_keeps_other_params_byte_for_byte():
    out = redact.redact_query(f"/x?a=%20b&key={KEY}&c=d#f")
    assert out.startswith("/x?a=%20b&key=<redacted:") and out.endswith("&c=d#f")


def test_devin_request_token_replaced_rest_kept():
    body = devin_body()
    out = redact.redact_devin_request(body)
    assert out is not None and TOKEN.encode() not in out
    req = pb.GetChatMessageRequest.FromString(out[5:])
    assert req.metadata.api_key == f"<redacted:{redact.key_id(TOKEN)}>"
    assert req.metadata.ide_name == "chisel"
    info = read_request(out)
    assert info is not None and info.max_tokens == 400 and info.model == "swe-2" and info.prompts == ((1, "hello"),)
    assert redact.redact_devin_request(out) is None  # already redacted
    assert redact.redact_devin_request(b"not a connect body") is None
    assert redact.redact_devin_request(devin_body("")) is None


def test_client_key_and_labels():
    h = {"authorization": f"Bearer {KEY}"}
    assert redact.client_key(h.get) == KEY
    assert redact.client_key({"x-api-key": KEY}.get) == KEY
    assert redact.client_key({}.get, "/g?alt=sse&key=" + KEY) == KEY
    assert redact.client_key({}.get, "/v1/responses") is None
    assert redact.key_label(KEY) == redact.key_id(KEY)
    assert redact.key_label(KEY, [("sk-test-*", "team-a")]) == "team-a"
    assert redact.key_label(KEY, [(redact.key_id(KEY), "alice")]) == "alice"
    assert redact.key_label(None) == "-"
    # a redacted header read back (saved flow) gives the same id, and its label
    redacted = redact.redact_header("authorization", f"Bearer {KEY}")
    k = redact.client_key({"authorization": redacted}.get)
    assert redact.key_label(k) == redact.key_id(KEY)
    assert redact.key_label(k, [(redact.key_id(KEY), "alice")]) == "alice"


# --- the addon ----------------------------------------------------------------------------
def secret_flow(path="/v1/chat/completions?key=" + KEY):
    req = http.Request.make(
        "POST",
        "http://127.0.0.1:8317" + path,
        b'{"model":"m"}',
        {
            "authorization": f"Bearer {KEY}",
            "x-api-key": KEY,
            "cookie": "sid=" + KEY,
            "content-type": "application/json",
        },
    )
    resp = http.Response.make(200, b"{}", {"content-type": "application/json", "set-cookie": "sid=" + KEY})
    return tflow.tflow(req=req, resp=resp)


def saved(f) -> bytes:
    buf = _io.BytesIO()
    io.FlowWriter(buf).add(f)
    return buf.getvalue()


@pytest.fixture
def tctx():
    with taddons.context() as tctx:
        yield tctx


def test_display_copy_redacted_until_the_request_leaves(tctx):
    a = mod.Redact()
    tctx.master.addons.add(a)
    a.running()
    tail = tctx.master.addons.get(mod.Restore.name)
    assert tail is not None and tctx.master.addons.chain[-1] is tail
    f = secret_flow()
    f.response = None
    a.requestheaders(f)
    # what mitmweb's view gets at requestheaders and in the update after it: no secret
    assert KEY not in f.request.headers["authorization"] and KEY not in f.request.path
    assert KEY.encode() not in saved(f)
    tail.update([f])
    assert KEY not in f.request.headers["authorization"]
    # streamfix's own request hooks can still read the client's credentials
    assert mod.original_header(f, "Authorization") == f"Bearer {KEY}"
    assert mod.original_path(f).endswith(KEY)
    a.request(f)
    assert KEY not in f.request.headers["x-api-key"]  # the view's update after request: still redacted
    tail.update([f])  # the tail's update, the last thing before the request goes out
    assert f.request.headers["authorization"] == f"Bearer {KEY}" and f.request.path.endswith(KEY)
    assert f.request.headers["cookie"] == "sid=" + KEY and f.request.headers["x-api-key"] == KEY
    assert f.id not in shared.held_secrets()
    assert mod.original_header(f, "x-api-key") == KEY


def test_streamed_request_restored_after_requestheaders(tctx):
    a = mod.Redact()
    tctx.master.addons.add(a)
    a.running()
    f = secret_flow()
    f.request.stream = True  # its headers leave right after requestheaders
    a.requestheaders(f)
    tctx.master.addons.get(mod.Restore.name).update([f])
    assert f.request.headers["x-api-key"] == KEY and f.request.path.endswith(KEY)


def test_no_display_redaction_without_the_tail(tctx):
    a = mod.Redact()
    tctx.master.addons.add(a)  # running() never called: no tail, so nothing is held
    f = secret_flow()
    a.requestheaders(f)
    assert f.request.headers["x-api-key"] == KEY


def test_finished_flow_redacted_for_good(tctx):
    a = mod.Redact()
    tctx.master.addons.add(a)
    f = secret_flow()
    f.response.stream = True
    a.responseheaders(f)
    assert KEY not in str(f.request.headers) and KEY not in f.request.path
    assert f.response.headers["set-cookie"] == "sid=" + KEY  # still going to the client
    a.response(f)
    assert KEY.encode() not in saved(f)


def test_buffered_live_response_keeps_set_cookie_for_the_client(tctx):
    a = mod.Redact()
    tctx.master.addons.add(a)
    f = secret_flow()
    a.response(f)
    assert f.response.headers["set-cookie"] == "sid=" + KEY
    assert KEY not in str(f.request.headers)


def test_error_flow_redacted(tctx):
    a = mod.Redact()
    tctx.master.addons.add(a)
    f = secret_flow()
    f.error = tflow.terr()
    a.error(f)
    assert KEY.encode() not in saved(f)


def test_devin_body_redacted(tctx):
    a = mod.Redact()
    tctx.master.addons.add(a)
    req = http.Request.make(
        "POST", "https://server.codeium.com" + CHAT_PATH, devin_body(),
        {"authorization": f"Basic {TOKEN}-{TOKEN}", "content-type": "application/connect+proto"},
    )  # fmt: skip
    f = tflow.tflow(req=req, resp=http.Response.make(200, b"", {"content-type": "application/connect+proto"}))
    a.responseheaders(f)  # while the Devin stream runs, mitmweb shows the request: no token in it
    assert TOKEN.encode() not in f.request.raw_content
    a.response(f)
    assert f.id not in a._body_done
    out = saved(f)
    assert TOKEN.encode() not in out
    assert f.request.headers["authorization"].startswith("Basic <redacted:")


def test_option_off_keeps_everything(tctx):
    a = mod.Redact()
    tctx.master.addons.add(a)
    tctx.configure(a, streamfix_redact=False)
    a.running()
    f = secret_flow()
    a.requestheaders(f)
    a.response(f)
    assert f.request.headers["authorization"] == f"Bearer {KEY}"
    assert KEY.encode() in saved(f)


def test_offline_flow_set_cookie_redacted(tctx):
    a = mod.Redact()
    tctx.master.addons.add(a)
    f = secret_flow()
    f.live = False
    a.response(f)
    assert KEY.encode() not in saved(f)
    assert orjson.loads(f.request.content) == {"model": "m"}
