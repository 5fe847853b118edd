"""More gateways' defect classes, each checked against the rules:

- a ``200 text/event-stream`` that ends with no event at all (cindy #2497): rule
  ``no_events``, a failure the client sees, per API;
- SSE with CR-only line endings from a relay (promptfoo #10109): the parser and every
  repairer handle it (a CR-only copy of one buggy recording per API is repaired exactly as
  its LF original, CR framing kept); but eventsource-parser 3.1.1 (every AI SDK) drops
  the last event of a CR-only stream that ends right after its blank line (found by the
  client matrix: aisdk7/google lost Gemini's finishReason): rule ``cr_end``, contract rule
  ``sse.cr_end``;
- a final usage chunk on chat whose ``choices`` is not empty (LiteLLM #28735): rule
  ``usage_chunk``, contract rule ``chat.usage_chunk``.

The hand-checked expected bodies are compared in test_recordings.py as for every
recording; here: the raw body violates the contract, the repaired one does not, and with
the rule off the defect stays.
"""

from dataclasses import replace

import orjson
import pytest
from streamfix.wire.apis import stream_repairer
from streamfix.wire.contract import check
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

from streamfix.recordings import Recording, load

APIS = ["responses", "chat", "messages", "gemini"]
EMPTY = [f"{api}-empty-stream" for api in APIS]
CR_ONLY = {
    "responses-relay-cr-only": "responses-devin-toolcall",
    "chat-relay-cr-only": "chat-devin-index1",
    "messages-relay-cr-only": "messages-devin-truncated",
    "gemini-relay-cr-only": "gemini-devin-truncated",
}


def repair(rec: Recording, rules: Rules | None = None, chunk: int = 0) -> tuple[bytes, StreamRepair]:
    req = rec.request["body"]
    ctx = FlowContext(model=req.get("model"), started_at=rec.meta.get("started_at", 0), request=req)
    s = StreamRepair(stream_repairer(rec.api, rules or Rules(), ctx, Verdict()))
    body = rec.body
    pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)] if chunk else [body]
    out = b"".join(s.feed(p) for p in pieces) + s.close()
    assert s.error is None
    return out, s


def body_of(api: str, body: bytes, rules: Rules | None = None) -> tuple[bytes, StreamRepair]:
    meta = {"api": api, "started_at": 7, "request": {"body": {"model": "m"}}}
    return repair(Recording("t", None, meta, body), rules)  # type: ignore[arg-type]


def rules_of(body: bytes, api: str) -> set[str]:
    return {v.rule for v in check(api, body)}


# --- no event at all ----------------------------------------------------------------------


@pytest.mark.parametrize("name", EMPTY)
def test_empty_stream_ends_in_a_failure_the_client_sees(name):
    rec = load(name)
    assert rec.body == b"" and rules_of(rec.body, rec.api) == {"terminal.present"}
    out, s = repair(rec)
    assert out == rec.expected and check(rec.api, out) == []
    assert dict(s.repairer.fired) == {"no_events": 1} and s.repairer.changed == 1
    (obj,) = [orjson.loads(line[6:]) for line in out.splitlines() if line.startswith(b"data: ")]
    # a failure, never a success, in the API's own shape
    if rec.api == "responses":
        assert obj["type"] == "response.failed" and obj["response"]["status"] == "failed"
        assert obj["sequence_number"] == 0 and obj["response"]["id"] is None
    elif rec.api == "messages":
        assert obj["type"] == "error" and out.startswith(b"event: error\n")
    else:
        assert set(obj) == {"error"}
    off, _ = repair(rec, Rules(no_events=False))
    assert off == b"" and "terminal.present" in rules_of(off, rec.api), "with no_events off the defect stays"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "body",
    [b": keep-alive\n\n", b": keep-alive\n\n: again\n\n", b": cut", b"\n\n", b": a\r\r", b": a\r\n\r\n"],
    ids=["comment", "two-comments", "unterminated-comment", "blank-lines", "cr", "crlf"],
)
def test_only_comments_is_no_event_too(api, body):
    """Comments pass as they came; the failure follows in the stream's line end, after a
    comment the stream stopped inside is ended (it cannot swallow the failure)."""
    out, s = body_of(api, body)
    assert out.startswith(body) and s.repairer.fired["no_events"] == 1
    assert check(api, out) == [], out
    eol = b"\r\n" if b"\r\n" in body else b"\r" if b"\r" in body else b"\n"
    assert out.endswith(eol + eol) and (eol == b"\n" or b"\n" not in out.replace(b"\r\n", b""))


