"""The benchmarks' streams: long synthetic turns as an unfixed CPA emits them.

Devin on Responses, chat and messages, and the Claude path on Responses, in the shapes of
the recordings: reasoning and text deltas, several write_file calls with thousands of
argument deltas (all calls closed at the end, Go-escaped ``\\u003c``), usage on the
terminal; and a short Devin turn (:func:`turn_stream`) where what a flow costs beyond its
events shows. Seeded, so every run builds the same bytes. Public: the end-to-end tests use
them for their large bodies.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from streamfix.wire.sse import SseParser

MODEL = "devin/swe-2"
INTERACTION_ID = "interaction_3f9c1a2b-4d5"
CALLS = (1200, 300, 200, 100)
"""Argument deltas per write_file call of the default streams (CPA users report 3500-4700
deltas for one large call; four calls make the item bookkeeping work)."""

RESPONSES_REQUEST: dict[str, Any] = {
    "model": MODEL,
    "stream": True,
    "input": [{"role": "user", "content": "Build the landing pages."}],
    "tools": [
        {
            "type": "function",
            "name": "write_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        }
    ],
}
CHAT_REQUEST: dict[str, Any] = {
    "model": MODEL,
    "stream": True,
    "messages": [{"role": "user", "content": "Build the landing pages."}],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "write_file",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                    "required": ["path", "content"],
                },
            },
        }
    ],
}

_WORDS = (  # noqa: SIM905  (prose reads better than a list of words)
    "the page needs a hero section with a call to action and three feature cards plus "
    "a footer that links to pricing docs and the blog so I will write index.html first "
    "then styles.css and keep every asset relative to the site root"
).split()


# --- synthetic CPA streams ----------------------------------------------------------
def deltas(rng: random.Random, n: int) -> list[str]:
    """n token-sized text deltas (1-4 words each). The first has no leading space, as a
    model's text begins (in each of the 28 recordings with text, e.g.
    ``recordings/responses-devin-toolcall``: ``"Creating the file"``, then ``" now."``);
    with one, any later delta that began with the same word was a prefix of the text,
    which rule replay holds until the next delta."""
    words = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4))) for _ in range(n)]
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def _html(rng: random.Random, k: int, size: int) -> str:
    lines = [f'<!doctype html>\n<html lang="en">\n<head><title>Page {k} & co</title></head>\n<body>']
    n = 0
    while n < size:
        line = f'  <p class="c{rng.randint(0, 9)}">' + " ".join(rng.choice(_WORDS) for _ in range(8)) + "</p>"
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines + ["</body>\n</html>\n"])


def _split(s: str, n: int) -> list[str]:
    """``s`` cut into n pieces of similar length (never empty)."""
    n = max(1, min(n, len(s)))
    step, extra = divmod(len(s), n)
    out, i = [], 0
    for j in range(n):
        w = step + (1 if j < extra else 0)
        out.append(s[i : i + w])
        i += w
    return out


def _go(data: bytes) -> bytes:
    """Go's encoding/json (sjson) escapes <, > and & inside strings; they only occur there."""
    return data.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")


def _calls(rng: random.Random, calls: Sequence[int]) -> list[tuple[str, str, list[str]]]:
    """(call id, full arguments, argument deltas) per call; ~20 argument bytes per delta."""
    out = []
    for k, n in enumerate(calls):
        args = json.dumps({"path": f"site/page_{k}.html", "content": _html(rng, k, 20 * n)}, separators=(",", ":"))
        out.append((f"write_file_{k}#{rng.getrandbits(32):08x}", args, _split(args, n)))
    return out


