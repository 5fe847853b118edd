"""wire/chat.py: tool_index, tool_header, truncation on /v1/chat/completions; recordings."""

from __future__ import annotations

import orjson
import pytest
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk
from repairkit import chunking_property, error_cuts, events, recordings, repair_recording, run, sse
from streamfix.wire import chat
from streamfix.wire.chat import ChatRepairer, repair_chat_json
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.verdict import Verdict

BASE = {"id": "interaction_1", "object": "chat.completion.chunk", "created": 1789000000, "model": "devin/swe-2"}
REQ = {"model": "devin/swe-2", "stream": True, "max_tokens": 400, "messages": []}


def chunk(delta=None, finish=None, usage=None, choices=None, index=0):
    obj = dict(BASE)
    obj["choices"] = (
        choices if choices is not None else [{"index": index, "delta": delta or {}, "finish_reason": finish}]
    )
    if usage is not None:
        obj["usage"] = usage
    return obj


def header(i, id_="write_file_0#a1", name="write_file", args=""):
    return chunk(
        {"tool_calls": [{"index": i, "id": id_, "type": "function", "function": {"name": name, "arguments": args}}]}
    )


def args(i, text):
    return chunk({"tool_calls": [{"index": i, "function": {"arguments": text}}]})


def finish(reason="tool_calls", completion=58, **kw):
    usage = {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}
    return chunk(finish=reason, usage=usage, **kw)


DONE = b"[DONE]"


def fix(*objs, request=REQ, rules=None, verdict=None):
    out, rep = run(ChatRepairer, sse(*objs), request, rules, verdict)
    return events(out), rep, out


def tool_entries(evs):
    return [
        tc
        for e in evs
        if isinstance(e, dict)
        for ch in e.get("choices", [])
        for tc in ch.get("delta", {}).get("tool_calls", [])
    ]


def finish_reasons(evs):
    return [
        ch["finish_reason"]
        for e in evs
        if isinstance(e, dict)
        for ch in e.get("choices", [])
        if ch.get("finish_reason") is not None
    ]


def openai_assemble(body: bytes):
    """What openai-python's chat.completions.stream() helper builds from the body."""
    state = ChatCompletionStreamState()
    for e in events(body):
        if isinstance(e, dict):
            state.handle_chunk(ChatCompletionChunk.model_validate(e))
    return state.current_completion_snapshot


WHOLE = '{"path":"a.txt","content":"hi"}'


# --- tool_index ---------------------------------------------------------------------------
def test_tool_index_renumbers_step_index_to_zero():
    evs, rep, _ = fix(header(1), args(1, WHOLE), finish(), DONE)
    assert [tc["index"] for tc in tool_entries(evs)] == [0, 0]
    assert rep.changed == 2


def test_tool_index_rule_off_leaves_the_defect():
    evs, rep, _ = fix(header(1), args(1, WHOLE), finish(), DONE, rules=Rules(tool_index=False))
    assert [tc["index"] for tc in tool_entries(evs)] == [1, 1]
    assert rep.changed == 0


def test_tool_index_several_calls_in_order_of_first_appearance():
    evs, _, _ = fix(
        header(2, "a"),
        args(2, "{}"),
        header(4, "b", "read_file"),
        args(4, "{}"),
        header(5, "c"),
        args(5, "{}"),
        finish(),
        DONE,
    )
    assert [tc["index"] for tc in tool_entries(evs)] == [0, 0, 1, 1, 2, 2]


def test_tool_index_per_choice():
    two = [
        {
            "index": 0,
            "delta": {
                "tool_calls": [
                    {"index": 3, "id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ]
            },
            "finish_reason": None,
        },
        {
            "index": 1,
            "delta": {
                "tool_calls": [
                    {"index": 7, "id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}
                ]
            },
            "finish_reason": None,
        },
    ]
    evs, _, _ = fix(chunk(choices=two), DONE)
    assert [tc["index"] for tc in tool_entries(evs)] == [0, 0]


def test_tool_index_makes_openai_python_assemble_the_call():
    body = sse(header(1), args(1, WHOLE), finish(), DONE)
    with pytest.raises(IndexError):
        openai_assemble(body)
    out, _ = run(ChatRepairer, body, REQ)
    snap = openai_assemble(out)
    [tc] = snap.choices[0].message.tool_calls
    assert (tc.id, tc.function.name, tc.function.arguments) == ("write_file_0#a1", "write_file", WHOLE)


def test_index_reuse_for_a_second_call_gets_the_next_ordinal():
    evs, _, _ = fix(
        header(0, "call_A", "get_weather"),
        args(0, '{"city":"Oslo"}'),
        header(0, "call_B", "get_time"),
        args(0, '{"tz":"UTC"}'),
        finish(),
        DONE,
    )
    assert [tc["index"] for tc in tool_entries(evs)] == [0, 0, 1, 1]
    assert tool_entries(evs)[2]["id"] == "call_B"  # a new call keeps its header


def test_entries_without_index_pass_and_are_noted():
    bad = chunk({"tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{}"}}]})
    _evs, rep, out = fix(bad, finish(), DONE)
    assert sse(bad) in out
    assert any("without an integer index" in n for n in rep.notes)


