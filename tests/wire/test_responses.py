"""wire/responses.py: one test per repair rule (each also run with the rule off, where the
defect must remain), the recordings against their hand-checked expected bodies, byte
identity of clean streams, idempotence, chunking, fail-open and failure handling.

Two client views are used as oracles besides ``wire.invariants``: ``aisdk_problems`` (the
required fields of ``@ai-sdk/openai`` 4.0.118's ``openaiResponsesChunkSchema`` for the
modeled event types, transcribed from its source) and openai-python's own
``ResponseStreamState`` (the ``responses.stream()`` accumulator), run offline.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import streamfix.wire.sse as sse_mod
import streamfix.wire.stream as stream_mod
from hypothesis import given, settings
from hypothesis import strategies as st
from streamfix.wire import response_base
from streamfix.wire.invariants import check, json_events
from streamfix.wire.response_usage import fix_usage
from streamfix.wire.responses import (
    ResponsesRepairer,
    repair_responses_body,
    repair_responses_json,
)
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair, repair_body
from streamfix.wire.verdict import Verdict
from support import pure_only

from streamfix.recordings import Recording, all_recordings

STARTED = 1789012400
RECORDINGS = [r for r in all_recordings() if r.api == "responses"]
STREAMED = [r for r in RECORDINGS if r.streaming]


# --- helpers ----------------------------------------------------------------------------


def sse(*events: dict[str, Any], named: bool = True) -> bytes:
    out = []
    for e in events:
        head = f"event: {e['type']}\n".encode() if named else b""
        out.append(head + b"data: " + orjson.dumps(e) + b"\n\n")
    return b"".join(out)


parse = json_events


SNIPPET = Rules(eof_terminal=False)
"""For a stream cut short on purpose (a snippet): no failure terminal appended at its end."""


def run(
    body: bytes,
    rules: Rules = Rules(),
    request: dict | None = None,
    verdict: Verdict | None = None,
    model: str | None = "devin/swe-2",
) -> tuple[bytes, ResponsesRepairer]:
    r = ResponsesRepairer(rules, FlowContext(model=model, started_at=STARTED, request=request), verdict or Verdict())
    out, err = repair_body(r, body)
    assert err is None, err
    return out, r


def types(body: bytes) -> list[str]:
    return [e["type"] for e in parse(body)]


def rec_ctx(rec: Recording) -> FlowContext:
    body = rec.request.get("body", {})
    return FlowContext(model=body.get("model"), started_at=rec.meta.get("started_at", STARTED), request=body)


def repair_recording(rec: Recording, body: bytes | None = None, rules: Rules = Rules()) -> bytes:
    body = rec.body if body is None else body
    if not rec.streaming:
        return repair_responses_body(body, rules, rec_ctx(rec), Verdict())[0]
    out, err = repair_body(ResponsesRepairer(rules, rec_ctx(rec), Verdict()), body)
    assert err is None
    return out


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _nullish_num(v: Any) -> bool:
    return v is None or _num(v)


def aisdk_problems(body: bytes) -> list[str]:
    """Events @ai-sdk/openai 4.0.118 would reject ("Known response chunk failed schema
    validation"): the required fields of its modeled chunk types, plus the strictest
    intersection of what the clients require (non-null integer usage with total_tokens, call status)."""
    bad = []
    for n, e in enumerate(parse(body)):
        t = e.get("type")
        where = f"event {n} ({t})"
        r = e.get("response") if isinstance(e.get("response"), dict) else {}
        if t in ("response.created", "response.in_progress"):
            if not isinstance(r.get("id"), str) or not _num(r.get("created_at")) or not isinstance(r.get("model"), str):
                bad.append(f"{where}: response.id/created_at/model")
        elif t in ("response.output_item.added", "response.output_item.done"):
            item = e.get("item") or {}
            if not _num(e.get("output_index")):
                bad.append(f"{where}: output_index")
            if not isinstance(item.get("id"), str):
                bad.append(f"{where}: item.id")
            if item.get("type") == "function_call":
                for k in ("call_id", "name", "arguments"):
                    if not isinstance(item.get(k), str):
                        bad.append(f"{where}: item.{k}")
                if t.endswith("done") and item.get("status") != "completed":
                    bad.append(f"{where}: function_call status {item.get('status')!r}")
        elif t == "response.output_text.delta":
            if not isinstance(e.get("item_id"), str) or not isinstance(e.get("delta"), str):
                bad.append(f"{where}: item_id/delta")
        elif t in ("response.function_call_arguments.delta", "response.function_call_arguments.done"):
            key = "delta" if t.endswith("delta") else "arguments"
            if (
                not isinstance(e.get("item_id"), str)
                or not _num(e.get("output_index"))
                or not isinstance(e.get(key), str)
            ):
                bad.append(f"{where}: item_id/output_index/{key}")
        elif t in (
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_part.done",
            "response.reasoning_summary_text.delta",
        ):
            if not isinstance(e.get("item_id"), str) or not _num(e.get("summary_index")):
                bad.append(f"{where}: item_id/summary_index")
        elif t in ("response.completed", "response.incomplete"):
            u = r.get("usage")
            if not isinstance(u, dict) or not all(
                type(u.get(k)) is int for k in ("input_tokens", "output_tokens", "total_tokens")
            ):
                bad.append(f"{where}: usage {u!r}")
            elif any(
                not _nullish_num(v)
                for k, d in u.items()
                if k.endswith("_details") and isinstance(d, dict)
                for v in d.values()
                if not isinstance(v, dict)
            ):
                bad.append(f"{where}: usage details")
            d = r.get("incomplete_details")
            if d is not None and not isinstance((d or {}).get("reason"), str):
                bad.append(f"{where}: incomplete_details")
        elif t in ("response.failed", "error") and not _num(e.get("sequence_number")):
            bad.append(f"{where}: sequence_number")
    return bad


def openai_python_final(body: bytes):
    """Feed the stream to openai-python's responses.stream() accumulator; the final
    response (None without response.completed). Raises what the helper raises."""
    from openai._models import construct_type
    from openai._types import omit
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    state = ResponseStreamState(input_tools=omit, text_format=omit)
    for obj in parse(body):
        state.handle_event(construct_type(type_=ResponseStreamEvent, value=obj))
    return state._completed_response


# minimal streams in the shapes of unfixed CPA's Devin path (as the recordings have them)
def created(rid="interaction_1", **extra):
    return {
        "type": "response.created",
        "response": {
            "id": rid,
            "object": "response",
            "status": "in_progress",
            "model": "devin/swe-2",
            "output": [],
            **extra,
        },
        "sequence_number": 1,
    }


def fc_added(idx, cid, seq, **extra):
    return {
        "type": "response.output_item.added",
        "output_index": idx,
        "item": {"id": cid, "type": "function_call", "call_id": cid, "name": "f", "arguments": "", **extra},
        "sequence_number": seq,
    }


def args_delta(idx, cid, delta, seq):
    return {
        "type": "response.function_call_arguments.delta",
        "output_index": idx,
        "item_id": cid,
        "delta": delta,
        "sequence_number": seq,
    }


def args_done(idx, cid, args, seq):
    return {
        "type": "response.function_call_arguments.done",
        "output_index": idx,
        "item_id": cid,
        "arguments": args,
        "sequence_number": seq,
    }


def fc_done(idx, cid, args, seq, **extra):
    return {
        "type": "response.output_item.done",
        "output_index": idx,
        "item": {"id": cid, "type": "function_call", "call_id": cid, "name": "f", "arguments": args, **extra},
        "sequence_number": seq,
    }


def fc_item(cid, args, **extra):
    return {"id": cid, "type": "function_call", "call_id": cid, "name": "f", "arguments": args, **extra}


USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


def completed(output, seq, usage=USAGE, rid="interaction_1", typ="response.completed", **extra):
    return {
        "type": typ,
        "response": {
            "id": rid,
            "object": "response",
            "status": "completed",
            "model": "devin/swe-2",
            "created_at": STARTED,
            "output": output,
            "usage": usage,
            **extra,
        },
        "sequence_number": seq,
    }


def one_call(**done_extra) -> bytes:
    return sse(
        created(created_at=STARTED),
        fc_added(0, "c1", 2),
        args_delta(0, "c1", '{"a":1}', 3),
        args_done(0, "c1", '{"a":1}', 4),
        fc_done(0, "c1", '{"a":1}', 5, **done_extra),
        completed([fc_item("c1", '{"a":1}', **done_extra)], 6),
    )


def msg_added(idx, mid, seq):
    return {
        "type": "response.output_item.added",
        "sequence_number": seq,
        "output_index": idx,
        "item": {"id": mid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
    }


def part_added(idx, mid, seq):
    return {
        "type": "response.content_part.added",
        "sequence_number": seq,
        "item_id": mid,
        "output_index": idx,
        "content_index": 0,
        "part": {"type": "output_text", "annotations": [], "text": ""},
    }


def text_delta(idx, mid, delta, seq):
    return {
        "type": "response.output_text.delta",
        "sequence_number": seq,
        "item_id": mid,
        "output_index": idx,
        "content_index": 0,
        "delta": delta,
    }


# --- rule 1: status -----------------------------------------------------------------------


def test_status_filled_on_added_done_and_terminal_output():
    out, _ = run(one_call())
    evs = parse(out)
    assert evs[1]["item"]["status"] == "in_progress"
    assert evs[4]["item"]["status"] == "completed"
    assert evs[5]["response"]["output"][0]["status"] == "completed"
    # the events that needed nothing are untouched
    assert out.count(b'"status":"in_progress"') == 2  # created + the call


def test_status_off_leaves_the_defect():
    out, _ = run(one_call(), Rules(status=False))
    evs = parse(out)
    assert "status" not in evs[1]["item"] and "status" not in evs[4]["item"]
    assert "status" not in evs[5]["response"]["output"][0]
    assert any("status" in p for p in aisdk_problems(out))


def test_existing_status_left_alone():
    body = one_call(status="incomplete")
    out, _ = run(body)
    evs = parse(out)
    assert evs[4]["item"]["status"] == "incomplete"
    assert evs[5]["response"]["output"][0]["status"] == "incomplete"
    # only the added event (no status) changed
    assert sum(1 for a, b in zip(body.split(b"\n\n"), out.split(b"\n\n")) if a != b) == 1


# --- rule 2: item_order -------------------------------------------------------------------


def claude_late_close(rules: Rules = Rules()) -> bytes:
    body = sse(
        {
            "type": "response.created",
            "sequence_number": 1,
            "response": {"id": "r", "object": "response", "created_at": 1, "model": "m", "status": "in_progress"},
        },
        msg_added(0, "m0", 2),
        part_added(0, "m0", 3),
        text_delta(0, "m0", "Hello", 4),
        text_delta(0, "m0", " there", 5),
        {
            "type": "response.output_item.added",
            "sequence_number": 6,
            "output_index": 1,
            "item": {
                "id": "fc1",
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": "c1",
                "name": "f",
            },
        },
        {
            "type": "response.function_call_arguments.delta",
            "sequence_number": 7,
            "item_id": "fc1",
            "output_index": 1,
            "delta": "{}",
        },
        {
            "type": "response.function_call_arguments.done",
            "sequence_number": 8,
            "item_id": "fc1",
            "output_index": 1,
            "arguments": "{}",
        },
        {
            "type": "response.output_item.done",
            "sequence_number": 9,
            "output_index": 1,
            "item": {
                "id": "fc1",
                "type": "function_call",
                "status": "completed",
                "arguments": "{}",
                "call_id": "c1",
                "name": "f",
            },
        },
        {
            "type": "response.output_text.done",
            "sequence_number": 10,
            "item_id": "m0",
            "output_index": 0,
            "content_index": 0,
            "text": "Hello there",
            "logprobs": [],
        },
        {
            "type": "response.content_part.done",
            "sequence_number": 11,
            "item_id": "m0",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "annotations": [], "text": "Hello there"},
        },
        {
            "type": "response.output_item.done",
            "sequence_number": 12,
            "output_index": 0,
            "item": {
                "id": "m0",
                "type": "message",
                "status": "completed",
                "content": [{"type": "output_text", "annotations": [], "text": "Hello there"}],
                "role": "assistant",
            },
        },
        {
            "type": "response.completed",
            "sequence_number": 13,
            "response": {
                "id": "r",
                "object": "response",
                "created_at": 1,
                "model": "m",
                "status": "completed",
                "output": [
                    {
                        "id": "m0",
                        "type": "message",
                        "status": "completed",
                        "content": [{"type": "output_text", "annotations": [], "text": "Hello there"}],
                        "role": "assistant",
                    },
                    {
                        "id": "fc1",
                        "type": "function_call",
                        "status": "completed",
                        "arguments": "{}",
                        "call_id": "c1",
                        "name": "f",
                    },
                ],
                "usage": USAGE,
            },
        },
    )
    return run(body, rules, model="m")[0]


def test_item_order_closes_message_before_next_item():
    out = claude_late_close()
    evs = parse(out)
    assert [e["type"] for e in evs][5:10] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
    ]
    assert evs[5]["text"] == "Hello there"
    assert evs[6]["part"] == {"type": "output_text", "annotations": [], "text": "Hello there"}
    assert evs[7]["item"]["status"] == "completed"
    assert evs[7]["item"]["content"] == [{"type": "output_text", "annotations": [], "text": "Hello there"}]
    # the late closes are gone: one close of each kind for the message
    assert sum(1 for e in evs if e["type"] == "response.output_text.done") == 1
    assert len(evs) == 13
    assert check("responses", out) == []


def test_item_order_off_leaves_the_defect():
    out = claude_late_close(Rules(item_order=False))
    assert any("still open" in p for p in check("responses", out))


def two_calls() -> bytes:
    """Devin path: call 1 still open when call 2 is added; both closed at the end."""
    return sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2),
        args_delta(0, "a", '{"x":', 3),
        args_delta(0, "a", "1}", 4),
        fc_added(1, "b", 5),
        args_delta(1, "b", "{}", 6),
        args_done(0, "a", '{"x":1}', 7),
        fc_done(0, "a", '{"x":1}', 8),
        args_done(1, "b", "{}", 9),
        fc_done(1, "b", "{}", 10),
        completed([fc_item("a", '{"x":1}'), fc_item("b", "{}")], 11),
    )


def test_item_order_devin_overlapping_calls():
    out, rep = run(two_calls())
    evs = parse(out)
    assert [(e["type"], e.get("output_index")) for e in evs[1:11]] == [
        ("response.output_item.added", 0),
        ("response.function_call_arguments.delta", 0),
        ("response.function_call_arguments.delta", 0),
        ("response.function_call_arguments.done", 0),
        ("response.output_item.done", 0),  # synthesized
        ("response.output_item.added", 1),
        ("response.function_call_arguments.delta", 1),
        ("response.function_call_arguments.done", 1),
        ("response.output_item.done", 1),
        ("response.completed", None),
    ]
    assert evs[4]["arguments"] == '{"x":1}'
    assert evs[5]["item"]["arguments"] == '{"x":1}' and evs[5]["item"]["status"] == "completed"
    assert check("responses", out) == []
    assert any("closed an open item" in n for n in rep.notes)
    off, _ = run(two_calls(), Rules(item_order=False))
    assert any("still open" in p for p in check("responses", off))


def test_item_order_closes_reasoning_with_streamed_summary():
    body = sse(
        created(created_at=STARTED),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {
                "id": "item_0",
                "type": "reasoning",
                "status": "in_progress",
                "encrypted_content": "",
                "summary": [],
            },
            "sequence_number": 2,
        },
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "Think", "sequence_number": 3},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "ing.", "sequence_number": 4},
        msg_added(1, "item_1", 5),
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"id": "item_0", "type": "reasoning", "encrypted_content": "", "summary": []},
            "sequence_number": 6,
        },
    )
    out, _ = run(body, SNIPPET)
    evs = parse(out)
    assert evs[4] == {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {
            "id": "item_0",
            "type": "reasoning",
            "status": "completed",
            "encrypted_content": "",
            "summary": [{"type": "summary_text", "text": "Thinking."}],
        },
        "sequence_number": 5,
    }
    assert evs[5]["type"] == "response.output_item.added" and evs[5]["sequence_number"] == 6
    assert len(evs) == 6  # the late reasoning done is dropped
    off, _ = run(body, Rules(item_order=False))
    assert types(off)[4] == "response.output_item.added"


def test_open_items_closed_before_terminal():
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2),
        args_delta(0, "a", "{}", 3),
        completed([fc_item("a", "{}")], 4),
    )
    out, _ = run(body)
    assert types(out) == [
        "response.created",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert parse(out)[5]["sequence_number"] == 6
    assert check("responses", out) == []
    off, _ = run(body, Rules(item_order=False))
    assert "response.output_item.done" not in types(off)


def test_delta_after_close_dropped_with_note():
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2),
        args_delta(0, "a", "{}", 3),
        fc_added(1, "b", 4),
        args_delta(0, "a", "late", 5),
        args_delta(1, "b", "{}", 6),
    )
    out, rep = run(body)
    assert b'"late"' not in out
    assert any("dropped response.function_call_arguments.delta" in n for n in rep.notes)
    off, _ = run(body, Rules(item_order=False))
    assert b'"late"' in off


def msg_done_events(idx, mid, text, seq):
    """The gateway's closes of a message: output_text.done, content_part.done, output_item.done."""
    part = {"type": "output_text", "annotations": [], "text": text}
    return (
        {
            "type": "response.output_text.done",
            "sequence_number": seq,
            "item_id": mid,
            "output_index": idx,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        },
        {
            "type": "response.content_part.done",
            "sequence_number": seq + 1,
            "item_id": mid,
            "output_index": idx,
            "content_index": 0,
            "part": part,
        },
        {
            "type": "response.output_item.done",
            "sequence_number": seq + 2,
            "output_index": idx,
            "item": {"id": mid, "type": "message", "status": "completed", "content": [part], "role": "assistant"},
        },
    )


def claude_fc(idx, fid, seq):
    """A Claude-path function call, added and closed by the gateway (4 events)."""
    item = {"id": fid, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": fid, "name": "f"}
    return (
        {"type": "response.output_item.added", "sequence_number": seq, "output_index": idx, "item": item},
        {
            "type": "response.function_call_arguments.delta",
            "sequence_number": seq + 1,
            "item_id": fid,
            "output_index": idx,
            "delta": "{}",
        },
        {
            "type": "response.function_call_arguments.done",
            "sequence_number": seq + 2,
            "item_id": fid,
            "output_index": idx,
            "arguments": "{}",
        },
        {
            "type": "response.output_item.done",
            "sequence_number": seq + 3,
            "output_index": idx,
            "item": {**item, "status": "completed", "arguments": "{}"},
        },
    )


def claude_text_tool_text(*, gateway_closes: bool = True, terminal_output: bool = True) -> bytes:
    """CPA v7.1.64..v7.2.89 for Claude text(0) tool_use(1) text(2): the second text streams into
    message m0 (index 0) after the call; its closes and the terminal carry both texts."""
    full = "Hello there. More text."
    tail = msg_done_events(0, "m0", full, 12) if gateway_closes else ()
    seq = 15 if gateway_closes else 12
    return sse(
        {
            "type": "response.created",
            "sequence_number": 1,
            "response": {"id": "r", "object": "response", "created_at": 1, "model": "m", "status": "in_progress"},
        },
        msg_added(0, "m0", 2),
        part_added(0, "m0", 3),
        text_delta(0, "m0", "Hello", 4),
        text_delta(0, "m0", " there.", 5),
        *claude_fc(1, "fc1", 6),
        text_delta(0, "m0", " More", 10),
        text_delta(0, "m0", " text.", 11),
        *tail,
        {
            "type": "response.completed",
            "sequence_number": seq,
            "response": {
                "id": "r",
                "object": "response",
                "created_at": 1,
                "model": "m",
                "status": "completed",
                "output": [
                    {
                        "id": "m0",
                        "type": "message",
                        "status": "completed",
                        "content": [{"type": "output_text", "annotations": [], "text": full}],
                        "role": "assistant",
                    },
                    {
                        "id": "fc1",
                        "type": "function_call",
                        "status": "completed",
                        "arguments": "{}",
                        "call_id": "fc1",
                        "name": "f",
                    },
                ]
                if terminal_output
                else [],
                "usage": USAGE,
            },
        },
    )


def texts_by_item(body: bytes) -> dict[str, str]:
    """What a client assembles from the deltas: item_id -> text."""
    got: dict[str, str] = {}
    for e in parse(body):
        if e["type"] == "response.output_text.delta":
            got[e["item_id"]] = got.get(e["item_id"], "") + e["delta"]
    return got


def test_item_order_continues_a_message_closed_early():
    verdict = Verdict()
    out, rep = run(claude_text_tool_text(), verdict=verdict, model="m")
    evs = parse(out)
    assert [(e["type"], e.get("output_index")) for e in evs[10:20]] == [
        ("response.function_call_arguments.done", 1),
        ("response.output_item.done", 1),
        ("response.output_item.added", 2),
        ("response.content_part.added", 2),  # synthesized
        ("response.output_text.delta", 2),
        ("response.output_text.delta", 2),
        ("response.output_text.done", 2),
        ("response.content_part.done", 2),
        ("response.output_item.done", 2),
        ("response.completed", None),
    ]
    assert evs[12]["item"] == {
        "id": "m0_2",
        "type": "message",
        "status": "in_progress",
        "content": [],
        "role": "assistant",
    }
    assert evs[13] == {
        "type": "response.content_part.added",
        "sequence_number": 14,
        "item_id": "m0_2",
        "output_index": 2,
        "content_index": 0,
        "part": {"type": "output_text", "annotations": [], "text": ""},
    }
    # the second text reaches the client, once, under the continuation
    assert texts_by_item(out) == {"m0": "Hello there.", "m0_2": " More text."}
    assert all(e["content_index"] == 0 for e in evs[13:18])
    # the gateway's late closes describe the continuation only
    assert evs[16]["text"] == " More text." and evs[16]["item_id"] == "m0_2"
    assert evs[17]["part"]["text"] == " More text."
    assert evs[18]["item"] == {
        "id": "m0_2",
        "type": "message",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "text": " More text."}],
        "role": "assistant",
    }
    output = evs[-1]["response"]["output"]
    assert [(o["id"], o["type"]) for o in output] == [("m0", "message"), ("fc1", "function_call"), ("m0_2", "message")]
    assert output[0]["content"][0]["text"] == "Hello there."
    assert output[2]["content"][0]["text"] == " More text."
    assert [e["sequence_number"] for e in evs] == list(range(1, len(evs) + 1))
    assert verdict.text_len == len("Hello there. More text.")
    assert check("responses", out) == [] and aisdk_problems(out) == []
    final = openai_python_final(out)
    assert [o.type for o in final.output] == ["message", "function_call", "message"]
    assert any("continuation" in n for n in rep.notes)
    assert run(out, model="m")[0] == out  # idempotent


