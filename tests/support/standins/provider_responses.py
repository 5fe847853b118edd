"""A fake OpenAI Responses provider (the Codex backend's wire): what a real CPA's
``codex-api-key`` entry with a ``base-url`` calls, ``POST {base}/responses`` (also served on
``/v1/responses``).

Written from OpenAI's documented Responses streaming events (the API reference's
"Responses streaming events": every event has ``type`` and a ``sequence_number`` counting
from 0, framed ``event: TYPE`` + ``data: JSON``; no ``[DONE]``), not from CPA:

- ``response.created`` and ``response.in_progress`` (the Response object, ``status:
  "in_progress"``, ``output: []``, ``usage: null``);
- per output item ``response.output_item.added`` ... ``response.output_item.done``, one item
  at a time, ``output_index`` 0, 1, 2 ...:

  * reasoning (``rs_...``, ``summary: []`` when added): ``reasoning_summary_part.added``,
    ``reasoning_summary_text.delta``\\*, ``reasoning_summary_text.done``,
    ``reasoning_summary_part.done``; done with its ``summary``;
  * message (``msg_...``, ``role: "assistant"``): ``content_part.added`` (an ``output_text``
    part, or a ``refusal`` part), ``output_text.delta``\\* / ``refusal.delta``\\*,
    ``output_text.done`` / ``refusal.done``, ``content_part.done``;
  * function call (``fc_...``, ``call_id``, ``name``, ``arguments: ""``, ``status:
    "in_progress"``): ``function_call_arguments.delta``\\*, ``function_call_arguments.done``,
    done with ``status: "completed"``;
- the terminal: ``response.completed`` (``status: "completed"``, ``output``, ``usage`` with
  ``input_tokens`` (cached included), ``input_tokens_details.cached_tokens``,
  ``output_tokens`` (reasoning included), ``output_tokens_details.reasoning_tokens``,
  ``total_tokens``); ``response.incomplete`` (``incomplete_details.reason``
  ``max_output_tokens`` or ``content_filter``; the item being written ``status:
  "incomplete"``); ``response.failed`` (``status: "failed"``, ``error: {code, message}``:
  ``server_error`` for an in-band failure, ``context_length_exceeded`` when the context
  window is full, as the Codex backend reports it).
- The Codex backend's own events, sent only by the scripts that ask (``Script.vendor``):
  ``codex.rate_limits`` and ``codex.response.metadata`` before ``response.created``, and a
  ``keepalive`` frame after ``response.in_progress``; they are not in the Responses API.

Without ``"stream": true`` (which the Codex backend never serves) one Response object.
"""

from __future__ import annotations

from typing import Any

import orjson

from standins.frames import Frames

CREATED = 1767225600
"""``created_at`` of every fake response (fixed: two runs of one script give the same bytes)."""
SERVER_ERROR = {"code": "server_error", "message": "The server had an error processing your request."}
CONTEXT_ERROR = {
    "code": "context_length_exceeded",
    "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
}
RATE_LIMITS = {
    "type": "codex.rate_limits",
    "plan_type": "plus",
    "rate_limits": {
        "allowed": True,
        "limit_reached": False,
        "primary": {
            "used_percent": 7.0,
            "window_minutes": 300,
            "reset_after_seconds": 13168,
            "reset_at": CREATED + 13168,
        },
        "secondary": {
            "used_percent": 29.0,
            "window_minutes": 10080,
            "reset_after_seconds": 434962,
            "reset_at": CREATED + 434962,
        },
    },
    "code_review_rate_limits": None,
}
METADATA = {"type": "codex.response.metadata", "headers": {"x-codex-safety-buffering-enabled": "false"}}


def _tokens(parts: tuple[str, ...]) -> int:
    from standins.provider_gemini import tokens_of

    return tokens_of(parts)


def response_object(
    s: Any, model: str, rid: str, status: str, output: list[dict[str, Any]] | None = None, out_tokens: int | None = None
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "id": rid,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": output or [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None,
        "metadata": {},
    }
    if out_tokens is not None and s.usage:
        uncached, cached = s.usage_in
        reasoning = s.reasoning_tokens if s.reasoning_tokens is not None else _tokens(s.thinking)
        r["usage"] = {
            "input_tokens": uncached + cached,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": out_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": uncached + cached + out_tokens,
        }
    return r