# --- tool_header ---------------------------------------------------------------------------
def test_resent_header_with_same_name_is_stripped():
    evs, _, _ = fix(header(2), args(2, '{"path":'), header(2), args(2, '"a"}'), finish(), DONE)
    entries = tool_entries(evs)
    assert entries[2] == {"index": 0, "function": {"arguments": ""}}
    assert [e.get("function", {}).get("name") for e in entries].count("write_file") == 1


def test_resent_header_rule_off_leaves_the_name_twice():
    evs, _, out = fix(
        header(2), args(2, '{"path":'), header(2), args(2, '"a"}'), finish(), DONE, rules=Rules(tool_header=False)
    )
    assert [e.get("function", {}).get("name") for e in tool_entries(evs)].count("write_file") == 2
    # and openai-python then concatenates the name and the id
    tc = openai_assemble(out).choices[0].message.tool_calls[0]
    assert tc.function.name == "write_filewrite_file" and tc.id == "write_file_0#a1" * 2


def test_resent_header_assembles_once_in_openai_python():
    body = sse(header(2), args(2, '{"path":'), header(2), args(2, '"a"}'), finish(), DONE)
    out, _ = run(ChatRepairer, body, REQ)
    [tc] = openai_assemble(out).choices[0].message.tool_calls
    assert (tc.id, tc.function.name, tc.function.arguments) == ("write_file_0#a1", "write_file", '{"path":"a"}')


def test_late_name_header_is_held_and_completed():
    body = sse(
        header(1, name=""), args(1, '{"path":'), b": keep-alive", header(1), args(1, '"a"}'), finish(), DONE
    ).replace(b"data: : keep-alive", b": keep-alive")
    out, _rep = run(ChatRepairer, body, REQ)
    evs = events(out)
    entries = tool_entries(evs)
    assert entries[0]["function"]["name"] == "write_file" and entries[0]["index"] == 0
    assert entries[2] == {"index": 0, "function": {"arguments": ""}}
    assert out.index(b"keep-alive") > out.index(b'{\\"path\\":')  # order kept
    [tc] = openai_assemble(out).choices[0].message.tool_calls
    assert (tc.function.name, tc.function.arguments) == ("write_file", '{"path":"a"}')


def test_late_name_is_held_while_streaming():
    rep = ChatRepairer(Rules(), FlowContext(request=REQ), Verdict())
    from streamfix.wire.stream import StreamRepair

    s = StreamRepair(rep)
    assert s.feed(sse(chunk({"role": "assistant"}))) != b""
    assert s.feed(sse(header(1, name=""), args(1, "{"))) == b""  # held
    released = s.feed(sse(header(1)))
    assert released.count(b"data: ") == 3 and b'"name":"write_file"' in released


def test_late_name_rule_off_passes_the_nameless_header():
    evs, _, _ = fix(header(1, name=""), args(1, "{}"), header(1), finish(), DONE, rules=Rules(tool_header=False))
    assert tool_entries(evs)[0]["function"]["name"] == ""


def test_late_name_and_late_id_replace_cpa_fallback_id():
    evs, _, _ = fix(
        header(1, id_="call_1", name=""), header(1, id_="edit_0#x", name="edit"), args(1, "{}"), finish(), DONE
    )
    first = tool_entries(evs)[0]
    assert (first["id"], first["function"]["name"]) == ("edit_0#x", "edit")


def test_late_id_after_a_named_header_keeps_the_first_id():
    evs, _, _ = fix(header(1, id_="call_1"), args(1, "{"), header(1, id_="edit_0#x"), args(1, "}"), finish(), DONE)
    entries = tool_entries(evs)
    assert entries[0]["id"] == "call_1"
    assert "id" not in entries[2] and "name" not in entries[2]["function"]


def test_name_that_never_arrives_is_released_at_the_finish():
    evs, rep, _ = fix(header(1, name=""), args(1, "{}"), finish(), DONE)
    assert tool_entries(evs)[0]["function"]["name"] == ""
    assert finish_reasons(evs) == ["tool_calls"]
    assert any("never arrived" in n for n in rep.notes)


def test_name_hold_is_bounded():
    many = [chunk({"content": f"x{i}"}) for i in range(chat.HOLD_LIMIT + 5)]  # no delta repeats the text
    rep = ChatRepairer(Rules(), FlowContext(request=REQ), Verdict())
    from streamfix.wire.stream import StreamRepair

    s = StreamRepair(rep)
    out = s.feed(sse(header(1, name=""), *many))
    assert out.count(b"data: ") == chat.HOLD_LIMIT + 6  # released, nothing lost
    assert len(rep.held) == 0


def test_a_name_sent_after_a_released_nameless_header_is_kept():
    many = [chunk({"content": "x"}) for _ in range(chat.HOLD_LIMIT + 1)]
    evs, _, out = fix(header(1, name=""), *many, header(1), args(1, "{}"), finish(), DONE)
    entries = tool_entries(evs)
    assert entries[1] == {"index": 0, "function": {"name": "write_file", "arguments": ""}}
    assert openai_assemble(out).choices[0].message.tool_calls[0].function.name == "write_file"


# --- truncation ----------------------------------------------------------------------------
CUT = '{"path":"index.html","content":"<!doctype'


