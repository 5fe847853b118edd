"""Provider responses as their APIs document them, for the upstream-leg decoders' tests
(tests/wire/test_upstream_decoders.py) and fuzz corpus (tests/support/fuzz_upstream.py).

Each sample is written after the provider's own documentation of its wire (the Gemini API's
``streamGenerateContent?alt=sse`` and ``generateContent`` responses, the Gemini CLI's
``{"response": ...}`` envelope, the Interactions API's streaming events, Anthropic's
Messages streaming events and error events, OpenAI's chat completion chunks and the
Responses API's streaming events), and ``EXPECT`` gives what the decoder must record,
worked out by hand from the sample: finish (raw), outcome, usage (input, output with the
thoughts, reasoning, cached, total), errors, how the body ended, and the bytes of text
and tool arguments hashed.
"""

from __future__ import annotations

import orjson


def sse(*objs, crlf: bool = False, events: tuple[str | None, ...] = ()) -> bytes:
    end = b"\r\n\r\n" if crlf else b"\n\n"
    out = b""
    for i, o in enumerate(objs):
        name = events[i] if i < len(events) else None
        head = b"event: " + name.encode() + (b"\r\n" if crlf else b"\n") if name else b""
        out += head + b"data: " + (o if isinstance(o, bytes) else orjson.dumps(o)) + end
    return out


def _gc(parts, finish=None, usage=None, model="gemini-2.5-flash"):
    c = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        c["finishReason"] = finish
    o = {"candidates": [c], "modelVersion": model, "responseId": "r1"}
    if usage:
        o["usageMetadata"] = usage
    return o


G_STOP = [
    _gc([{"text": "The"}], usage={"promptTokenCount": 8, "totalTokenCount": 8}),
    _gc([{"text": " opposite of hot is cold."}], "STOP",
        {"promptTokenCount": 8, "candidatesTokenCount": 7, "totalTokenCount": 15}),
]  # fmt: skip
G_THOUGHTS_MAX = [
    _gc([{"text": "Let me think about this.", "thought": True}]),
    _gc([{"text": "Here is a long ans"}]),
    _gc([{"text": "wer"}], "MAX_TOKENS",
        {"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 50, "totalTokenCount": 65,
         "cachedContentTokenCount": 4}),
]  # fmt: skip
G_PARALLEL = [
    _gc([{"text": "Checking both."}]),
    _gc([{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
         {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}], "STOP",
        {"promptTokenCount": 20, "candidatesTokenCount": 12, "totalTokenCount": 32}),
]  # fmt: skip
G_SAFETY = [
    _gc([{"text": "I can"}]),
    {"candidates": [{"content": {"parts": [], "role": "model"}, "finishReason": "SAFETY", "index": 0,
                     "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
                                        "blocked": True}]}],
     "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 2, "totalTokenCount": 11}},
]  # fmt: skip
G_BLOCKED = {
    "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
    "usageMetadata": {"promptTokenCount": 6, "totalTokenCount": 6},
}
G_ERROR = {
    "error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}
}

I_EVENTS = [
    ("interaction.created", {"interaction": {"id": "v1_a", "status": "in_progress", "object": "interaction",
                                             "model": "gemini-3-flash-preview"}, "event_type": "interaction.created"}),
    ("interaction.status_update", {"interaction_id": "v1_a", "status": "in_progress", "event_type": "interaction.status_update"}),
    ("step.start", {"index": 0, "step": {"type": "thought"}, "event_type": "step.start"}),
    ("step.delta", {"index": 0, "delta": {"type": "thought_summary", "content": {"type": "text", "text": "Counting."}},
                    "event_type": "step.delta"}),
    ("step.stop", {"index": 0, "event_type": "step.stop"}),
    ("step.start", {"index": 1, "step": {"type": "model_output"}, "event_type": "step.start"}),
    ("step.delta", {"index": 1, "delta": {"type": "text", "text": "1, 2, 3"}, "event_type": "step.delta"}),
    ("step.stop", {"index": 1, "event_type": "step.stop"}),
    ("step.start", {"index": 2, "step": {"type": "function_call", "id": "c1", "name": "count", "arguments": {}},
                    "event_type": "step.start"}),
    ("step.delta", {"index": 2, "delta": {"type": "arguments_delta", "arguments": "{\"to\":"}, "event_type": "step.delta"}),
    ("step.delta", {"index": 2, "delta": {"type": "arguments_delta", "arguments": "25}"}, "event_type": "step.delta"}),
    ("step.stop", {"index": 2, "event_type": "step.stop"}),
]  # fmt: skip


