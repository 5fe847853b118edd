"""addons/turnlog.py: the turn record, the JSON line writer, and the Repair addon feeding it."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import orjson
import pytest
from mitmproxy import http
from mitmproxy.test import taddons, tflow
from streamfix.addons import repair, shared, turn, turnlog
from streamfix.wire import redact
from streamfix.wire.sse import SseParser

from streamfix.recordings import load

KEY = "sk-turnlog-SECRET-42"


@pytest.fixture
def logged(tmp_path: Path):
    """Repair + TurnLog under taddons, writing to a temp file; yields (repair addon, path)."""
    path = tmp_path / "turns.jsonl"
    r, t = repair.Repair(), turnlog.TurnLog()
    with taddons.context(r, t) as tctx:
        tctx.configure(t, streamfix_log=str(path))
        yield r, path
        t.done()
    assert not shared.has_turn_sinks()


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def rec_flow(name: str, headers: dict | None = None) -> http.HTTPFlow:
    rec = load(name)
    req = http.Request.make("POST", "http://127.0.0.1:8317" + rec.request["path"], rec.request_body,
                            {"content-type": "application/json", **(headers or {})})  # fmt: skip
    req.timestamp_start = 1000.0
    resp = http.Response.make(rec.status, b"", rec.headers)
    resp.timestamp_start, resp.timestamp_end = 1000.25, 1001.5
    f = tflow.tflow(req=req, resp=resp)
    f.response.raw_content = None
    return f


def stream_through(r: repair.Repair, f: http.HTTPFlow, body: bytes) -> bytes:
    r.request(f)
    r.responseheaders(f)
    out = b"".join(b"".join(f.response.stream(body[i : i + 97])) for i in range(0, len(body), 97))
    out += b"".join(f.response.stream(b""))
    r.response(f)
    return out


def test_truncated_stream_turn(logged):
    r, path = logged
    f = rec_flow("responses-devin-truncated", {"authorization": f"Bearer {KEY}"})
    stream_through(r, f, load("responses-devin-truncated").body)
    (t,) = lines(path)
    assert t["key"] == redact.key_id(KEY) and KEY not in path.read_text()
    assert t["api"] == "responses" and t["transport"] == "sse" and t["path"] == "/v1/responses"
    assert t["model"] == "devin/swe-2"
    assert t["ended"] == "truncated"
    assert t["verdict"]["outcome"] == "max_tokens" and t["verdict"]["evidence"]
    # the recording's usage (read by hand in its expected.body's terminal event)
    assert t["tokens"]["client"] == {"input_tokens": 584, "output_tokens": 400, "total_tokens": 984, "cached_tokens": 0}
    assert t["tokens"]["upstream"] is None  # no upstream leg in this test
    assert sum(t["rules"].values()) > 0
    body = load("responses-devin-truncated").body
    assert t["bytes"]["in"] == len(body) and t["bytes"]["out"] > 0
    p = SseParser()
    assert t["events"] == len(p.feed(body) + p.close())
    assert t["ttfb_ms"] is not None and t["duration_ms"] == 1500
    assert t["time"].endswith("Z")


def test_clean_json_turn(logged):
    r, path = logged
    f = rec_flow("responses-devin-nonstream", {"x-api-key": KEY})
    f.response.raw_content = load("responses-devin-nonstream").body
    r.request(f)
    r.responseheaders(f)
    r.response(f)
    (t,) = lines(path)
    assert t["transport"] == "json" and t["key"] == redact.key_id(KEY)
    assert t["ttfb_ms"] == 250 and t["duration_ms"] == 1500
    # the body's function_call items lack status (read by hand): the rule is named
    assert t["rules"].get("status") == 1
    # its usage, read by hand in the recording's body
    assert t["tokens"]["client"] == {
        "input_tokens": 3120,
        "output_tokens": 58,
        "total_tokens": 3178,
        "cached_tokens": 2048,
    }
    assert t["ended"] in ("complete", "truncated")


def test_client_abort_and_upstream_error(logged):
    r, path = logged
    f = rec_flow("chat-devin-index1")
    body = load("chat-devin-index1").body
    r.request(f)
    r.responseheaders(f)
    f.response.stream(body[:40])
    f.error = tflow.terr("Client disconnected.")
    r.error(f)
    g = rec_flow("chat-devin-index1")
    r.request(g)
    g.response = None
    g.error = tflow.terr("server closed connection")
    r.error(g)
    a, b = lines(path)
    assert a["ended"] == "client_abort" and a["bytes"]["in"] == 40 and a["error"] == "Client disconnected."
    assert b["ended"] == "upstream_error" and b["status"] is None


def test_stream_without_terminal_is_an_upstream_error(logged):
    r, path = logged
    body = load("chat-devin-index1").body
    cut = body[: body.index(b'"finish_reason":"')]
    cut = cut[: cut.rindex(b"\n\n") + 2]
    assert cut.count(b"data: ") >= 2
    stream_through(r, rec_flow("chat-devin-index1"), cut)
    (t,) = lines(path)
    assert t["ended"] == "upstream_error" and "terminal" in t["error"]


def test_labels(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    r, t = repair.Repair(), turnlog.TurnLog()
    with taddons.context(r, t) as tctx:
        tctx.configure(t, streamfix_log=str(path), streamfix_key_labels=["sk-turnlog-*=ci", "0123456789ab=x"])
        stream_through(
            r, rec_flow("chat-devin-index1", {"authorization": f"Bearer {KEY}"}), load("chat-devin-index1").body
        )
        stream_through(
            r, rec_flow("chat-devin-index1", {"authorization": "Bearer other"}), load("chat-devin-index1").body
        )
        stream_through(r, rec_flow("chat-devin-index1"), load("chat-devin-index1").body)
        with pytest.raises(Exception, match="PATTERN=NAME"):
            tctx.configure(t, streamfix_key_labels=["nolabel"])
        t.done()
    assert [x["key"] for x in lines(path)] == ["ci", redact.key_id("other"), "-"]


def test_no_log_no_records():
    r = repair.Repair()
    with taddons.context(r, turnlog.TurnLog()):
        assert not shared.has_turn_sinks()
        f = rec_flow("chat-devin-index1", {"authorization": f"Bearer {KEY}"})
        stream_through(r, f, load("chat-devin-index1").body)
        assert r.flows == {}


def test_upstream_counts_from_the_matched_record():
    from streamfix.wire.devin import Usage

    class Rec:
        result = type("R", (), {"usage": Usage(prompt_tokens=100, output_tokens=7, cache_read_tokens=20)})()

    class Resolver:
        record = Rec()

    class V:
        output_tokens = 0
        upstream_output_tokens = 7

    up = turn.upstream_counts(V(), Resolver())
    assert up == {"input_tokens": 120, "output_tokens": 7, "cached_tokens": 20, "total_tokens": 127, "source": "devin"}
    assert turn.upstream_counts(V(), None) == {"output_tokens": 7, "source": "devin"}

    class V2(V):  # the upstream_counts record wins, and carries the model Devin used
        upstream_counts = {"input_tokens": 1, "output_tokens": 2, "model": "swe-fake", "source": "devin"}  # noqa: RUF012

    rec = turn.Turn(flow_id="f", api="chat", transport="sse", path="/v1/chat/completions?key=x",
                    key="-", model="m", started=1.0, ended_at=2.0, ended="complete", verdict=V2()).record()  # fmt: skip
    assert rec["upstream_model"] == "swe-fake" and rec["tokens"]["upstream"] == {
        "input_tokens": 1,
        "output_tokens": 2,
        "source": "devin",
    }
    assert rec["path"] == "/v1/chat/completions"


def test_handler_appends_whole_lines_from_threads(tmp_path: Path):
    """Many writers (threads here; processes behave the same with O_APPEND): every line
    whole, none lost."""
    import logging

    path = tmp_path / "t.jsonl"
    hs = [turnlog.TurnLogHandler(str(path)) for _ in range(4)]
    log = logging.getLogger("test.turnlog.append")
    log.propagate = False
    fmt = turnlog.JsonLineFormatter()

    def writer(h, n):
        for i in range(200):
            rec = log.makeRecord(
                log.name,
                logging.INFO,
                __file__,
                0,
                "turn",
                (),
                None,
                extra={"turn": {"w": n, "i": i, "pad": "x" * 3000}},
            )
            h.setFormatter(fmt)
            h.handle(rec)

    threads = [threading.Thread(target=writer, args=(h, n)) for n, h in enumerate(hs)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for h in hs:
        h.close()
    got = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(got) == 800 and sorted((g["w"], g["i"]) for g in got) == [(w, i) for w in range(4) for i in range(200)]


def test_handler_reopens_after_rotation(tmp_path: Path):
    import logging

    path = tmp_path / "t.jsonl"
    h = turnlog.TurnLogHandler(str(path))
    h.setFormatter(turnlog.JsonLineFormatter())
    mk = lambda i: logging.LogRecord("x", logging.INFO, __file__, 0, "turn", (), None)
    r1 = mk(1)
    r1.turn = {"n": 1}
    h.handle(r1)
    os.rename(path, tmp_path / "t.jsonl.1")  # what logrotate does (no copytruncate)
    r2 = mk(2)
    r2.turn = {"n": 2}
    h.handle(r2)
    h.close()
    assert (tmp_path / "t.jsonl.1").read_text() == '{"n":1}\n'
    assert path.read_text() == '{"n":2}\n'


def test_prefix_label_survives_redaction(tmp_path: Path):
    """A WebSocket turn is logged long after its upgrade request was redacted: the label a
    key prefix gave it is kept by the key's id."""
    from streamfix.addons import redact as redact_addon

    r, t, rd = repair.Repair(), turnlog.TurnLog(), redact_addon.Redact()
    with taddons.context(r, t, rd) as tctx:
        tctx.configure(t, streamfix_log=str(tmp_path / "t.jsonl"), streamfix_key_labels=["sk-turnlog-*=ci"])
        f = rec_flow("chat-devin-index1", {"authorization": f"Bearer {KEY}"})
        rd.requestheaders(f)
        rd.responseheaders(f)  # redacted for good
        assert KEY not in f.request.headers["authorization"]
        assert turnlog.client_label(f.request.headers.get, f.request.path) == "ci"
        other = rec_flow(
            "chat-devin-index1", {"authorization": redact.redact_header("authorization", "Bearer sk-other")}
        )
        assert turnlog.client_label(other.request.headers.get) == redact.key_id("sk-other")
        t.done()