def test_truncation_sets_length():
    evs, rep, _ = fix(header(2), args(2, CUT), finish(completion=400), DONE)
    assert finish_reasons(evs) == ["length"]
    assert rep.decision.outcome == "max_tokens"


def test_truncation_off_leaves_the_defect_but_decides():
    evs, rep, _ = fix(header(2), args(2, CUT), finish(completion=400), DONE, rules=Rules(truncation="off"))
    assert finish_reasons(evs) == ["tool_calls"]
    assert rep.decision.truncated


def test_truncation_completed_policy_still_sets_length_on_chat():
    evs, _, _ = fix(header(2), args(2, CUT), finish(completion=400), DONE, rules=Rules(truncation="completed"))
    assert finish_reasons(evs) == ["length"]


def test_complete_call_at_cap_stays_tool_calls():
    evs, rep, _out = fix(header(2), args(2, WHOLE), finish(completion=400), DONE, rules=Rules(tool_index=False))
    assert finish_reasons(evs) == ["tool_calls"] and rep.changed == 0
    assert rep.decision.outcome == "complete"


def test_text_at_cap_becomes_length():
    evs, _, _ = fix(chunk({"content": "Once upon"}), finish("stop", completion=400), DONE)
    assert finish_reasons(evs) == ["length"]


def test_native_length_is_left_alone():
    body = sse(args(0, CUT), finish("length", completion=400), DONE)
    out, rep = run(ChatRepairer, body, REQ, Rules(tool_index=False, tool_header=False))
    assert out == body and rep.decision.native


def test_native_content_filter_is_left_alone():
    body = sse(chunk({"content": "I can"}), finish("content_filter", completion=3), DONE)
    out, rep = run(ChatRepairer, body, REQ)
    assert out == body and rep.decision.outcome == "content_filter" and rep.decision.native


def test_upstream_content_filter_via_resolver():
    v = Verdict(resolver=lambda ver: ver.upstream("content_filter", "StopReason 11"))
    evs, _rep, _ = fix(chunk({"content": "I can"}), finish("stop", completion=3), DONE, verdict=v)
    assert finish_reasons(evs) == ["content_filter"]


def test_usage_only_chunk_after_finish_is_counted_and_order_kept():
    req = {"max_completion_tokens": 16, "stream_options": {"include_usage": True}}
    fin = chunk(finish="stop", usage=None)
    fin["usage"] = None
    usage_only = dict(BASE, choices=[], usage={"prompt_tokens": 5, "completion_tokens": 16, "total_tokens": 21})
    body = sse(chunk({"content": "one two three"}), fin, usage_only, DONE)
    out, rep = run(ChatRepairer, body, req)
    evs = events(out)
    assert finish_reasons(evs) == ["length"]
    assert evs[2] == usage_only and evs[3] == DONE
    assert rep.decision.outcome == "max_tokens"


def test_finish_without_usage_is_held_until_the_next_event():
    rep = ChatRepairer(Rules(), FlowContext(request=REQ), Verdict())
    from streamfix.wire.stream import StreamRepair

    s = StreamRepair(rep)
    assert s.feed(sse(chunk(finish="stop"))) == b""
    assert s.feed(b": ping\n\n") == b""  # comments do not settle it
    assert s.feed(sse(DONE)).count(b"data: ") == 2


@pytest.mark.parametrize(
    ("req", "reason", "evidence"),
    [
        ({"model": "m", "messages": []}, "stop", None),  # no cap: usage cannot decide
        (REQ, "length", None),  # the gateway's own verdict: native evidence wins
        (REQ, "stop", frozenset({"tool_args", "native", "request_cap"})),  # usage evidence off
    ],
    ids=["no-cap", "native-length", "usage-evidence-off"],
)
def test_finish_is_not_held_when_usage_cannot_change_the_verdict(req, reason, evidence):
    """A held event is lost if the upstream is cut, so the finish chunk goes out in the
    read that brought it whenever a later usage chunk could not change the verdict."""
    from streamfix.wire.stream import StreamRepair

    v = Verdict() if evidence is None else Verdict(enabled=evidence)
    s = StreamRepair(ChatRepairer(Rules(), FlowContext(request=req), v))
    fin = sse(chunk(finish=reason))
    assert s.feed(fin) == fin


def test_finish_reason_of_any_json_type_is_no_crash():
    """Found by the fuzz target: a list as finish_reason (unhashable) went into a dict lookup."""
    from streamfix.wire.stream import StreamRepair

    s = StreamRepair(ChatRepairer(Rules(), FlowContext(request=REQ), Verdict()))
    body = sse(chunk({"content": "a"}), chunk(finish=[1, "a"]), DONE)
    out = s.feed(body) + s.close()
    assert s.error is None and out == body


def test_finish_without_usage_at_the_end_of_stream_is_decided():
    evs, rep, _ = fix(args(0, CUT), chunk(finish="tool_calls"), rules=Rules(tool_index=False))
    assert finish_reasons(evs) == ["length"] and rep.decision is not None