def _completed(status, usage):
    return ("interaction.completed", {"interaction": {"id": "v1_a", "status": status, "object": "interaction",
                                                      "usage": usage}, "event_type": "interaction.completed"})  # fmt: skip


I_USAGE = {"total_input_tokens": 11, "total_output_tokens": 7, "total_thought_tokens": 3, "total_cached_tokens": 2,
           "total_tokens": 21}  # fmt: skip


def _isse(evs, done=True):
    body = sse(*(o for _, o in evs), events=tuple(n for n, _ in evs))
    return body + (b"event: done\ndata: [DONE]\n\n" if done else b"")


A_START = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                                "model": "claude-sonnet-4-5", "stop_reason": None, "stop_sequence": None,
                                                "usage": {"input_tokens": 25, "cache_creation_input_tokens": 0,
                                                          "cache_read_input_tokens": 100, "output_tokens": 1}}}  # fmt: skip
A_TEXT = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}},
    {"type": "content_block_stop", "index": 0},
]
A_TOOL = [
    {"type": "content_block_start", "index": 1, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "thinking_delta", "thinking": "Weather first."}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "signature_delta", "signature": "EqQB"}},
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"location\": \"San Fra"}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "ncisco, CA\"}"}},
    {"type": "content_block_stop", "index": 2},
]  # fmt: skip


def _adelta(stop, out=15):
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": out},
    }


def _asse(*objs):
    return sse(*objs, events=tuple(o["type"] for o in objs))


def _chunk(delta, finish=None, **extra):
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}  # fmt: skip


C_USAGE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": [],
           "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21,
                     "prompt_tokens_details": {"cached_tokens": 3}, "completion_tokens_details": {"reasoning_tokens": 4}}}  # fmt: skip
C_BODY = [
    _chunk({"role": "assistant", "content": ""}),
    _chunk({"content": "Hello"}),
    _chunk({"content": " world"}),
    _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":1}"}}]}),
]  # fmt: skip


def _r(typ, seq, **f):
    return {"type": typ, "sequence_number": seq, **f}


R_BASE = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5", "output": []}
R_USAGE = {"input_tokens": 36, "input_tokens_details": {"cached_tokens": 12}, "output_tokens": 87,
           "output_tokens_details": {"reasoning_tokens": 64}, "total_tokens": 123}  # fmt: skip