def devin_responses_stream(
    calls: Sequence[int] = CALLS, reasoning: int = 300, text: int = 400, seed: int = 1, keepalive_every: int = 1000
) -> bytes:
    """A Devin turn on unfixed CPA's ``/v1/responses``: reasoning, text, then ``calls``
    function calls, all of them closed only at the end; no status on function_call items,
    no ``response.in_progress``, reasoning deltas without item_id/summary_index, one
    summary_text per delta, ``output_index`` = step index, the body's extra trailing LF."""
    rng = random.Random(seed)
    out: list[bytes] = []
    seq = 0

    def emit(type_: str, **fields: Any) -> None:
        nonlocal seq
        seq += 1
        obj = {"type": type_, **fields, "sequence_number": seq}
        out.append(b"event: " + type_.encode() + b"\ndata: " + _go(orjson.dumps(obj)) + b"\n\n")
        if keepalive_every and seq % keepalive_every == 0:
            out.append(b": keep-alive\n\n")

    emit(
        "response.created",
        response={"id": INTERACTION_ID, "object": "response", "status": "in_progress", "model": MODEL, "output": []},
    )
    rdeltas = deltas(rng, reasoning)
    emit(
        "response.output_item.added",
        output_index=0,
        item={"id": "item_0", "type": "reasoning", "status": "in_progress", "encrypted_content": "", "summary": []},
    )
    for d in rdeltas:
        emit("response.reasoning_summary_text.delta", output_index=0, delta=d)
    reasoning_item = {
        "id": "item_0",
        "type": "reasoning",
        "encrypted_content": "",
        "summary": [{"type": "summary_text", "text": d} for d in rdeltas],
    }
    emit("response.output_item.done", output_index=0, item=reasoning_item)

    tdeltas = deltas(rng, text)
    full = "".join(tdeltas)
    emit(
        "response.output_item.added",
        output_index=1,
        item={"id": "item_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []},
    )
    emit(
        "response.content_part.added",
        output_index=1,
        content_index=0,
        item_id="item_1",
        part={"type": "output_text", "text": ""},
    )
    for d in tdeltas:
        emit("response.output_text.delta", output_index=1, content_index=0, item_id="item_1", delta=d)
    emit("response.output_text.done", output_index=1, content_index=0, item_id="item_1", text=full, logprobs=[])
    emit(
        "response.content_part.done",
        output_index=1,
        content_index=0,
        item_id="item_1",
        part={"type": "output_text", "text": full},
    )
    message_item = {
        "id": "item_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": full}],
    }
    emit("response.output_item.done", output_index=1, item=message_item)

    call_items = []
    for k, (cid, args, pieces) in enumerate(_calls(rng, calls)):
        emit(
            "response.output_item.added",
            output_index=2 + k,
            item={"id": cid, "type": "function_call", "call_id": cid, "name": "write_file", "arguments": ""},
        )
        for p in pieces:
            emit("response.function_call_arguments.delta", output_index=2 + k, item_id=cid, delta=p)
        call_items.append({"id": cid, "type": "function_call", "call_id": cid, "name": "write_file", "arguments": args})
    for k, item in enumerate(call_items):
        emit(
            "response.function_call_arguments.done", output_index=2 + k, item_id=item["id"], arguments=item["arguments"]
        )
        emit("response.output_item.done", output_index=2 + k, item=item)

    out_tokens = (len(full) + sum(len(i["arguments"]) for i in call_items)) // 4
    emit(
        "response.completed",
        response={
            "id": INTERACTION_ID,
            "object": "response",
            "status": "completed",
            "model": MODEL,
            "output": [reasoning_item, message_item, *call_items],
            "usage": {
                "input_tokens": 12850,
                "output_tokens": out_tokens,
                "total_tokens": 12850 + out_tokens,
                "input_tokens_details": {"cached_tokens": 11640},
            },
        },
    )
    out.append(b"\n")
    return b"".join(out)