def test_multi_choice_truncation_is_not_applied():
    two = [{"index": 0, "delta": {}, "finish_reason": "stop"}, {"index": 1, "delta": {}, "finish_reason": "stop"}]
    body = sse(chunk({"content": "a"}), chunk(choices=two, usage={"completion_tokens": 400}), DONE)
    out, rep = run(ChatRepairer, body, REQ)
    assert out == body
    assert any("choices" in n for n in rep.notes)


def test_evidence_reported_to_the_verdict():
    v = Verdict()
    direct = Verdict()
    fix(
        chunk({"reasoning_content": "think"}),
        chunk({"content": "Hello"}),
        header(1),
        args(1, '{"a":'),
        args(1, "1}"),
        finish(completion=7),
        DONE,
        verdict=v,
    )
    direct.observe_text("Hello")
    direct.observe_args('{"a":')
    direct.observe_args("1}")
    assert v.digest() == direct.digest()
    assert v.last_tool_args == '{"a":1}' and v.output_tokens == 7


# --- errors, passthrough -------------------------------------------------------------------------
def test_error_event_passes_and_no_finish_is_synthesized():
    err = {"error": {"message": "devin stream terminated prematurely before EOS trailer", "code": "stream_truncated"}}
    body = sse(header(1), args(1, CUT), err)
    out, _rep = run(ChatRepairer, body, REQ)
    evs = events(out)
    assert evs[-1] == err and finish_reasons(evs) == []
    assert DONE not in evs


def test_error_releases_a_held_header_first():
    err = {"error": {"message": "boom", "code": "502"}}
    evs, _, _ = fix(header(1, name=""), args(1, "{"), err)
    assert evs[-1] == err and len(evs) == 3


def test_stream_without_finish_is_noted_and_passes_with_the_rule_off():
    body = sse(chunk({"content": "partial"}))
    out, rep = run(ChatRepairer, body, REQ, Rules(eof_terminal=False))
    assert out == body
    assert any("without a finish_reason" in n for n in rep.notes)


def test_stream_without_finish_ends_with_an_error_chunk():
    """Rule eof_terminal (pi #8473, codex #41340): an error chunk as OpenAI sends one,
    never a finish; a half event at the cut is kept as a comment."""
    body = sse(chunk({"content": "partial"}))
    out, rep = run(ChatRepairer, body + b'data: {"id":"c', REQ)
    assert out == body + b':data: {"id":"c\n\n' + (
        b'data: {"error":{"message":"The upstream stream ended without a finish_reason.",'
        b'"type":"server_error","param":null,"code":null}}\n\n'
    )
    assert any("ended it with an error chunk" in n for n in rep.notes)
    end = sse({"error": {"message": "x"}})
    assert run(ChatRepairer, body + end, REQ)[0] == body + end
    end = sse(chunk({}, "stop"))  # (rule done_marker adds the [DONE] it lacks)
    assert run(ChatRepairer, body + end, REQ)[0] == body + end + b"data: [DONE]\n\n"


def test_done_without_finish_is_a_failure():
    """Rule hidden_failure: chunks, then ``[DONE]`` with no finish_reason (CPA's Gemini,
    Claude, interactions and OpenAI-compatible chat paths when the provider stopped without
    a finish): an error chunk before the ``[DONE]``; with the rule off, as it came."""
    body = sse(chunk({"content": "partial"}))
    err = (b'data: {"error":{"message":"The upstream stream ended without a finish_reason.",'
           b'"type":"server_error","param":null,"code":null}}\n\n')  # fmt: skip
    out, rep = run(ChatRepairer, body + b"data: [DONE]\n\n", REQ)
    assert out == body + err + b"data: [DONE]\n\n"
    assert rep.fired == {"hidden_failure": 1} and rep.fault() == "the stream carried an error event"
    assert run(ChatRepairer, out, REQ)[0] == out  # idempotent: the error chunk ends it
    off, _ = run(ChatRepairer, body + b"data: [DONE]\n\n", REQ, rules=Rules(hidden_failure=False))
    assert off == body + b"data: [DONE]\n\n"
    # a finish, or an error, before the [DONE]: nothing to tell
    for end in (sse(chunk({}, "stop"), b"[DONE]"), sse({"error": {"message": "x"}}, b"[DONE]")):
        assert run(ChatRepairer, body + end, REQ)[0] == body + end


def test_done_comments_and_bad_json_pass_raw():
    body = b": keep-alive\n\ndata: {not json\n\ndata: [1,2]\n\nevent: x\ndata: [DONE]\n\nretry: 5\n\n"
    out, rep = run(ChatRepairer, body, REQ)
    assert out == body and rep.changed == 0


def test_crlf_events_keep_their_line_ends():
    body = sse(header(1), finish(), DONE, eol=b"\r\n")
    out, _ = run(ChatRepairer, body, REQ)
    assert b'"index":0' in out and out.count(b"\r\n\r\n") == 3 and b"\n\n" not in out.replace(b"\r\n", b"")


# --- non-stream -----------------------------------------------------------------------------------
def completion(tool_calls, finish_reason="tool_calls", completion_tokens=58, content=None):
    return {
        "id": "interaction_1",
        "object": "chat.completion",
        "created": 1789000000,
        "model": "devin/swe-2",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "tool_calls": tool_calls},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": completion_tokens, "total_tokens": 10 + completion_tokens},
    }


def call(id_, arguments="{}", name="f"):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