R_HEAD = [
    _r("response.created", 0, response={**R_BASE, "status": "in_progress"}),
    _r("response.in_progress", 1, response={**R_BASE, "status": "in_progress"}),
    _r("response.output_item.added", 2, output_index=0, item={"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}),
    _r("response.output_text.delta", 3, item_id="msg_1", output_index=0, content_index=0, delta="Hi"),
    _r("response.output_text.delta", 4, item_id="msg_1", output_index=0, content_index=0, delta=" there"),
    _r("response.output_item.added", 5, output_index=1, item={"id": "fc_1", "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "c1", "name": "f"}),
    _r("response.function_call_arguments.delta", 6, item_id="fc_1", output_index=1, delta="{\"x\":"),
    _r("response.function_call_arguments.delta", 7, item_id="fc_1", output_index=1, delta="2}"),
]  # fmt: skip


def _rsse(*objs):
    return sse(*objs, events=tuple(o["type"] for o in objs))


ESCAPED = 'Line one\n"quoted" \\ caf\u00e9 \U0001f600'
"""A text delta with what JSON escapes: a newline, quotes, a backslash, non-ASCII (as
``\\u`` escapes, as Python's and Google's encoders write them), an astral character."""


def spaced(*objs) -> bytes:
    """SSE with ``json.dumps``'s spacing and ASCII escapes (the Gemini API documents its
    stream so: ``{"candidates": [{"content": {"parts": [{"text": "The"}]...``)."""
    import json

    return b"".join(b"data: " + json.dumps(o).encode() + b"\r\n\r\n" for o in objs)


SAMPLES: dict[tuple[str, str, str], bytes] = {
    ("gemini", "sse", "spaced_escapes"): spaced(_gc([{"text": ESCAPED}], usage={"promptTokenCount": 8, "totalTokenCount": 8}),
                                                _gc([{"text": ESCAPED}]), _gc([{"text": ""}], "STOP",
                                                {"promptTokenCount": 8, "candidatesTokenCount": 9, "totalTokenCount": 17})),
    ("gemini", "sse", "stop"): sse(*G_STOP, crlf=True),
    ("gemini", "sse", "thoughts_max"): sse(*G_THOUGHTS_MAX),
    ("gemini", "sse", "parallel"): sse(*G_PARALLEL),
    ("gemini", "sse", "safety"): sse(*G_SAFETY),
    ("gemini", "sse", "blocked"): sse(G_BLOCKED),
    ("gemini", "sse", "error"): sse(G_STOP[0], G_ERROR),
    ("gemini", "sse", "no_finish"): sse(G_STOP[0]),
    ("gemini", "sse", "cut"): sse(G_STOP[0]) + sse(G_STOP[1])[:40],
    ("gemini", "sse", "envelope"): sse(*({"response": o, "traceId": "t1"} for o in G_THOUGHTS_MAX)),
    ("gemini", "json", "stop"): orjson.dumps({"candidates": [{"content": {"parts": [{"text": "The opposite of hot is cold."}],
                                                                          "role": "model"}, "finishReason": "STOP", "index": 0}],
                                              "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 7,
                                                                "totalTokenCount": 15}, "modelVersion": "gemini-2.5-flash"}, option=orjson.OPT_INDENT_2),
    ("gemini", "json", "envelope_safety"): orjson.dumps({"response": G_SAFETY[1] | {"candidates": [
        {"content": {"parts": [{"text": "I can"}], "role": "model"}, "finishReason": "SAFETY", "index": 0}]}, "traceId": "t"}),
    ("gemini", "json", "two_candidates"): orjson.dumps({"candidates": [
        {"content": {"parts": [{"text": "one"}], "role": "model"}, "finishReason": "MAX_TOKENS", "index": 0},
        {"content": {"parts": [{"text": "two"}], "role": "model"}, "finishReason": "STOP", "index": 1}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4, "totalTokenCount": 7}}),
    ("gemini", "json", "cut"): orjson.dumps({"candidates": [{"content": {"parts": [{"text": "The opposite"}]}}]})[:45],
    # :streamGenerateContent without alt=sse (Portkey calls it so): a JSON array of the
    # chunks, framed as Google frames it (pretty objects, LF-comma-CRLF between, LF ] at the end)
    ("gemini", "json", "array_stream"): b"[" + b"\n,\r\n".join(orjson.dumps(o, option=orjson.OPT_INDENT_2)
                                                                for o in G_PARALLEL) + b"\n]",
    ("interactions", "sse", "completed"): _isse([*I_EVENTS, _completed("requires_action", I_USAGE)]),
    ("interactions", "sse", "incomplete"): _isse([*I_EVENTS[:7], _completed("incomplete", I_USAGE)]),
    ("interactions", "sse", "error"): _isse([*I_EVENTS[:7], ("error", {"event_type": "error", "error": {"code": 503, "message": "The model is overloaded."}})], done=False),
    ("interactions", "sse", "no_finish"): _isse(I_EVENTS, done=False),
    ("interactions", "json", "completed"): orjson.dumps({"id": "v1_a", "status": "completed", "model": "gemini-3-flash-preview",
        "steps": [{"type": "model_output", "content": [{"type": "text", "text": "1, 2, 3"}]},
                  {"type": "function_call", "id": "c1", "name": "count", "arguments": {"to": 25}}], "usage": I_USAGE}),
    ("anthropic", "sse", "end_turn"): _asse(A_START, *A_TEXT, _adelta("end_turn"), {"type": "message_stop"}),
    ("anthropic", "sse", "tool_use"): _asse(A_START, *A_TEXT, *A_TOOL, _adelta("tool_use", 89), {"type": "message_stop"}),
    ("anthropic", "sse", "refusal"): _asse(A_START, *A_TEXT, _adelta("refusal", 3), {"type": "message_stop"}),
    ("anthropic", "sse", "context"): _asse(A_START, *A_TEXT, _adelta("model_context_window_exceeded"), {"type": "message_stop"}),
    ("anthropic", "sse", "pause"): _asse(A_START, *A_TEXT, _adelta("pause_turn"), {"type": "message_stop"}),
    ("anthropic", "sse", "error"): _asse(A_START, *A_TEXT[:3], {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ("anthropic", "sse", "no_finish"): _asse(A_START, *A_TEXT),
    ("anthropic", "json", "max_tokens"): orjson.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hello!"}, {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}],
        "stop_reason": "max_tokens", "stop_sequence": None,
        "usage": {"input_tokens": 10, "cache_creation_input_tokens": 2, "cache_read_input_tokens": 5, "output_tokens": 3}}),
    ("openai_chat", "sse", "length"): sse(*C_BODY, _chunk({}, "length"), C_USAGE, b"[DONE]"),
    # an OpenAI refusal: refusal deltas, then a normal stop (how OpenAI says one)
    ("openai_chat", "sse", "refusal"): sse(C_BODY[0], _chunk({"refusal": "I can't "}), _chunk({"refusal": "help."}),
                                           _chunk({}, "stop"), C_USAGE, b"[DONE]"),
    ("openai_chat", "sse", "error"): sse(*C_BODY[:3], {"error": {"message": "The server had an error", "type": "server_error", "param": None, "code": None}}),
    ("openai_chat", "sse", "done_no_finish"): sse(*C_BODY, b"[DONE]"),
    ("openai_chat", "sse", "eof_no_finish"): sse(*C_BODY),
    ("openai_chat", "json", "content_filter"): orjson.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello world", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}, "finish_reason": "content_filter"}],
        "usage": C_USAGE["usage"]}),
    ("responses", "sse", "completed"): _rsse(*R_HEAD, _r("response.completed", 8, response={**R_BASE, "status": "completed", "usage": R_USAGE})),
    ("responses", "sse", "refusal"): _rsse(*R_HEAD[:3], _r("response.refusal.delta", 3, item_id="msg_1", output_index=0,
                                                           content_index=0, delta="I can't help."),
                                           _r("response.completed", 4, response={**R_BASE, "status": "completed", "usage": R_USAGE})),
    ("responses", "sse", "incomplete"): _rsse(*R_HEAD, _r("response.incomplete", 8, response={**R_BASE, "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"}, "usage": R_USAGE})),
    ("responses", "sse", "content_filter"): _rsse(*R_HEAD[:5], _r("response.incomplete", 5, response={**R_BASE, "status": "incomplete",
        "incomplete_details": {"reason": "content_filter"}, "usage": R_USAGE})),
    ("responses", "sse", "failed"): _rsse(*R_HEAD[:5], _r("response.failed", 5, response={**R_BASE, "status": "failed",
        "error": {"code": "server_error", "message": "The model failed."}})),
    ("responses", "sse", "error_event"): _rsse(*R_HEAD[:5], _r("error", 5, code="rate_limit_exceeded", message="Rate limit reached.", param=None)),
    ("responses", "sse", "no_finish"): _rsse(*R_HEAD),
    ("responses", "json", "incomplete"): orjson.dumps({**R_BASE, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"id": "msg_1", "type": "message", "status": "incomplete", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Hi there", "annotations": []}]},
                   {"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "c1", "name": "f", "arguments": "{\"x\":2}"}],
        "usage": R_USAGE, "error": None}),
}  # fmt: skip

