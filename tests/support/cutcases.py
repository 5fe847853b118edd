"""Streams an upstream cuts mid-body, per API, where a repairer holds events (the cut-upstream and
client tests), and an HTTP/1.1 upstream that sends one and resets or closes."""

from __future__ import annotations

import socket
import time

import orjson
from support import ChunkedUpstream


def _sse(obj, event: str | None = None) -> bytes:
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunk(delta, finish=None, usage=None):
    obj = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    return _sse(obj)


def _tool(index, id_="call_a", name="write_file", args=""):
    return {
        "tool_calls": [{"index": index, "id": id_, "type": "function", "function": {"name": name, "arguments": args}}]
    }


def _msg(obj):
    return _sse(obj, obj["type"])


def _resp(obj):
    return _sse(obj, obj["type"])


CREATED = _resp(
    {
        "type": "response.created",
        "sequence_number": 0,
        "response": {
            "id": "r1",
            "object": "response",
            "created_at": 1,
            "model": "m",
            "status": "in_progress",
            "output": [],
        },
    }
)


NO_CAP = {"model": "m", "stream": True, "messages": []}


MESSAGE_START = _msg(
    {
        "type": "message_start",
        "message": {
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "m",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 0},
        },
    }
)


def _tool_use_start(index, id_, name):
    block = {"type": "tool_use", "id": id_, "name": name, "input": {}}
    return {"type": "content_block_start", "index": index, "content_block": block}


def _json_delta(index, part):
    return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}


CAP = {"model": "m", "stream": True, "max_tokens": 100, "messages": []}


# name -> (path, request, events, how many events reach the client before the cut)
CASES: dict[str, tuple[str, dict, list[bytes], int | None]] = {
    # CPA's step index 2 renumbered to 0; the finish chunk without usage: no cap, so
    # usage cannot change the verdict and it goes out at once
    "chat-finish-no-cap": (
        "/v1/chat/completions",
        NO_CAP,
        [
            _chunk({"role": "assistant"}),
            _chunk(_tool(2)),
            _chunk({"tool_calls": [{"index": 2, "function": {"arguments": '{"path":"a"}'}}]}),
            _chunk({}, finish="tool_calls"),
        ],
        None,
    ),
    # a gateway's own "length" is native: nothing to wait for
    "chat-native-length-with-cap": (
        "/v1/chat/completions",
        CAP,
        [
            _chunk({"role": "assistant"}),
            _chunk({"content": "some text"}),
            _chunk({}, finish="length"),
        ],
        None,
    ),
    # a whole tool_use call: its stop is not held
    "messages-whole-call": (
        "/v1/messages",
        CAP,
        [
            _msg(
                {
                    "type": "message_start",
                    "message": {
                        "id": "m1",
                        "type": "message",
                        "role": "assistant",
                        "content": [],
                        "model": "m",
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 1, "output_tokens": 0},
                    },
                }
            ),
            _msg(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": "toolu_a", "name": "write_file", "input": {}},
                }
            ),
            _msg(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": '{"path":"a"}'},
                }
            ),
            _msg({"type": "content_block_stop", "index": 0}),
        ],
        None,
    ),
    # Responses holds nothing: a call without status gets it, and everything arrives
    "responses-open-call": (
        "/v1/responses",
        {"model": "m", "stream": True, "input": "x"},
        [
            CREATED,
            _resp(
                {
                    "type": "response.output_item.added",
                    "sequence_number": 1,
                    "output_index": 0,
                    "item": {
                        "id": "fc1",
                        "type": "function_call",
                        "call_id": "fc1",
                        "name": "write_file",
                        "arguments": "",
                    },
                }
            ),
            _resp(
                {
                    "type": "response.function_call_arguments.delta",
                    "sequence_number": 2,
                    "output_index": 0,
                    "item_id": "fc1",
                    "delta": '{"path":',
                }
            ),
        ],
        None,
    ),
    # must hold: a nameless header waits for its name (the repair needs it); the first
    # event arrives, the held two are reported as not delivered
    "chat-nameless-header": (
        "/v1/chat/completions",
        NO_CAP,
        [
            _chunk({"role": "assistant"}),
            _chunk(_tool(0, name="")),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
        ],
        1,
    ),
    # the same at CPA's step index 1 (the only call): the held header and the
    # argument delta behind it reach the client at index 0 (SALVAGED), not as they came
    "chat-nameless-header-step-index": (
        "/v1/chat/completions",
        NO_CAP,
        [
            _chunk({"role": "assistant"}),
            _chunk(_tool(1, name="")),
            _chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"pa'}}]}),
        ],
        1,
    ),
    # messages: a re-sent tool_use start merged into the first (its name filled, later
    # indexes shifted down), then a second nameless start at raw index 2 held: it and the
    # delta behind it reach the client at index 1 (SALVAGED), not 2
    "messages-held-shifted-start": (
        "/v1/messages",
        NO_CAP,
        [
            MESSAGE_START,
            _msg(_tool_use_start(0, "toolu_a", "")),
            _msg(_json_delta(0, '{"pa')),
            _msg({"type": "content_block_stop", "index": 0}),
            _msg(_tool_use_start(1, "toolu_a", "write_file")),
            _msg(_json_delta(1, 'th":"a"}')),
            _msg({"type": "content_block_stop", "index": 1}),
            _msg(_tool_use_start(2, "toolu_b", "")),
            _msg(_json_delta(2, '{"x')),
        ],
        7,
    ),
    # must hold: with a cap, a later usage chunk may still make the finish "length"
    "chat-finish-awaiting-usage": (
        "/v1/chat/completions",
        CAP,
        [
            _chunk({"role": "assistant"}),
            _chunk({"content": "some text"}),
            _chunk({}, finish="stop"),
        ],
        2,
    ),
    # reset mid-event: the unfinished event cannot be judged yet, so it is not sent;
    # the whole one before it is
    "responses-mid-event": (
        "/v1/responses",
        {"model": "m", "stream": True, "input": "x"},
        [
            CREATED,
            b'event: response.output_item.added\ndata: {"type":"response.output_item.added","seq',
        ],
        1,
    ),
}