def repair_json(obj, rules=None, request=REQ):
    v = Verdict()
    v.request(request)
    return repair_chat_json(obj, rules or Rules(), FlowContext(request=request), v), obj


def test_json_duplicate_fallback_ids_become_per_ordinal():
    changed, obj = repair_json(completion([call("call_0"), call("call_0"), call("call_0")]))
    assert changed
    assert [tc["id"] for tc in obj["choices"][0]["message"]["tool_calls"]] == ["call_0", "call_1", "call_2"]


def test_json_duplicate_ids_avoid_taken_names():
    _, obj = repair_json(completion([call("call_0"), call("call_1"), call("call_0")]))
    assert [tc["id"] for tc in obj["choices"][0]["message"]["tool_calls"]] == ["call_0", "call_1", "call_2"]
    _, obj = repair_json(completion([call("x"), call("call_1"), call("x")]))
    assert [tc["id"] for tc in obj["choices"][0]["message"]["tool_calls"]] == ["x", "call_1", "call_2"]


def test_json_unique_ids_untouched_and_rule_off():
    changed, _ = repair_json(completion([call("a"), call("b")]))
    assert not changed
    changed, _obj = repair_json(completion([call("call_0"), call("call_0")]), Rules(tool_index=False))
    assert not changed


def test_json_truncation():
    changed, obj = repair_json(completion([call("w", CUT)], completion_tokens=400))
    assert changed and obj["choices"][0]["finish_reason"] == "length"
    changed, obj = repair_json(completion([call("w", CUT)], completion_tokens=400), Rules(truncation="off"))
    assert not changed and obj["choices"][0]["finish_reason"] == "tool_calls"


def test_json_native_and_complete_untouched():
    changed, _ = repair_json(completion([call("w", CUT)], "length", 400))
    assert not changed
    changed, _ = repair_json(completion([call("w", WHOLE)], completion_tokens=12))
    assert not changed
    assert repair_json({"object": "list"})[0] is False


# --- recordings ----------------------------------------------------------------------------
CHAT = recordings("chat")
NAMES = [r.name for r in CHAT]


def test_the_recordings_are_there():
    assert {
        "chat-devin-truncated-toolcall",
        "chat-devin-index1",
        "chat-devin-late-header",
        "chat-openai-clean",
        "chat-devin-nonstream",
    } <= set(NAMES)


@pytest.mark.parametrize("rec", CHAT, ids=NAMES)
def test_recording_repaired_is_expected(rec):
    out = repair_recording(rec, ChatRepairer, repair_chat_json)
    assert out == rec.expected
    if rec.kind == "clean":
        assert out == rec.body
    else:
        assert out != rec.body


@pytest.mark.parametrize("rec", CHAT, ids=NAMES)
def test_recording_repair_is_idempotent(rec):
    once = repair_recording(rec, ChatRepairer, repair_chat_json)
    assert repair_recording(rec, ChatRepairer, repair_chat_json, body=once) == once


@pytest.mark.parametrize("rec", CHAT, ids=NAMES)
def test_recording_any_chunking(rec):
    chunking_property(rec, ChatRepairer, repair_chat_json)()


ASSEMBLES = {"chat-portkey-gemini-text-tool", "chat-portkey-gemini-parallel"}
"""Buggy recordings whose defect is not in the calls' deltas (a finish_reason, a missing [DONE])."""


@pytest.mark.parametrize("rec", [r for r in CHAT if r.streaming and b'"tool_calls":[' in r.body], ids=lambda r: r.name)
def test_recording_assembles_in_openai_python(rec):
    out = repair_recording(rec, ChatRepairer, repair_chat_json)
    calls = openai_assemble(out).choices[0].message.tool_calls
    assert calls
    headers = [tc for tc in tool_entries(events(out)) if "id" in tc]
    assert [(tc.id, tc.function.name) for tc in calls] == [(h["id"], h["function"]["name"]) for h in headers]
    if rec.kind == "buggy" and rec.name not in ASSEMBLES:  # unrepaired, the helper cannot even assemble it
        with pytest.raises(IndexError):
            openai_assemble(rec.body)


@pytest.mark.parametrize("rec", [r for r in CHAT if r.streaming], ids=lambda r: r.name)
def test_no_error_stream_becomes_success(rec):
    err = b'data: {"error":{"message":"devin stream terminated prematurely before EOS trailer","code":"stream_truncated"}}\n\n'
    error_cuts(rec, ChatRepairer, err, lambda b: len(finish_reasons(events(b))))


def test_fail_open_when_the_verdict_raises_loses_and_duplicates_nothing():
    def boom(ver):
        raise RuntimeError("resolver down")

    from streamfix.wire.stream import StreamRepair

    body = sse(chunk({"content": "a"}), header(1, name=""), args(1, "{}"), chunk(finish="stop"), DONE)
    for cut in range(0, len(body), 7):
        rep = ChatRepairer(Rules(), FlowContext(request=REQ), Verdict(resolver=boom))
        s = StreamRepair(rep)
        out = s.feed(body[:cut]) + s.feed(body[cut:]) + s.close()
        assert isinstance(s.error, RuntimeError)
        assert len(events(out)) == len(events(body))
        assert out.endswith(sse(chunk(finish="stop"), DONE))


