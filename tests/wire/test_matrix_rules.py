"""This round's rules (the real-CPA matrix's classes), each on the real bytes a CPA build sent
(recordings/real-cpa/, through the client leg in process: tests/support/matrix_replay.py) and on
small hand-made streams, with the rule on and off, and the contract rule that names each.

- hidden_failure (wire/hidden.py): a failure reported as success ends as the API's failure;
- eof_terminal on Messages and Gemini: a stream that stops without its terminal ends failed;
- finish_reason (wire/stops.py): stop reasons in the API's own words, on every API;
- usage_math (wire/usage_math.py): usage that adds up;
- terminal_output: a terminal without output gets ``output: []``;
- vendor_events: the Codex backend's own events kept for Codex only;
- tool_index: a second call at an index in use (Gemini's ``[A]`` then ``[B, C]``).
"""

from __future__ import annotations

import matrix_recordings as mr
import matrix_replay as rp
import orjson
import pytest
from repairkit import run
from streamfix.wire import hidden, stops, usage_math
from streamfix.wire.chat import ChatRepairer
from streamfix.wire.contract import check
from streamfix.wire.gemini import GeminiRepairer
from streamfix.wire.invariants import json_events
from streamfix.wire.messages import MessagesRepairer
from streamfix.wire.responses import ResponsesRepairer
from streamfix.wire.rules import FlowContext, Rules

CELLS = {c.key: c for c in mr.load()}


def cell(version: str, path: str, api: str, turn: str) -> mr.Cell:
    return CELLS[(version, path, api, turn)]


def through(c: mr.Cell, **options) -> tuple[bytes, str]:
    """The cell's raw stream through the sidecar's client leg (``options``: streamfix
    options, e.g. a rule off): (bytes, the flow's comment: its receipt)."""
    out, comments = rp.replay_http(c.meta, c.body, options=options)
    return out, comments[0]


def evs(body: bytes) -> list[dict]:
    return [e for e in json_events(body) if isinstance(e, dict)]


def rules(api: str, body: bytes, client: str | None = None) -> set[str]:
    return {v.rule for v in check(api, body, client=client)}


# --- the tables --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "value", "want"),
    [
        ("chat", "max_tokens", "length"),  # CPA's Gemini chat translator
        ("chat", "safety", "content_filter"),  # its non-stream form, lower-cased
        ("chat", "RECITATION", "content_filter"),
        ("chat", "refusal", "content_filter"),  # Anthropic's, passed through
        ("chat", "model_context_window_exceeded", "length"),
        ("chat", "pause_turn", "length"),  # an unfinished turn (wire/stops.py)
        ("chat", "end_turn", "stop"),
        ("chat", "tool_use", "tool_calls"),
        ("messages", "length", "max_tokens"),
        ("messages", "content_filter", "refusal"),
        ("messages", "stop", "end_turn"),
        ("messages", "MAX_TOKENS", "max_tokens"),
        ("gemini", "max_tokens", "MAX_TOKENS"),
        ("gemini", "length", "MAX_TOKENS"),
        ("gemini", "safety", "SAFETY"),
        ("gemini", "stop", "STOP"),
        ("gemini", "refusal", "SAFETY"),
        ("responses", "length", "max_output_tokens"),
        ("responses", "refusal", "content_filter"),
        ("responses", "pause_turn", "max_output_tokens"),
        ("responses", "model_context_window_exceeded", "max_output_tokens"),
    ],
)
def test_a_foreign_stop_reason_in_the_apis_own_words(api, value, want):
    assert stops.foreign(api, value) == want and want in stops.OWN[api]


def test_own_and_unknown_stop_reasons_are_left_alone():
    for api, own in stops.OWN.items():
        assert all(stops.foreign(api, v) is None for v in own), api
    for v in ("malformed_function_call", "OTHER", "weird", None, 3, ["stop"]):
        assert stops.foreign("chat", v) is None
    assert stops.foreign("responses", "stop") is None  # a normal end has no reason there


def test_native_finish_reason_disagreement():
    assert stops.native_disagrees("stop", "safety") == "content_filter"  # CPA's Gemini SAFETY
    assert stops.native_disagrees("tool_calls", "max_tokens") == "length"  # N5's measured shape
    assert stops.native_disagrees("stop", "stop") is None
    assert stops.native_disagrees("stop", "tool_calls") is None
    assert stops.native_disagrees("length", "safety") is None  # not a normal end: left
    assert stops.native_disagrees("stop", None) is None