def test_item_order_off_leaves_the_text_in_the_unclosed_message():
    body = claude_text_tool_text()
    out, _ = run(body, Rules(item_order=False), model="m")
    assert b"m0_2" not in out
    assert texts_by_item(out) == {"m0": "Hello there. More text."}
    assert any("still open" in p for p in check("responses", out))


def test_item_order_continuation_closed_at_the_terminal_when_the_gateway_never_closes_it():
    out, _ = run(claude_text_tool_text(gateway_closes=False), model="m")
    evs = parse(out)
    assert [e["type"] for e in evs[-4:]] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert evs[-2]["item"]["id"] == "m0_2" and evs[-2]["item"]["content"][0]["text"] == " More text."
    assert [o["content"][0]["text"] for o in evs[-1]["response"]["output"] if o["type"] == "message"] == [
        "Hello there.",
        " More text.",
    ]
    assert check("responses", out) == []
    out, _ = run(claude_text_tool_text(terminal_output=False), model="m")
    assert [o["id"] for o in parse(out)[-1]["response"]["output"]] == ["m0", "fc1", "m0_2"]


def test_item_order_second_continuation_and_part_added_opens_one():
    body = sse(
        created(created_at=STARTED),
        msg_added(0, "m0", 2),
        part_added(0, "m0", 3),
        text_delta(0, "m0", "a", 4),
        *claude_fc(1, "f1", 5),
        text_delta(0, "m0", "b", 9),
        *claude_fc(2, "f2", 10),
        {**part_added(0, "m0", 14), "content_index": 1},
        {**text_delta(0, "m0", "c", 15), "content_index": 1},
        completed([], 16),
    )
    out, _ = run(body)
    evs = parse(out)
    added = [(e["output_index"], e["item"]["id"]) for e in evs if e["type"] == "response.output_item.added"]
    assert added == [(0, "m0"), (1, "f1"), (2, "m0_2"), (3, "f2"), (4, "m0_3")]
    assert texts_by_item(out) == {"m0": "a", "m0_2": "b", "m0_3": "c"}
    # the gateway's part 1 is the continuation's part 0; its own content_part.added, not a synthesized one
    parts = [(e["item_id"], e["content_index"]) for e in evs if e["type"] == "response.content_part.added"]
    assert parts == [("m0", 0), ("m0_2", 0), ("m0_3", 0)]
    assert [o["id"] for o in evs[-1]["response"]["output"]] == ["m0", "f1", "m0_2", "f2", "m0_3"]
    assert check("responses", out) == []
    assert run(out)[0] == out