# (finish, outcome, ended, errors, usage (input, output, reasoning, cached, total) or None, text bytes, args bytes)
EXPECT: dict[tuple[str, str, str], tuple] = {
    ("gemini", "sse", "spaced_escapes"): ("STOP", "complete", "finish", 0, (8, 9, 0, 0, 17), 2 * 30, 0),
    ("gemini", "sse", "stop"): ("STOP", "complete", "finish", 0, (8, 7, 0, 0, 15), 28, 0),
    ("gemini", "sse", "thoughts_max"): ("MAX_TOKENS", "max_tokens", "finish", 0, (10, 55, 50, 4, 65), 21, 0),
    ("gemini", "sse", "parallel"): ("STOP", "complete", "finish", 0, (20, 12, 0, 0, 32), 14, 31),
    ("gemini", "sse", "safety"): ("SAFETY", "content_filter", "finish", 0, (9, 2, 0, 0, 11), 5, 0),
    ("gemini", "sse", "blocked"): ("PROHIBITED_CONTENT", "content_filter", "finish", 0, (6, 0, 0, 0, 6), 0, 0),
    ("gemini", "sse", "error"): (None, "failed", "no_finish", 1, (8, 0, 0, 0, 8), 3, 0),
    ("gemini", "sse", "no_finish"): (None, "failed", "no_finish", 0, (8, 0, 0, 0, 8), 3, 0),
    ("gemini", "sse", "cut"): (None, "failed", "cut", 0, (8, 0, 0, 0, 8), 3, 0),
    ("gemini", "sse", "envelope"): ("MAX_TOKENS", "max_tokens", "finish", 0, (10, 55, 50, 4, 65), 21, 0),
    ("gemini", "json", "stop"): ("STOP", "complete", "finish", 0, (8, 7, 0, 0, 15), 28, 0),
    ("gemini", "json", "envelope_safety"): ("SAFETY", "content_filter", "finish", 0, (9, 2, 0, 0, 11), 5, 0),
    ("gemini", "json", "two_candidates"): ("MAX_TOKENS", "max_tokens", "finish", 0, (3, 4, 0, 0, 7), 3, 0),
    ("gemini", "json", "cut"): (None, "failed", "cut", 0, None, 0, 0),
    ("gemini", "json", "array_stream"): ("STOP", "complete", "finish", 0, (20, 12, 0, 0, 32), 14, 31),
    ("interactions", "sse", "completed"): ("requires_action", "complete", "finish", 0, (11, 10, 3, 2, 21), 7, 9),
    ("interactions", "sse", "incomplete"): ("incomplete", "max_tokens", "finish", 0, (11, 10, 3, 2, 21), 7, 0),
    ("interactions", "sse", "error"): (None, "failed", "no_finish", 1, None, 7, 0),
    ("interactions", "sse", "no_finish"): (None, "failed", "no_finish", 0, None, 7, 9),
    ("interactions", "json", "completed"): ("completed", "complete", "finish", 0, (11, 10, 3, 2, 21), 7, 9),
    ("anthropic", "sse", "end_turn"): ("end_turn", "complete", "finish", 0, (125, 15, 0, 100, 140), 6, 0),
    ("anthropic", "sse", "tool_use"): ("tool_use", "complete", "finish", 0, (125, 89, 0, 100, 214), 6, 33),
    ("anthropic", "sse", "refusal"): ("refusal", "content_filter", "finish", 0, (125, 3, 0, 100, 128), 6, 0),
    ("anthropic", "sse", "context"): ("model_context_window_exceeded", "max_tokens", "finish", 0, (125, 15, 0, 100, 140), 6, 0),
    ("anthropic", "sse", "pause"): ("pause_turn", "max_tokens", "finish", 0, (125, 15, 0, 100, 140), 6, 0),  # unfinished (wire/stops.py)
    ("anthropic", "sse", "error"): (None, "failed", "no_finish", 1, (125, 1, 0, 100, 126), 5, 0),
    ("anthropic", "sse", "no_finish"): (None, "failed", "no_finish", 0, (125, 1, 0, 100, 126), 6, 0),
    ("anthropic", "json", "max_tokens"): ("max_tokens", "max_tokens", "finish", 0, (17, 3, 0, 5, 20), 6, 7),
    ("openai_chat", "sse", "length"): ("length", "max_tokens", "finish", 0, (9, 12, 4, 3, 21), 11, 7),
    ("openai_chat", "sse", "refusal"): ("stop", "content_filter", "finish", 0, (9, 12, 4, 3, 21), 0, 0),
    ("openai_chat", "sse", "error"): (None, "failed", "no_finish", 1, None, 11, 0),
    ("openai_chat", "sse", "done_no_finish"): (None, "failed", "no_finish", 0, None, 11, 7),
    ("openai_chat", "sse", "eof_no_finish"): (None, "failed", "no_finish", 0, None, 11, 7),
    ("openai_chat", "json", "content_filter"): ("content_filter", "content_filter", "finish", 0, (9, 12, 4, 3, 21), 11, 7),
    ("responses", "sse", "completed"): ("completed", "complete", "finish", 0, (36, 87, 64, 12, 123), 8, 7),
    ("responses", "sse", "refusal"): ("completed", "content_filter", "finish", 0, (36, 87, 64, 12, 123), 0, 0),
    ("responses", "sse", "incomplete"): ("incomplete/max_output_tokens", "max_tokens", "finish", 0, (36, 87, 64, 12, 123), 8, 7),
    ("responses", "sse", "content_filter"): ("incomplete/content_filter", "content_filter", "finish", 0, (36, 87, 64, 12, 123), 8, 0),
    ("responses", "sse", "failed"): ("failed", "failed", "finish", 1, None, 8, 0),
    ("responses", "sse", "error_event"): (None, "failed", "no_finish", 1, None, 8, 0),
    ("responses", "sse", "no_finish"): (None, "failed", "no_finish", 0, None, 8, 7),
    ("responses", "json", "incomplete"): ("incomplete/max_output_tokens", "max_tokens", "finish", 0, (36, 87, 64, 12, 123), 8, 7),
}  # fmt: skip
