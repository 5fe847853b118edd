"""wire/contract.py: the oracle itself must catch each defect and accept a correct stream."""

import orjson
from streamfix.wire.invariants import check

from streamfix.recordings import load


def sse(*events):
    return b"".join(b"event: %s\ndata: %s\n\n" % (e["type"].encode(), orjson.dumps(e)) for e in events)


def good_responses():
    r = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m", "status": "in_progress", "output": []}
    fc = {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "f", "arguments": ""}
    done_fc = {**fc, "arguments": "{}", "status": "completed"}
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    done_msg = {**msg, "status": "completed", "content": [{"type": "output_text", "text": "hi", "annotations": []}]}
    final = {
        **r,
        "status": "completed",
        "output": [done_msg, done_fc],
        "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
    }
    part = {"type": "output_text", "text": "", "annotations": []}
    evs = [
        {"type": "response.created", "response": r},
        {"type": "response.output_item.added", "output_index": 0, "item": msg},
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": part,
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": "hi",
        },
        {"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0, "text": "hi"},
        {
            "type": "response.content_part.done",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": {**part, "text": "hi"},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done_msg},
        {"type": "response.output_item.added", "output_index": 1, "item": {**fc, "status": "in_progress"}},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_1", "delta": "{}"},
        {"type": "response.output_item.done", "output_index": 1, "item": done_fc},
        {"type": "response.completed", "response": final},
    ]
    for n, e in enumerate(evs):
        e["sequence_number"] = n
    return evs


def test_correct_responses_stream_passes():
    assert check("responses", sse(*good_responses())) == []


def test_each_responses_violation_is_named():
    evs = good_responses()
    evs[6:7] = []  # message never closed before the call is added
    evs[7]["sequence_number"] = 2  # not increasing
    del evs[8]["item"]["status"]  # call done without status
    evs[-1]["response"]["usage"] = {}
    found = check("responses", sse(*evs))
    assert found == [
        "event 6: item.order: item 0 still open when item 1 is added",
        "event 7: response.sequence: sequence_number 2 not above 7",
        "event 8: function_call.status: function_call done with status None",
        "event 9: function_call.status: function_call 'fc_1' in output with status None",  # same dict
        "event 9: terminal.usage: response.completed usage without integer input/output/total tokens",
    ]


def test_cpa_samples_fail_for_their_known_defects():
    """The recordings of CPA's exact output."""
    devin = check("responses", load("responses-devin-toolcall").body)
    assert "event 0: response.fields: response.created without response.created_at" in devin
    assert "event 16: function_call.status: function_call done with status None" in devin
    claude = check("responses", load("responses-claude-text-then-tool").body)
    assert "event 6: item.order: item 0 still open when item 1 is added" in claude
    chat = check("chat", load("chat-devin-truncated-toolcall").body)
    assert chat == [
        "event 5: chat.tool_index: choice 0: tool_calls index 2, expected 0",
        # the call was cut by the budget (its arguments are not JSON) and the finish says tool_calls
        (
            "event 10: terminal.truncated: finish_reason 'tool_calls', but verdict max_tokens (tool_args: last tool "
            "call's arguments (167 chars) are not valid JSON)"
        ),
    ]


def chunk(delta, finish=None):
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_chat():
    head = {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}
    ok = [
        chunk({"tool_calls": [head]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
        chunk({"tool_calls": [{**head, "index": 1, "id": "b"}]}),
        chunk({}, "tool_calls"),
    ]
    body = b"".join(b"data: %s\n\n" % orjson.dumps(c) for c in ok) + b"data: [DONE]\n\n"
    assert check("chat", body) == []
    twice = ok[:1] + ok[:1] + ok[3:]
    assert check("chat", b"".join(b"data: %s\n\n" % orjson.dumps(c) for c in twice) + b"data: [DONE]\n\n") == [
        "event 1: chat.tool_header: choice 0: tool call 0 announces its name again"
    ]


def test_messages():
    evs = [
        {"type": "message_start", "message": {}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    assert check("messages", sse(*evs)) == []
    evs[1]["index"] = 1
    assert "event 1: messages.block_index: content_block_start index 1, expected 0" in check("messages", sse(*evs))


# --- every API's rules fire (wire/contract.py) --------------------------------------

from streamfix.wire import contract


def names(api, body):
    return [(v.rule, v.event) for v in contract.check(api, body)]


def test_messages_rules():
    start = {"type": "message_start", "message": {}}
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}
    stop = {"type": "content_block_stop", "index": 0}
    md = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
    ping = {"type": "ping"}
    assert (
        names("messages", sse(start, ping, block, delta, stop, md, {"type": "message_stop"})) == []
    )  # ping is Anthropic's
    assert names("messages", sse(block, start, {**delta, "index": 1})) == [
        ("messages.start", 0),
        ("messages.block_order", 2),
        ("terminal.present", None),
    ]
    assert names("messages", sse(start, block, md, {"type": "message_stop"}, {"type": "keepalive"})) == [
        ("messages.stop_reason", 2),
        ("sse.nonstandard", 4),
    ]
    assert names("messages", sse(start, {"type": "message_stop"})) == [("messages.stop", 1)]


def test_gemini_rules():
    def chunk(finish=None):
        c = {"content": {"parts": [{"text": "x"}], "role": "model"}, "index": 0}
        return b"data: " + orjson.dumps({"candidates": [c | ({"finishReason": finish} if finish else {})]}) + b"\n\n"

    assert names("gemini", chunk() + chunk("STOP")) == []
    assert names("gemini", chunk() + chunk()) == [("terminal.present", None)]
    assert names("gemini", chunk("STOP") + chunk()) == [("gemini.finish", 1)]
    assert names("gemini", chunk() + b'data: {"error": {"code": 500}}\n\n') == []


def test_chat_rules():
    head = {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}
    body = b"".join(
        b"data: %s\n\n" % orjson.dumps(c)
        for c in [
            chunk({"content": "a"}),
            chunk({"tool_calls": [{**head, "function": {"arguments": "{}"}}]}),
            chunk({}, "stop"),
            chunk({"content": "late"}),
            chunk({}, "stop"),
        ]
    )
    assert names("chat", body) == [
        ("chat.tool_name", 1),
        ("chat.tool_finish", 2),  # 'stop' right after a whole call
        ("chat.finish_once", 3),
        ("chat.finish_once", 4),
        ("chat.done", None),  # finished, no [DONE]
    ]
    assert names("chat", b"data: %s\n\n" % orjson.dumps(chunk({"content": "a"}))) == [("terminal.present", None)]
    # [DONE] with no finish_reason: the upstream never finished (a failure reported as success)
    assert names("chat", b"data: %s\n\ndata: [DONE]\n\n" % orjson.dumps(chunk({"content": "a"}))) == [
        ("terminal.hidden_failure", 1)
    ]
    err = b'data: {"error":{"message":"x"}}\n\n'
    assert names("chat", b"data: %s\n\n%sdata: [DONE]\n\n" % (orjson.dumps(chunk({"content": "a"})), err)) == []
    assert names("chat", b"event: ping\n\n: comment\n\ndata: \n\nretry: 5\n\n") == [
        ("sse.nonstandard", 0),
        ("sse.empty_data", 1),
        ("terminal.present", None),
    ]


def test_sse_framing_and_bounds():
    assert ("sse.unterminated", 0) in names("chat", b'data: {"choices":[]}')
    assert ("sse.not_json", 0) in names("responses", b"data: {nope\n\n")
    many = b'data: {"type":"keepalive"}\n\n' * (contract.MAX_VIOLATIONS + 5)
    c = contract.StreamChecker("responses")
    c.feed(many)
    assert len(c.close()) == contract.MAX_VIOLATIONS and c.dropped == 6  # 205 + terminal.present
    assert set(contract.RULES) >= {v.rule for v in c.violations}


def test_reasons_never_carry_content():
    secret = "SECRET-TEXT-42"
    evs = good_responses()
    evs[3]["delta"] = secret
    evs[3]["item_id"] = "other"  # item.id violation on the delta that carries the text
    evs[4]["text"] = secret
    evs[5]["part"]["text"] = secret
    found = contract.check("responses", sse(*evs) + b"data: " + secret.encode() + b"\n\n")
    assert found and not any(secret in str(v) for v in found)


def test_any_json_value_where_an_id_or_index_goes_never_breaks_the_checker():
    odd = [[1], {"a": 1}, None, 1.5, True]
    for v in odd:
        evs = good_responses()
        for e in evs:
            for k in ("item_id", "output_index", "content_index"):
                if k in e:
                    e[k] = v
        evs[1]["item"]["id"] = v
        evs.append({"type": v, "sequence_number": 99})
        body = sse(*evs[:-1]) + b"data: " + orjson.dumps(evs[-1]) + b"\n\n"
        assert contract.check("responses", body)  # reported, not raised
        chat_body = (
            b"data: " + orjson.dumps({"choices": [{"index": v, "delta": {"tool_calls": [{"index": v}]}}]}) + b"\n\n"
        )
        contract.check("chat", chat_body)


def test_prefix_mode_checks_what_a_cut_stream_can_satisfy():
    """A cut stream's prefix (what a client got when the upstream failed) is held
    to every rule but those only a whole stream satisfies (END_RULES: the terminal at the
    end); its unfinished last event is not judged; every other rule still reports."""
    from streamfix.wire.contract import END_RULES, check

    chunk = (
        b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,'
        b'"delta":{"tool_calls":[{"index":IDX,"id":"call_a","type":"function","function":{"name":"f"}}]}}]}\n\n'
    )
    cut = chunk.replace(b"IDX", b"0") + b'data: {"id":"c","obj'
    assert {v.rule for v in check("chat", cut)} == {"terminal.present", "sse.unterminated", "sse.not_json"}
    assert check("chat", cut, prefix=True) == []
    bad = chunk.replace(b"IDX", b"1") + b'data: {"id"'
    assert [v.rule for v in check("chat", bad, prefix=True)] == ["chat.tool_index"]
    assert END_RULES == {"terminal.present", "chat.done"}
    finished = (
        chunk.replace(b"IDX", b"0") + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    )
    assert [v.rule for v in check("chat", finished)] == ["chat.done"]
    assert check("chat", finished, prefix=True) == []


def test_chat_error_finish_done_tool_finish_error_last():
    def body(*objs):
        return b"".join(b"data: %s\n\n" % (o if isinstance(o, bytes) else orjson.dumps(o)) for o in objs)

    text = chunk({"content": "a"})
    err = {"error": {"message": "x", "type": "server_error"}}
    over = {"choices": [{"finish_reason": "overloaded_error", "delta": {"content": ""}}]}
    assert names("chat", body(text, over, b"[DONE]")) == [("stop.reason", 1), ("chat.error_finish", 1)]
    assert names("chat", body(text, chunk({}, "stop"))) == [("chat.done", None)]
    assert names("chat", body(text, err)) == []  # an error needs no [DONE]
    usage = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    assert names("chat", body(text, err, usage, b"[DONE]")) == [("chat.error_last", 2)]
    call = {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
    calls = chunk({"tool_calls": [call]})
    assert names("chat", body(text, calls, chunk({}, "stop"), b"[DONE]")) == [("chat.tool_finish", 2)]
    assert names("chat", body(text, calls, chunk({}, "tool_calls"), b"[DONE]")) == []
    forced = {"messages": [], "tool_choice": {"type": "function", "function": {"name": "f"}}}
    stopped = body(text, calls, chunk({}, "stop"), b"[DONE]")
    assert contract.check("chat", stopped, request=forced) == []  # OpenAI's own stop for a named function
    assert names("chat", body(calls, text, chunk({}, "stop"), b"[DONE]")) == []  # content after the call
    cut = chunk({"tool_calls": [{**call, "function": {"name": "f", "arguments": '{"x":'}}]})
    assert names("chat", body(cut, chunk({}, "stop"), b"[DONE]")) == [("terminal.truncated", 2)]  # not tool_finish
