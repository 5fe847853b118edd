"""wire/messages.py: truncation and re-sent tool_use headers on Anthropic /v1/messages; recordings."""

from __future__ import annotations

import orjson
import pytest
from repairkit import chunking_property, error_cuts, recordings, repair_recording, run
from streamfix.wire import messages
from streamfix.wire.contract import check
from streamfix.wire.messages import MessagesRepairer, repair_messages_json
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

REQ = {"model": "devin/swe-2", "max_tokens": 400, "stream": True, "messages": []}


def ev(obj, nl=3) -> bytes:
    """One event the way CPA frames it (``nl`` newlines after the data line)."""
    return b"event: " + obj["type"].encode() + b"\ndata: " + orjson.dumps(obj) + b"\n" * nl


START = {
    "type": "message_start",
    "message": {
        "id": "interaction_1",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "devin/swe-2",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    },
}
STOP = {"type": "message_stop"}


def block_start(i, type_="text", **cb):
    base = {
        "text": {"type": "text", "text": ""},
        "thinking": {"type": "thinking", "thinking": ""},
        "tool_use": {"type": "tool_use", "id": "write_file_0#a1", "name": "write_file", "input": {}},
    }[type_]
    return {"type": "content_block_start", "index": i, "content_block": {**base, **cb}}


def text(i, t):
    return {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}}


def part(i, j):
    return {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": j}}


def block_stop(i):
    return {"type": "content_block_stop", "index": i}


def message_delta(reason="tool_use", out=58):
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"input_tokens": 10, "output_tokens": out},
    }


def body(*objs, nl=3):
    return b"".join(o if isinstance(o, bytes) else ev(o, nl) for o in objs)


def datas(out: bytes, loose: bool = False) -> list[dict]:
    """Every data line's JSON; ``loose``: skip the lines that are not JSON (a gateway's
    input can hold a cut one: messages-litellm-glued-ping)."""
    lines = out.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")  # SSE line ends: any
    return [orjson.loads(line[6:]) for line in lines if line.startswith(b"data: ") and (not loose or _parses(line[6:]))]


def _parses(b: bytes) -> bool:
    try:
        orjson.loads(b)
    except orjson.JSONDecodeError:
        return False
    return True


class ErrorEvent(Exception):
    """The stream carried an ``error`` event (the Anthropic SDK raises on one)."""