@pytest.mark.parametrize(
    ("api", "usage", "fixed", "changes"),
    [
        # Gemini's counts copied into Responses: output without the thoughts its total counts
        (
            "responses",
            {
                "input_tokens": 42,
                "output_tokens": 4,
                "total_tokens": 68,
                "output_tokens_details": {"reasoning_tokens": 22},
            },
            {
                "input_tokens": 42,
                "output_tokens": 26,
                "total_tokens": 68,
                "output_tokens_details": {"reasoning_tokens": 22},
            },
            1,
        ),
        (
            "chat",
            {
                "prompt_tokens": 42,
                "completion_tokens": 4,
                "total_tokens": 68,
                "completion_tokens_details": {"reasoning_tokens": 22},
            },
            {
                "prompt_tokens": 42,
                "completion_tokens": 26,
                "total_tokens": 68,
                "completion_tokens_details": {"reasoning_tokens": 22},
            },
            1,
        ),
        # cached above input (an uncached input under an API that counts cached in it)
        (
            "responses",
            {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "input_tokens_details": {"cached_tokens": 30}},
            {"input_tokens": 40, "output_tokens": 5, "total_tokens": 45, "input_tokens_details": {"cached_tokens": 30}},
            1,
        ),
        (
            "gemini",
            {"promptTokenCount": 10, "cachedContentTokenCount": 30, "candidatesTokenCount": 5, "totalTokenCount": 15},
            {"promptTokenCount": 40, "cachedContentTokenCount": 30, "candidatesTokenCount": 5, "totalTokenCount": 45},
            1,
        ),
        # negative counts
        ("messages", {"input_tokens": -1, "output_tokens": 5}, {"input_tokens": 0, "output_tokens": 5}, 1),
        # already right: nothing (Gemini's own thoughts apart from candidates is right)
        (
            "responses",
            {
                "input_tokens": 42,
                "output_tokens": 26,
                "total_tokens": 68,
                "output_tokens_details": {"reasoning_tokens": 22},
            },
            None,
            0,
        ),
        (
            "gemini",
            {"promptTokenCount": 42, "candidatesTokenCount": 4, "thoughtsTokenCount": 22, "totalTokenCount": 68},
            None,
            0,
        ),
        ("chat", {"prompt_tokens": 42, "completion_tokens": 26, "total_tokens": 68}, None, 0),
    ],
)
def test_usage_math(api, usage, fixed, changes):
    before = orjson.loads(orjson.dumps(usage))
    assert len(usage_math.problems(api, usage)) == changes
    assert len(usage_math.repair(api, usage)) == changes
    assert usage == (fixed if fixed is not None else before)
    assert usage_math.problems(api, usage) == [] and usage_math.repair(api, usage) == []  # idempotent


def test_synthetic_completion_needs_the_gemini_translators_ids():
    resp = {"id": "resp_abc", "status": "completed"}
    assert hidden.synthetic_completion(resp, ["msg_resp_abc_0", "rs_resp_abc_1"])
    assert hidden.synthetic_completion(resp, [])  # the error-first turn: no item at all
    assert not hidden.synthetic_completion(resp | {"usage": {"input_tokens": 1}}, ["msg_resp_abc_0"])
    assert not hidden.synthetic_completion(resp | {"usage": {}}, [])  # usage present, if empty: left to rule usage
    assert not hidden.synthetic_completion({"id": "chatcmpl-abc"}, ["msg_chatcmpl-abc_0"])  # OpenAI-compatible
    assert not hidden.synthetic_completion(resp, ["msg_68a0c1f2"])  # the Responses API's own ids


# --- hidden_failure, on the real bytes ----------------------------------------------------


