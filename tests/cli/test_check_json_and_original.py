"""The offline checker and check mode on what the real builds send: non-streamed (JSON)
bodies against the contract (``wire.contract.check_json``), a saved JSON body (not called a
bad HAR file), and ``streamfix check --original`` flagging CPA's failed and truncated
streams (the flows built from recordings/real-cpa/, with the gateway's original kept as
streamfix keeps it)."""

from __future__ import annotations

import json

import matrix_recordings as mr
import matrix_replay as rp
import orjson
import pytest
from streamfix.wire.contract import check_json

from streamfix import check as offline
from streamfix.recordings import load

CELLS = {c.key: c for c in mr.load()}


def names(vs) -> list[str]:
    return [v.rule for v in vs]


# --- the JSON contract ------------------------------------------------------------------------


def test_clean_json_bodies_pass():
    resp = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "m",
        "status": "completed",
        "output": [
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
    }
    assert check_json("responses", resp) == []
    chat = {
        "id": "c",
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    assert check_json("chat", orjson.dumps(chat)) == []
    msg = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    assert check_json("messages", msg) == []
    gem = {
        "candidates": [{"content": {"parts": [{"text": "hi"}], "role": "model"}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
    }
    assert check_json("gemini", gem) == []
    assert check_json("chat", {"error": {"message": "overloaded"}}) == []  # a failure, told as one


def test_each_json_rule_is_named():
    resp = {
        "id": "resp_1",
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "refusal"},
        "output": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}],
        "usage": {
            "input_tokens": 3,
            "output_tokens": 4,
            "total_tokens": 29,
            "output_tokens_details": {"reasoning_tokens": 22},
        },
    }
    assert names(check_json("responses", resp)) == [
        "response.fields",
        "item.fields",
        "function_call.status",
        "usage.sums",
        "stop.reason",
    ]
    chat = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "native_finish_reason": "safety",
                "message": {
                    "tool_calls": [
                        {"id": "call_0", "function": {"arguments": "{}"}},
                        {"id": "call_0", "function": {"arguments": "{}"}},
                    ]
                },
            }
        ]
    }
    assert names(check_json("chat", chat)) == ["chat.tool_index", "stop.reason"]
    assert names(check_json("messages", {"type": "message", "content": [], "stop_reason": "length"})) == ["stop.reason"]
    assert names(check_json("gemini", {"candidates": [{"content": {"parts": []}}]})) == ["terminal.present"]
    assert names(check_json("chat", b"not json")) == ["sse.not_json"]


def test_json_truncation_from_the_request_cap():
    """A body whose usage reached the request's cap but that says it ended normally."""
    chat = {
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "The tides rise"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 16, "total_tokens": 19},
    }
    assert check_json("chat", chat) == []  # no cap known: no evidence
    [v] = check_json("chat", chat, request={"max_tokens": 16})
    assert v.rule == "terminal.truncated" and "output tokens 16 >= max_tokens 16" in v.reason


@pytest.mark.parametrize(
    ("name", "rules"),
    [
        ("chat-gemini-safety-nonstream", {"stop.reason"}),  # CPA's lower-cased "safety"
        ("chat-gemini-max-tokens-nonstream", {"stop.reason"}),  # "max_tokens"
        ("responses-devin-nonstream", {"item.fields", "function_call.status", "response.fields"}),
    ],
)
def test_json_recordings_raw_break_and_repaired_pass(name, rules):
    rec = load(name)
    meta = {"request": rec.request | {"method": "POST"}, "response": rec.meta["response"], "transport": "http"}
    assert set(names(check_json(rec.api, rec.body, rec.request.get("body")))) >= rules
    fixed, _ = rp.replay_http(meta, rec.body)
    assert check_json(rec.api, fixed, rec.request.get("body")) == [], fixed
    out, comments = rp.replay_http(meta, rec.body, mode="check")  # check mode: JSON bodies too
    assert out == rec.body and all(r in comments[0] for r in rules), comments


# --- the offline checker ------------------------------------------------------------------------


def run(*args) -> int:
    return offline.main([str(a) for a in args])