def assemble(out: bytes) -> dict:
    """A strict Messages client: checks the event grammar and builds the message."""
    msg = None
    open_ = None
    for d in datas(out):
        t = d["type"]
        if t == "error":
            raise ErrorEvent(d["error"].get("message"))
        if t == "message_start":
            msg = dict(d["message"], content=[])
        elif t == "content_block_start":
            assert open_ is None and d["index"] == len(msg["content"]), d
            msg["content"].append(dict(d["content_block"], _json=""))
            open_ = d["index"]
        elif t == "content_block_delta":
            assert d["index"] == open_, d
            b, delta = msg["content"][open_], d["delta"]
            if delta["type"] == "text_delta":
                b["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                b["_json"] += delta["partial_json"]
        elif t == "content_block_stop":
            assert d["index"] == open_, d
            open_ = None
        elif t == "message_delta":
            assert open_ is None
            msg["stop_reason"] = d["delta"]["stop_reason"]
    ids = [b["id"] for b in msg["content"] if b["type"] == "tool_use"]
    assert len(ids) == len(set(ids)), f"duplicate tool_use ids {ids}"
    return msg


def fix(*objs, request=REQ, rules=None, verdict=None):
    out, rep = run(MessagesRepairer, body(*objs), request, rules, verdict)
    return out, rep


CUT = '{"path":"index.html","content":"<!doctype'
WHOLE = '{"path":"a.txt","content":"hi"}'


# --- truncation ------------------------------------------------------------------------------
def test_truncation_sets_max_tokens():
    out, rep = fix(START, block_start(0, "tool_use"), part(0, CUT), block_stop(0), message_delta(out=400), STOP)
    assert assemble(out)["stop_reason"] == "max_tokens"
    assert rep.decision.outcome == "max_tokens" and rep.changed == 1


def test_truncation_off_leaves_tool_use():
    out, rep = fix(
        START,
        block_start(0, "tool_use"),
        part(0, CUT),
        block_stop(0),
        message_delta(out=400),
        STOP,
        rules=Rules(truncation="off"),
    )
    assert assemble(out)["stop_reason"] == "tool_use" and rep.decision.truncated


def test_content_filter_becomes_refusal():
    v = Verdict(resolver=lambda ver: ver.upstream("content_filter", "StopReason 11"))
    out, _ = fix(START, block_start(0), text(0, "I can"), block_stop(0), message_delta("end_turn", 3), STOP, verdict=v)
    assert assemble(out)["stop_reason"] == "refusal"


@pytest.mark.parametrize("reason", ["max_tokens", "refusal", "model_context_window_exceeded"])
def test_native_stop_reasons_left_alone(reason):
    b = body(START, block_start(0), text(0, "a"), block_stop(0), message_delta(reason, 400), STOP)
    out, rep = run(MessagesRepairer, b, REQ)
    assert out == b and rep.decision.native


def test_whole_call_at_cap_stays_tool_use():
    b = body(START, block_start(0, "tool_use"), part(0, WHOLE), block_stop(0), message_delta(out=400), STOP)
    out, rep = run(MessagesRepairer, b, REQ)
    assert out == b and rep.decision.outcome == "complete"


def test_text_at_cap_becomes_max_tokens():
    out, _ = fix(START, block_start(0), text(0, "Once upon"), block_stop(0), message_delta("end_turn", 400), STOP)
    assert assemble(out)["stop_reason"] == "max_tokens"


def test_evidence_reported():
    v, direct = Verdict(), Verdict()
    fix(
        START,
        block_start(0, "thinking"),
        block_stop(0),
        block_start(1),
        text(1, "Hi"),
        block_stop(1),
        block_start(2, "tool_use"),
        part(2, '{"a":'),
        part(2, "1}"),
        block_stop(2),
        message_delta(out=9),
        STOP,
        verdict=v,
    )
    direct.observe_text("Hi")
    direct.observe_args('{"a":')
    direct.observe_args("1}")
    assert v.digest() == direct.digest() and v.last_tool_args == '{"a":1}' and v.output_tokens == 9


# --- tool_header: re-sent tool_use blocks -----------------------------------------------------------
def late_name(name_first="", id_first="write_file_0#a1", id_again="write_file_0#a1"):
    return (
        START,
        block_start(0),
        text(0, "Reading."),
        block_stop(0),
        block_start(1, "tool_use", name=name_first, id=id_first),
        part(1, '{"path":'),
        block_stop(1),
        block_start(2, "tool_use", id=id_again),
        part(2, '"a.txt"}'),
        block_stop(2),
        block_start(3),
        text(3, "Done."),
        block_stop(3),
        message_delta(out=30),
        STOP,
    )


def test_late_name_blocks_are_merged():
    out, rep = fix(*late_name())
    msg = assemble(out)
    assert [b["type"] for b in msg["content"]] == ["text", "tool_use", "text"]
    tool = msg["content"][1]
    assert (tool["id"], tool["name"], tool["_json"]) == ("write_file_0#a1", "write_file", '{"path":"a.txt"}')
    assert rep.changed >= 3


def test_late_name_rule_off_leaves_two_blocks_with_one_id():
    out, _ = fix(*late_name(), rules=Rules(tool_header=False))
    with pytest.raises(AssertionError, match="duplicate tool_use ids"):
        assemble(out)


def test_resent_start_with_same_name_is_merged():
    out, _ = fix(*late_name(name_first="write_file"))
    msg = assemble(out)
    assert len([b for b in msg["content"] if b["type"] == "tool_use"]) == 1


def test_late_name_with_cpa_fallback_id_takes_the_real_id():
    out, _ = fix(*late_name(id_first="toolu_interactions", id_again="write_file_0#z9"))
    tool = assemble(out)["content"][1]
    assert (tool["id"], tool["name"]) == ("write_file_0#z9", "write_file")


def test_a_second_whole_call_with_the_same_id_is_not_merged():
    out, _ = fix(
        START,
        block_start(0, "tool_use"),
        part(0, WHOLE),
        block_stop(0),
        block_start(1, "tool_use"),
        part(1, WHOLE),
        block_stop(1),
        message_delta(out=30),
        STOP,
        rules=Rules(truncation="off"),
    )
    assert datas(out).count(block_start(1, "tool_use")) == 1


def test_a_different_call_is_not_merged():
    objs = (
        START,
        block_start(0, "tool_use"),
        part(0, '{"a":'),
        block_stop(0),
        block_start(1, "tool_use", id="read_file_1#b2", name="read_file"),
        part(1, "{}"),
        block_stop(1),
        message_delta(out=30),
        STOP,
    )
    b = body(*objs)
    out, _ = run(MessagesRepairer, b, REQ, Rules(truncation="off"))
    assert out == b


def test_tool_use_stop_is_held_until_the_next_data_event():
    """Only while the block's input is not whole JSON (a re-sent start may follow)."""
    s = StreamRepair(MessagesRepairer(Rules(), FlowContext(request=REQ), Verdict()))
    s.feed(body(START, block_start(0, "tool_use"), part(0, '{"a":')))
    assert s.feed(body(block_stop(0), nl=2)) == b""
    assert s.feed(b": ping\n\n") == b""
    assert s.feed(body(message_delta(), nl=2)).count(b"data: ") == 2


def test_stop_of_a_whole_call_is_not_held():
    """A call whose input is complete JSON cannot be re-sent: its stop goes out in the
    read that brought it (a held event would be lost if the upstream were cut here)."""
    s = StreamRepair(MessagesRepairer(Rules(), FlowContext(request=REQ), Verdict()))
    s.feed(body(START, block_start(0, "tool_use"), part(0, '{"a":'), part(0, "1}")))
    stop = body(block_stop(0), nl=2)
    assert s.feed(stop) == stop


def test_nameless_start_is_held_until_named():
    s = StreamRepair(MessagesRepairer(Rules(), FlowContext(request=REQ), Verdict()))
    s.feed(body(START))
    assert s.feed(body(block_start(0, "tool_use", name=""), part(0, "{"), block_stop(0))) == b""
    out = s.feed(body(block_start(1, "tool_use"), part(1, "}")))
    assert [d["type"] for d in datas(out)] == ["content_block_start", "content_block_delta", "content_block_delta"]
    assert datas(out)[0]["content_block"]["name"] == "write_file"


def test_nameless_start_hold_is_bounded_and_loses_nothing():
    many = [text(0, "x")] * (messages.HOLD_LIMIT + 3)
    s = StreamRepair(MessagesRepairer(Rules(), FlowContext(request=REQ), Verdict()))
    out = s.feed(body(block_start(0, "tool_use", name=""), *many))
    assert out.count(b"data: ") == messages.HOLD_LIMIT + 4
    assert s.repairer.held == []


def test_name_never_arriving_is_released_at_message_delta():
    out, rep = fix(START, block_start(0, "tool_use", name=""), part(0, "{}"), block_stop(0), message_delta(out=3), STOP)
    assert assemble(out)["content"][0]["name"] == ""
    assert any("never arrived" in n for n in rep.notes)


# --- framing, errors, passthrough ------------------------------------------------------------------
def test_three_newline_framing_is_kept():
    b = body(START, block_start(0), text(0, "a"), block_stop(0), message_delta("end_turn", 400), STOP)
    out, _ = run(MessagesRepairer, b, REQ)
    assert out.count(b"\n\n\n") == b.count(b"\n\n\n") == 6
    assert out.replace(b"max_tokens", b"end_turn") == b


def test_error_passes_and_nothing_is_synthesized():
    err = {"type": "error", "error": {"type": "api_error", "message": "stream_truncated"}}
    b = body(START, block_start(0, "tool_use", name=""), part(0, "{"), err)
    out, _rep = run(MessagesRepairer, b, REQ)
    assert out == b
    assert [d["type"] for d in datas(out)][-1] == "error"
    assert not any(d["type"] in ("message_delta", "message_stop") for d in datas(out))


def test_stream_without_message_stop_ends_with_an_error_event():
    """Rule eof_terminal: a Messages stream that stops without message_stop (nor an error)
    ends with an error event, as Anthropic ends one that fails; off: as it came."""
    b = body(START, block_start(0), text(0, "part"))
    out, rep = run(MessagesRepairer, b, REQ)
    assert out == b + (b'event: error\ndata: {"type":"error","error":{"type":"api_error",'
                       b'"message":"The upstream stream ended without a stop_reason."}}\n\n')  # fmt: skip
    assert rep.fired == {"eof_terminal": 1} and any("without message_stop" in n for n in rep.notes)
    out, rep = run(MessagesRepairer, b, REQ, rules=Rules(eof_terminal=False))
    assert out == b and any("without message_delta" in n for n in rep.notes)


def test_comments_bad_json_pass_raw():
    b = b": hi\n\nevent: content_block_delta\ndata: {nope\n\ndata: [DONE]\n\n"
    out, rep = run(MessagesRepairer, b, REQ)
    assert out == b and rep.changed == 0


# --- non-stream ---------------------------------------------------------------------------------
def message(content, stop_reason="tool_use", out=58):
    return {
        "id": "interaction_1",
        "type": "message",
        "role": "assistant",
        "model": "devin/swe-2",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": out},
    }


def repair_json(obj, rules=None, request=REQ):
    v = Verdict()
    v.request(request)
    return repair_messages_json(obj, rules or Rules(), FlowContext(request=request), v), obj


def tool(id_):
    return {"type": "tool_use", "id": id_, "name": "f", "input": {}}


def test_json_usage_at_cap_is_max_tokens_even_with_a_tool_use():
    changed, obj = repair_json(message([tool("w")], out=400))
    assert changed and obj["stop_reason"] == "max_tokens"


def test_json_truncation_off_and_below_cap():
    assert repair_json(message([tool("w")], out=400), Rules(truncation="off"))[0] is False
    assert repair_json(message([tool("w")], out=12))[0] is False


def test_json_native_left_alone():
    assert repair_json(message([{"type": "text", "text": "x"}], "max_tokens", 400))[0] is False


def test_json_duplicate_fallback_ids():
    changed, obj = repair_json(
        message([{"type": "text", "text": "x"}, tool("toolu_interactions"), tool("toolu_interactions")], out=3)
    )
    assert changed
    assert [b["id"] for b in obj["content"] if b["type"] == "tool_use"] == ["toolu_interactions", "toolu_1"]
    changed, _ = repair_json(
        message([tool("toolu_interactions"), tool("toolu_interactions")], out=3), Rules(tool_index=False)
    )
    assert not changed


def test_json_not_a_message():
    assert repair_json({"type": "error", "error": {}})[0] is False


# --- recordings -----------------------------------------------------------------------------------
MSG = recordings("messages")
NAMES = [r.name for r in MSG]


def test_the_recordings_are_there():
    assert {"messages-devin-truncated", "messages-clean"} <= set(NAMES)


@pytest.mark.parametrize("rec", MSG, ids=NAMES)
def test_recording_repaired_is_expected(rec):
    out = repair_recording(rec, MessagesRepairer, repair_messages_json)
    assert out == rec.expected
    assert (out == rec.body) == (rec.kind == "clean")
    if b"event: error" in out:  # messages-empty-stream: the failure a client sees
        with pytest.raises(ErrorEvent):
            assemble(out)
    else:
        assemble(out)


@pytest.mark.parametrize("rec", MSG, ids=NAMES)
def test_recording_repair_is_idempotent(rec):
    once = repair_recording(rec, MessagesRepairer, repair_messages_json)
    assert repair_recording(rec, MessagesRepairer, repair_messages_json, body=once) == once


@pytest.mark.parametrize("rec", MSG, ids=NAMES)
def test_recording_any_chunking(rec):
    chunking_property(rec, MessagesRepairer, repair_messages_json)()


@pytest.mark.parametrize("rec", [r for r in MSG if r.streaming], ids=lambda r: r.name)
def test_no_error_stream_becomes_success(rec):
    err = b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"stream_truncated"}}\n\n'
    error_cuts(
        rec,
        MessagesRepairer,
        err,
        lambda b: sum(d["type"] in ("message_delta", "message_stop") for d in datas(b, True)),
    )


