"""wire/told.py: the usage, ending and names each API tells the client, in one shape (hand-written events)."""

from __future__ import annotations

import orjson
import pytest
from streamfix.wire.told import Told, finish_of, names_of, usage_of


@pytest.mark.parametrize(
    ("api", "obj", "want"),
    [
        ("responses", {"type": "response.completed", "response": {"usage": {"input_tokens": 10, "output_tokens": 5,
         "total_tokens": 15, "input_tokens_details": {"cached_tokens": 4}}}},
         {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "cached_tokens": 4}),
        ("responses", {"object": "response", "usage": {"input_tokens": 3, "output_tokens": 2}},
         {"input_tokens": 3, "output_tokens": 2}),
        ("responses", {"type": "response.output_text.delta", "delta": "usage"}, None),
        ("chat", {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8,
         "prompt_tokens_details": {"cached_tokens": 2}}},
         {"input_tokens": 7, "output_tokens": 1, "total_tokens": 8, "cached_tokens": 2}),
        ("chat", {"choices": [], "usage": None}, None),
        # messages: input_tokens is the uncached part; the whole input adds reads and writes
        ("messages", {"type": "message_start", "message": {"usage": {"input_tokens": 5, "cache_read_input_tokens": 100,
         "cache_creation_input_tokens": 20, "output_tokens": 1}}},
         {"input_tokens": 125, "output_tokens": 1, "cached_tokens": 100, "cache_write_tokens": 20}),
        ("messages", {"type": "message_delta", "usage": {"output_tokens": 42}}, {"output_tokens": 42}),
        ("gemini", {"usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3, "thoughtsTokenCount": 2,
         "totalTokenCount": 14, "cachedContentTokenCount": 4}},
         {"input_tokens": 9, "output_tokens": 5, "total_tokens": 14, "cached_tokens": 4, "reasoning_tokens": 2}),
        ("responses", {"type": "response.completed", "response": {"usage": {"input_tokens": 10, "output_tokens": 50,
         "output_tokens_details": {"reasoning_tokens": 30}}}},
         {"input_tokens": 10, "output_tokens": 50, "reasoning_tokens": 30}),
        ("chat", {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 9,
         "completion_tokens_details": {"reasoning_tokens": 4}}},
         {"input_tokens": 1, "output_tokens": 9, "reasoning_tokens": 4}),
        ("chat", {"usage": {"prompt_tokens": True, "completion_tokens": -1}}, None),
        ("other", {"usage": {"input_tokens": 1}}, None),
    ],
)  # fmt: skip
def test_usage_of(api, obj, want):
    assert usage_of(api, obj) == want


def sse(*objs, event=None) -> bytes:
    return b"".join(
        (f"event: {event}\n".encode() if event else b"") + b"data: " + orjson.dumps(o) + b"\n\n" for o in objs
    )


