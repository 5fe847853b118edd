"""Check mode (``streamfix_mode=check``, addons/check.py via addons/repair.py): the client
gets the gateway's bytes and headers untouched; every contract violation is reported in
the log and the flow comment (the receipt); a correct stream reports none."""

import gzip
import logging

import pytest
from addonkit import drive, hooks, make_flow
from mitmproxy import exceptions
from mitmproxy.test import taddons
from streamfix.addons import repair as mod

from streamfix.recordings import load


@pytest.fixture
def addon():
    return mod.Repair()


def chunks(body, n=7):
    return [body[i : i + n] for i in range(0, len(body), n)]


def test_bad_mode_rejected(addon):
    with taddons.context(addon) as tctx, pytest.raises(exceptions.OptionsError):
        tctx.configure(addon, streamfix_mode="fix-everything")


def test_streamed_buggy_flow_passes_unchanged_and_is_reported(addon, caplog):
    rec = load("responses-claude-text-then-tool")
    caplog.set_level(logging.INFO, "streamfix")
    with taddons.context(addon) as tctx:
        tctx.configure(addon, streamfix_mode="check")
        f = make_flow(body=rec.request["body"])
        hooks(addon, f)
        assert f.response.headers["content-length"] == "999"  # headers untouched too
        assert drive(f.response.stream, chunks(rec.body)) == rec.body
        addon.response(f)
    assert f.comment.startswith("streamfix [responses] check: 6 violations (response.fields x2, item.order x4)")
    assert "event 6: item.order: item 0 still open when item 1 is added" in f.comment
    assert f.marked
    logged = [r.getMessage() for r in caplog.records]
    # the per-flow summary is in the log too, not only in the comment
    assert (
        "streamfix: POST /v1/responses: streamfix [responses] check: 6 violations (response.fields x2, item.order x4)"
        in logged
    )
    assert "streamfix: POST /v1/responses: check: event 6: item.order: item 0 still open when item 1 is added" in logged
    # never content: the text the model wrote is nowhere in the report
    assert "list the files" not in f.comment and not any("list the files" in m for m in logged)


def test_clean_flow_reports_no_violation(addon):
    rec = load("responses-openai-clean")
    with taddons.context(addon) as tctx:
        tctx.configure(addon, streamfix_mode="check")
        f = make_flow(body=rec.request["body"])
        hooks(addon, f)
        assert drive(f.response.stream, chunks(rec.body, 3)) == rec.body
    assert f.comment.startswith("streamfix [responses] check:") and "no violation" in f.comment
    assert not f.marked


def test_gzip_stream_is_checked_on_the_decoded_copy_and_sent_compressed(addon):
    rec = load("chat-devin-index1")
    gz = gzip.compress(rec.body)
    with taddons.context(addon) as tctx:
        tctx.configure(addon, streamfix_mode="check")
        f = make_flow(path="/v1/chat/completions", body=rec.request["body"])
        f.response.headers["content-encoding"] = "gzip"
        hooks(addon, f)
        assert f.response.headers["content-encoding"] == "gzip"
        assert drive(f.response.stream, chunks(gz, 5)) == gz
    assert "chat.tool_index" in f.comment


def test_buffered_body_is_checked_not_changed(addon):
    rec = load("responses-devin-toolcall")
    with taddons.context(addon) as tctx:
        tctx.configure(addon, streamfix_mode="check")
        f = make_flow(body=rec.request["body"], resp_body=rec.body)
        hooks(addon, f)
        addon.response(f)
    assert f.response.content == rec.body
    assert "event 0: response.fields: response.created without response.created_at" in f.comment


def test_repair_mode_is_still_the_default(addon):
    rec = load("responses-claude-text-then-tool")
    with taddons.context(addon):
        f = make_flow(body=rec.request["body"])
        hooks(addon, f)
        assert drive(f.response.stream, chunks(rec.body)) == rec.expected
