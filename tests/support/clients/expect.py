"""What a client should end up with for a recording, read from its hand-checked output.

A recording's ``expected.body`` (the body itself for a clean one) is the stream (or, for
a non-streamed recording, the JSON body) a client should get. From it this module takes
the facts a client's result is judged by: the tool calls (name and arguments, in order),
how the response ended (Responses terminal event, or ``status`` mapped to it, and
``incomplete_details.reason``; chat ``finish_reason``) and the text. The judges in
``judge.py`` compare each client's own view of the stream against these.

Cost: one pass over the expected body per recording.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson
from streamfix.wire.invariants import json_events

MARKER_FILE = "probe-marker.txt"
"""A tool call whose arguments name this file writes it (responses-codex-exec): Codex must
really have run the command, so the file must exist after the run."""
MARKER_TEXT = "probe-ok"
FOLLOWUP = "responses-codex-done"
"""The recording that answers an agent's second request (the one carrying tool output)."""


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str

    @property
    def valid(self) -> bool:
        """The arguments are a JSON object (a truncated call's are not)."""
        try:
            return isinstance(json.loads(self.arguments), dict)
        except ValueError:
            return False

    @property
    def input(self) -> Any:
        return json.loads(self.arguments) if self.valid else self.arguments


@dataclass(frozen=True)
class Expected:
    api: str
    calls: tuple[Call, ...]
    finish: str | None
    """Responses: the terminal event type; chat: choice 0's finish_reason."""
    reason: str | None
    """Responses: ``incomplete_details.reason`` of the terminal; chat: None."""
    text: str
    stream: bool = True
    """False for a non-streamed (JSON) recording."""

    @property
    def truncated(self) -> bool:
        """The stream says the model hit its output cap."""
        if self.api == "responses":
            return self.finish == "response.incomplete" and self.reason == "max_output_tokens"
        return self.finish in ("length", "max_tokens", "MAX_TOKENS")

    @property
    def failed(self) -> bool:
        """The stream ends in a failure (``response.failed``; chat, messages and Gemini: an
        error event, ``finish`` ``"error"``; streamfix's own for a stream cut without a
        terminal or without any event): the client must report an error, never a success."""
        return self.finish == ("response.failed" if self.api == "responses" else "error")

    @property
    def writes_marker(self) -> bool:
        return any(MARKER_FILE in c.arguments for c in self.calls)

    def aisdk_finish(self) -> str | None:
        """The unified finishReason every AI SDK generation maps this ending to."""
        if self.api == "responses":
            if self.finish == "response.completed":
                return "tool-calls" if self.calls else "stop"
            if self.finish == "response.incomplete":
                return {"max_output_tokens": "length", "content_filter": "content-filter"}.get(
                    self.reason or "", "tool-calls" if self.calls else "other"
                )
            if self.finish == "response.failed":
                return "error"
            return None
        if self.api == "messages":  # @ai-sdk/anthropic mapAnthropicStopReason
            return {
                "end_turn": "stop",
                "pause_turn": "stop",
                "stop_sequence": "stop",
                "tool_use": "tool-calls",
                "max_tokens": "length",
                "model_context_window_exceeded": "length",
                "refusal": "content-filter",
            }.get(self.finish or "", "other")
        if self.api == "gemini":  # @ai-sdk/google mapGoogleFinishReason
            if self.finish == "STOP":
                return "tool-calls" if self.calls else "stop"
            return {
                "MAX_TOKENS": "length",
                "SAFETY": "content-filter",
                "RECITATION": "content-filter",
                "BLOCKLIST": "content-filter",
                "PROHIBITED_CONTENT": "content-filter",
                "SPII": "content-filter",
                "MALFORMED_FUNCTION_CALL": "error",
            }.get(self.finish or "", "other")
        return {
            "stop": "stop",
            "length": "length",
            "tool_calls": "tool-calls",
            "function_call": "tool-calls",
            "content_filter": "content-filter",
        }.get(self.finish or "", "other")