def test_item_order_no_continuation_for_a_message_the_gateway_closed():
    body = sse(
        created(created_at=STARTED),
        msg_added(0, "m0", 2),
        part_added(0, "m0", 3),
        text_delta(0, "m0", "a", 4),
        *claude_fc(1, "f1", 5),
        *msg_done_events(0, "m0", "a", 9),  # late, but the gateway's own close
        text_delta(0, "m0", "stray", 12),
        completed([], 13),
    )
    out, rep = run(body)
    assert b"stray" not in out and b"m0_2" not in out
    assert any("dropped response.output_text.delta" in n for n in rep.notes)
    # an empty delta opens nothing either
    body = sse(
        created(created_at=STARTED),
        msg_added(0, "m0", 2),
        part_added(0, "m0", 3),
        text_delta(0, "m0", "a", 4),
        *claude_fc(1, "f1", 5),
        text_delta(0, "m0", "", 9),
        completed([], 10),
    )
    assert b"m0_2" not in run(body)[0]


def test_item_order_continuation_closes_an_open_item_first():
    body = sse(
        created(created_at=STARTED),
        msg_added(0, "m0", 2),
        part_added(0, "m0", 3),
        text_delta(0, "m0", "a", 4),
        fc_added(1, "c", 5),
        args_delta(1, "c", "{}", 6),
        text_delta(0, "m0", "b", 7),
        completed([], 8),
    )
    out, _ = run(body)
    assert [(e["type"], e.get("output_index")) for e in parse(out)[9:14]] == [
        ("response.function_call_arguments.done", 1),
        ("response.output_item.done", 1),
        ("response.output_item.added", 2),
        ("response.content_part.added", 2),
        ("response.output_text.delta", 2),
    ]
    assert check("responses", out) == []


