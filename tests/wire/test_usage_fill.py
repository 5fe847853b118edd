"""Usage from the upstream leg fills the client leg's missing or zero counts, on every API,
streaming and non-streaming. The counts are Devin's in CPA's mapping
(its source): input = prompt 7.2 + cache read 7.5, output 7.3, cached 7.5,
total = input + output. Expected values below are those numbers, written out by hand.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from repairkit import events, run, sse
from streamfix.wire.chat import ChatRepairer, repair_chat_json
from streamfix.wire.gemini import GeminiRepairer, repair_gemini_json
from streamfix.wire.messages import MessagesRepairer, repair_messages_json
from streamfix.wire.responses import ResponsesRepairer, repair_responses_json
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.verdict import UpstreamUsage, Verdict

# Devin: prompt 1210, output 400, cache read 11640, model swe-2
DEVIN = UpstreamUsage(input_tokens=12850, output_tokens=400, cached_tokens=11640, total_tokens=13250,
                      model="swe-2", source="field7")  # fmt: skip


def upstream(counts: UpstreamUsage | None = DEVIN) -> Verdict:
    v = Verdict()
    if counts is not None:
        v.upstream_usage(counts)  # what the correlator reports for the matched Devin flow
    return v


def data(body: bytes) -> list[Any]:
    return [e for e in events(body) if isinstance(e, dict)]


# --- Responses ------------------------------------------------------------------------------
def responses_stream(usage: Any, typ: str = "response.completed") -> bytes:
    resp = {"id": "interaction_1", "object": "response", "created_at": 1, "status": "in_progress",
            "model": "devin/swe-2", "output": []}  # fmt: skip
    term = {"type": typ, "response": {**resp, "status": "completed"}, "sequence_number": 2}
    if usage is not ...:
        term["response"]["usage"] = usage
    return sse({"type": "response.created", "response": resp, "sequence_number": 1}, term)


RESPONSES_WANT = {"input_tokens": 12850, "output_tokens": 400, "total_tokens": 13250,
                  "input_tokens_details": {"cached_tokens": 11640}}  # fmt: skip


@pytest.mark.parametrize(
    "usage",
    [
        ...,  # usage dropped
        None,
        {},
        {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0, "total_tokens": 0},
    ],
)
def test_responses_stream_every_count_filled(usage):
    out, rep = run(ResponsesRepairer, responses_stream(usage), verdict=upstream())
    got = data(out)[-1]["response"]["usage"]
    assert {k: got[k] for k in RESPONSES_WANT} == RESPONSES_WANT
    assert any("filled from the upstream usage" in n and "model swe-2" in n for n in rep.notes)


def test_responses_stream_keeps_non_zero_counts_and_fills_the_rest():
    usage = {"input_tokens": 77, "output_tokens": 0, "total_tokens": 77}
    out, _ = run(ResponsesRepairer, responses_stream(usage), verdict=upstream())
    got = data(out)[-1]["response"]["usage"]
    # input 77 is the client leg's own: kept; output filled; the total was input + 0: recomputed
    assert got == {"input_tokens": 77, "output_tokens": 400, "total_tokens": 477,
                   "input_tokens_details": {"cached_tokens": 11640}}  # fmt: skip


def test_responses_stream_whole_usage_passes_unchanged():
    body = responses_stream({"input_tokens": 5, "output_tokens": 6, "total_tokens": 11,
                             "input_tokens_details": {"cached_tokens": 1}})  # fmt: skip
    out, rep = run(ResponsesRepairer, body, verdict=upstream())
    assert out == body and rep.changed == 0


def test_responses_without_upstream_usage_keeps_zeros_and_failed_is_not_filled():
    zeros = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    out, _ = run(ResponsesRepairer, responses_stream(zeros), verdict=upstream(None))
    assert data(out)[-1]["response"]["usage"] == zeros
    failed = responses_stream(zeros, "response.failed")
    out, _ = run(ResponsesRepairer, failed, verdict=upstream())
    assert data(out)[-1]["response"]["usage"] == zeros  # never dress up a failure


def test_responses_usage_rule_off():
    body = responses_stream({"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})
    out, _ = run(ResponsesRepairer, body, rules=Rules(usage=False), verdict=upstream())
    assert out == body


@pytest.mark.parametrize("usage", [..., {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}])
def test_responses_json_every_count_filled(usage):
    obj = {"id": "interaction_1", "object": "response", "created_at": 1, "model": "m", "status": "completed",
           "output": []}  # fmt: skip
    if usage is not ...:
        obj["usage"] = usage
    assert repair_responses_json(obj, Rules(), FlowContext(), upstream())
    assert {k: obj["usage"][k] for k in RESPONSES_WANT} == RESPONSES_WANT


# --- chat -----------------------------------------------------------------------------------
def chunk(delta: dict, finish: str | None = None, **extra: Any) -> dict:
    return {"id": "interaction_1", "object": "chat.completion.chunk", "created": 1, "model": "devin/swe-2",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}  # fmt: skip


CHAT_WANT = {"prompt_tokens": 12850, "completion_tokens": 400, "total_tokens": 13250,
             "prompt_tokens_details": {"cached_tokens": 11640}}  # fmt: skip


def chat_stream(*finish_extra: dict) -> bytes:
    return sse(chunk({"role": "assistant"}), chunk({"content": "hi"}), *finish_extra, b"[DONE]")


@pytest.mark.parametrize(
    "finish",
    [
        chunk({}, "stop"),  # usage dropped: added on the finish chunk, where CPA puts it
        chunk({}, "stop", usage=None),
        chunk({}, "stop", usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}),
    ],
)
def test_chat_stream_usage_on_the_finish_chunk(finish):
    out, rep = run(ChatRepairer, chat_stream(finish), request={"stream_options": {"include_usage": True}},
                   verdict=upstream())  # fmt: skip
    objs = data(out)
    assert objs[-1]["choices"][0]["finish_reason"] == "stop"
    assert {k: objs[-1]["usage"][k] for k in CHAT_WANT} == CHAT_WANT
    assert [o for o in objs if o.get("usage")] == [objs[-1]]  # exactly one usage, on the finish chunk
    assert events(out)[-1] == b"[DONE]"
    assert any("model swe-2" in n for n in rep.notes)


def test_chat_stream_usage_only_chunk_is_filled_not_duplicated():
    # OpenAI's shape: finish chunk with usage null, then a usage-only chunk (choices [])
    usage_only = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
                  "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}  # fmt: skip
    out, _ = run(ChatRepairer, chat_stream(chunk({}, "stop", usage=None), usage_only), verdict=upstream())
    objs = data(out)
    assert objs[-2].get("usage") is None  # the finish chunk stays without usage
    assert {k: objs[-1]["usage"][k] for k in CHAT_WANT} == CHAT_WANT


def test_chat_stream_non_zero_usage_kept_and_cached_added():
    fin = chunk({}, "tool_calls", usage={"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12})
    out, _ = run(ChatRepairer, chat_stream(fin), verdict=upstream())
    assert data(out)[-1]["usage"] == {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12,
                                      "prompt_tokens_details": {"cached_tokens": 11640}}  # fmt: skip


def test_chat_stream_without_upstream_is_untouched():
    body = chat_stream(chunk({}, "stop"))
    out, _ = run(ChatRepairer, body, verdict=upstream(None))
    assert out == body


def test_chat_json_usage_filled():
    obj = {
        "id": "i",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    }
    assert repair_chat_json(obj, Rules(), FlowContext(), upstream())
    assert {k: obj["usage"][k] for k in CHAT_WANT} == CHAT_WANT
    obj["usage"] = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
                    "prompt_tokens_details": {"cached_tokens": 4}}  # fmt: skip
    assert not repair_chat_json(obj, Rules(), FlowContext(), upstream())


# --- messages -------------------------------------------------------------------------------
def messages_stream(delta_usage: Any, start_usage: Any = None) -> bytes:
    start = {"type": "message_start", "message": {"id": "interaction_1", "type": "message", "role": "assistant",
             "content": [], "model": "devin/swe-2", "stop_reason": None, "stop_sequence": None,
             "usage": start_usage or {"input_tokens": 0, "output_tokens": 0}}}  # fmt: skip
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}}
    if delta_usage is not ...:
        delta["usage"] = delta_usage
    return sse(start, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
               {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
               {"type": "content_block_stop", "index": 0}, delta, {"type": "message_stop"})  # fmt: skip


# Anthropic's terms: input_tokens is the uncached input (7.2), cache_read_input_tokens 7.5
MESSAGES_WANT = {"input_tokens": 1210, "cache_read_input_tokens": 11640, "output_tokens": 400}


@pytest.mark.parametrize("usage", [..., {"input_tokens": 0, "output_tokens": 0}, {}])
def test_messages_stream_message_delta_filled(usage):
    out, rep = run(MessagesRepairer, messages_stream(usage), verdict=upstream())
    objs = data(out)
    got = next(o for o in objs if o["type"] == "message_delta")["usage"]
    assert {k: got[k] for k in MESSAGES_WANT} == MESSAGES_WANT
    assert got["input_tokens"] + got["cache_read_input_tokens"] == DEVIN.input_tokens  # CPA's total input
    # message_start went out before the upstream finished: left as the gateway wrote it
    assert objs[0]["message"]["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert any("model swe-2" in n for n in rep.notes)


def test_messages_stream_gateway_input_kept_without_double_counting():
    # CPA writes its total input (prompt + cache read) into input_tokens: kept, no cache read beside it
    out, _ = run(MessagesRepairer, messages_stream({"input_tokens": 12850, "output_tokens": 0}), verdict=upstream())
    got = next(o for o in data(out) if o["type"] == "message_delta")["usage"]
    assert got == {"input_tokens": 12850, "output_tokens": 400}


# an Anthropic provider's own counts (the upstream decoders' authoritative usage)
ANTHROPIC = UpstreamUsage(input_tokens=42, output_tokens=26, total_tokens=68, source="message_delta",
                          authoritative=True)  # fmt: skip


def test_messages_stream_input_told_by_message_start_is_not_restated():
    # Anthropic's own message_delta leaves the input to message_start: a gateway passing it
    # on as it came passes byte for byte
    body = messages_stream({"output_tokens": 26}, {"input_tokens": 42, "output_tokens": 1})
    out, _ = run(MessagesRepairer, body, verdict=upstream(ANTHROPIC))
    assert out == body


@pytest.mark.parametrize(("start", "delta"), [(0, {"output_tokens": 26}), (40, {"output_tokens": 26}),
                                              (42, {"input_tokens": 0, "output_tokens": 26})])  # fmt: skip
def test_messages_stream_input_message_start_got_wrong_is_set_on_message_delta(start, delta):
    body = messages_stream(delta, {"input_tokens": start, "output_tokens": 1})
    out, _ = run(MessagesRepairer, body, verdict=upstream(ANTHROPIC))
    got = next(o for o in data(out) if o["type"] == "message_delta")["usage"]
    assert got == {"input_tokens": 42, "output_tokens": 26}


def test_messages_json_usage_filled():
    obj = {
        "id": "i",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "hi"}],
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    assert repair_messages_json(obj, Rules(), FlowContext(), upstream())
    assert obj["usage"] == MESSAGES_WANT


# --- Gemini ---------------------------------------------------------------------------------
def gemini_chunk(text: str, finish: str | None = None, usage: Any = ...) -> dict:
    cand: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    obj: dict[str, Any] = {"candidates": [cand], "modelVersion": "devin/swe-2", "responseId": "interaction_1"}
    if usage is not ...:
        obj["usageMetadata"] = usage
    return obj


GEMINI_WANT = {"promptTokenCount": 12850, "candidatesTokenCount": 400, "totalTokenCount": 13250,
               "cachedContentTokenCount": 11640}  # fmt: skip


@pytest.mark.parametrize(
    "usage",
    [..., {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0, "cachedContentTokenCount": 0}],
)
def test_gemini_stream_usage_metadata_filled(usage):
    out, rep = run(GeminiRepairer, sse(gemini_chunk("hi"), gemini_chunk("", "STOP", usage)), verdict=upstream())
    got = data(out)[-1]["usageMetadata"]
    assert {k: got[k] for k in GEMINI_WANT} == GEMINI_WANT
    assert data(out)[-1]["candidates"][0]["finishReason"] == "STOP"
    assert any("model swe-2" in n for n in rep.notes)


def test_gemini_json_usage_filled():
    obj = gemini_chunk("hi", "STOP")
    assert repair_gemini_json(obj, Rules(), FlowContext(), upstream())
    assert obj["usageMetadata"] == GEMINI_WANT
    whole = gemini_chunk("hi", "STOP", {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5,
                                        "cachedContentTokenCount": 1})  # fmt: skip
    before = orjson.dumps(whole)
    assert not repair_gemini_json(whole, Rules(), FlowContext(), upstream())
    assert orjson.dumps(whole) == before


# --- field 28 counts fill the same way --------------------------------------------------------
def test_field28_counts_fill_like_field7():
    f28 = UpstreamUsage(1500, 42, 1000, 1542, "", "field28")
    out, rep = run(ResponsesRepairer, responses_stream(...), verdict=upstream(f28))
    assert data(out)[-1]["response"]["usage"] == {"input_tokens": 1500, "output_tokens": 42,
                                                  "input_tokens_details": {"cached_tokens": 1000},
                                                  "total_tokens": 1542}  # fmt: skip
    assert any("(field28)" in n for n in rep.notes)