_events = json_events


def expected_from_body(api: str, body: bytes, stream: bool = True) -> Expected:
    if not stream:
        return _json(api, orjson.loads(body))
    events = _events(body)
    if api == "responses":
        return _responses(events)
    if api == "chat":
        return _chat(events)
    if api == "messages":
        return _messages(events)
    if api == "gemini":
        return _gemini(events)
    raise ValueError(f"no client speaks {api}")


def _messages(events: list[dict[str, Any]]) -> Expected:
    """Anthropic Messages: tool_use blocks (input from input_json_delta), stop_reason."""
    names: dict[int, str] = {}
    args: dict[int, list[str]] = {}
    text: list[str] = []
    finish = None
    for ev in events:
        t = ev.get("type")
        if t == "content_block_start" and (ev.get("content_block") or {}).get("type") == "tool_use":
            names[ev.get("index", 0)] = ev["content_block"].get("name", "")
            args[ev.get("index", 0)] = []
        elif t == "content_block_delta":
            d = ev.get("delta") or {}
            if d.get("type") == "input_json_delta" and ev.get("index", 0) in args:
                args[ev.get("index", 0)].append(d.get("partial_json", ""))
            elif d.get("type") == "text_delta":
                text.append(d.get("text", ""))
        elif t == "message_delta":
            finish = (ev.get("delta") or {}).get("stop_reason") or finish
        elif t == "error":
            finish = "error"
    calls = tuple(Call(names[i], "".join(args[i]) or "{}") for i in names)
    return Expected("messages", calls, finish, None, "".join(text))


def _gemini(events: list[dict[str, Any]]) -> Expected:
    """Gemini: one call per functionCall part (args is already an object), finishReason."""
    calls: list[Call] = []
    text: list[str] = []
    finish = None
    for ev in events:
        if "error" in ev and "candidates" not in ev:
            finish = "error"
        for cand in ev.get("candidates") or []:
            for part in (cand.get("content") or {}).get("parts") or []:
                if "functionCall" in part:
                    fc = part["functionCall"]
                    calls.append(Call(fc.get("name", ""), json.dumps(fc.get("args") or {})))
                elif isinstance(part.get("text"), str) and not part.get("thought"):
                    text.append(part["text"])
            finish = cand.get("finishReason") or finish
    return Expected("gemini", tuple(calls), finish, None, "".join(text))


def _responses(events: list[dict[str, Any]]) -> Expected:
    calls: list[Call] = []
    text: list[str] = []
    finish = reason = None
    for ev in events:
        t = ev.get("type")
        if t == "response.output_item.done":
            item = ev.get("item") or {}
            if item.get("type") == "function_call":
                calls.append(Call(item.get("name", ""), item.get("arguments", "")))
        elif t == "response.output_text.delta":
            text.append(ev.get("delta", ""))
        elif t in ("response.completed", "response.incomplete", "response.failed"):
            finish = t
            reason = ((ev.get("response") or {}).get("incomplete_details") or {}).get("reason")
    return Expected("responses", tuple(calls), finish, reason, "".join(text))


def _chat(events: list[dict[str, Any]]) -> Expected:
    order: list[int] = []
    names: dict[int, str] = {}
    args: dict[int, list[str]] = {}
    text: list[str] = []
    finish = None
    for ev in events:
        if "error" in ev and "choices" not in ev:
            finish = "error"  # an error chunk (OpenAI's mid-stream error)
        for ch in ev.get("choices") or []:
            if ch.get("index", 0) != 0:
                continue
            delta = ch.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                i = tc.get("index", 0)
                if i not in names:
                    order.append(i)
                    names[i] = ""
                    args[i] = []
                fn = tc.get("function") or {}
                if fn.get("name") and not names[i]:
                    names[i] = fn["name"]
                if isinstance(fn.get("arguments"), str):
                    args[i].append(fn["arguments"])
            if ch.get("finish_reason"):
                finish = ch["finish_reason"]
    calls = tuple(Call(names[i], "".join(args[i])) for i in order)
    return Expected("chat", calls, finish, None, "".join(text))