def test_item_order_continuation_with_output_index_off():
    out, _ = run(claude_text_tool_text(), Rules(output_index=False), model="m")
    evs = parse(out)
    assert {e.get("output_index") for e in evs if e.get("item_id") == "m0_2"} == {2}
    assert texts_by_item(out) == {"m0": "Hello there.", "m0_2": " More text."}


def test_repeated_added_for_open_item_dropped():
    body = sse(created(created_at=STARTED), fc_added(0, "a", 2), fc_added(0, "a", 3), args_delta(0, "a", "{}", 4))
    out, _ = run(body)
    assert types(out).count("response.output_item.added") == 1


# --- rule 3: output_index -----------------------------------------------------------------


def claude_thinking() -> bytes:
    return next(r for r in RECORDINGS if r.name == "responses-claude-thinking-text-tool").body


def test_output_index_dense_when_reasoning_and_message_share_index_0():
    out, _ = run(claude_thinking(), model="claude-sonnet-4-6")
    added = [e["output_index"] for e in parse(out) if e["type"] == "response.output_item.added"]
    assert added == [0, 1, 2]
    by_item = {e["item_id"]: e["output_index"] for e in parse(out) if "item_id" in e}
    assert by_item["msg_msg_01Tz8KqW3nVb6Yc2Hd9Lf5Rx_0"] == 1
    final = openai_python_final(out)
    assert [o.type for o in final.output] == ["reasoning", "message", "function_call"]