@pytest.mark.parametrize("turn", ["no_finish", "inband_error", "cut_body", "error_first"])
def test_responses_completed_without_usage_is_a_failure(turn):
    """v7.2.140's Gemini path: the provider's body never finished (ended, cut, an in-band
    error, an error before any content) and CPA says response.completed without usage.
    Through the sidecar: response.failed, the same id and sequence number, the items as CPA
    closed them; off: completed, as before this round (its usage filled with zeros)."""
    c = cell("v7.2.140", "gemini", "responses", turn)
    raw = evs(c.body)[-1]
    assert raw["type"] == "response.completed" and "usage" not in raw["response"]
    assert "terminal.hidden_failure" in rules("responses", c.body)
    out, receipt = through(c)
    last = evs(out)[-1]
    assert last["type"] == "response.failed" and last["response"]["status"] == "failed"
    assert last["response"]["error"] == {
        "code": "server_error",
        "message": "The upstream stream ended without a finish.",
    }
    assert last["sequence_number"] == raw["sequence_number"] and last["response"]["id"] == raw["response"]["id"]
    assert [o["id"] for o in last["response"].get("output", [])] == [o["id"] for o in raw["response"].get("output", [])]
    assert b"\nevent: response.failed\ndata: " in out and b"event: response.completed" not in out
    assert "hidden_failure 1" in receipt and check("responses", out) == []
    off, _ = through(c, streamfix_hidden_failure=False)
    assert evs(off)[-1]["type"] == "response.completed"


def test_responses_completed_without_usage_elsewhere_is_left():
    """The same shape from CPA's OpenAI-compatible translator (chatcmpl ids): a provider that
    sent no usage, not a failure. hidden_failure leaves it (rule usage fills zeros)."""
    c = cell("v7.2.140", "gemini", "responses", "no_finish")
    body = c.body.replace(b"resp_fakeno_finish", b"chatcmpl-fakeno_finish")
    assert "terminal.hidden_failure" not in rules("responses", body)
    out, _ = rp.replay_http(c.meta, body)
    assert evs(out)[-1]["type"] == "response.completed"


def test_chat_done_without_finish_is_a_failure():
    c = cell("v7.2.140", "gemini", "chat", "no_finish")
    assert c.body.endswith(b"data: [DONE]\n\n") and b'"finish_reason":"' not in c.body.replace(
        b'"finish_reason":null', b""
    )
    out, receipt = through(c)
    assert (
        out
        == c.body[: -len(b"data: [DONE]\n\n")]
        + orjson.dumps(hidden.CHAT_ERROR).join((b"data: ", b"\n\n"))
        + b"data: [DONE]\n\n"
    )
    assert "hidden_failure 1" in receipt and check("chat", out) == []
    assert through(c, streamfix_hidden_failure=False)[0] == c.body


def test_messages_stop_without_delta_is_a_failure():
    """message_stop with no message_delta: an error event in its place; when CPA's own error
    event follows it (the cut body), the message_stop goes and CPA's error tells it."""
    c = cell("v7.2.140", "gemini", "messages", "inband_error")
    out, receipt = through(c)
    assert evs(out)[-1] == hidden.MESSAGES_ERROR and b"message_stop" not in out
    # in the message_stop's place (CPA's third newline, an empty event of its own, after it)
    assert out.endswith(
        b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":'
        b'"The upstream stream ended without a stop_reason."}}\n\n\n'
    )
    assert "hidden_failure 1" in receipt and check("messages", out) == []
    assert through(c, streamfix_hidden_failure=False)[0] == c.body
    cut = cell("v7.2.140", "gemini", "messages", "cut_body")
    out, _ = through(cut)
    assert [e["type"] for e in evs(out)][-2:] == ["content_block_delta", "error"]
    assert evs(out)[-1]["error"]["message"] == "unexpected EOF"  # CPA's own
    assert out == cut.body.replace(b'event: message_stop\ndata: {"type":"message_stop"}\n\n', b"")


ZEROED = b'"delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":0,"output_tokens":0}}'


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
@pytest.mark.parametrize("turn", ["inband_error", "no_finish"])
def test_antigravitys_zeroed_message_delta_is_a_failure(version, turn):
    """CPA's Antigravity -> Claude translator ends a body without a finish with its own
    message_delta (end_turn, usage 0/0 after a message_start that counted 42) and
    message_stop: an error event in the delta's place, the message_stop dropped; when CPA's
    own error event follows (the cut body), both go and CPA's error tells it."""
    c = cell(version, "antigravity", "messages", turn)
    assert ZEROED in c.body and rules("messages", c.body) == {"terminal.hidden_failure"}
    out, receipt = through(c)
    kinds = [e["type"] for e in evs(out)]
    assert kinds[-1] == "error" and "message_delta" not in kinds and "message_stop" not in kinds
    assert evs(out)[-1] == hidden.MESSAGES_ERROR and "hidden_failure" in receipt and check("messages", out) == []
    assert out.startswith(c.body[: c.body.index(b"event: message_delta")])
    assert through(c, streamfix_hidden_failure=False)[0] == c.body
    assert rp.replay_http(c.meta, out)[0] == out  # idempotent
    cut = cell("v7.2.140", "antigravity", "messages", "cut_body")
    out, _ = through(cut)
    assert [e["type"] for e in evs(out)][-2:] == ["content_block_stop", "error"]
    assert evs(out)[-1]["error"]["message"] == "unexpected EOF"  # CPA's own