def test_responses_failure_terminal_is_an_upstream_error(logged):
    r, path = logged
    body = (
        b'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":'
        b'{"id":"r1","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}}\n\n'
        b'event: response.failed\ndata: {"type":"response.failed","sequence_number":1,"response":'
        b'{"id":"r1","object":"response","created_at":1,"status":"failed","model":"m","output":[],'
        b'"error":{"code":"server_error","message":"upstream quota"}}}\n\n'
    )
    stream_through(r, rec_flow("responses-devin-toolcall"), body)
    (t,) = lines(path)
    assert t["ended"] == "upstream_error" and "failure" in t["error"]


def test_a_log_path_under_a_file_says_so_not_mkdir(tmp_path):
    """The folder of the log is a file (or under one): mkdir -p would fail there too, so
    the check says what is in the way."""
    from mitmproxy import exceptions

    f = tmp_path / "notes.txt"
    f.write_text("x")
    for path in (f / "turns.jsonl", f / "deeper" / "turns.jsonl"):
        with pytest.raises(exceptions.OptionsError) as e:
            turnlog.check_log(str(path))
        assert f"{f} is a file, not a folder" in str(e.value) and "mkdir" not in str(e.value)


def test_the_log_check_opens_the_file_and_leaves_nothing_behind(tmp_path):
    from mitmproxy import exceptions

    log = tmp_path / "turns.jsonl"
    turnlog.check_log(str(log))
    assert not log.exists()  # created by the check's open, removed again
    log.write_text("kept\n")
    turnlog.check_log(str(log))
    assert log.read_text() == "kept\n"  # appended to, never truncated
    with pytest.raises(exceptions.OptionsError, match="cannot open it"):
        turnlog.check_log("/proc/turns.jsonl")