@pytest.mark.parametrize(
    ("api", "body"),
    [
        ("responses", b'event: ping\ndata: {"type":"ping"}\n\n'),
        ("chat", b'data: {"type":"keepalive"}\n\n'),
        ("messages", b'event: ping\ndata: {"type": "ping"}\n\n'),
        ("responses", b"data:\n\n"),
    ],
)
def test_only_keepalives_is_no_event(api, body):
    out, s = body_of(api, body)
    assert s.repairer.fired["no_events"] == 1 and check(api, out) == []


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "body",
    [b"\x00\xff garbage", b"<html>502 Bad Gateway</html>\n\n", b"id: 1\n\n", b"data: not json\n\n"],
    ids=["bytes", "html", "id-only", "not-json"],
)
def test_a_body_that_is_not_silent_is_not_touched(api, body):
    """Anything but comments and keep-alives is not 'no event': garbage and non-SSE bodies
    pass as they came (fail open), with nothing added by this rule."""
    out, s = body_of(api, body, Rules(eof_terminal=False))
    assert out == body and "no_events" not in s.repairer.fired


def test_an_api_event_then_nothing_is_eof_terminal_not_no_events():
    body = (
        b'event: response.created\ndata: {"type":"response.created","sequence_number":0,'
        b'"response":{"id":"r","created_at":1,"model":"m"}}\n\n'
    )
    out, s = body_of("responses", body)
    assert "no_events" not in s.repairer.fired and s.repairer.fired["eof_terminal"] == 1
    assert orjson.loads(out.split(b"data: ")[-1])["response"]["id"] == "r"


# --- CR-only line endings -------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CR_ONLY))
def test_cr_only_is_repaired_as_its_lf_original(name):
    rec, lf = load(name), load(CR_ONLY[name])
    assert b"\n" not in rec.body and rec.body == lf.body.replace(b"\n", b"\r")
    # the same contract violations as the LF original, event for event (and sse.cr_end
    # when the body stops right after its last event's blank line)
    cr_end = not rec.body.endswith(b"\r\r\r")
    assert [v for v in check(rec.api, rec.body) if v.rule != "sse.cr_end"] == check(lf.api, lf.body)
    # expected.body: the LF original's hand-checked one with every LF a CR (and rule
    # cr_end's one CR)
    assert rec.expected == lf.expected.replace(b"\n", b"\r") + (b"\r" if cr_end else b"")
    assert ("sse.cr_end" in rules_of(rec.body, rec.api)) == cr_end
    out, s = repair(rec)
    assert out == rec.expected and check(rec.api, out) == []
    _, lf_s = repair(lf)
    want = dict(lf_s.repairer.fired, **({"cr_end": 1} if cr_end else {}))
    assert dict(s.repairer.fired) == want and s.events == lf_s.events
    off, _ = repair(rec, Rules(cr_end=False))
    assert off == lf.expected.replace(b"\n", b"\r")
    if cr_end:
        assert "sse.cr_end" in rules_of(off, rec.api), "with cr_end off the defect stays"
    for n in (1, 2, 7, 64):  # chunk boundaries anywhere, between two CRs too
        assert repair(rec, chunk=n)[0] == rec.expected


# --- usage chunk with choices ----------------------------------------------------------------


def test_usage_chunk_gets_empty_choices():
    rec = load("chat-litellm-usage-choices")
    assert rules_of(rec.body, "chat") == {"chat.usage_chunk"}
    out, s = repair(rec)
    assert out == rec.expected and check("chat", out) == []
    assert dict(s.repairer.fired) == {"usage_chunk": 1}
    off, _ = repair(rec, Rules(usage_chunk=False))
    assert off == rec.body and "chat.usage_chunk" in rules_of(off, "chat")
    for n in (1, 5, 64):
        assert repair(rec, chunk=n)[0] == rec.expected


def _chat(*chunks: dict) -> bytes:
    return b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
USAGE = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