def responses_events(s: Any, model: str, cut: bool, out_tokens: int, rid: str) -> Frames:
    """The turn as Responses stream events (objects, each with ``sequence_number``);
    ``content_end`` marks the last content delta."""
    ev = Frames()
    seq = 0
    deltas = 0
    output: list[dict[str, Any]] = []

    def emit(obj: dict[str, Any]) -> None:
        nonlocal seq
        obj["sequence_number"] = seq
        seq += 1
        ev.append(obj)

    def failed() -> bool:
        return s.error_after is not None and deltas >= s.error_after

    def fail(error: dict[str, Any]) -> Frames:
        emit(
            {"type": "response.failed", "response": response_object(s, model, rid, "failed", output) | {"error": error}}
        )
        return ev

    if s.vendor:
        ev.append(dict(RATE_LIMITS))
        ev.append(dict(METADATA))
    emit({"type": "response.created", "response": response_object(s, model, rid, "in_progress")})
    emit({"type": "response.in_progress", "response": response_object(s, model, rid, "in_progress")})
    if s.vendor:
        ev.append({"type": "keepalive"})

    stop = "max_tokens" if cut else s.stop
    items: list[tuple[str, Any]] = []
    if s.thinking:
        items.append(("reasoning", s.thinking))
    if s.text or s.refusal:
        items.append(("message", s.text))
    items += [("function_call", c) for c in s.calls]
    if s.text_after:
        items.append(("message", s.text_after))
    last = len(items) - 1
    for k, (kind, what) in enumerate(items):
        if failed():
            return fail(SERVER_ERROR)
        # the item being written when the budget ran out (or the filter stopped it) is incomplete
        status = "incomplete" if k == last and stop in ("max_tokens", "safety") else "completed"
        if kind == "reasoning":
            iid = f"rs_{rid}_{k}"
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": k,
                    "item": {"id": iid, "type": "reasoning", "summary": []},
                }
            )
            emit(
                {
                    "type": "response.reasoning_summary_part.added",
                    "item_id": iid,
                    "output_index": k,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""},
                }
            )
            for t in what:
                if failed():
                    return fail(SERVER_ERROR)
                emit(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": iid,
                        "output_index": k,
                        "summary_index": 0,
                        "delta": t,
                    }
                )
                deltas += 1
                ev.mark()
            text = "".join(what)
            emit(
                {
                    "type": "response.reasoning_summary_text.done",
                    "item_id": iid,
                    "output_index": k,
                    "summary_index": 0,
                    "text": text,
                }
            )
            emit(
                {
                    "type": "response.reasoning_summary_part.done",
                    "item_id": iid,
                    "output_index": k,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": text},
                }
            )
            item = {"id": iid, "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}
        elif kind == "message":
            iid = f"msg_{rid}_{k}"
            refusal = bool(s.refusal) and not what
            pieces = s.refusal if refusal else what
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": k,
                    "item": {"id": iid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
                }
            )
            empty = (
                {"type": "refusal", "refusal": ""}
                if refusal
                else {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            )
            emit(
                {
                    "type": "response.content_part.added",
                    "item_id": iid,
                    "output_index": k,
                    "content_index": 0,
                    "part": empty,
                }
            )
            for t in pieces:
                if failed():
                    return fail(SERVER_ERROR)
                if refusal:
                    emit(
                        {
                            "type": "response.refusal.delta",
                            "item_id": iid,
                            "output_index": k,
                            "content_index": 0,
                            "delta": t,
                        }
                    )
                else:
                    emit(
                        {
                            "type": "response.output_text.delta",
                            "item_id": iid,
                            "output_index": k,
                            "content_index": 0,
                            "delta": t,
                            "logprobs": [],
                        }
                    )
                deltas += 1
                ev.mark()
            text = "".join(pieces)
            if refusal:
                part = {"type": "refusal", "refusal": text}
                emit(
                    {
                        "type": "response.refusal.done",
                        "item_id": iid,
                        "output_index": k,
                        "content_index": 0,
                        "refusal": text,
                    }
                )
            else:
                part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
                emit(
                    {
                        "type": "response.output_text.done",
                        "item_id": iid,
                        "output_index": k,
                        "content_index": 0,
                        "text": text,
                        "logprobs": [],
                    }
                )
            emit(
                {
                    "type": "response.content_part.done",
                    "item_id": iid,
                    "output_index": k,
                    "content_index": 0,
                    "part": part,
                }
            )
            item = {"id": iid, "type": "message", "status": status, "content": [part], "role": "assistant"}
        else:
            c = what
            iid = f"fc_{c.id}"
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": k,
                    "item": {
                        "id": iid,
                        "type": "function_call",
                        "status": "in_progress",
                        "arguments": "",
                        "call_id": c.id,
                        "name": c.name,
                    },
                }
            )
            for a in c.args:
                if failed():
                    return fail(SERVER_ERROR)
                emit({"type": "response.function_call_arguments.delta", "item_id": iid, "output_index": k, "delta": a})
                deltas += 1
                ev.mark()
            args = "".join(c.args)
            emit(
                {"type": "response.function_call_arguments.done", "item_id": iid, "output_index": k, "arguments": args}
            )
            item = {
                "id": iid,
                "type": "function_call",
                "status": status,
                "arguments": args,
                "call_id": c.id,
                "name": c.name,
            }
        emit({"type": "response.output_item.done", "output_index": k, "item": item})
        output.append(item)
    if failed():
        return fail(SERVER_ERROR)
    if stop == "context_window":
        return fail(CONTEXT_ERROR)
    if stop in ("max_tokens", "safety"):
        r = response_object(s, model, rid, "incomplete", output, out_tokens)
        r["incomplete_details"] = {"reason": "max_output_tokens" if stop == "max_tokens" else "content_filter"}
        emit({"type": "response.incomplete", "response": r})
    else:
        emit(
            {"type": "response.completed", "response": response_object(s, model, rid, "completed", output, out_tokens)}
        )
    return ev


def responses_frames(events: list[dict[str, Any]]) -> list[bytes]:
    return [b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events]


def responses_json(s: Any, model: str, cut: bool, out_tokens: int, rid: str) -> dict[str, Any]:
    """The turn as one Response object (what the terminal event of the stream carries)."""
    evs = responses_events(s, model, cut, out_tokens, rid)
    for e in reversed(evs):
        if e["type"] in ("response.completed", "response.incomplete", "response.failed"):
            return e["response"]
    raise AssertionError("a Responses turn without a terminal")