def _json(api: str, obj: dict[str, Any]) -> Expected:
    """A non-streamed body; the Responses ``status`` stands for its terminal event. An error
    object (the body a failure is answered with, HTTP 502 when streamfix told a hidden one)
    is a failure."""
    if "error" in obj and not any(k in obj for k in ("output", "choices")):
        return Expected(api, (), "response.failed" if api == "responses" else "error", None, "", stream=False)
    if api == "responses":
        out = obj.get("output") or []
        calls = tuple(Call(i.get("name", ""), i.get("arguments", "")) for i in out if i.get("type") == "function_call")
        text = "".join(
            c.get("text", "")
            for i in out
            if i.get("type") == "message"
            for c in i.get("content") or []
            if c.get("type") == "output_text"
        )
        reason = (obj.get("incomplete_details") or {}).get("reason")
        return Expected("responses", calls, f"response.{obj.get('status')}", reason, text, stream=False)
    if api == "chat":
        ch = (obj.get("choices") or [{}])[0]
        msg = ch.get("message") or {}
        calls = tuple(
            Call((t.get("function") or {}).get("name", ""), (t.get("function") or {}).get("arguments", ""))
            for t in msg.get("tool_calls") or []
        )
        return Expected("chat", calls, ch.get("finish_reason"), None, msg.get("content") or "", stream=False)
    raise ValueError(f"no client speaks {api}")


def tools_for(request_body: dict[str, Any] | None, calls: tuple[Call, ...]) -> list[dict[str, Any]]:
    """The function tools a client offers: the recorded request's (Responses, chat,
    Messages or Gemini shape), plus any tool the recording calls that the request did not
    list (a client rejects unknown tools)."""
    out: list[dict[str, Any]] = []
    declared: list[dict[str, Any]] = []
    for t in (request_body or {}).get("tools") or []:
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("functionDeclarations"), list):  # Gemini
            declared += [f for f in t["functionDeclarations"] if isinstance(f, dict)]
        elif isinstance(t.get("function"), dict):  # chat nests
            declared.append(t["function"])
        elif t.get("type", "function") in ("function", "custom") or "input_schema" in t:  # Responses, Messages
            declared.append(t)
    for fn in declared:
        if fn.get("name"):
            schema = _json_schema(fn.get("parameters") or fn.get("input_schema") or {"type": "object"})
            out.append({"name": fn["name"], "description": fn.get("description") or fn["name"], "parameters": schema})
    have = {t["name"] for t in out}
    for c in calls:
        if c.name and c.name not in have:
            have.add(c.name)
            out.append(
                {"name": c.name, "description": c.name, "parameters": {"type": "object", "additionalProperties": True}}
            )
    return out


def _json_schema(schema: Any) -> Any:
    """Gemini declares OpenAPI types in capitals (``OBJECT``, ``STRING``); JSON Schema wants
    them in lower case."""
    if isinstance(schema, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _json_schema(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_json_schema(v) for v in schema]
    return schema


CAP_KEYS = ("max_output_tokens", "max_tokens", "max_completion_tokens")


def output_cap(request_body: dict[str, Any] | None) -> tuple[str, int] | None:
    """The recorded request's output-token cap as (key, value): a client must send it too,
    because the addon's truncation verdict compares the usage against it (a cut call whose
    pieces are each valid JSON is only recognisable that way)."""
    body = request_body or {}
    for key in CAP_KEYS:
        if isinstance(body.get(key), int):
            return key, body[key]
    cap = (body.get("generationConfig") or {}).get("maxOutputTokens")
    return ("maxOutputTokens", cap) if isinstance(cap, int) else None
