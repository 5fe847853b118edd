"""addons/repair.py: the mitmproxy glue, driven with taddons/tflow (no sockets).

A stand-in repairer (marks every JSON event it sees) keeps these tests about the glue:
routing, streaming set-up, headers, decoding, buffered bodies, fail-open, options.
"""

import gzip
import logging
from typing import ClassVar

import orjson
import pytest
from addonkit import drive, hooks, make_flow
from mitmproxy import exceptions, http
from mitmproxy.test import taddons, tflow
from streamfix.addons import buffered
from streamfix.addons import repair as mod
from streamfix.wire.stream import EventRepairer

SSE_BODY = b'event: a\ndata: {"n":1}\n\nevent: b\ndata: {"n":2}\n\ndata: [DONE]\n\n'


class Marker(EventRepairer):
    instances: ClassVar[list["Marker"]] = []

    def __init__(self, rules, ctx, verdict):
        super().__init__()
        self.rules, self.ctx, self.verdict = rules, ctx, verdict
        Marker.instances.append(self)

    def event(self, ev):
        obj = self.parse(ev)
        if obj is None:
            return [ev.raw]
        if obj.get("boom"):
            raise RuntimeError("repairer bug")
        obj["fixed"] = True
        self.changed += 1
        return [ev.with_data(orjson.dumps(obj))]


def marker_json(obj, rules, ctx, verdict, fired=None):
    obj["fixed"] = True
    return True


@pytest.fixture
def addon(monkeypatch):
    monkeypatch.setattr(mod, "stream_repairer", lambda api, r, c, v: Marker(r, c, v))
    monkeypatch.setattr(buffered, "stream_repairer", lambda api, r, c, v: Marker(r, c, v))
    monkeypatch.setattr(buffered, "json_repairer", lambda api: marker_json)
    Marker.instances.clear()
    return mod.Repair()


class TestOptions:
    def test_defaults_and_rule_switch(self, addon):
        with taddons.context(addon) as tctx:
            assert addon.rules.status and addon.rules.truncation == "incomplete"
            tctx.configure(addon, streamfix_status=False, streamfix_truncation="completed")
            assert not addon.rules.status and addon.rules.truncation == "completed"
            assert addon.rules.tool_index  # others untouched

    def test_bad_truncation_rejected(self, addon):
        with (
            taddons.context(addon) as tctx,
            pytest.raises(exceptions.OptionsError, match="streamfix_truncation.*'sometimes'"),
        ):
            tctx.configure(addon, streamfix_truncation="sometimes")

    def test_bad_evidence_rejected(self, addon):
        with taddons.context(addon) as tctx:
            with pytest.raises(exceptions.OptionsError, match="'telepathy'"):
                tctx.configure(addon, streamfix_evidence=["usage", "telepathy"])
            tctx.configure(addon, streamfix_evidence=["usage"])
            assert addon.evidence == {"usage"}
            tctx.configure(addon, streamfix_evidence=["usage,native", "upstream"])
            assert addon.evidence == {"usage", "native", "upstream"}