def test_fail_open_when_the_verdict_raises_loses_and_duplicates_nothing():
    def boom(ver):
        raise RuntimeError("resolver down")

    b = body(START, block_start(0, "tool_use", name=""), part(0, "{}"), block_stop(0), message_delta(), STOP)
    for cut in range(0, len(b), 11):
        s = StreamRepair(MessagesRepairer(Rules(), FlowContext(request=REQ), Verdict(resolver=boom)))
        out = s.feed(b[:cut]) + s.feed(b[cut:]) + s.close()
        assert isinstance(s.error, RuntimeError)
        assert out == b


# --- rule block_order: LiteLLM's bridge starts block 1 before it stops block 0 -------------------
LATE_STOP0 = b": content_block_stop 0 withheld: sent before block 1 started\n\n"


def early_tool(reason="tool_use"):
    """LiteLLM's shape (before 1.108.7): tool_use block 1 starts while text block 0 is open,
    then stop 1, then stop 0."""
    return (
        START,
        block_start(0),
        text(0, "Let me look."),
        block_start(1, "tool_use", id="toolu_1", name="exec_command"),
        part(1, '{"cmd":'),
        part(1, '"ls"}'),
        block_stop(1),
        block_stop(0),
        message_delta(reason),
        STOP,
    )


def test_block_order_stops_the_open_block_before_the_next_starts():
    out, rep = fix(*early_tool())
    msg = assemble(out)  # the strict client: one block open at a time
    assert [b["type"] for b in msg["content"]] == ["text", "tool_use"]
    assert msg["content"][0]["text"] == "Let me look." and msg["content"][1]["_json"] == '{"cmd":"ls"}'
    ds = datas(out)
    assert [(d["type"], d.get("index")) for d in ds[1:6]] == [
        ("content_block_start", 0),
        ("content_block_delta", 0),
        ("content_block_stop", 0),
        ("content_block_start", 1),
        ("content_block_delta", 1),
    ]
    assert sum(d["type"] == "content_block_stop" for d in ds) == 2
    assert LATE_STOP0 in out  # the gateway's own late stop, withheld as a comment
    assert rep.fired["block_order"] == 2  # the stop sent early, the late one withheld
    assert not [v for v in check("messages", out) if v.rule == "messages.block_order"]