def test_output_index_off_leaves_the_defect():
    out, _ = run(claude_thinking(), Rules(output_index=False), model="claude-sonnet-4-6")
    added = [e["output_index"] for e in parse(out) if e["type"] == "response.output_item.added"]
    assert added == [0, 0, 2]
    with pytest.raises(RuntimeError, match="Duplicate response output index"):
        openai_python_final(out)


def test_output_index_gap_closed_and_mapped_by_raw_index():
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2),
        fc_done(0, "a", "{}", 3, status="completed"),
        fc_added(2, "b", 4, status="in_progress"),
        {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{}", "sequence_number": 5},
        fc_done(2, "b", "{}", 6, status="completed"),
    )
    out, _ = run(body)
    evs = parse(out)
    assert [e.get("output_index") for e in evs[3:6]] == [1, 1, 1]
    assert evs[4]["item_id"] == "b"  # schema_fill, mapped by raw index 2
    off, _ = run(body, Rules(output_index=False))
    assert [e.get("output_index") for e in parse(off)[3:6]] == [2, 2, 2]


# --- rule 4: sequence ---------------------------------------------------------------------


def test_sequence_strictly_increasing_across_inserted_and_dropped():
    out, _ = run(two_calls())
    seqs = [e["sequence_number"] for e in parse(out)]
    assert seqs == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    off, _ = run(two_calls(), Rules(sequence=False))
    seqs = [e["sequence_number"] for e in parse(off)]
    assert seqs == [1, 2, 3, 4, 5, 6, 5, 6, 9, 10, 11]


def test_sequence_keeps_bytes_of_events_already_right():
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2, status="in_progress"),
        args_delta(0, "a", "{}", 5),
        args_delta(0, "a", "", 4),
        args_done(0, "a", "{}", 9),
    )
    out, _ = run(body, SNIPPET)
    assert [e["sequence_number"] for e in parse(out)] == [1, 2, 5, 6, 9]
    src, dst = body.split(b"\n\n"), out.split(b"\n\n")
    assert [i for i, (a, b) in enumerate(zip(src, dst)) if a != b] == [3]


# --- rule 5: terminal_output --------------------------------------------------------------


def test_terminal_output_reordered_and_completed():
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2, status="in_progress"),
        fc_done(0, "a", "{}", 3, status="completed"),
        fc_added(1, "b", 4, status="in_progress"),
        fc_done(1, "b", "[]", 5, status="completed"),
        msg_added(2, "m", 6),
        {
            "type": "response.output_item.done",
            "sequence_number": 7,
            "output_index": 2,
            "item": {"id": "m", "type": "message", "status": "completed", "content": [], "role": "assistant"},
        },
        completed(
            [
                {"id": "x", "type": "message", "content": []},
                fc_item("b", "[]", status="completed"),
                fc_item("a", "{}", status="completed"),
            ],
            8,
        ),
    )
    out, rep = run(body)
    output = parse(out)[-1]["response"]["output"]
    assert [o["id"] for o in output] == ["a", "b", "m", "x"]
    assert output[2] == {"id": "m", "type": "message", "status": "completed", "content": [], "role": "assistant"}
    assert any("never announced" in n for n in rep.notes)
    off, _ = run(body, Rules(terminal_output=False))
    assert [o["id"] for o in parse(off)[-1]["response"]["output"]] == ["x", "b", "a"]


def test_terminal_output_matches_calls_by_call_id():
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "fc_1", 2, status="in_progress", call_id="call_1"),
        fc_done(0, "fc_1", "{}", 3, status="completed", call_id="call_1"),
        completed(
            [{"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}", "status": "completed"}], 4
        ),
    )
    out, _ = run(body)
    assert out.split(b"\n\n")[3] == body.split(b"\n\n")[3]  # matched, so left byte-identical


def test_terminal_output_filled_when_missing():
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2, status="in_progress"),
        fc_done(0, "a", "{}", 3, status="completed"),
        completed([], 4),
    )
    out, _ = run(body)
    assert parse(out)[-1]["response"]["output"] == [fc_item("a", "{}", status="completed")]


# --- rule 6: usage ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "usage, fixed",
    [
        ({}, {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}),
        (None, {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}),
        ("missing", {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}),
        ({"input_tokens": 5, "output_tokens": 3}, {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}),
        ({"input_tokens": 7}, {"input_tokens": 7, "output_tokens": 0, "total_tokens": 7}),
        (
            {"input_tokens": 5.0, "output_tokens": "3", "total_tokens": 8},
            {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8},
        ),
        (
            {
                "input_tokens": 5,
                "output_tokens": 3,
                "total_tokens": 8,
                "input_tokens_details": {"cached_tokens": None},
                "output_tokens_details": {"reasoning_tokens": 2.0},
            },
            {
                "input_tokens": 5,
                "output_tokens": 3,
                "total_tokens": 8,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 2},
            },
        ),
    ],
)
def test_usage_completed(usage, fixed):
    extra = {} if usage == "missing" else {"usage": usage}
    term = completed([], 2)
    del term["response"]["usage"]
    term["response"].update(extra)
    body = sse(created(created_at=STARTED), term)
    verdict = Verdict()
    out, _ = run(body, verdict=verdict)
    assert parse(out)[-1]["response"]["usage"] == fixed
    assert not aisdk_problems(out)
    off, _ = run(body, Rules(usage=False))
    assert off == body
    if isinstance(usage, dict) and type(usage.get("output_tokens")) is int:
        assert verdict.output_tokens == usage["output_tokens"]


def test_usage_output_tokens_from_the_upstream_count():
    verdict = Verdict()
    verdict.upstream_usage(123)  # what the Devin tap / correlator reports
    term = completed([], 2, usage={})
    out, rep = run(sse(created(created_at=STARTED), term), verdict=verdict)
    assert parse(out)[-1]["response"]["usage"] == {"input_tokens": 0, "output_tokens": 123, "total_tokens": 123}
    assert any("upstream" in n for n in rep.notes)
    # a count the client leg has is kept
    verdict = Verdict()
    verdict.upstream_usage(123)
    out, _ = run(
        sse(created(created_at=STARTED), completed([], 2, usage={"input_tokens": 1, "output_tokens": 7})),
        verdict=verdict,
    )
    assert parse(out)[-1]["response"]["usage"] == {"input_tokens": 1, "output_tokens": 7, "total_tokens": 8}