def test_a_finished_message_delta_with_zero_usage_is_left():
    """Only a delta that zeroes the input its start counted: a start that counted none (a
    gateway that never counts), a delta with other fields or another stop, are left."""
    start = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message",'
        b'"role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,'
        b'"usage":{"input_tokens":%d,"output_tokens":0}}}\n\n'
    )
    rest = (
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
        b'{"type":"text","text":""}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta",'
        b'"index":0,"delta":{"type":"text_delta","text":"hi"}}\n\nevent: content_block_stop\ndata: '
        b'{"type":"content_block_stop","index":0}\n\nevent: message_delta\ndata: {"type":"message_delta",%s}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    zeroed = ZEROED[:-1]
    for body in (
        start % 0 + rest % zeroed,
        start % 42 + rest % zeroed.replace(b"end_turn", b"max_tokens"),
        start % 42 + rest % zeroed.replace(b'"output_tokens":0', b'"output_tokens":3'),
        start % 42 + rest % zeroed.replace(b'"output_tokens":0}', b'"output_tokens":0,"cache_read_input_tokens":0}'),
    ):
        assert run(MessagesRepairer, body)[0] == body and "terminal.hidden_failure" not in rules("messages", body)
    body = start % 42 + rest % zeroed
    out = run(MessagesRepairer, body)[0]
    assert out != body and "terminal.hidden_failure" in rules("messages", body) and check("messages", out) == []
    for n in (1, 7, 64):  # any chunking
        assert run(MessagesRepairer, body, cuts=list(range(n, len(body), n)))[0] == out


def test_messages_and_gemini_streams_that_stop_end_failed():
    """Rule eof_terminal, now on Messages and Gemini: the Claude path's body ended without
    a finish reaches /v1/messages without message_stop, and /v1beta's stream without a
    finishReason: each ends with its API's failure."""
    m = cell("v7.2.140", "claude", "messages", "no_finish")
    out, _ = through(m)
    assert out.startswith(m.body) and evs(out)[-1] == hidden.MESSAGES_ERROR
    assert through(m, streamfix_eof_terminal=False)[0] == m.body
    g = cell("v7.2.140", "gemini", "gemini", "no_finish")
    out, _ = through(g)
    assert out.startswith(g.body) and evs(out)[-1]["error"]["status"] == "INTERNAL"
    assert through(g, streamfix_eof_terminal=False)[0] == g.body


# --- finish_reason ------------------------------------------------------------------------


def test_chat_stop_beside_a_native_safety_is_content_filter():
    c = cell("v7.2.140", "gemini", "chat", "safety")
    assert b'"finish_reason":"stop","native_finish_reason":"safety"' in c.body
    assert "stop.reason" in rules("chat", c.body)
    out, receipt = through(c)
    assert out == c.body.replace(
        b'"finish_reason":"stop","native_finish_reason":"safety"',
        b'"finish_reason":"content_filter","native_finish_reason":"safety"',
    )
    assert "finish_reason 1" in receipt and check("chat", out) == []
    assert through(c, streamfix_finish_reason=False)[0] == c.body


def test_gemini_early_stop_dropped():
    """CPA's OpenAI -> Gemini translator: finishReason STOP on its first, empty chunk. Dropped
    (the turn's own STOP comes later); on the failure turns the stream then ends failed."""
    c = cell("v7.2.140", "openai", "gemini", "text_tool")
    first = b'data: {"candidates":[{"content":{"parts":[],"role":"model"},"index":0,"finishReason":"STOP"}]'
    assert c.body.startswith(first) and "gemini.finish" in rules("gemini", c.body)
    out, _ = through(c)
    assert out == c.body.replace(b',"finishReason":"STOP"}]', b"}]", 1) and check("gemini", out) == []
    nf = cell("v7.2.89", "openai", "gemini", "inband_error")  # v7.2.89: no error event at all
    out, _ = through(nf)
    assert evs(out)[-1]["error"]["status"] == "INTERNAL" and b'"finishReason"' not in out
    assert through(c, streamfix_finish_reason=False)[0] == c.body


def test_gemini_stream_ending_on_its_usage_gets_stop():
    """CPA's Codex -> Gemini translator writes no finishReason for a turn without a call: the
    stream ends on a chunk with the turn's whole usage. STOP is written on that chunk."""
    c = cell("v7.2.140", "codex", "gemini", "thoughts")
    assert b"finishReason" not in c.body and "terminal.present" in rules("gemini", c.body)
    out, receipt = through(c)
    last = evs(out)[-1]
    assert last["candidates"][0]["finishReason"] == "STOP" and last["usageMetadata"]["candidatesTokenCount"] == 26
    assert out.startswith(c.body[: c.body.rindex(b"data: ")]) and check("gemini", out) == []
    assert "finish_reason 1" in receipt
    off, _ = through(c, streamfix_finish_reason=False)
    assert evs(off)[-1]["error"]["status"] == "INTERNAL"  # without it: the stream stopped, a failure


def test_gemini_error_event_loses_its_name():
    """CPA writes a Gemini client's failure as ``event: error`` + data: Gemini's stream has no
    event names (an EventSource would not even deliver it as a message)."""
    c = cell("v7.2.140", "codex", "gemini", "inband_error")
    assert b"event: error\n" in c.body
    out, _ = through(c)
    assert b"event: error" not in out and out == c.body.replace(b"event: error\n", b"")


def test_foreign_stop_reasons_on_each_api():
    def chat_stream(finish: str) -> bytes:
        return (
            b"".join(
                b"data: " + orjson.dumps(o) + b"\n\n"
                for o in (
                    {
                        "id": "c",
                        "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": {"content": "hi"}}],
                    },
                    {
                        "id": "c",
                        "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                    },
                )
            )
            + b"data: [DONE]\n\n"
        )

    out, rep = run(ChatRepairer, chat_stream("pause_turn"))
    assert b'"finish_reason":"length"' in out and rep.decision.outcome == "max_tokens" and rep.decision.native
    assert "stop.reason" in rules("chat", chat_stream("pause_turn")) and check("chat", out) == []
    md = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
        b'"content":[],"model":"x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":0}}}'
        b'\n\nevent: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"length","stop_sequence":null},'
        b'"usage":{"output_tokens":3}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    assert "stop.reason" in rules("messages", md)
    out, _ = run(MessagesRepairer, md)
    assert out == md.replace(b'"stop_reason":"length"', b'"stop_reason":"max_tokens"') and check("messages", out) == []
    g = b'data: {"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"},"finishReason":"max_tokens"}]}\n\n'
    out, _ = run(GeminiRepairer, g)
    assert out == g.replace(b'"max_tokens"', b'"MAX_TOKENS"') and "stop.reason" in rules("gemini", g)
    inc = (
        b'data: {"type":"response.created","response":{"id":"r","created_at":1,"model":"m"}}\n\n'
        b'data: {"type":"response.incomplete","response":{"id":"r","status":"incomplete","output":[],'
        b'"incomplete_details":{"reason":"refusal"},"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}}\n\n'
    )
    assert "stop.reason" in rules("responses", inc)
    out, _ = run(ResponsesRepairer, inc)
    assert out == inc.replace(b'"reason":"refusal"', b'"reason":"content_filter"') and check("responses", out) == []
    off, _ = run(ResponsesRepairer, inc, rules=Rules(finish_reason=False))
    assert off == inc