def test_finish_written_before_the_upstream_trailer_waits_for_done():
    """CPA PR #5111's Devin executor writes the finish chunk when it parses the StopReason
    frame, before Devin's usage frame and trailer: the finish is held (while the linked
    upstream call is open) until the next event, [DONE], which CPA writes only after the
    trailer; by then the upstream record is finished and decides (content_filter, usage)."""
    from repairkit import make
    from streamfix.wire import devin_pb2 as pb
    from streamfix.wire.connect import encode_end_stream, encode_frame
    from streamfix.wire.correlate import Correlator
    from streamfix.wire.devin import DevinTap
    from streamfix.wire.stream import StreamRepair

    corr = Correlator()
    corr.upstream_started("up", "client")
    v = Verdict()
    v.resolver = corr.resolver("client")
    s = StreamRepair(make(ChatRepairer, {"model": "m", "stream": True, "messages": []}, None, v))
    out = s.feed(sse(chunk({"content": "I cannot"}), chunk({"role": "assistant"}, finish="stop")))
    assert finish_reasons(events(out)) == []  # held: the upstream call is still open
    tap = DevinTap()
    tap.feed(encode_frame(pb.GetChatMessageResponse(text=b"I cannot", stop_reason=11).SerializeToString()))
    tap.feed(encode_frame(pb.GetChatMessageResponse(usage=pb.ModelUsage(
        prompt_tokens=30, output_tokens=4, cache_read_tokens=10)).SerializeToString()) + encode_end_stream())  # fmt: skip
    corr.upstream_finished("up", tap.result())
    out += s.feed(sse(DONE)) + s.close()
    evs = events(out)
    assert finish_reasons(evs) == ["content_filter"] and evs[-1] == DONE
    (fin,) = [e for e in evs if isinstance(e, dict) and e["choices"][0]["finish_reason"]]
    assert fin["usage"]["prompt_tokens"] == 40 and fin["usage"]["completion_tokens"] == 4


# --- error_finish, done_marker, tool_finish, error_last (Portkey, LiteLLM) ----------------------
def _overloaded(word="overloaded_error"):
    obj = dict(BASE)
    obj["choices"] = [{"finish_reason": word, "delta": {"content": ""}}]  # Portkey: no choice index
    return obj


def _err(word):
    return (
        b'data: {"error":{"message":"The upstream provider failed: the gateway ended the stream with finish_reason '
        + f"'{word}'".encode()
        + b'.","type":"server_error","param":null,"code":null}}\n\n'
    )


@pytest.mark.parametrize("word", ["overloaded_error", "rate_limit_error", "api_error", "error"])
def test_error_finish_becomes_an_error_chunk_and_done_is_withheld(word):
    """Rule error_finish (Portkey 1.15.2's Anthropic in-band error as the finish_reason)."""
    head = sse(chunk({"content": "Starting "}))
    body = head + sse(_overloaded(word), DONE)
    out, rep = run(ChatRepairer, body, REQ)
    withheld = f": [DONE] withheld: the gateway ended the stream with finish_reason '{word}'\n\n".encode()
    assert out == head + _err(word) + withheld
    assert "error_finish" in rep.fired and finish_reasons(events(out)) == []
    assert run(ChatRepairer, out, REQ)[0] == out  # idempotent
    for cuts in ([7], list(range(0, len(body), 5)), list(range(len(body)))):
        assert run(ChatRepairer, body, REQ, cuts=cuts)[0] == out
    off, rep_off = run(ChatRepairer, body, REQ, Rules(error_finish=False))
    assert off == body and "error_finish" not in rep_off.fired


def test_error_finish_leaves_known_foreign_words_to_rule_finish_reason():
    for word, want in (("max_tokens", "length"), ("safety", "content_filter"), ("refusal", "content_filter")):
        evs, rep, _ = fix(chunk({"content": "x"}), chunk(finish=word), DONE, request={"messages": []})
        assert finish_reasons(evs) == [want] and evs[-1] == DONE and "error_finish" not in rep.fired
    evs, _, _ = fix(chunk({"content": "x"}), chunk(finish="malformed_function_call"), DONE)
    assert finish_reasons(evs) == ["malformed_function_call"] and evs[-1] == DONE


def test_error_finish_defers_to_the_upstream_legs_evidence():
    v = Verdict(resolver=lambda ver: ver.upstream("failed", "Anthropic in-band error overloaded_error"))
    out, rep = run(ChatRepairer, sse(chunk({"content": "a"}), _overloaded(), DONE), REQ, verdict=v)
    assert b"Anthropic in-band error overloaded_error" in out and b": [DONE] withheld" in out
    assert "upstream_failure" in rep.fired and "error_finish" not in rep.fired


def test_done_marker_ends_a_finished_stream_without_done():
    """Rule done_marker (Portkey 1.15.2's Gemini chat never sends data: [DONE])."""
    body = sse(chunk({"content": "hi"}), finish("stop", 2))
    out, rep = run(ChatRepairer, body, REQ)
    assert out == body + b"data: [DONE]\n\n" and rep.fired == {"done_marker": 1}
    assert run(ChatRepairer, out, REQ)[0] == out
    for cuts in (list(range(0, len(body), 3)), list(range(len(body)))):
        assert run(ChatRepairer, body, REQ, cuts=cuts)[0] == out
    assert run(ChatRepairer, body, REQ, Rules(done_marker=False))[0] == body
    crlf = sse(chunk({"content": "hi"}), finish("stop", 2), eol=b"\r\n")
    assert run(ChatRepairer, crlf, REQ)[0] == crlf + b"data: [DONE]\r\n\r\n"