def test_incomplete_details_null_is_no_native_evidence():
    term = completed(
        [fc_item("a", '{"x"', status="completed")],
        4,
        incomplete_details=None,
        usage={"input_tokens": 1, "output_tokens": 400, "total_tokens": 401},
    )
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2, status="in_progress"),
        fc_done(0, "a", '{"x"', 3, status="completed"),
        term,
    )
    out, rep = run(body, request={"max_output_tokens": 400})
    assert not rep.decision.native and rep.decision.outcome == "max_tokens"
    assert parse(out)[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_usage_reported_to_verdict():
    verdict = Verdict()
    run(one_call(), verdict=verdict)
    assert verdict.output_tokens == 5


def test_fix_usage_leaves_right_usage_alone():
    u = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2, "total_tokens": 3}
    assert fix_usage(dict(u)) == (u, False)


# --- rule 7: response_id ------------------------------------------------------------------


def test_response_id_kept_across_lifecycle():
    body = sse(
        created("first", created_at=STARTED),
        {
            "type": "response.in_progress",
            "response": {"id": "second", "created_at": STARTED, "model": "m"},
            "sequence_number": 2,
        },
        completed([], 3, rid="third"),
    )
    out, _ = run(body)
    assert [e["response"]["id"] for e in parse(out)] == ["first", "first", "first"]
    assert openai_python_final(out) is not None
    off, _ = run(body, Rules(response_id=False))
    assert [e["response"]["id"] for e in parse(off)] == ["first", "second", "third"]
    with pytest.raises(RuntimeError, match="identity changed"):
        openai_python_final(off)


# --- rule 8: schema_fill ------------------------------------------------------------------


def devin_reasoning() -> bytes:
    return sse(
        created(),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {
                "id": "item_0",
                "type": "reasoning",
                "status": "in_progress",
                "encrypted_content": "",
                "summary": [],
            },
            "sequence_number": 2,
        },
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "a", "sequence_number": 3},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "b", "sequence_number": 4},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "id": "item_0",
                "type": "reasoning",
                "encrypted_content": "",
                "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
            },
            "sequence_number": 5,
        },
        completed([], 6),
    )


def test_schema_fill_created_at_item_id_summary_index():
    out, _ = run(devin_reasoning())
    evs = parse(out)
    assert evs[0]["response"]["created_at"] == STARTED
    assert [(e["item_id"], e["summary_index"]) for e in evs[2:4]] == [("item_0", 0), ("item_0", 0)]
    assert aisdk_problems(out) == []


def test_schema_fill_off_leaves_the_defect():
    out, _ = run(devin_reasoning(), Rules(schema_fill=False))
    problems = aisdk_problems(out)
    assert any("created_at" in p for p in problems)
    assert any("summary_index" in p for p in problems)


def test_schema_fill_model_from_request_and_earlier_lifecycle():
    body = sse(
        {"type": "response.created", "sequence_number": 1, "response": {"id": "r", "created_at": 5}},
        {"type": "response.in_progress", "sequence_number": 2, "response": {"id": "r"}},
    )
    out, _ = run(body, SNIPPET, model="claude-sonnet-4-6")
    r0, r1 = (e["response"] for e in parse(out))
    assert r0 == {"id": "r", "created_at": 5, "model": "claude-sonnet-4-6"}
    assert r1 == {"id": "r", "created_at": 5, "model": "claude-sonnet-4-6"}


def test_schema_fill_summary_index_follows_summary_part_added():
    body = sse(
        created(created_at=STARTED),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "rs", "type": "reasoning"},
            "sequence_number": 2,
        },
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs",
            "output_index": 0,
            "summary_index": 1,
            "sequence_number": 3,
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs",
            "output_index": 0,
            "delta": "x",
            "sequence_number": 4,
        },
    )
    out, _ = run(body)
    assert parse(out)[3]["summary_index"] == 1


def test_schema_fill_function_call_id_and_failed_sequence():
    body = sse(
        created(created_at=STARTED),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "call_id": "c", "name": "f", "status": "in_progress"},
            "sequence_number": 2,
        },
        {"type": "response.failed", "response": {"id": "interaction_1", "error": {"message": "boom"}}},
    )
    out, _ = run(body)
    evs = parse(out)
    assert evs[1]["item"]["id"] == "c" and evs[1]["item"]["arguments"] == ""
    assert evs[2]["sequence_number"] == 3


def test_schema_fill_item_ids_and_done_fields_from_the_announced_item():
    body = sse(
        created(created_at=STARTED),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "message", "status": "in_progress", "role": "assistant", "content": []},
            "sequence_number": 2,
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"type": "message", "status": "completed", "role": "assistant", "content": []},
            "sequence_number": 3,
        },
        fc_added(1, "c", 4, status="in_progress"),
        args_delta(1, "c", "{}", 5),
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {"type": "function_call", "status": "completed"},
            "sequence_number": 6,
        },
    )
    out, _ = run(body)
    evs = parse(out)
    assert evs[1]["item"]["id"] == "item_0" and evs[2]["item"]["id"] == "item_0"
    assert evs[5]["item"] == {
        "type": "function_call",
        "status": "completed",
        "id": "c",
        "call_id": "c",
        "name": "f",
        "arguments": "{}",
    }
    assert aisdk_problems(out) == []
    off, _ = run(body, Rules(schema_fill=False))
    assert any("item.id" in p for p in aisdk_problems(off))


# --- rule 9: truncation -------------------------------------------------------------------


def truncated() -> bytes:
    return sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2),
        args_delta(0, "a", '{"path":"x","content":"abc', 3),
        args_done(0, "a", '{"path":"x","content":"abc', 4),
        fc_done(0, "a", '{"path":"x","content":"abc', 5),
        completed(
            [fc_item("a", '{"path":"x","content":"abc')],
            6,
            usage={"input_tokens": 584, "output_tokens": 400, "total_tokens": 984},
        ),
    )


