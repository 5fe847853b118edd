"""The usage == cap rule reads the request's tool schemas, on the streams a client gets.

Gemini MAX_TOKENS through CPA (v7.2.89 and v7.2.140, issue "finer truths"): the request's
``max_output_tokens`` 400, ``usage.output_tokens`` 400, the last call ``{"path": "essay.md"}``
while ``write_file`` declares ``path`` and ``content`` required. Responses ended
``completed``, messages ``tool_use``: the call parses, so the old rule kept it. The streams
below are written by hand in the shape CPA's translators give (one call, its arguments in
one delta, the usage on the terminal); the expected endings are each API's own words for
a truncation."""

from __future__ import annotations

import orjson
from streamfix.wire.apis import stream_repairer
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.sse import SseParser
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
          "required": ["path", "content"]}  # fmt: skip
CUT_ARGS = '{"path": "essay.md"}'
WHOLE_ARGS = '{"path": "essay.md", "content": "# Essay"}'


def sse(*events: tuple[str, dict]) -> bytes:
    return b"".join(f"event: {name}\n".encode() + b"data: " + orjson.dumps(obj) + b"\n\n" for name, obj in events)


def responses_stream(args: str) -> bytes:
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "write_file", "arguments": ""}
    done = {**call, "arguments": args, "status": "completed"}
    resp = {"id": "resp_1", "object": "response", "model": "gemini-2.5-flash", "status": "in_progress", "output": []}
    return sse(
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": resp}),
        ("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1,
                                        "output_index": 0, "item": {**call, "status": "in_progress"}}),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta",
                                                    "sequence_number": 2, "item_id": "fc_1", "output_index": 0,
                                                    "delta": args}),
        ("response.function_call_arguments.done", {"type": "response.function_call_arguments.done",
                                                   "sequence_number": 3, "item_id": "fc_1", "output_index": 0,
                                                   "arguments": args}),
        ("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 4, "output_index": 0,
                                       "item": done}),
        ("response.completed", {"type": "response.completed", "sequence_number": 5, "response": {
            **resp, "status": "completed", "output": [done],
            "usage": {"input_tokens": 50, "output_tokens": 400, "total_tokens": 450}}}),
    )  # fmt: skip


def messages_stream(args: str) -> bytes:
    return sse(
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                           "model": "gemini-2.5-flash", "content": [], "stop_reason": None,
                           "usage": {"input_tokens": 50, "output_tokens": 0}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "input_json_delta", "partial_json": args}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 400}}),
        ("message_stop", {"type": "message_stop"}),
    )  # fmt: skip


def repaired(api: str, request: dict, body: bytes) -> list[dict]:
    verdict = Verdict()
    verdict.request(request)
    s = StreamRepair(stream_repairer(api, Rules(), FlowContext(model=request["model"], request=request), verdict))
    out = b"".join(s.feed(body[i : i + 61]) for i in range(0, len(body), 61)) + s.close()
    assert s.error is None
    p = SseParser()
    return [orjson.loads(e.data) for e in p.feed(out) + p.close() if e.data is not None]


RESPONSES_REQUEST = {"model": "gemini-2.5-flash", "stream": True, "max_output_tokens": 400, "input": "Write it.",
                     "tools": [{"type": "function", "name": "write_file", "parameters": SCHEMA}]}  # fmt: skip
MESSAGES_REQUEST = {"model": "gemini-2.5-flash", "stream": True, "max_tokens": 400,
                    "messages": [{"role": "user", "content": "Write it."}],
                    "tools": [{"name": "write_file", "input_schema": SCHEMA}]}  # fmt: skip


def test_responses_a_call_missing_a_required_property_at_the_cap_ends_incomplete():
    evs = repaired("responses", RESPONSES_REQUEST, responses_stream(CUT_ARGS))
    last = evs[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_responses_the_whole_call_at_the_cap_stays_completed():
    evs = repaired("responses", RESPONSES_REQUEST, responses_stream(WHOLE_ARGS))
    assert evs[-1]["type"] == "response.completed"


def test_messages_a_call_missing_a_required_property_at_the_cap_ends_max_tokens():
    evs = repaired("messages", MESSAGES_REQUEST, messages_stream(CUT_ARGS))
    delta = next(e for e in evs if e["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "max_tokens"


def test_messages_the_whole_call_at_the_cap_stays_tool_use():
    evs = repaired("messages", MESSAGES_REQUEST, messages_stream(WHOLE_ARGS))
    delta = next(e for e in evs if e["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use"