@pytest.mark.parametrize("reason", ["tool_use", "max_tokens"])
def test_block_order_off_passes_the_order_as_it_came(reason):
    b = body(*early_tool(reason))
    out, rep = run(MessagesRepairer, b, REQ, Rules(block_order=False))
    assert out == b
    assert "block_order" not in rep.fired
    assert [v for v in check("messages", out) if v.rule == "messages.block_order"]


def test_block_order_max_tokens_turn_keeps_its_stop_reason():
    out, _ = fix(*early_tool("max_tokens"))
    assert assemble(out)["stop_reason"] == "max_tokens"
    assert LATE_STOP0 in out


def test_block_order_any_byte_split_and_idempotent():
    b = body(*early_tool())
    whole, _ = run(MessagesRepairer, b, REQ)
    for step in (1, 7, 40):
        assert run(MessagesRepairer, b, REQ, cuts=list(range(0, len(b), step)))[0] == whole
    assert run(MessagesRepairer, whole, REQ)[0] == whole


def test_block_order_a_delta_for_a_closed_block_passes_as_it_came():
    objs = list(early_tool())
    late = text(0, " more")
    objs.insert(5, late)  # a text delta for block 0 after block 1 started (and 0 was stopped)
    out, rep = fix(*objs)
    assert ev(late) in out  # kept: dropping it would lose the model's output
    assert any("after its stop" in n for n in rep.notes)
    assert LATE_STOP0 in out