def test_truncation_becomes_response_incomplete():
    out, rep = run(truncated(), request={"model": "devin/swe-2", "max_output_tokens": 400})
    last = out.split(b"\n\n")[5]
    assert last.startswith(b"event: response.incomplete\n")
    term = parse(out)[-1]
    assert term["type"] == "response.incomplete"
    assert term["response"]["status"] == "incomplete"
    assert term["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert term["response"]["usage"]["output_tokens"] == 400
    assert term["response"]["output"][0]["status"] == "completed"
    assert parse(out)[4]["item"]["status"] == "completed"
    assert rep.decision is not None and rep.decision.outcome == "max_tokens" and not rep.decision.native
    assert check("responses", out) == []


def test_truncation_evidence_reported():
    verdict = Verdict()
    run(truncated(), verdict=verdict)
    assert verdict.last_tool_args == '{"path":"x","content":"abc'
    assert verdict.output_tokens == 400
    assert verdict.args_len == len('{"path":"x","content":"abc')


def test_truncation_policy_completed_keeps_terminal_but_repairs_the_rest():
    out, rep = run(truncated(), Rules(truncation="completed"), request={"max_output_tokens": 400})
    term = parse(out)[-1]
    assert term["type"] == "response.completed" and "incomplete_details" not in term["response"]
    assert term["response"]["output"][0]["status"] == "completed"
    assert rep.decision.truncated


def test_truncation_policy_off():
    out, _ = run(truncated(), Rules(truncation="off"), request={"max_output_tokens": 400})
    assert parse(out)[-1]["type"] == "response.completed"


def test_truncation_content_filter_from_upstream():
    verdict = Verdict()
    verdict.upstream("content_filter", "StopReason 11")
    out, _ = run(one_call(), verdict=verdict)
    assert parse(out)[-1]["response"]["incomplete_details"] == {"reason": "content_filter"}


def test_native_incomplete_left_alone():
    term = completed(
        [fc_item("a", "{", status="completed")],
        5,
        typ="response.incomplete",
        incomplete_details={"reason": "max_output_tokens"},
    )
    term["response"]["status"] = "incomplete"
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2, status="in_progress"),
        args_delta(0, "a", "{", 3),
        fc_done(0, "a", "{", 4, status="completed"),
        term,
    )
    out, rep = run(body, request={"max_output_tokens": 400})
    assert out == body
    assert rep.decision.native and rep.decision.outcome == "max_tokens"


def test_no_truncation_on_complete_call():
    out, rep = run(one_call(), request={"max_output_tokens": 400})
    assert parse(out)[-1]["type"] == "response.completed"
    assert not rep.decision.truncated


# --- failures and stream ends -------------------------------------------------------------


def test_no_success_after_response_failed():
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2),
        args_delta(0, "a", '{"x"', 3),
        {
            "type": "response.failed",
            "response": {
                "id": "interaction_1",
                "status": "failed",
                "error": {"code": "server_error", "message": "upstream"},
            },
            "sequence_number": 4,
        },
    )
    out, rep = run(body, request={"max_output_tokens": 1})
    assert types(out) == [
        "response.created",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.failed",
    ]
    assert rep.decision is None
    assert out.split(b"\n\n")[3] == body.split(b"\n\n")[3]


def test_no_success_after_error_event():
    head = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2),
        {
            "type": "error",
            "code": "stream_truncated",
            "message": "devin stream terminated prematurely",
            "sequence_number": 3,
        },
    )
    out, rep = run(head)
    assert types(out) == ["response.created", "response.output_item.added", "error"]
    assert rep.decision is None
    # whatever follows a failure passes raw: no closes, no repairs, no verdict
    tail = sse(completed([fc_item("a", "{")], 4, usage={}))
    out, rep = run(head + tail, request={"max_output_tokens": 1})
    assert out.endswith(tail) and rep.decision is None


def test_stream_without_terminal_passes_as_it_ended_with_the_rule_off():
    body = sse(created(created_at=STARTED), fc_added(0, "a", 2, status="in_progress"), args_delta(0, "a", "{", 3))
    out, rep = run(body + b'data: {"type":"response.compl', SNIPPET)
    assert out == body + b'data: {"type":"response.compl'
    assert "stream ended without a terminal event" in rep.notes
    assert rep.decision is None


def test_stream_without_terminal_ends_with_response_failed():
    """Rule eof_terminal (pi #8473, codex #41340): a failure, same id, next number; the
    open call stays open (never closed, so never run), nothing before it changes; the
    failure's output lists it as announced, with its arguments so far, incomplete
    (every announced item)."""
    body = sse(created(created_at=STARTED), fc_added(0, "a", 2, status="in_progress"), args_delta(0, "a", "{", 3))
    cut = body + b'data: {"type":"response.compl'
    out, rep = run(cut)
    assert out.startswith(body)
    tail = out[len(body) :]
    # the half event is kept as a comment, so it cannot glue onto the failure
    assert tail.startswith(b':data: {"type":"response.compl\n\nevent: response.failed\n')
    assert tail.endswith(b"\n\n")
    [failed] = parse(tail)
    assert failed == {
        "type": "response.failed",
        "sequence_number": 4,
        "response": {
            "id": "interaction_1",
            "object": "response",
            "created_at": STARTED,
            "status": "failed",
            "error": {"code": "server_error", "message": "The upstream stream ended without a terminal event."},
            "incomplete_details": None,
            "model": "devin/swe-2",
            "output": [
                {
                    "id": "a",
                    "type": "function_call",
                    "call_id": "a",
                    "name": "f",
                    "arguments": "{",
                    "status": "incomplete",
                }
            ],
            "usage": None,
        },
    }
    assert rep.decision is None
    assert check("responses", out) == []
    # the receipt says it once, with what was done
    said = [n for n in rep.notes if n.startswith("stream ended without a terminal event")]
    assert said == ["stream ended without a terminal event: ended it with response.failed"], rep.notes


# --- passthrough and fail-open ------------------------------------------------------------


def test_passthrough_of_done_comments_unknown_and_bad_json():
    extras = (
        b": keep-alive\n\n"
        b"data: [DONE]\n\n"
        b'event: custom\ndata: {"type":"custom.thing","sequence_number":0}\n\n'
        b'data: {"no_type":1}\n\n'
        b"data: {not json\n\n"
        b"data: [1,2]\n\n"
    )
    body = sse(created(created_at=STARTED), fc_added(0, "a", 2)) + extras + sse(args_delta(0, "a", "{}", 3))
    out, rep = run(body, Rules(eof_terminal=False, nonstandard=False))
    assert extras in out
    assert any("not JSON" in n for n in rep.notes)


def test_unmodeled_response_event_renumbered_only():
    body = sse(
        created(created_at=STARTED),
        fc_added(0, "a", 2),
        fc_added(1, "b", 3),
        {"type": "response.refusal.delta", "item_id": "b", "output_index": 1, "delta": "no", "sequence_number": 4},
    )
    out, _ = run(body, SNIPPET)
    assert parse(out)[-1] == {
        "type": "response.refusal.delta",
        "item_id": "b",
        "output_index": 1,
        "delta": "no",
        "sequence_number": 6,
    }


@pure_only
def test_exception_fails_open(monkeypatch):
    body = one_call()

    def boom(self, ev, obj):
        raise ValueError("bug")

    monkeypatch.setattr(ResponsesRepairer, "_item_done", boom)
    rep = ResponsesRepairer(Rules(), FlowContext(started_at=STARTED), Verdict())
    s = StreamRepair(rep)
    out = b"".join(s.feed(body[i : i + 7]) for i in range(0, len(body), 7)) + s.close()
    assert isinstance(s.error, ValueError)
    # everything from the failing event on is the original bytes
    cut = body.index(b"event: response.output_item.done")
    assert out.endswith(body[cut:])