class TestStreaming:
    def test_sse_is_streamed_through_the_repairer(self, addon):
        with taddons.context(addon):
            f = make_flow()
            hooks(addon, f)
            assert callable(f.response.stream)
            assert "content-length" not in f.response.headers
            assert f.response.headers["transfer-encoding"] == "chunked"  # HTTP/1.1 client
            out = drive(f.response.stream, [SSE_BODY[:10], SSE_BODY[10:33], SSE_BODY[33:]])
            assert out.count(b'"fixed":true') == 2 and out.endswith(b"data: [DONE]\n\n")

    def test_request_facts_reach_the_repairer(self, addon):
        with taddons.context(addon):
            f = make_flow(body={"model": "devin/swe-2", "stream": True, "max_output_tokens": 400})
            hooks(addon, f)
            drive(f.response.stream, [SSE_BODY])
            [m] = Marker.instances
            assert m.ctx.model == "devin/swe-2" and m.verdict.cap == 400

    def test_nothing_to_send_is_an_empty_list(self, addon):
        with taddons.context(addon):
            f = make_flow()
            hooks(addon, f)
            assert f.response.stream(b'data: {"n"') == []

    def test_gzip_stream_is_decoded_and_repaired(self, addon):
        with taddons.context(addon):
            f = make_flow()
            f.response.headers["content-encoding"] = "gzip"
            hooks(addon, f)
            assert "content-encoding" not in f.response.headers
            gz = gzip.compress(SSE_BODY)
            out = drive(f.response.stream, [gz[i : i + 5] for i in range(0, len(gz), 5)])
            assert out.count(b'"fixed":true') == 2

    def test_repairer_exception_passes_rest_through(self, addon, caplog):
        body = b'data: {"n":1}\n\ndata: {"boom":1}\n\ndata: {"n":3}\n\n'
        with taddons.context(addon):
            f = make_flow(path="/v1/chat/completions?key=SECRET")
            hooks(addon, f)
            with caplog.at_level(logging.INFO, logger="streamfix"):
                out = drive(f.response.stream, [body])
            assert out == b'data: {"n":1,"fixed":true}\n\ndata: {"boom":1}\n\ndata: {"n":3}\n\n'
            assert "repairer failed (RuntimeError: repairer bug)" in caplog.text
            assert "SECRET" not in caplog.text
            assert "passed through unchanged" in f.comment

    def test_receipt_marks_and_comments_the_flow(self, addon):
        with taddons.context(addon):
            f = make_flow()
            hooks(addon, f)
            drive(f.response.stream, [SSE_BODY])
            addon.response(f)
            # the stand-in repairer names no rule: the count alone
            assert f.marked and f.comment == "fixed 2 events (responses)"

    def test_keep_bodies(self, addon):
        with taddons.context(addon) as tctx:
            tctx.configure(addon, streamfix_keep_bodies=True)
            f = make_flow()
            hooks(addon, f)
            drive(f.response.stream, [SSE_BODY])
            addon.response(f)
            assert f.metadata["streamfix.original"] == SSE_BODY
            assert f.response.content.count(b'"fixed":true') == 2

    def test_connection_close_left_as_it_came(self, addon):
        # mitmproxy closes the client connection after the response only if the header
        # stays (RFC 9112 section 9.6); the end-to-end proof is tests/e2e/test_http_semantics.py
        with taddons.context(addon):
            f = make_flow(headers={"connection": "close"})
            hooks(addon, f)
            assert f.request.headers["connection"] == "close"


class TestNotOurs:
    @pytest.mark.parametrize(
        "path", ["/v1/models", "/v1/embeddings", "/exa.api_server_pb.ApiServerService/GetChatMessage"]
    )
    def test_other_paths_untouched(self, addon, path):
        with taddons.context(addon):
            f = make_flow(path=path)
            before = f.response.headers.copy()
            hooks(addon, f)
            assert f.response.stream is False and f.response.headers == before

    def test_upstream_listener_is_not_the_client_leg(self, addon):
        """Two listeners (docs/upstream-leg.md): flows on the regular one are CPA's own
        upstream calls, never repaired; with regular mode alone, clients use it."""
        from mitmproxy.proxy.mode_specs import ProxyMode

        with taddons.context(addon) as tctx:
            tctx.configure(addon, mode=["reverse:http://127.0.0.1:8317@8318", "regular@8080"])
            cpa_call = make_flow()
            hooks(addon, cpa_call)
            assert cpa_call.response.stream is False
            client = make_flow()
            client.client_conn.proxy_mode = ProxyMode.parse("reverse:http://127.0.0.1:8317@8318")
            hooks(addon, client)
            assert callable(client.response.stream)
            tctx.configure(addon, mode=["regular@8080"])
            direct = make_flow()
            hooks(addon, direct)
            assert callable(direct.response.stream)

    def test_master_switch(self, addon):
        with taddons.context(addon) as tctx:
            tctx.configure(addon, streamfix=False)
            f = make_flow()
            hooks(addon, f)
            assert f.response.stream is False

    def test_error_status_json_untouched(self, addon):
        with taddons.context(addon):
            f = make_flow(ctype="application/json", resp_body=b'{"error":{"message":"x"}}')
            f.response.status_code = 429
            hooks(addon, f)
            addon.response(f)
            assert f.response.content == b'{"error":{"message":"x"}}'


