"""wire/told.py: the usage each API tells the client, in one shape (hand-written events)."""

from __future__ import annotations

import orjson
import pytest
from streamfix.wire.told import UsageReader, usage_of


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
         {"input_tokens": 125, "output_tokens": 1, "cached_tokens": 100}),
        ("messages", {"type": "message_delta", "usage": {"output_tokens": 42}}, {"output_tokens": 42}),
        ("gemini", {"usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3, "thoughtsTokenCount": 2,
         "totalTokenCount": 14, "cachedContentTokenCount": 4}},
         {"input_tokens": 9, "output_tokens": 5, "total_tokens": 14, "cached_tokens": 4}),
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
    r = UsageReader("messages")
    r.feed(sse({"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}}))
    r.feed(sse({"type": "content_block_delta", "delta": {"text": "hi"}}))
    r.feed(sse({"type": "message_delta", "usage": {"output_tokens": 12}}))
    assert r.counts == {"input_tokens": 30, "output_tokens": 12, "total_tokens": 42}


def test_reader_ignores_chunks_without_usage_and_keeps_a_split_event():
    r = UsageReader("chat")
    r.feed(sse({"choices": [{"delta": {"content": "x"}}]}))
    assert r.counts is None
    body = sse({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}})
    r.feed(body[:20])  # "data: {"choices"... cut before the usage: a later chunk completes it
    r.feed(body[20:])
    assert r.counts == {"input_tokens": 4, "output_tokens": 6, "total_tokens": 10}


def test_reader_bad_json_is_ignored():
    r = UsageReader("chat")
    r.feed(b'data: {"usage": oops\n\n')
    assert r.counts is None


def test_reader_parses_only_events_that_name_a_usage(monkeypatch):
    """The turn log's reader runs on every output chunk: an event without a usage key (a
    ``message`` item, Anthropic's ``message_start`` type name in a text) is not parsed."""
    from streamfix.wire.told import UsageReader

    r = UsageReader("responses")
    parsed = []
    monkeypatch.setattr(r.__class__, "body", lambda self, data: parsed.append(data))
    r.feed(b'data: {"type":"response.output_item.added","item":{"type":"message"}}\n\n')
    r.feed(b'data: {"type":"response.output_text.delta","delta":"a message about usage"}\n\n')
    assert parsed == []
    r.feed(b'data: {"type":"response.completed","response":{"usage":{"input_tokens":1}}}\n\n')
    assert len(parsed) == 1