def test_done_marker_never_after_a_failure_a_cut_or_without_a_finish():
    text = sse(chunk({"content": "hi"}))
    err = sse({"error": {"message": "boom"}})
    assert run(ChatRepairer, text + err, REQ)[0] == text + err  # the gateway's error
    out, _ = run(ChatRepairer, text, REQ)
    assert b"[DONE]" not in out and b'"error"' in out  # no finish: rule eof_terminal's
    cut = text + sse(finish("stop", 2)) + b'data: {"id":"x'
    assert b"[DONE]" not in run(ChatRepairer, cut, REQ)[0]  # ended inside an event
    out, _ = run(ChatRepairer, text + sse(_overloaded()), REQ)
    assert out == text + _err("overloaded_error")  # after an error chunk written here
    v = Verdict(resolver=lambda ver: ver.upstream("failed", "cut"))
    out, _ = run(ChatRepairer, text + sse(finish("stop", 2)), REQ, verdict=v)
    assert b"[DONE]" not in out and b"The upstream provider failed: cut" in out
    done = text + sse(finish("stop", 2), DONE)
    assert run(ChatRepairer, done, REQ)[0] == done


def _portkey_call(i, id_, cmd):
    fn = {"name": "exec_command", "arguments": orjson.dumps({"cmd": cmd}).decode()}
    return {"index": i, "id": id_, "type": "function", "function": fn}


def test_tool_finish_stop_after_whole_calls_becomes_tool_calls():
    """Rule tool_finish (Portkey 1.15.2 writes Gemini's STOP on a function-call turn as stop)."""
    body = sse(
        chunk({"content": "I'll list the files."}),
        chunk({"tool_calls": [_portkey_call(0, "a", "ls")]}),
        chunk({"tool_calls": [_portkey_call(1, "b", "pwd")]}),
        finish("stop", 11),
        DONE,
    )
    out, rep = run(ChatRepairer, body, REQ)
    assert finish_reasons(events(out)) == ["tool_calls"] and "tool_finish" in rep.fired
    assert out == body.replace(b'"finish_reason":"stop"', b'"finish_reason":"tool_calls"')
    assert run(ChatRepairer, out, REQ)[0] == out
    for cuts in (list(range(0, len(body), 4)), list(range(len(body)))):
        assert run(ChatRepairer, body, REQ, cuts=cuts)[0] == out
    assert run(ChatRepairer, body, REQ, Rules(tool_finish=False))[0] == body


def test_tool_finish_streamed_arguments_and_skimmed_deltas():
    body = sse(header(0, "w1", "write_file"), args(0, '{"path":'), args(0, '"a"}'), finish("stop", 12), DONE)
    evs, _, _ = fix(*events(body))
    assert finish_reasons(evs) == ["tool_calls"]


@pytest.mark.parametrize(
    "objs",
    [
        # content after the last call
        (header(0, args=WHOLE), chunk({"content": "done."}), finish("stop", 12)),
        # a call's arguments that do not parse, or are no object
        (header(0, args=CUT), header(1, "w2", args=WHOLE), finish("stop", 12)),
        (header(0, args="[1]"), finish("stop", 12)),
        # no call at all
        (chunk({"content": "hi"}), finish("stop", 2)),
    ],
    ids=["content-after", "cut-args", "not-object", "no-call"],
)
def test_tool_finish_leaves_stop_alone(objs):
    evs, rep, _ = fix(*objs, DONE, request={"messages": []})
    assert finish_reasons(evs) == ["stop"] and "tool_finish" not in rep.fired


def test_tool_finish_leaves_a_forced_call_alone():
    # the client named the function (tool_choice an object): OpenAI itself finishes stop then
    forced = {"messages": [], "tool_choice": {"type": "function", "function": {"name": "exec_command"}}}
    body = sse(header(0, args=WHOLE), finish("stop", 12), DONE)
    out, rep = run(ChatRepairer, body, forced)
    assert out == body and "tool_finish" not in rep.fired
    obj = completion([call("a", WHOLE)], "stop", 12)
    assert not repair_chat_json(obj, Rules(), FlowContext(request=forced), Verdict())
    assert obj["choices"][0]["finish_reason"] == "stop"


def _cut_verdict():
    return Verdict(resolver=lambda ver: ver.upstream("max_tokens", "finishReason MAX_TOKENS"))


def test_tool_finish_never_against_a_truncation_verdict():
    # the upstream leg says the provider stopped at its cap: rule truncation writes length
    evs, rep, _ = fix(header(0, args=WHOLE), finish("stop", 12), DONE, verdict=_cut_verdict())
    assert finish_reasons(evs) == ["length"] and "tool_finish" not in rep.fired
    evs, rep, _ = fix(header(0, args=WHOLE), finish("stop", 12), DONE, rules=Rules(truncation="off"),
                      verdict=_cut_verdict())  # fmt: skip
    assert finish_reasons(evs) == ["stop"] and "tool_finish" not in rep.fired