class TestBuffered:
    def test_json_body_repaired_in_response(self, addon):
        with taddons.context(addon):
            f = make_flow(ctype="application/json", resp_body=b'{"id":"r"}')
            hooks(addon, f)
            assert f.response.stream is False
            addon.response(f)
            assert orjson.loads(f.response.content) == {"id": "r", "fixed": True}

    def test_replayed_sse_body_repaired_in_response(self, addon):
        """-nr and --server-replay: the body is there at responseheaders; no stream callable."""
        with taddons.context(addon):
            f = make_flow(resp_body=SSE_BODY)
            hooks(addon, f)
            assert f.response.stream is False
            addon.response(f)
            assert f.response.content.count(b'"fixed":true') == 2

    def test_gzip_json_body(self, addon):
        with taddons.context(addon):
            f = make_flow(ctype="application/json", resp_body=gzip.compress(b'{"id":"r"}'))
            f.response.headers["content-encoding"] = "gzip"
            hooks(addon, f)
            addon.response(f)
            assert orjson.loads(f.response.content) == {"id": "r", "fixed": True}
            assert f.response.headers["content-encoding"] == "gzip"  # re-encoded by mitmproxy


class TestReceipts:
    """With the real repairers: a verdict that changes a terminal leaves a receipt."""

    def run_recording(self, name, caplog, **options):
        from streamfix.recordings import load

        rec = load(name)
        addon = mod.Repair()
        with taddons.context(addon) as tctx:
            if options:
                tctx.configure(addon, **options)
            req = http.Request.make(
                "POST",
                "http://127.0.0.1:8317" + rec.request["path"],
                rec.request_body,
                {"content-type": "application/json"},
            )
            resp = http.Response.make(rec.status, b"", rec.headers)
            f = tflow.tflow(req=req, resp=resp)
            f.response.raw_content = None
            hooks(addon, f)
            with caplog.at_level(logging.INFO, logger="streamfix"):
                out = drive(f.response.stream, [rec.body[i : i + 97] for i in range(0, len(rec.body), 97)])
                addon.response(f)
        return rec, f, out

    def test_an_empty_completion_answered_200_reaches_the_client_as_502(self, caplog):
        """CPA #2193: HTTP 200 with id, model and usage zeroed and no content; the client gets
        the OpenAI error object with HTTP 502 (rule hidden_failure), the receipt says so."""
        from streamfix.recordings import load

        rec = load("chat-cpa-zeroed-nonstream")
        addon = mod.Repair()
        with taddons.context(addon):
            req = http.Request.make("POST", "http://127.0.0.1:8317" + rec.request["path"], rec.request_body,
                                    {"content-type": "application/json"})  # fmt: skip
            f = tflow.tflow(req=req, resp=http.Response.make(rec.status, rec.body, rec.headers))
            hooks(addon, f)
            with caplog.at_level(logging.INFO, logger="streamfix"):
                addon.response(f)
        assert f.response.status_code == 502 == rec.expected_status and f.response.reason == "Bad Gateway"
        assert f.response.content == rec.expected
        assert f.comment.startswith("fixed hidden_failure (body, chat)")

    def test_a_stream_cut_before_its_terminal_says_why_in_its_comment(self, caplog):
        """The comment says what the log line says: the receipt first, then the repairer's
        note on the missing terminal (mitmweb showed only the receipt)."""
        _rec, f, out = self.run_recording("responses-eof-no-terminal", caplog)
        assert b"response.failed" in out
        line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("streamfix: POST "))
        lines = f.comment.split("\n")
        assert line == "streamfix: POST /v1/responses: " + "; ".join(lines)
        assert any(x.startswith("stream ended without a terminal event") for x in lines[1:]), lines

    def test_truncation_receipt_in_log_and_comment(self, caplog):
        rec, f, out = self.run_recording("chat-devin-truncated-toolcall", caplog)
        assert b'"finish_reason":"length"' in out
        line = next(r.getMessage() for r in caplog.records if "verdict max_tokens" in r.getMessage())
        # verdict first, then the rules with their counts: four tool_calls chunks carry
        # index 2 (-> 0) and the finish chunk's finish_reason becomes length
        head = "verdict max_tokens; fixed tool_index 4, truncation 1 (5 events, chat)"
        assert line.startswith(f"streamfix: POST /v1/chat/completions: {head}; why: ")
        assert "usage: " in line and "400" in line  # the evidence that decided it, with numbers
        lines = f.comment.split("\n")
        assert lines[0] == head and lines[1].startswith("why: ") and f.marked
        # never content: no prompt text or generated text in the receipt
        prompt = rec.request["body"]["messages"][-1]["content"]
        assert prompt[:20] not in caplog.text and "Launch" not in caplog.text

    def test_no_receipt_when_policy_off(self, caplog):
        _, f, out = self.run_recording("chat-devin-truncated-toolcall", caplog, streamfix_truncation="off")
        assert b'"finish_reason":"length"' not in out
        assert "verdict" not in caplog.text and "verdict" not in (f.comment or "")

    def test_clean_stream_is_untouched_and_unmarked(self, caplog):
        rec, f, out = self.run_recording("chat-openai-clean", caplog)
        assert out == rec.body and not f.marked and not f.comment

    def test_one_log_line_per_flow_its_receipt_then_the_notes(self, caplog):
        """Every line costs mitmproxy an add_log hook through every addon (~800k
        instructions): a finished flow logs one, the receipt with the repairer's notes
        after it; the comment has the same lines, one each (mitmweb says why as the log
        does), the receipt first (the flow list shows that one)."""
        _rec, f, _out = self.run_recording("responses-claude-text-then-tool", caplog)
        # read off the recording: message item 0 is still open when the call is added
        # (event 7), and its three done events come after the call's
        notes = [
            "closed an open item before the next one (item 0, message)",
            "dropped response.output_text.done after the item was closed (item 0, message)",
            "dropped response.content_part.done after the item was closed (item 0, message)",
            "dropped a late output_item.done (item 0, message)",
        ]
        ours = [r.getMessage() for r in caplog.records if r.getMessage().startswith("streamfix: POST /v1/responses: ")]
        assert len(ours) == 1, ours
        head = f.comment.split("\n")[0]
        assert ours[0] == "streamfix: POST /v1/responses: " + "; ".join(f.comment.split("\n"))
        assert head.startswith("fixed ") and f.comment.split("\n")[-len(notes) :] == notes

    def test_an_unchanged_flow_with_notes_logs_them_in_one_line(self, caplog):
        """Nothing repaired (a data line that is not JSON passes as it came, noted): one
        line of notes, no receipt, no mark; the comment says the notes."""
        from streamfix.recordings import load

        rec = load("chat-openai-clean")
        first, sep, rest = rec.body.partition(b"\n\n")
        body = first + sep + b"data: {oops\n\ndata: [1\n\n" + rest
        addon = mod.Repair()
        with taddons.context(addon):
            req = http.Request.make(
                "POST",
                "http://127.0.0.1:8317" + rec.request["path"],
                rec.request_body,
                {"content-type": "application/json"},
            )
            f = tflow.tflow(req=req, resp=http.Response.make(rec.status, b"", rec.headers))
            f.response.raw_content = None
            hooks(addon, f)
            with caplog.at_level(logging.INFO, logger="streamfix"):
                out = drive(f.response.stream, [body])
                addon.response(f)
        assert out == body and not f.marked
        assert (
            f.comment
            == "event data is not JSON (5 bytes), passed through\nevent data is not JSON (2 bytes), passed through"
        )
        ours = [r.getMessage() for r in caplog.records if r.getMessage().startswith("streamfix: POST ")]
        assert ours == [
            (
                "streamfix: POST /v1/chat/completions: event data is not JSON (5 bytes), passed through; "
                "event data is not JSON (2 bytes), passed through"
            )
        ]

    def test_usage_at_cap_with_whole_call_is_complete(self, caplog):
        """usage == cap, but the last output is a call whose arguments parse: not cut."""
        _, f, out = self.run_recording("chat-devin-cap-exact-complete", caplog)
        assert b'"finish_reason":"tool_calls"' in out and b'"finish_reason":"length"' not in out
        assert "verdict max_tokens" not in caplog.text
        assert f.comment == "fixed tool_index 3 (3 events, chat)"  # the index repair still happened


def test_streamfix_skim_switches_skimming_and_the_bytes_stay_the_same():
    """``--set streamfix_skim=false``: every event is parsed (nothing skimmed); on (the
    default) most deltas of the Claude-path stream are skimmed; the client's bytes are the
    same either way, and a plain stream's reads after the first skip the addon's callable."""
    from streamfix.wire.stream import Reads

    from streamfix import bench

    _, _path, request, build = bench.STREAMS["responses-claude"]
    events = bench.events_of(build())
    addon = mod.Repair()
    outs = {}
    for on in (True, False):
        with taddons.context(addon) as tctx:
            tctx.configure(addon, streamfix_skim=on)
            f = make_flow(body=request)
            hooks(addon, f)
            assert isinstance(f.response.stream, Reads)
            repair = addon.flows[f.id].stream.repair
            outs[on] = drive(f.response.stream, events)
            addon.response(f)
            if on:
                assert repair.skimmed > len(events) * 3 // 4
            else:
                assert repair.skimmed == 0
            assert repair.events == len(events)
    assert outs[True] == outs[False]
    assert outs[True] != b"".join(events)  # and it was repaired (sequence numbers, items)