@pytest.mark.parametrize(
    "choice",
    [
        {"index": 0, "delta": {}},
        {"index": 0, "delta": {}, "finish_reason": None},
        {"index": 0, "delta": {"content": None, "role": None, "tool_calls": None}, "logprobs": None},
        {"index": 0},
    ],
)
def test_placeholder_shapes(choice):
    body = _chat({"choices": [{"index": 0, "delta": {"content": "hi"}}]}, FINISH, {"choices": [choice], "usage": USAGE})
    assert "chat.usage_chunk" in rules_of(body, "chat")
    out, s = body_of("chat", body)
    assert s.repairer.fired["usage_chunk"] == 1 and check("chat", out) == []
    assert orjson.loads(out.split(b"\n\n")[2][6:]) == {"choices": [], "usage": USAGE}


@pytest.mark.parametrize(
    "chunks",
    [
        # the usage chunk of the spec
        [FINISH, {"choices": [], "usage": USAGE}],
        # CPA: usage on the finish chunk itself
        [{**FINISH, "usage": USAGE}],
        # usage before the finish (not the final usage chunk): left alone
        [{"choices": [{"index": 0, "delta": {}}], "usage": USAGE}, FINISH],
    ],
    ids=["spec", "usage-on-finish", "usage-before-finish"],
)
def test_spec_and_other_usage_placements_pass(chunks):
    body = _chat({"choices": [{"index": 0, "delta": {"content": "hi"}}]}, *chunks)
    assert "chat.usage_chunk" not in rules_of(body, "chat")
    out, s = body_of("chat", body)
    assert out == body and "usage_chunk" not in s.repairer.fired


def test_a_usage_chunk_carrying_content_is_not_emptied():
    """Choices that carry something (text after the finish) are not placeholders: the
    rule loses nothing; the contract still reports it."""
    late = {"choices": [{"index": 0, "delta": {"content": "more"}}], "usage": USAGE}
    body = _chat({"choices": [{"index": 0, "delta": {"content": "hi"}}]}, FINISH, late)
    out, s = body_of("chat", body)
    assert out == body and "usage_chunk" not in s.repairer.fired
    assert {"chat.usage_chunk", "chat.finish_once"} <= rules_of(body, "chat")


def test_cr_end_is_idempotent_and_only_at_a_cr_cut():
    body = b"data: {}\r\r"
    assert rules_of(body, "chat") >= {"sse.cr_end"}
    out, s = body_of("chat", body, Rules(eof_terminal=False))
    assert out == body + b"\r" and s.repairer.fired["cr_end"] == 1
    again, s2 = body_of("chat", out, Rules(eof_terminal=False))
    assert again == out and "cr_end" not in s2.repairer.fired
    for other in (b"data: {}\n\n", b"data: {}\r\n\r\n", b"data: {}\r\r\r", b"data: {}\n\r\r"[:-1]):
        assert "cr_end" not in body_of("chat", other, Rules(eof_terminal=False))[1].repairer.fired, other


@pytest.mark.parametrize("rule", ["no_events", "usage_chunk", "cr_end"])
def test_every_rule_is_an_option(rule):
    from streamfix.addons import options

    assert f"streamfix_{rule}" in options.RULE_OPTIONS and options.RULE_OPTIONS[f"streamfix_{rule}"] == rule
    assert options.RULES[rule].help
    assert getattr(replace(Rules(), **{rule: False}), rule) is False


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("responses-empty-stream", "fixed no_events 1 (1 event, responses)"),
        ("chat-empty-stream", "fixed no_events 1 (1 event, chat)"),
        ("messages-empty-stream", "fixed no_events 1 (1 event, messages)"),
        ("gemini-empty-stream", "fixed no_events 1 (1 event, gemini)"),
        ("chat-litellm-usage-choices", "fixed usage_chunk 1 (1 event, chat)"),
        ("gemini-relay-cr-only", "verdict max_tokens; fixed truncation 1, cr_end 1 (2 events, gemini)"),
        ("chat-relay-cr-only", "fixed tool_index 3, cr_end 1 (4 events, chat)"),
    ],
)
def test_receipt_line(name, line):
    """The receipt (flow comment, log line) names each new rule with its count."""
    from streamfix.addons.receipts import receipt

    rec = load(name)
    _, s = repair(rec)
    rep = s.repairer
    head, _why = receipt(rec.api, rep, rep.decision, "incomplete")
    assert head == line