# --- usage_math, terminal_output, vendor_events, tool_index ---------------------------------


@pytest.mark.parametrize(("api", "key"), [("responses", "output_tokens"), ("chat", "completion_tokens")])
def test_gemini_thoughts_usage_adds_up(api, key):
    c = cell("v7.2.140", "gemini", api, "thoughts")
    assert "usage.sums" in rules(api, c.body)
    out, receipt = through(c)
    usage = (
        next(e["usage"] for e in reversed(evs(out)) if isinstance(e.get("usage"), dict))
        if api == "chat"
        else evs(out)[-1]["response"]["usage"]
    )
    assert usage[key] == 26 and usage["total_tokens"] == 68  # 4 + 22 thoughts; total as it was
    assert "usage_math 1" in receipt and check(api, out) == []
    off, _ = through(c, streamfix_usage_math=False)
    assert off == c.body if api == "chat" else b'"output_tokens":4' in off


def test_terminal_without_output_gets_an_empty_list():
    c = cell("v7.2.140", "claude", "responses", "zero_items")
    raw = evs(c.body)[-1]
    assert raw["type"] == "response.completed" and "output" not in raw["response"]
    assert "terminal.output" in rules("responses", c.body)
    out, receipt = through(c)
    assert evs(out)[-1]["response"]["output"] == [] and "terminal_output 1" in receipt
    assert check("responses", out) == []
    assert through(c, streamfix_terminal_output=False)[0] == c.body