def test_a_saved_json_body_is_checked_not_called_a_bad_har_file(tmp_path, capsys):
    p = tmp_path / "body.json"
    p.write_bytes(load("chat-gemini-safety-nonstream").body)
    assert run(p) == 1
    out = capsys.readouterr()
    assert "not a HAR file" not in out.err and f"{p} [chat]: 1 violation" in out.out
    assert "end of stream: stop.reason: choice 0: finish_reason 'safety' is not a chat finish reason" in out.out
    ok = tmp_path / "ok.json"
    ok.write_bytes(
        rp.replay_http(
            {
                "request": {"method": "POST", "path": "/v1/chat/completions", "body": {}},
                "response": {"status": 200, "headers": {"content-type": "application/json"}},
                "transport": "http",
            },
            p.read_bytes(),
        )[0]
    )
    assert run(ok) == 0 and "ok, a JSON body" in capsys.readouterr().out
    bad = tmp_path / "x.har"
    bad.write_text("{}")
    assert run(bad) == 2 and "not a HAR file (no log object)" in capsys.readouterr().err


def _flow_file(path, cell: mr.Cell, keep_original: bool = True) -> None:
    """A flow as the sidecar saves it (``-w``): the repaired body as the flow's, the
    gateway's in metadata ``streamfix.original``, marked repaired."""
    from mitmproxy import http, io
    from mitmproxy.test import tflow

    fixed, comments = rp.replay_http(cell.meta, cell.body)
    req = cell.meta["request"]
    r = http.Request.make(
        "POST", "http://127.0.0.1:8318" + req["path"], orjson.dumps(req["body"]), {"content-type": "application/json"}
    )
    f = tflow.tflow(req=r, resp=http.Response.make(200, fixed, cell.meta["response"]["headers"]))
    if keep_original:
        f.metadata["streamfix.original"] = cell.body
    f.marked = ":wrench:"
    f.comment = comments[0]
    with path.open("ab") as fp:
        io.FlowWriter(fp).add(f)


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        # a failure CPA reported as a success (its Gemini translator's synthetic STOP)
        (("v7.2.140", "gemini", "responses", "no_finish"), "terminal.hidden_failure"),
        (("v7.2.140", "gemini", "chat", "inband_error"), "terminal.hidden_failure"),
        (("v7.2.140", "gemini", "messages", "no_finish"), "messages.stop"),
        # truncation CPA reported as a normal end: the request's cap (16) reached
        (("v7.2.140", "gemini", "responses", "max_tokens"), "terminal.truncated"),
        (("v7.2.140", "claude", "gemini", "max_tokens"), "terminal.truncated"),
        (("v7.2.89", "interactions", "chat", "max_tokens"), "terminal.truncated"),
    ],
)
def test_check_original_flags_cpas_failed_and_truncated_streams(tmp_path, capsys, key, rule):
    p = tmp_path / "turn.flow"
    _flow_file(p, CELLS[key])
    assert run("--original", p) == 1
    out = capsys.readouterr().out
    assert "gateway's original" in out and f": {rule}: " in out, out
    assert run(p) == 0, capsys.readouterr().out  # as the client got it through the sidecar
    capsys.readouterr()
    assert run("--both", p) == 1
    both = capsys.readouterr().out
    assert "gateway's original: " in both and "as the client got it: ok" in both


def test_a_flow_file_with_json_and_sse_flows(tmp_path, capsys):
    """JSON flows of a flow file are checked too, with their request (not skipped)."""
    from mitmproxy import http, io
    from mitmproxy.test import tflow

    p = tmp_path / "mixed.flow"
    rec = load("chat-gemini-max-tokens-nonstream")
    r = http.Request.make(
        "POST", "http://127.0.0.1:8318/v1/chat/completions", rec.request_body, {"content-type": "application/json"}
    )
    f = tflow.tflow(req=r, resp=http.Response.make(200, rec.body, {"content-type": "application/json"}))
    with p.open("wb") as fp:
        io.FlowWriter(fp).add(f)
    _flow_file(p, CELLS[("v7.2.140", "gemini", "chat", "thoughts")])
    assert run(p) == 1
    out = capsys.readouterr().out
    assert "#0 POST /v1/chat/completions [chat]: " in out and "stop.reason" in out
    assert "#1 POST /v1/chat/completions [chat]: ok" in out
    assert json.loads(rec.request_body)["max_tokens"] == 32