def test_reader_merges_messages_start_and_delta_and_computes_total():
    r = Told("messages")
    r.feed(sse({"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}}))
    r.feed(sse({"type": "content_block_delta", "delta": {"text": "hi"}}))
    r.feed(sse({"type": "message_delta", "usage": {"output_tokens": 12}}))
    assert r.counts == {"input_tokens": 30, "output_tokens": 12, "total_tokens": 42}


def test_reader_ignores_chunks_without_usage_and_keeps_a_split_event():
    r = Told("chat")
    r.feed(sse({"choices": [{"delta": {"content": "x"}}]}))
    assert r.counts is None
    body = sse({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}})
    r.feed(body[:20])  # "data: {"choices"... cut before the usage: a later chunk completes it
    r.feed(body[20:])
    assert r.counts == {"input_tokens": 4, "output_tokens": 6, "total_tokens": 10}


def test_reader_bad_json_is_ignored():
    r = Told("chat")
    r.feed(b'data: {"usage": oops\n\n')
    assert r.counts is None


def test_reader_parses_the_first_event_and_then_only_events_that_name_a_usage(monkeypatch):
    """The reader runs on every output chunk: after the first event (which names the
    response), an event without a usage key (a ``message`` item, Anthropic's
    ``message_start`` type name in a text) is not parsed as it passes."""
    r = Told("responses")
    parsed = []
    real = Told.body
    monkeypatch.setattr(Told, "body", lambda self, data: (parsed.append(data), real(self, data)))
    r.feed(b'data: {"type":"response.created","response":{"id":"resp_1","model":"m","status":"in_progress"}}\n\n')
    r.feed(b'data: {"type":"response.output_item.added","item":{"type":"message"}}\n\n')
    r.feed(b'data: {"type":"response.output_text.delta","delta":"a message about usage"}\n\n')
    assert len(parsed) == 1 and (r.response_id, r.response_model, r.finish) == ("resp_1", "m", None)
    r.feed(b'data: {"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":1}}}\n\n')
    assert len(parsed) == 2 and r.finish == ["completed"] and r.counts == {"input_tokens": 1, "total_tokens": 1}


@pytest.mark.parametrize(
    ("api", "obj", "want"),
    [
        ("chat", {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}, ["length"]),
        ("chat", {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}, None),
        ("chat", {"choices": [{"finish_reason": "stop"}, {"finish_reason": "tool_calls"}]}, ["stop", "tool_calls"]),
        ("chat", {"error": {"message": "upstream failed", "type": "server_error"}}, ["error"]),
        ("chat", {"object": "chat.completion", "choices": [{"message": {}, "finish_reason": "stop"}]}, ["stop"]),
        ("messages", {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}, ["max_tokens"]),
        ("messages", {"type": "message_start", "message": {"stop_reason": None}}, None),
        ("messages", {"type": "error", "error": {"type": "overloaded_error"}}, ["error"]),
        ("messages", {"type": "message", "stop_reason": "tool_use"}, ["tool_use"]),
        ("gemini", {"candidates": [{"finishReason": "MAX_TOKENS"}]}, ["MAX_TOKENS"]),
        ("gemini", {"candidates": [{"content": {}}]}, None),
        ("gemini", {"error": {"code": 503, "status": "UNAVAILABLE"}}, ["error"]),
        ("responses", {"type": "response.completed", "response": {"status": "completed"}}, ["completed"]),
        ("responses", {"type": "response.incomplete", "response": {"status": "incomplete",
         "incomplete_details": {"reason": "max_output_tokens"}}}, ["max_output_tokens"]),
        ("responses", {"type": "response.failed", "response": {"status": "failed"}}, ["error"]),
        ("responses", {"type": "error", "code": "server_error"}, ["error"]),
        ("responses", {"type": "response.created", "response": {"status": "in_progress"}}, None),
        ("responses", {"type": "response.output_text.delta", "delta": "response.completed"}, None),
        ("responses", {"object": "response", "status": "incomplete", "incomplete_details": None}, ["incomplete"]),
        ("responses", {"object": "response", "status": "completed"}, ["completed"]),
    ],
)  # fmt: skip
def test_finish_of(api, obj, want):
    assert finish_of(api, obj) == want


@pytest.mark.parametrize(
    ("api", "obj", "want"),
    [
        ("chat", {"id": "chatcmpl-1", "model": "gpt-x", "choices": []}, ("chatcmpl-1", "gpt-x")),
        ("responses", {"type": "response.created", "response": {"id": "resp_1", "model": "m"}}, ("resp_1", "m")),
        ("messages", {"type": "message_start", "message": {"id": "msg_1", "model": "claude"}}, ("msg_1", "claude")),
        ("gemini", {"responseId": "r1", "modelVersion": "gemini-2.5"}, ("r1", "gemini-2.5")),
        ("chat", {"id": "", "model": "", "choices": []}, (None, None)),  # a zeroed completion names nothing
    ],
)  # fmt: skip
def test_names_of(api, obj, want):
    assert names_of(api, obj) == want


def test_reader_tells_the_last_ending_and_the_first_names_across_split_chunks():
    r = Told("chat")
    body = sse(
        {"id": "c1", "model": "m1", "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]},
        {"id": "c1", "model": "m1", "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
        {"id": "c1", "model": "m1", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
    )
    for i in range(0, len(body), 7):
        r.feed(body[i : i + 7])
    assert (r.response_id, r.response_model, r.finish) == ("c1", "m1", ["length"])


def test_an_ending_without_usage_is_read_from_the_last_chunks_when_asked():
    """chat: the finish chunk, then the usage chunk, then [DONE], a read each; an error
    event after a finish wins (the last ending); the held chunks are bounded."""
    from streamfix.wire import told

    r = Told("chat")
    r.feed(sse({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}))
    r.feed(sse({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}))
    r.feed(sse({"id": "c1", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}))
    r.feed(b"data: [DONE]\n\n")
    assert r.finish == ["length"] and r.counts == {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
    r.feed(sse({"error": {"message": "overloaded", "type": "server_error"}}))
    assert r.finish == ["error"]

    m = Told("messages")  # an ending read as it passed (with usage) is not undone by older held chunks
    m.feed(sse({"type": "message_start", "message": {"id": "msg", "usage": {"input_tokens": 3}}}))
    m.feed(sse({"type": "content_block_delta", "delta": {"text": "stop_reason"}}))
    m.feed(sse({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 4}}))
    m.feed(sse({"type": "message_stop"}))
    assert m.finish == ["max_tokens"]

    big = Told("chat")
    big.feed(sse({"id": "c", "choices": []}))
    for _ in range(told.HOLD_CHUNKS + 2):
        big.feed(sse({"choices": [{"delta": {"content": "y" * (2 * told.HOLD_BYTES)}}]}))
    assert len(big._held) == told.HOLD_CHUNKS and all(len(c) <= told.HOLD_BYTES for c in big._held)
    assert big.finish is None  # a cut tail is skipped, not misread