def test_vendor_events_kept_for_codex_only():
    c = cell("v7.2.140", "codex", "responses", "vendor")
    assert "sse.vendor" in rules("responses", c.body) and "sse.vendor" not in rules("responses", c.body, "codex")
    out, receipt = through(c)
    assert out.startswith(b":event: codex.rate_limits\n:data: ") and b"\nevent: codex." not in out
    assert "vendor_events 2" in receipt and check("responses", out) == []
    meta = c.meta | {"request": c.meta["request"] | {"headers": {"originator": "codex_cli_rs"}}}
    mine, _ = rp.replay_http(meta, c.body)
    assert mine.startswith(b"event: codex.rate_limits\n") and b"\nevent: codex.response.metadata\n" in mine
    assert check("responses", mine, client="codex") == []
    off, _ = through(c, streamfix_vendor_events=False)
    assert off.startswith(b"event: codex.rate_limits\n")


def test_a_second_call_at_an_index_in_use():
    """Gemini's ``[A]``, then ``[B, C]`` in one chunk: CPA numbers B and C both 1. The
    contract calls it (chat.tool_index); rule tool_index gives C index 2."""
    c = cell("v7.2.140", "gemini", "chat", "parallel")
    idx = [
        tc["index"]
        for e in evs(c.body)
        for ch in e.get("choices", [])
        for tc in (ch.get("delta") or {}).get("tool_calls") or []
    ]
    assert idx == [0, 1, 1] and "chat.tool_index" in rules("chat", c.body)
    out, _ = through(c)
    got = [
        (tc["index"], tc["id"])
        for e in evs(out)
        for ch in e.get("choices", [])
        for tc in (ch.get("delta") or {}).get("tool_calls") or []
    ]
    assert [i for i, _ in got] == [0, 1, 2] and len({i for _, i in got}) == 3 and check("chat", out) == []


# --- check mode and the receipts ------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        (("v7.2.140", "gemini", "responses", "no_finish"), "terminal.hidden_failure"),
        (("v7.2.140", "gemini", "chat", "no_finish"), "terminal.hidden_failure"),
        (("v7.2.140", "gemini", "messages", "inband_error"), "messages.stop"),
        (("v7.2.140", "antigravity", "messages", "no_finish"), "terminal.hidden_failure"),
        (("v7.2.140", "gemini", "chat", "safety"), "stop.reason"),
        (("v7.2.140", "gemini", "responses", "thoughts"), "usage.sums"),
        (("v7.2.140", "codex", "responses", "vendor"), "sse.vendor"),
        (("v7.2.140", "claude", "responses", "zero_items"), "terminal.output"),
        (("v7.2.140", "openai", "gemini", "text_tool"), "gemini.finish"),
    ],
)
def test_check_mode_names_the_rule_and_changes_nothing(key, rule):
    c = cell(*key)
    out, comments = rp.replay_http(c.meta, c.body, mode="check")
    assert out == c.body
    assert rule in comments[0], comments


def test_flow_context_knows_codex():
    from streamfix.wire.foreign import codex_client

    assert codex_client("codex_cli_rs", None) and codex_client(None, "codex_exec/0.171.0 (Linux)")
    assert not codex_client(None, "ai-sdk/openai/4.0.118") and not codex_client(None, None)
    assert FlowContext().client is None