def test_block_order_leaves_a_correct_order_and_held_tool_stops_alone():
    b = body(
        START,
        block_start(0),
        text(0, "a"),
        block_stop(0),
        block_start(1, "tool_use"),
        part(1, WHOLE),
        block_stop(1),
        message_delta(),
        STOP,
    )
    out, rep = run(MessagesRepairer, b, REQ)
    assert out == b and "block_order" not in rep.fired
    # a re-sent tool_use header (rule tool_header) is still merged: its stop never counts as the open block's
    lb = body(*late_name())
    assert run(MessagesRepairer, lb, REQ)[0] == run(MessagesRepairer, lb, REQ, Rules(block_order=False))[0]


# --- rule glued_event: LiteLLM's ping written onto a cut provider line -----------------------
GLUED = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
    b'"content":[],"model":"x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":4,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Two "}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","in\n'
    b'event: ping\ndata: {"type": "ping"}\n\n'
    b'event: error\ndata: {"type": "error", "error": {"type": "api_error", "message": "cut"}}\n\n'
)
UNGLUED_HALF = b':event: content_block_delta\n:data: {"type":"content_block_delta","in\n\nevent: ping\n'


def test_glued_event_splits_the_half_off_as_a_comment():
    out, rep = run(MessagesRepairer, GLUED, REQ)
    assert out == GLUED.replace(
        b'event: content_block_delta\ndata: {"type":"content_block_delta","in\nevent: ping\n', UNGLUED_HALF
    )
    assert rep.fired["glued_event"] == 1
    assert not check("messages", out)
    with pytest.raises(ErrorEvent):  # the gateway's error event still tells the failure
        assemble(out)