SALVAGED: dict[str, list[bytes]] = {
    # written by hand: what the client gets where salvage changes the held events
    "chat-nameless-header-step-index": [
        _chunk({"role": "assistant"}),
        _chunk(_tool(0, name="")),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
    ],
    "messages-held-shifted-start": [
        MESSAGE_START,
        _msg(_tool_use_start(0, "toolu_a", "write_file")),  # the re-sent start's name, merged
        _msg(_json_delta(0, '{"pa')),
        # the held stop and the re-sent start: dropped (one block)
        _msg(_json_delta(0, 'th":"a"}')),
        _msg({"type": "content_block_stop", "index": 0}),
        _msg(_tool_use_start(1, "toolu_b", "")),  # held for its name when the upstream failed
        _msg(_json_delta(1, '{"x')),
    ],
}
"""Cases whose held events reach the client repaired (the others' held events need no
change: they arrive byte for byte as the upstream sent them)."""


class CuttingUpstream(ChunkedUpstream):
    """HTTP/1.1 upstream: answers ``/<case>/<cut>/<api path>`` with the case's events, one
    chunk each, 20 ms apart, waits 0.5 s, then resets (SO_LINGER 0) or closes (FIN) the
    connection without the last chunk."""

    def respond(self, conn: socket.socket, path: str, body: bytes) -> None:
        _, case, cut = path.split("/")[:3]
        self.start_sse(conn)
        for ev in CASES[case][2]:
            self.chunk(conn, ev)
            time.sleep(0.02)
        time.sleep(0.5)
        if cut == "reset":
            self.reset(conn)