@pure_only
def test_one_parse_per_event_and_no_reserialization_of_unchanged(monkeypatch):
    rec = next(r for r in RECORDINGS if r.name == "responses-claude-text-then-tool")
    loads, dumps = [], []
    real_loads, real_dumps = orjson.loads, orjson.dumps

    class CountingLoads:
        JSONDecodeError = orjson.JSONDecodeError

        @staticmethod
        def loads(b):
            loads.append(1)
            return real_loads(b)

    class CountingDumps:
        @staticmethod
        def dumps(o):
            dumps.append(1)
            return real_dumps(o)

    monkeypatch.setattr(stream_mod, "orjson", CountingLoads)
    monkeypatch.setattr(sse_mod, "orjson", CountingLoads)  # Event.json: the one loads per event
    monkeypatch.setattr(response_base, "orjson", CountingDumps)  # every repaired event's one dumps
    # the full path's counts: skimming off (a body read at once skims the events after
    # the ones that teach a layout: tests/wire/test_stream.py counts the parses with it on)
    rep = ResponsesRepairer(Rules(), rec_ctx(rec), Verdict())
    rep.skim = None
    repair_body(rep, rec.body)
    assert len(loads) == 15  # one per event
    assert len(dumps) == 10  # 2 filled + 3 synthesized + 5 renumbered; 3 dropped, 2 untouched raw
    # the continuation (text after the call) costs no extra parse either
    loads.clear()
    dumps.clear()
    rec = next(r for r in RECORDINGS if r.name == "responses-claude-text-tool-text")
    rep = ResponsesRepairer(Rules(), rec_ctx(rec), Verdict())
    rep.skim = None
    repair_body(rep, rec.body)
    assert len(loads) == 17  # one per event
    # 2 filled + 3 + 2 synthesized + 5 renumbered (the call) + 2 deltas and 3 late closes
    # retargeted + the terminal; nothing raw but the first message's 4 events
    assert len(dumps) == 18


# --- recordings ---------------------------------------------------------------------------


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda r: r.name)
def test_recording_repaired_equals_expected(rec):
    assert repair_recording(rec) == rec.expected


@pytest.mark.parametrize("rec", [r for r in RECORDINGS if r.kind == "clean"], ids=lambda r: r.name)
def test_clean_recording_byte_identical(rec):
    assert not (rec.path / "expected.body").exists()
    assert repair_recording(rec) == rec.body


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda r: r.name)
def test_recording_repair_idempotent(rec):
    assert repair_recording(rec, rec.expected) == rec.expected


@pytest.mark.parametrize("rec", STREAMED, ids=lambda r: r.name)
def test_recording_clients_accept_expected(rec):
    assert check("responses", rec.expected) == []
    assert aisdk_problems(rec.expected) == []
    if parse(rec.expected)[0]["type"] == "response.failed":  # responses-empty-stream: a failure first
        with pytest.raises(RuntimeError, match="response.created"):
            openai_python_final(rec.expected)
    else:
        openai_python_final(rec.expected)
    if rec.kind == "buggy":
        assert check("responses", rec.body) or aisdk_problems(rec.body)


@pytest.mark.parametrize("rec", [r for r in RECORDINGS if not r.streaming], ids=lambda r: r.name)
def test_nonstream_recording_items_have_ids(rec):
    out = orjson.loads(repair_recording(rec))
    assert all(isinstance(o.get("id"), str) for o in out["output"])
    assert all(o.get("status") == "completed" for o in out["output"] if o["type"] == "function_call")


@pytest.mark.parametrize("rec", STREAMED, ids=lambda r: r.name)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_chunking_gives_the_same_output(rec, data):
    body = rec.body
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(body)), max_size=40), label="cuts")))
    s = StreamRepair(ResponsesRepairer(Rules(), rec_ctx(rec), Verdict()))
    out = b""
    prev = 0
    for c in cuts + [len(body)]:
        out += s.feed(body[prev:c])
        prev = c
    out += s.close()
    assert s.error is None
    assert out == rec.expected  # == the one-chunk output (test_recording_repaired_equals_expected)


def test_byte_by_byte_feeding():
    for rec in STREAMED:
        s = StreamRepair(ResponsesRepairer(Rules(), rec_ctx(rec), Verdict()))
        out = b"".join(s.feed(rec.body[i : i + 1]) for i in range(len(rec.body))) + s.close()
        assert out == rec.expected, rec.name


# --- non-streaming ------------------------------------------------------------------------


def test_json_repair_status_ids_usage():
    obj = {
        "id": "i",
        "object": "response",
        "status": "completed",
        "model": "m",
        "output": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}],
        "usage": {},
    }
    assert repair_responses_json(obj, Rules(), FlowContext(), Verdict())
    assert obj["output"][0]["id"] == "c" and obj["output"][0]["status"] == "completed"
    assert obj["usage"] == {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    assert not repair_responses_json(obj, Rules(), FlowContext(), Verdict())


def test_json_repair_rules_off():
    obj = {
        "output": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
    assert not repair_responses_json(obj, Rules(status=False, schema_fill=False), FlowContext(), Verdict())
    assert "status" not in obj["output"][0]


def test_json_repair_truncation():
    obj = {
        "id": "i",
        "object": "response",
        "status": "completed",
        "output": [
            {
                "id": "c",
                "type": "function_call",
                "call_id": "c",
                "name": "f",
                "arguments": '{"a":',
                "status": "completed",
            }
        ],
        "usage": {"input_tokens": 1, "output_tokens": 50, "total_tokens": 51},
    }
    ctx = FlowContext(request={"max_output_tokens": 50})
    assert repair_responses_json(obj, Rules(), ctx, Verdict())
    assert obj["status"] == "incomplete" and obj["incomplete_details"] == {"reason": "max_output_tokens"}
    assert obj["output"][0]["status"] == "completed"


def test_json_repair_never_touches_failed():
    obj = {
        "id": "i",
        "status": "failed",
        "error": {"message": "x"},
        "output": [],
        "usage": {"input_tokens": 1, "output_tokens": 50, "total_tokens": 51},
    }
    repair_responses_json(obj, Rules(), FlowContext(request={"max_output_tokens": 50}), Verdict())
    assert obj["status"] == "failed" and "incomplete_details" not in obj


def test_json_body_not_json_passes():
    assert repair_responses_body(b"<html>", Rules(), FlowContext(), Verdict()) == (b"<html>", None)


# --- the real AI SDK (optional: needs node and scripts/install-clients) --------------------


def test_json_body_gets_created_at_and_model_and_reports_the_digest():
    """Non-stream: AI SDK 6's generateText builds a Date from created_at ("Invalid time
    value" without it); the verdict sees the same text/args digest as a stream would."""
    body = {
        "id": "r",
        "object": "response",
        "status": "completed",
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        ],
        "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
    }
    v = Verdict()
    assert repair_responses_json(body, Rules(), FlowContext(model="m", started_at=STARTED), v)
    assert body["created_at"] == STARTED and body["model"] == "m"
    streamed = Verdict()
    streamed.observe_text("h")
    streamed.observe_text("i")
    streamed.observe_args("{}")
    assert v.digest() == streamed.digest()
    off = {"id": "r", "output": []}
    repair_responses_json(off, Rules(schema_fill=False), FlowContext(model="m", started_at=STARTED), Verdict())
    assert "created_at" not in off and "model" not in off