def test_glued_event_off_passes_it_and_the_contract_flags_it():
    out, rep = run(MessagesRepairer, GLUED, REQ, Rules(glued_event=False))
    assert out == GLUED
    assert "glued_event" not in rep.fired
    assert "sse.glued" in {v.rule for v in check("messages", out)}


def test_glued_event_any_byte_split_and_idempotent():
    whole, _ = run(MessagesRepairer, GLUED, REQ)
    for step in (1, 5, 33):
        assert run(MessagesRepairer, GLUED, REQ, cuts=list(range(0, len(GLUED), step)))[0] == whole
    assert run(MessagesRepairer, whole, REQ)[0] == whole


def test_glued_event_leaves_other_bad_json_and_valid_events_alone():
    bad = b'event: content_block_delta\ndata: {"type":"content_block_delta","in\n\n'  # cut, but not glued
    two_data = b'event: ping\ndata: {"type":\ndata: "ping"}\n\n'  # valid JSON over two data lines
    for extra in (bad, two_data):
        b = GLUED.split(b'event: content_block_delta\ndata: {"type":"content_block_delta","in')[0] + extra
        out, rep = run(MessagesRepairer, b, REQ)
        assert "glued_event" not in rep.fired
        assert extra in out


def test_glued_event_glued_twice_is_split_twice():
    b = GLUED.replace(b'data: {"type": "ping"}\n\n', b'data: {"type": "pi\nevent: ping\ndata: {"type": "ping"}\n\n')
    out, rep = run(MessagesRepairer, b, REQ)
    assert rep.fired["glued_event"] == 2
    assert not check("messages", out)


def test_block_order_never_fires_on_a_merged_resent_header():
    """Rule tool_header's held stop and dropped re-sent start: the merged block stays the
    open one, so the text block after it starts with nothing open."""
    b = body(*late_name(), nl=2)
    out, rep = run(MessagesRepairer, b, REQ)
    assert "block_order" not in rep.fired
    assemble(out)