def test_json_tool_finish():
    changed, obj = repair_json(completion([call("a", WHOLE), call("b", "{}")], "stop", 12))
    assert changed and obj["choices"][0]["finish_reason"] == "tool_calls"
    assert repair_json(obj)[0] is False  # idempotent
    changed, obj = repair_json(completion([call("a", WHOLE)], "stop", 12), Rules(tool_finish=False))
    assert not changed and obj["choices"][0]["finish_reason"] == "stop"
    changed, obj = repair_json(completion([call("a", CUT), call("b", WHOLE)], "stop", 12))
    assert not changed and obj["choices"][0]["finish_reason"] == "stop"
    changed, obj = repair_json(completion([call("a", WHOLE)], "stop", 12, content="Done."))
    assert obj["choices"][0]["finish_reason"] == "tool_calls"  # (a JSON body: no order of content and calls)
    for truncation, want in (("incomplete", "length"), ("off", "stop")):
        obj = completion([call("a", WHOLE)], "stop", 12)
        v = _cut_verdict()
        v.request(REQ)
        repair_chat_json(obj, Rules(truncation=truncation), FlowContext(request=REQ), v)
        assert obj["choices"][0]["finish_reason"] == want


def test_error_last_withholds_chunks_after_the_upstream_failure():
    """Rule error_last (LiteLLM 1.108.7: its usage chunk follows the finish the upstream leg
    proves failed): the chunk after the error chunk goes out as an SSE comment."""
    usage = chunk(choices=[], usage={"prompt_tokens": 27, "completion_tokens": 5, "total_tokens": 32})
    text = sse(chunk({"content": "Two chunks "}), chunk({"content": "and then nothing"}))
    body = text + sse(chunk(finish="stop"), usage, DONE)

    def verdict():
        return Verdict(resolver=lambda ver: ver.upstream("failed", "OpenAI chat body ended without a finish_reason"))

    out, rep = run(ChatRepairer, body, REQ, verdict=verdict())
    err = (b'data: {"error":{"message":"The upstream provider failed: OpenAI chat body ended without a '
           b'finish_reason.","type":"server_error","param":null,"code":null}}\n\n')  # fmt: skip
    assert out == text + err + b":" + sse(usage) + b": [DONE] withheld: the upstream failed\n\n"
    assert "error_last" in rep.fired
    assert [e for e in events(out) if isinstance(e, dict)][-1]["error"]["type"] == "server_error"
    for cuts in (list(range(0, len(body), 6)), list(range(len(body)))):
        assert run(ChatRepairer, body, REQ, verdict=verdict(), cuts=cuts)[0] == out
    off, rep_off = run(ChatRepairer, body, REQ, Rules(error_last=False), verdict=verdict())
    assert off == text + err + sse(usage) + b": [DONE] withheld: the upstream failed\n\n"
    assert "error_last" not in rep_off.fired


def test_error_last_after_error_finish_and_hidden_failure():
    usage = chunk(choices=[], usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})
    head = sse(chunk({"content": "a"}))
    out, rep = run(ChatRepairer, head + sse(_overloaded(), usage, DONE), REQ)
    withheld = b": [DONE] withheld: the gateway ended the stream with finish_reason 'overloaded_error'\n\n"
    assert out == head + _err("overloaded_error") + b":" + sse(usage) + withheld
    assert {"error_finish", "error_last"} <= set(rep.fired)
    assert run(ChatRepairer, out, REQ)[0] == out
    off, _ = run(ChatRepairer, head + sse(_overloaded(), usage, DONE), REQ, Rules(error_last=False))
    assert off == head + _err("overloaded_error") + sse(usage) + withheld
    out, rep = run(ChatRepairer, head + sse(DONE, usage), REQ)  # (data after the [DONE])
    assert out.endswith(b"data: [DONE]\n\n:" + sse(usage)) and "error_last" in rep.fired
    # a gateway's own error chunk is not this repairer's: what follows it passes
    err = sse({"error": {"message": "boom"}})
    assert run(ChatRepairer, head + err + sse(usage), REQ)[0] == head + err + sse(usage)


def test_error_finish_keeps_what_its_chunk_streamed():
    last = dict(BASE, choices=[{"index": 0, "delta": {"content": "the work"}, "finish_reason": "overloaded_error"}])
    head = sse(chunk({"content": "Starting "}))
    body = head + sse(last, DONE)
    out, rep = run(ChatRepairer, body, REQ)
    kept = dict(BASE, choices=[{"index": 0, "delta": {"content": "the work"}, "finish_reason": None}])
    withheld = b": [DONE] withheld: the gateway ended the stream with finish_reason 'overloaded_error'\n\n"
    assert out == head + sse(kept) + _err("overloaded_error") + withheld
    assert rep.fired["error_finish"] == 2  # the chunk, the [DONE]
    assert run(ChatRepairer, out, REQ)[0] == out
    for cuts in (list(range(0, len(body), 5)), list(range(len(body)))):
        assert run(ChatRepairer, body, REQ, cuts=cuts)[0] == out