def devin_chat_stream(
    calls: Sequence[int] = CALLS, reasoning: int = 300, text: int = 400, seed: int = 1, keepalive_every: int = 1000
) -> bytes:
    """The same turn on unfixed CPA's ``/v1/chat/completions``: ``tool_calls[].index`` =
    step index (2, 3, ...), interaction id as chunk id, usage on the finish chunk, [DONE]."""
    rng = random.Random(seed)
    out: list[bytes] = []
    base = {"id": INTERACTION_ID, "object": "chat.completion.chunk", "created": 1789012345, "model": MODEL}

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None) -> None:
        obj: dict[str, Any] = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage is not None:
            obj["usage"] = usage
        out.append(b"data: " + _go(orjson.dumps(obj)) + b"\n\n")
        if keepalive_every and len(out) % keepalive_every == 0:
            out.append(b": keep-alive\n\n")

    chunk({"role": "assistant"})
    for d in deltas(rng, reasoning):
        chunk({"reasoning_content": d})
    tdeltas = deltas(rng, text)
    for d in tdeltas:
        chunk({"content": d})
    n_args = 0
    for k, (cid, args, pieces) in enumerate(_calls(rng, calls)):
        chunk(
            {
                "tool_calls": [
                    {"index": 2 + k, "id": cid, "type": "function", "function": {"name": "write_file", "arguments": ""}}
                ]
            }
        )
        for p in pieces:
            chunk({"tool_calls": [{"index": 2 + k, "function": {"arguments": p}}]})
        n_args += len(args)
    out_tokens = (len("".join(tdeltas)) + n_args) // 4
    chunk(
        {},
        "tool_calls",
        {
            "prompt_tokens": 12850,
            "completion_tokens": out_tokens,
            "total_tokens": 12850 + out_tokens,
            "prompt_tokens_details": {"cached_tokens": 11640},
        },
    )
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def claude_responses_stream(text: int = 600, calls: Sequence[int] = CALLS, seed: int = 2) -> bytes:
    """A Claude/Kiro turn on unfixed CPA's ``/v1/responses`` (v7.1.64..v7.2.89): a message
    whose text streams first and is closed only at the end, after the function calls
    (each closed in place), so every call's ``output_item.added`` arrives while the message
    is open; ``event:`` lines, ``sequence_number`` after ``type``."""
    rng = random.Random(seed)
    out: list[bytes] = []
    seq = 0
    rid = "msg_01HqA9ZkT3vF8w2bXyR7cD4e"
    mid = f"msg_{rid}_0"

    def emit(type_: str, **fields: Any) -> None:
        nonlocal seq
        seq += 1
        obj = {"type": type_, "sequence_number": seq, **fields}
        out.append(b"event: " + type_.encode() + b"\ndata: " + _go(orjson.dumps(obj)) + b"\n\n")

    resp = {
        "id": rid,
        "object": "response",
        "created_at": 1789012400,
        "status": "in_progress",
        "model": "claude-sonnet-4-5",
    }
    emit("response.created", response={**resp, "output": []})
    emit("response.in_progress", response=resp)
    emit(
        "response.output_item.added",
        output_index=0,
        item={"id": mid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
    )
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    emit("response.content_part.added", item_id=mid, output_index=0, content_index=0, part=part)
    tdeltas = deltas(rng, text)
    for d in tdeltas:
        emit("response.output_text.delta", item_id=mid, output_index=0, content_index=0, delta=d, logprobs=[])
    full = "".join(tdeltas)
    items = []
    for k, (cid, args, pieces) in enumerate(_calls(rng, calls)):
        fid = f"fc_{cid}"
        item = {
            "id": fid,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": cid,
            "name": "write_file",
        }
        emit("response.output_item.added", output_index=1 + k, item=item)
        for piece in pieces:
            emit("response.function_call_arguments.delta", item_id=fid, output_index=1 + k, delta=piece)
        emit("response.function_call_arguments.done", item_id=fid, output_index=1 + k, arguments=args)
        done = {**item, "status": "completed", "arguments": args}
        emit("response.output_item.done", output_index=1 + k, item=done)
        items.append(done)
    emit("response.output_text.done", item_id=mid, output_index=0, content_index=0, text=full, logprobs=[])
    emit("response.content_part.done", item_id=mid, output_index=0, content_index=0, part={**part, "text": full})
    message = {
        "id": mid,
        "type": "message",
        "status": "completed",
        "content": [{**part, "text": full}],
        "role": "assistant",
    }
    emit("response.output_item.done", output_index=0, item=message)
    n_out = (len(full) + sum(len(i["arguments"]) for i in items)) // 4
    emit(
        "response.completed",
        response={
            **resp,
            "status": "completed",
            "output": [message, *items],
            "usage": {"input_tokens": 9120, "output_tokens": n_out, "total_tokens": 9120 + n_out},
        },
    )
    return b"".join(out)


def devin_messages_stream(calls: Sequence[int] = CALLS, reasoning: int = 300, text: int = 400, seed: int = 3) -> bytes:
    """The Devin turn on unfixed CPA's ``/v1/messages``: CPA's "three newlines" framing, a
    thinking block, a text block, tool_use blocks with input_json_delta, message_delta
    with ``stop_reason: tool_use`` and usage, message_stop."""
    rng = random.Random(seed)
    out: list[bytes] = []

    def emit(obj: dict[str, Any]) -> None:
        out.append(b"event: " + obj["type"].encode() + b"\ndata: " + _go(orjson.dumps(obj)) + b"\n\n\n")

    emit(
        {
            "type": "message_start",
            "message": {
                "id": INTERACTION_ID,
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": MODEL,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 12850, "output_tokens": 0},
            },
        }
    )
    emit({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}})
    for d in deltas(rng, reasoning):
        emit({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": d}})
    emit({"type": "content_block_stop", "index": 0})
    emit({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}})
    tdeltas = deltas(rng, text)
    for d in tdeltas:
        emit({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": d}})
    emit({"type": "content_block_stop", "index": 1})
    n_args = 0
    for k, (cid, args, pieces) in enumerate(_calls(rng, calls)):
        emit(
            {
                "type": "content_block_start",
                "index": 2 + k,
                "content_block": {"type": "tool_use", "id": cid, "name": "write_file", "input": {}},
            }
        )
        for piece in pieces:
            emit(
                {
                    "type": "content_block_delta",
                    "index": 2 + k,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }
            )
        emit({"type": "content_block_stop", "index": 2 + k})
        n_args += len(args)
    n_out = (len("".join(tdeltas)) + n_args) // 4
    emit(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"input_tokens": 12850, "output_tokens": n_out},
        }
    )
    emit({"type": "message_stop"})
    return b"".join(out)


MESSAGES_REQUEST: dict[str, Any] = {
    "model": MODEL,
    "stream": True,
    "max_tokens": 32000,
    "messages": [{"role": "user", "content": "Build the landing pages."}],
    "tools": [{"name": "write_file", "input_schema": RESPONSES_REQUEST["tools"][0]["parameters"]}],
}
CLAUDE_RESPONSES_REQUEST: dict[str, Any] = {**RESPONSES_REQUEST, "model": "claude-sonnet-4-5"}


def long_responses_stream(events: int = 100_000) -> bytes:
    """``events`` text deltas into one message (Devin path, closed only by the terminal):
    the memory figure's stream (the open item's text is all that may grow)."""
    return devin_responses_stream(calls=(), reasoning=0, text=events, keepalive_every=0)


STREAMS: dict[str, tuple[str, str, dict[str, Any], Callable[[], bytes]]] = {
    # name -> (api, path, request body, builder)
    "responses": ("responses", "/v1/responses", RESPONSES_REQUEST, devin_responses_stream),
    "responses-claude": ("responses", "/v1/responses", CLAUDE_RESPONSES_REQUEST, claude_responses_stream),
    "chat": ("chat", "/v1/chat/completions", CHAT_REQUEST, devin_chat_stream),
    "messages": ("messages", "/v1/messages", MESSAGES_REQUEST, devin_messages_stream),
}


def turn_stream() -> bytes:
    """A short Devin turn on unfixed CPA's ``/v1/responses`` (166 events: reasoning, text,
    two calls; the capacity benchmark's): what a flow costs beyond its events shows here."""
    return devin_responses_stream(calls=(60, 30), reasoning=20, text=40, keepalive_every=0)


SHORT_STREAMS: dict[str, tuple[str, str, dict[str, Any], Callable[[], bytes]]] = {
    "turn": ("responses", "/v1/responses", RESPONSES_REQUEST, turn_stream),
}
"""Streams only the instruction benchmark runs, when named (``--streams turn``)."""


def events_of(body: bytes) -> list[bytes]:
    """The body cut into its events' raw bytes (one write each, as CPA sends them)."""
    p = SseParser()
    return [e.raw for e in p.feed(body) + p.close()]
