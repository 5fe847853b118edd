"""A stand-in for an *unfixed* CLIProxyAPI on its Devin path (for end-to-end tests).

    python tests/support/standins/cpa_standin.py --devin http://devin.test:PORT --proxy http://127.0.0.1:8080 --port 0

Takes client requests on ``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages`` and
Gemini's ``/v1beta/models/MODEL:streamGenerateContent`` / ``:generateContent`` (streaming or
not), and Responses over a WebSocket (``GET /v1/responses``, one turn per ``response.create``),
builds a GetChatMessageRequest from ``wire/devin.proto``, sends it to
Devin (``--devin``, a fake one in tests) through an explicit HTTP proxy (``--proxy``, like
CPA's ``proxy-url``; the sidecar's regular-mode listener), and translates the Connect
frames into the client's format the way unfixed CPA does (as read in its source), bugs included:

* StopReason is read and ignored: Responses always ends in ``response.completed``, chat in
  ``finish_reason`` ``tool_calls``/``stop``, messages in ``stop_reason``
  ``tool_use``/``end_turn``, Gemini in ``finishReason: "STOP"`` (its function calls are
  not modelled: text and thinking only);
* function calls stay open until the end of the stream; Responses function_call items
  have no ``status``; chat ``tool_calls[].index`` is the interactions step index;
* ``max_output_tokens`` on ``/v1/responses`` (and ``max_tokens`` on ``/v1/messages``) is
  dropped: Devin gets the default 128000. Chat maps ``max_tokens``/``max_completion_tokens``;
* usage comes from Devin's field 7 (input = prompt + cache read), or, when field 7 is
  missing or zero, from the "Token Usage" display group (field 28), as CPA does. A
  ``[cpa_usage:MODE]`` marker in the client's last user text drops it on the client leg,
  as CPA builds do when Devin's usage frame is late or never copied: ``zero`` writes the
  zeros unfixed CPA writes then (no ``total_tokens``), ``omit`` writes no usage at all.

JSON is written as CPA's sjson templates write it (compact; a string with a quote, a
backslash, a control or non-ASCII character re-encoded by Go's ``encoding/json``, which
escapes ``<``, ``>``, ``&``; any other string verbatim). Text
and argument deltas are passed on verbatim, as CPA does, so the sidecar can match the two
legs. Upstream failures become the error events CPA writes (Responses ``event: error``,
chat ``data: {"error":...}`` without ``[DONE]``, messages ``event: error``). The exact
error payloads are approximations; nothing here repairs anything.
"""

from __future__ import annotations

import argparse
import base64
import re
import ssl
import sys
import time
import uuid
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from streamfix.wire import devin_pb2 as pb
from streamfix.wire.connect import ConnectDecoder, encode_frame
from streamfix.wire.devin import CHAT_PATH

from streamfix.aioserve import serve_forever, start_app

DEFAULT_MAX_TOKENS = 128000
_USAGE_MARK = re.compile(r"\[cpa_usage:(zero|omit)\]")


def _go_string(v: str) -> bytes:
    """A string as CPA's sjson writes it: verbatim in quotes unless it holds a byte below
    0x20, above 0x7f, ``"`` or ``\\``; then ``encoding/json``'s form, which also escapes
    ``<``, ``>``, ``&``, U+2028 and U+2029 (so ``<h1>`` stays as is, ``"<h1>"`` does not:
    measured on the real v7.2.89 and v7.2.140)."""
    raw = v.encode("utf-8", "surrogatepass")
    if not any(c < 0x20 or c > 0x7F or c in (0x22, 0x5C) for c in raw):
        return b'"' + raw + b'"'
    return (
        orjson.dumps(v)
        .replace(b"<", b"\\u003c")
        .replace(b">", b"\\u003e")
        .replace(b"&", b"\\u0026")
        .replace("\u2028".encode(), b"\\u2028")
        .replace("\u2029".encode(), b"\\u2029")
    )


class RawJSON(bytes):
    """JSON text :func:`go_json` writes verbatim (CPA's sjson.SetRawBytes)."""


def go_json(obj: Any) -> bytes:
    """Compact JSON, each string written as CPA writes it (:func:`_go_string`)."""
    if isinstance(obj, RawJSON):
        return bytes(obj)
    if isinstance(obj, str):
        return _go_string(obj)
    if isinstance(obj, dict):
        return b"{" + b",".join(_go_string(str(k)) + b":" + go_json(v) for k, v in obj.items()) + b"}"
    if isinstance(obj, (list, tuple)):
        return b"[" + b",".join(go_json(v) for v in obj) + b"]"
    return orjson.dumps(obj)


# --- client request -> GetChatMessageRequest -----------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for p in content:
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(p.get("text", "")))
    return "\n".join(parts)


def build_request(api: str, body: dict[str, Any]) -> pb.GetChatMessageRequest:
    """What CPA's request translators + Devin executor make of a client request."""
    P = pb.ChatMessagePrompt
    TC = pb.ChatToolCall
    USER, ASSISTANT, TOOL = (pb.CHAT_MESSAGE_SOURCE_USER, pb.CHAT_MESSAGE_SOURCE_ASSISTANT,
                             pb.CHAT_MESSAGE_SOURCE_TOOL)  # fmt: skip
    system: list[str] = []
    prompts: list[pb.ChatMessagePrompt] = []
    max_tokens = DEFAULT_MAX_TOKENS
    tools: list[pb.ChatToolDefinition] = []

    def mid() -> str:
        return str(uuid.uuid4())

    if api == "responses":
        if isinstance(body.get("instructions"), str):
            system.append(body["instructions"])
        inp = body.get("input")
        items = [{"role": "user", "content": inp}] if isinstance(inp, str) else (inp or [])
        for it in items:
            if not isinstance(it, dict):
                continue
            t = it.get("type")
            if t in (None, "message"):
                role = it.get("role")
                if role in ("system", "developer"):
                    system.append(_text(it.get("content")))
                else:
                    prompts.append(P(message_id=mid(), source=USER if role == "user" else ASSISTANT,
                                     prompt=_text(it.get("content"))))  # fmt: skip
            elif t == "function_call":
                prompts.append(P(message_id=mid(), source=ASSISTANT, tool_calls=[
                    TC(id=str(it.get("call_id", "")).encode(), name=str(it.get("name", "")).encode(),
                       arguments_json=str(it.get("arguments", "")).encode())]))  # fmt: skip
            elif t == "function_call_output":
                out = it.get("output")
                prompts.append(P(message_id=mid(), source=TOOL, prompt=out if isinstance(out, str) else _text(out),
                                 tool_call_id=str(it.get("call_id", ""))))  # fmt: skip
        for tool in body.get("tools") or []:
            if isinstance(tool, dict) and tool.get("type") == "function":
                tools.append(pb.ChatToolDefinition(name=tool.get("name", ""), description=tool.get("description", ""),
                                                   json_schema=orjson.dumps(tool.get("parameters", {})).decode()))  # fmt: skip
        # the bug: max_output_tokens is dropped for Devin
    elif api == "gemini":
        si = body.get("systemInstruction") or body.get("system_instruction")
        if isinstance(si, dict):
            system.append("\n".join(str(p.get("text", "")) for p in si.get("parts") or [] if isinstance(p, dict)))
        for c in body.get("contents") or []:
            if not isinstance(c, dict):
                continue
            text = "\n".join(
                str(p.get("text", "")) for p in c.get("parts") or [] if isinstance(p, dict) and "text" in p
            )
            prompts.append(P(message_id=mid(), source=ASSISTANT if c.get("role") == "model" else USER, prompt=text))
    else:
        if api == "messages":
            sys_field = body.get("system")
            if sys_field:
                system.append(_text(sys_field))
        else:
            for name in ("max_completion_tokens", "max_tokens"):  # chat maps the cap
                v = body.get(name)
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    max_tokens = v
                    break
        for m in body.get("messages") or []:
            if not isinstance(m, dict):
                continue
            role, content = m.get("role"), m.get("content")
            if role == "system":
                system.append(_text(content))
            elif role == "tool":
                prompts.append(P(message_id=mid(), source=TOOL, prompt=_text(content),
                                 tool_call_id=str(m.get("tool_call_id", ""))))  # fmt: skip
            elif (
                role == "user"
                and isinstance(content, list)
                and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
            ):
                for b in content:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        prompts.append(P(message_id=mid(), source=TOOL, prompt=_text(b.get("content")),
                                         tool_call_id=str(b.get("tool_use_id", ""))))  # fmt: skip
                    elif isinstance(b, dict) and b.get("type") == "text":
                        prompts.append(P(message_id=mid(), source=USER, prompt=str(b.get("text", ""))))
            else:
                calls = [TC(id=str(c.get("id", "")).encode(), name=str(c.get("function", {}).get("name", "")).encode(),
                            arguments_json=str(c.get("function", {}).get("arguments", "")).encode())
                         for c in m.get("tool_calls") or [] if isinstance(c, dict)]  # fmt: skip
                prompts.append(P(message_id=mid(), source=USER if role == "user" else ASSISTANT,
                                 prompt=_text(content), tool_calls=calls))  # fmt: skip
    return pb.GetChatMessageRequest(
        metadata=pb.ClientMetadata(ide_name="chisel", ide_version="3000.10.21", api_key="standin-session-token",
                                   locale="en", os="linux", extension_version="3000.10.21",
                                   extension_name="chisel"),
        system_prompt="\n".join(system),
        prompts=prompts,
        request_type=5,
        configuration=pb.CompletionConfiguration(num_completions=1, max_tokens=max_tokens, max_newlines=400,
                                                 temperature=1.0, top_k=40, top_p=0.95),
        tools=tools,
        planner_mode=1,
        chat_model_uid=str(body.get("model", "swe-2")),
    )  # fmt: skip


# --- Devin frames -> interactions events (the unfixed executor) -----------------------


class Executor:
    """Devin frames in, interactions events out, as the unfixed executor emits them:
    StopReason ignored, function-call steps closed only at the end of the stream, text
    after a call held back until the calls are closed."""

    def __init__(self, model: str, usage_mode: str = "") -> None:
        self.usage_mode = usage_mode  # "" (copy Devin's), "zero" or "omit" (the drop knob)
        self.usage28: tuple[int, int, int] | None = None  # "Token Usage": input, output, cached
        self.id = "interaction_" + str(uuid.uuid4())[:12]
        self.model = model
        self.next_index = 0
        self.open: tuple[str, int] | None = None  # ("thought"|"model_output", index)
        self.calls: list[dict[str, Any]] = []
        self.held_text: list[str] = []
        self.usage: pb.ModelUsage | None = None

    def created(self) -> list[dict]:
        return [{"event_type": "interaction.created", "interaction": {"id": self.id, "model": self.model}}]

    def _start(self, kind: str, step: dict | None = None) -> list[dict]:
        i = self.next_index
        self.next_index += 1
        if kind != "function_call":
            self.open = (kind, i)
        return [{"event_type": "step.start", "index": i, "step": step or {"type": kind}}]

    def _stop_open(self) -> list[dict]:
        if self.open is None:
            return []
        i = self.open[1]
        self.open = None
        return [{"event_type": "step.stop", "index": i}]

    def frame(self, m: pb.GetChatMessageResponse) -> list[dict]:
        ev: list[dict] = []
        if m.thinking:
            t = m.thinking.decode("utf-8", "replace")
            if self.open is None or self.open[0] != "thought":
                ev += self._stop_open() + self._start("thought")
            ev.append({"event_type": "step.delta", "index": self.open[1],
                       "delta": {"type": "thought_summary", "text": t, "content": {"type": "text", "text": t}}})  # fmt: skip
        if m.text:
            t = m.text.decode("utf-8", "replace")
            if self.calls:
                self.held_text.append(t)
            else:
                if self.open is None or self.open[0] != "model_output":
                    ev += self._stop_open() + self._start("model_output")
                ev.append({"event_type": "step.delta", "index": self.open[1], "delta": {"type": "text", "text": t}})
        for tc in m.tool_calls:
            cid, name = tc.id.decode(), tc.name.decode()
            if cid and (not self.calls or self.calls[-1]["id"] != cid):
                ev += self._stop_open()
                call = {"id": cid, "name": name, "index": self.next_index, "args": []}
                self.calls.append(call)
                ev += self._start("function_call", {"type": "function_call", "name": name, "id": cid,
                                                    "call_id": cid, "arguments": {}})  # fmt: skip
            if tc.arguments_json and self.calls:
                a = tc.arguments_json.decode("utf-8", "replace")
                self.calls[-1]["args"].append(a)
                ev.append({"event_type": "step.delta", "index": self.calls[-1]["index"],
                           "delta": {"type": "arguments_delta", "arguments": a}})  # fmt: skip
        if m.HasField("usage"):
            self.usage = m.usage
        for g in m.dimension_groups:
            if g.title == b"Token Usage" and self.usage28 is None:
                vals = {mt.key: int(mt.value.value) for mt in g.metrics}
                self.usage28 = (vals.get(b"input_tokens", 0), vals.get(b"output_tokens", 0),
                                vals.get(b"cached_input_tokens", 0))  # fmt: skip
        return ev

    def _usage(self) -> dict[str, int] | None:
        """CPA's usage: field 7; field 28 when 7 is missing or zero; zeros without either."""
        if self.usage_mode == "omit":
            return None
        usage: dict[str, int] = {"total_input_tokens": 0, "total_output_tokens": 0, "total_cached_tokens": 0}
        if self.usage_mode == "zero":
            return usage
        u = self.usage
        if u is not None and (u.prompt_tokens or u.output_tokens or u.cache_read_tokens):
            inp, out, cached = u.prompt_tokens + u.cache_read_tokens, u.output_tokens, u.cache_read_tokens
        elif self.usage28 is not None:
            inp, out, cached = self.usage28
        else:
            return usage
        return {"total_input_tokens": inp, "total_output_tokens": out, "total_cached_tokens": cached,
                "total_tokens": inp + out}  # fmt: skip

    def completed(self) -> list[dict]:
        ev = self._stop_open()
        for c in self.calls:
            ev.append({"event_type": "step.stop", "index": c["index"]})
        if self.held_text:
            ev += self._start("model_output")
            ev.append({"event_type": "step.delta", "index": self.open[1],
                       "delta": {"type": "text", "text": "".join(self.held_text)}})  # fmt: skip
            ev += self._stop_open()
        interaction: dict[str, Any] = {"id": self.id, "model": self.model, "status": "completed"}
        usage = self._usage()
        if usage is not None:
            interaction["usage"] = usage
        ev.append({"event_type": "interaction.completed", "interaction": interaction})
        return ev


# --- interactions -> client formats (the unfixed translators) --------------------------
# Compared with the real v7.2.140 (and v7.2.89) translators by tests/e2e/realcpa/test_real_cpa_standin.py:
# they read the events as CPA does (thought text from delta.content.text or delta.text,
# item id = step.id, else step.call_id, else item_<index>; chat call id = step.call_id,
# else step.id, else call_<index>; usage counters only where the interaction has them).


def _dtext(d: dict) -> str:
    """A delta's text as CPA reads it (thought_summary: content.text, else text)."""
    if d.get("type") == "thought_summary":
        return str((d.get("content") or {}).get("text") or d.get("text") or "")
    return str(d.get("text") or "")


def _item_id(step: dict, i: int) -> str:
    return str(step.get("id") or step.get("call_id") or f"item_{i}")


def _chat_call_id(step: dict, i: int) -> str:
    return str(step.get("call_id") or step.get("id") or f"call_{i}")


def _usage_ints(u: dict | None, keys: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, names in keys:
        v = next((u[n] for n in names if isinstance((u or {}).get(n), int)), None)
        if v is None:
            continue
        if "." in key:
            a, b = key.split(".")
            out.setdefault(a, {})[b] = v
        else:
            out[key] = v
    return out


_CHAT_USAGE = (("prompt_tokens", ("input_tokens", "total_input_tokens")),
               ("completion_tokens", ("output_tokens", "total_output_tokens")), ("total_tokens", ("total_tokens",)),
               ("prompt_tokens_details.cached_tokens", ("cached_tokens", "total_cached_tokens")),
               ("completion_tokens_details.reasoning_tokens", ("reasoning_tokens", "total_thought_tokens")))  # fmt: skip


def _chat_usage(u: dict | None) -> dict[str, Any] | None:
    """Chat usage: no key without interactions usage, else only the counters it has."""
    return None if u is None else _usage_ints(u, _CHAT_USAGE)


def _messages_usage(u: dict | None) -> dict[str, Any]:
    """Claude usage: the {"input_tokens":0,"output_tokens":0} template, overwritten where
    the interactions usage has the counters."""
    out: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0}
    out.update(_usage_ints(u, (("input_tokens", ("input_tokens", "total_input_tokens")),
                               ("output_tokens", ("output_tokens", "total_output_tokens")))))  # fmt: skip
    return out


def _responses_usage(u: dict | None, ensure_details: bool = False) -> dict[str, Any]:
    """Responses usage from interactions usage, keys only where it has them (CPA's {} template);
    ``ensure_details``: the zero details the gemini executor adds (EnsureResponsesUsageDetails)."""
    out: dict[str, Any] = {}
    u = u or {}

    def first(*keys: str) -> int | None:
        for k in keys:
            if isinstance(u.get(k), int):
                return u[k]
        return None

    for key, names in (("input_tokens", ("input_tokens", "total_input_tokens")),
                       ("output_tokens", ("output_tokens", "total_output_tokens")), ("total_tokens", ("total_tokens",))):  # fmt: skip
        if (v := first(*names)) is not None:
            out[key] = v
    if (v := first("cached_tokens", "total_cached_tokens")) is not None:
        out["input_tokens_details"] = {"cached_tokens": v}
    if (v := first("reasoning_tokens", "total_thought_tokens")) is not None:
        out["output_tokens_details"] = {"reasoning_tokens": v}
    if ensure_details:
        out.setdefault("output_tokens_details", {"reasoning_tokens": 0})
        out.setdefault("input_tokens_details", {"cached_tokens": 0})
    return out


class ResponsesOut:
    terminal_events = ("response.completed",)

    def __init__(self, request_model: str = "", ensure_usage_details: bool = False) -> None:
        self.seq = 0
        self.id = self.model = ""
        self.request_model = request_model
        """The client's model: v7.2.140 writes it into response.created (v7.2.89: the
        interaction's model, which is the same for the Devin executor)."""
        self.ensure_usage_details = ensure_usage_details
        self.items: dict[int, dict] = {}  # output_index -> item (for the terminal)
        self.text: dict[int, list[str]] = {}
        self.kind: dict[int, str] = {}
        self.ids: dict[int, str] = {}

    def _ev(self, typ: str, obj: dict) -> bytes:
        self.seq += 1
        obj = {"type": typ, **obj, "sequence_number": self.seq}
        return b"event: " + typ.encode() + b"\ndata: " + go_json(obj) + b"\n\n"

    def event(self, e: dict) -> bytes:
        et = e["event_type"]
        if et == "interaction.created":
            self.id, self.model = e["interaction"]["id"], e["interaction"]["model"]
            return self._ev("response.created", {"response": {"id": self.id, "object": "response",
                                                               "status": "in_progress",
                                                               "model": self.request_model or self.model,
                                                               "output": []}})  # fmt: skip
        if et == "step.start":
            i, step = e["index"], e["step"]
            if i in self.kind:  # re-sent start ("update"): ignored
                return b""
            self.kind[i] = step["type"]
            self.text[i] = []
            iid = self.ids[i] = _item_id(step, i)
            if step["type"] == "thought":
                return self._ev("response.output_item.added", {"output_index": i, "item": {
                    "id": iid, "type": "reasoning", "status": "in_progress", "encrypted_content": "",
                    "summary": []}})  # fmt: skip
            if step["type"] == "model_output":
                item = {"id": iid, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
                return self._ev("response.output_item.added", {"output_index": i, "item": item}) + self._ev(
                    "response.content_part.added", {"output_index": i, "content_index": 0, "item_id": iid,
                                                    "part": {"type": "output_text", "text": ""}})  # fmt: skip
            item = {"id": iid, "type": "function_call", "call_id": iid, "name": step.get("name", ""),
                    "arguments": ""}  # fmt: skip
            self.items[i] = item
            return self._ev("response.output_item.added", {"output_index": i, "item": item})
        if et == "step.delta":
            i, d = e["index"], e["delta"]
            if d["type"] == "thought_summary":
                self.text.setdefault(i, []).append(_dtext(d))
                return self._ev("response.reasoning_summary_text.delta", {"output_index": i, "delta": _dtext(d)})
            if d["type"] == "text":
                self.text.setdefault(i, []).append(_dtext(d))
                return self._ev("response.output_text.delta", {"output_index": i, "content_index": 0,
                                                               "item_id": self.ids.get(i, ""), "delta": _dtext(d)})  # fmt: skip
            if d["type"] == "arguments_delta":
                self.text[i].append(d["arguments"])
                return self._ev("response.function_call_arguments.delta", {"output_index": i,
                                "item_id": self.items[i]["id"], "delta": d["arguments"]})  # fmt: skip
            return b""
        if et == "step.stop":
            i = e["index"]
            kind = self.kind.get(i)
            if kind == "thought":
                item = {"id": self.ids[i], "type": "reasoning", "encrypted_content": "",
                        "summary": [{"type": "summary_text", "text": t} for t in self.text[i]]}  # fmt: skip
                self.items[i] = item
                return self._ev("response.output_item.done", {"output_index": i, "item": item})
            if kind == "model_output":
                text = "".join(self.text[i])
                iid = self.ids[i]
                item = {"id": iid, "type": "message", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": text}]}  # fmt: skip
                self.items[i] = item
                return (
                    self._ev("response.output_text.done", {"output_index": i, "content_index": 0,
                             "item_id": iid, "text": text, "logprobs": []})
                    + self._ev("response.content_part.done", {"output_index": i, "content_index": 0,
                               "item_id": iid, "part": {"type": "output_text", "text": text}})
                    + self._ev("response.output_item.done", {"output_index": i, "item": item})
                )  # fmt: skip
            if kind == "function_call":
                item = dict(self.items[i], arguments="".join(self.text[i]))
                self.items[i] = item
                return self._ev("response.function_call_arguments.done", {"output_index": i, "item_id": item["id"],
                                "arguments": item["arguments"]}) + self._ev(
                    "response.output_item.done", {"output_index": i, "item": item})  # fmt: skip
            return b""
        if et == "interaction.completed":
            u = e["interaction"].get("usage")
            resp = {"id": self.id, "object": "response", "status": "completed",
                    "model": e["interaction"].get("model") or self.model,
                    "output": [self.items[i] for i in sorted(self.items)],
                    "usage": _responses_usage(u, self.ensure_usage_details)}  # fmt: skip
            # the framer writes nothing after the terminal; the swallowed [DONE] leaves "\n"
            return self._ev("response.completed", {"response": resp}) + b"\n"
        return b""

    def error(self, code: str, message: str) -> bytes:
        return b"event: error\ndata: " + go_json({"type": "error", "code": code, "message": message}) + b"\n\n"

    def body(self, events: list[dict]) -> dict:
        for e in events:
            self.event(e)
        last = events[-1]["interaction"].get("usage")
        out: list[dict] = []
        for i in sorted(self.items):  # the non-stream shapes: no ids, one summary part
            it = self.items[i]
            if it["type"] == "function_call":
                it = {
                    "type": "function_call",
                    "call_id": it["call_id"],
                    "name": it["name"],
                    "arguments": it["arguments"],
                }
            elif it["type"] == "reasoning":
                it = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "".join(self.text[i])}]}
            else:
                it = {"type": "message", "role": "assistant", "content": it["content"]}
            out.append(it)
        body = {"id": self.id, "object": "response", "status": "completed", "model": self.model, "output": out}
        if last is not None:  # the executor's EnsureResponsesUsageDetails: zero details added
            body["usage"] = _responses_usage(last, ensure_details=True)
        return body


class ChatOut:
    def __init__(self) -> None:
        self.id = self.model = ""
        self.created = int(time.time())
        self.any_call = False

    def _chunk(self, delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
        obj: dict[str, Any] = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                               "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
        if usage is not None:
            obj["usage"] = usage
        return b"data: " + go_json(obj) + b"\n\n"

    def event(self, e: dict) -> bytes:
        et = e["event_type"]
        if et == "interaction.created":
            self.id, self.model = e["interaction"]["id"], e["interaction"]["model"]
            return self._chunk({"role": "assistant"})
        if et == "step.start" and e["step"]["type"] == "function_call":
            s = e["step"]
            self.any_call = True
            return self._chunk({"tool_calls": [{"index": e["index"], "id": _chat_call_id(s, e["index"]),
                                "type": "function", "function": {"name": s["name"], "arguments": ""}}]})  # fmt: skip
        if et == "step.delta":
            d = e["delta"]
            if d["type"] == "thought_summary" and _dtext(d):
                return self._chunk({"reasoning_content": _dtext(d)})
            if d["type"] == "text" and _dtext(d):
                return self._chunk({"content": _dtext(d)})
            if d["type"] == "arguments_delta":
                return self._chunk({"tool_calls": [{"index": e["index"], "function": {"arguments": d["arguments"]}}]})
            return b""
        if et == "interaction.completed":
            usage = _chat_usage(e["interaction"].get("usage"))
            finish = "tool_calls" if self.any_call else "stop"
            return self._chunk({}, finish, usage) + b"data: [DONE]\n\n"
        return b""

    def error(self, code: str, message: str) -> bytes:
        return b"data: " + go_json({"error": {"message": message, "type": "server_error", "code": code}}) + b"\n\n"

    def body(self, events: list[dict]) -> dict:
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict] = {}
        usage: dict | None = None
        for e in events:
            et = e["event_type"]
            if et == "interaction.created":
                self.id, self.model = e["interaction"]["id"], e["interaction"]["model"]
            elif et == "step.start" and e["step"]["type"] == "function_call":
                s = e["step"]
                calls.setdefault(e["index"], {"id": s.get("call_id") or s.get("id") or "call_0", "type": "function",
                                              "function": {"name": s["name"], "arguments": ""}})  # fmt: skip
            elif et == "step.delta":
                d = e["delta"]
                if d["type"] == "text":
                    content.append(_dtext(d))
                elif d["type"] == "thought_summary":
                    reasoning.append(_dtext(d))
                elif d["type"] == "arguments_delta":
                    calls[e["index"]]["function"]["arguments"] += d["arguments"]
            elif et == "interaction.completed":
                usage = _chat_usage(e["interaction"].get("usage"))
        msg: dict[str, Any] = {"role": "assistant", "content": None if calls else "".join(content)}
        if reasoning:
            msg["reasoning_content"] = "".join(reasoning)
        if calls:
            msg["tool_calls"] = [calls[i] for i in sorted(calls)]
        body = {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}]}  # fmt: skip
        if usage is not None:
            body["usage"] = usage
        return body


class MessagesOut:
    def __init__(self) -> None:
        self.block = -1
        self.blocks: dict[int, int] = {}  # step index -> block index
        self.any_call = False
        self.id = self.model = ""

    @staticmethod
    def _ev(typ: str, obj: dict) -> bytes:
        return b"event: " + typ.encode() + b"\ndata: " + go_json({"type": typ, **obj}) + b"\n\n\n"

    def event(self, e: dict) -> bytes:
        et = e["event_type"]
        if et == "interaction.created":
            self.id, self.model = e["interaction"]["id"], e["interaction"]["model"]
            return self._ev("message_start", {"message": {"id": self.id, "type": "message", "role": "assistant",
                            "content": [], "model": self.model, "stop_reason": None, "stop_sequence": None,
                            "usage": {"input_tokens": 0, "output_tokens": 0}}})  # fmt: skip
        if et == "step.start":
            i, s = e["index"], e["step"]
            if i in self.blocks:
                return b""
            self.block += 1
            self.blocks[i] = self.block
            if s["type"] == "thought":
                cb: dict[str, Any] = {"type": "thinking", "thinking": ""}
            elif s["type"] == "model_output":
                cb = {"type": "text", "text": ""}
            else:
                self.any_call = True
                cb = {
                    "type": "tool_use",
                    "id": s.get("call_id") or s.get("id") or f"toolu_{i}",
                    "name": s["name"],
                    "input": {},
                }
            return self._ev("content_block_start", {"index": self.block, "content_block": cb})
        if et == "step.delta":
            d, b = e["delta"], self.blocks.get(e["index"])
            if b is None:
                return b""
            if d["type"] == "thought_summary" and _dtext(d):
                return self._ev(
                    "content_block_delta", {"index": b, "delta": {"type": "thinking_delta", "thinking": _dtext(d)}}
                )
            if d["type"] == "text" and _dtext(d):
                return self._ev("content_block_delta", {"index": b, "delta": {"type": "text_delta", "text": _dtext(d)}})
            if d["type"] == "arguments_delta":
                return self._ev("content_block_delta", {"index": b, "delta": {"type": "input_json_delta",
                                                                               "partial_json": d["arguments"]}})  # fmt: skip
            return b""
        if et == "step.stop":
            b = self.blocks.get(e["index"])
            return self._ev("content_block_stop", {"index": b}) if b is not None else b""
        if et == "interaction.completed":
            u = e["interaction"].get("usage")
            delta: dict[str, Any] = {"delta": {"stop_reason": "tool_use" if self.any_call else "end_turn",
                                               "stop_sequence": None}, "usage": _messages_usage(u)}  # fmt: skip
            return self._ev("message_delta", delta) + self._ev("message_stop", {})
        return b""

    def error(self, code: str, message: str) -> bytes:
        return (
            b"event: error\ndata: "
            + go_json({"type": "error", "error": {"type": "api_error", "message": message}})
            + b"\n\n"
        )

    def body(self, events: list[dict]) -> dict:
        content: list[dict] = []
        by_step: dict[int, dict] = {}
        usage: dict = {}
        for e in events:
            et = e["event_type"]
            if et == "interaction.created":
                self.id, self.model = e["interaction"]["id"], e["interaction"]["model"]
            elif et == "step.start" and e["index"] not in by_step:
                s = e["step"]
                if s["type"] == "thought":
                    blk: dict[str, Any] = {"type": "thinking", "thinking": ""}
                elif s["type"] == "model_output":
                    blk = {"type": "text", "text": ""}
                else:
                    self.any_call = True
                    blk = {"type": "tool_use", "id": s.get("call_id") or s.get("id") or "toolu_0", "name": s["name"], "input": {},
                           "_args": ""}  # fmt: skip
                by_step[e["index"]] = blk
                content.append(blk)
            elif et == "step.delta":
                d, blk = e["delta"], by_step.get(e["index"])
                if blk is None:
                    continue
                if d["type"] == "thought_summary":
                    blk["thinking"] += _dtext(d)
                elif d["type"] == "text":
                    blk["text"] += _dtext(d)
                elif d["type"] == "arguments_delta":
                    blk["_args"] += d["arguments"]
            elif et == "interaction.completed":
                usage = _messages_usage(e["interaction"].get("usage"))
        for blk in content:
            if "_args" in blk:  # the arguments' own JSON text, written raw
                args = blk.pop("_args") or "{}"
                try:
                    ok = isinstance(orjson.loads(args), dict)
                except orjson.JSONDecodeError:
                    ok = False
                blk["input"] = RawJSON(args.encode()) if ok else {}
        body = {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": "tool_use" if self.any_call else "end_turn", "stop_sequence": None}  # fmt: skip
        if usage:
            body["usage"] = usage
        return body


class GeminiOut:
    """interactions -> Gemini (CPA's translator): a chunk per delta, a final chunk with
    an empty text part, ``finishReason: "STOP"`` always, and ``usageMetadata``."""

    def __init__(self) -> None:
        self.id = self.model = ""

    def _obj(self, parts: list[dict], final: dict | None = None) -> dict:
        cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if final is not None:
            cand["finishReason"] = "STOP"
        cand["index"] = 0
        obj: dict[str, Any] = {"candidates": [cand], "modelVersion": self.model, "responseId": self.id}
        if final:
            obj["usageMetadata"] = final
        return obj

    @staticmethod
    def _usage(e: dict) -> dict:
        u = e["interaction"].get("usage")
        if u is None:
            return {}
        inp, out = u.get("total_input_tokens", 0), u.get("total_output_tokens", 0)
        return {"promptTokenCount": inp, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": inp}],
                "candidatesTokenCount": out, "totalTokenCount": u.get("total_tokens", 0),
                "cachedContentTokenCount": u.get("total_cached_tokens", 0)}  # fmt: skip

    @staticmethod
    def _part(e: dict) -> dict | None:
        d = e["delta"]
        if d["type"] == "thought_summary" and _dtext(d):
            return {"text": _dtext(d), "thought": True}
        if d["type"] == "text" and _dtext(d):
            return {"text": _dtext(d)}
        return None  # argument deltas: Gemini's functionCall parts are not modelled here

    def event(self, e: dict) -> bytes:
        et = e["event_type"]
        if et == "interaction.created":
            self.id, self.model = e["interaction"]["id"], e["interaction"]["model"]
        elif et == "step.delta" and (part := self._part(e)) is not None:
            return b"data: " + go_json(self._obj([part])) + b"\n\n"
        elif et == "interaction.completed":
            return b"data: " + go_json(self._obj([{"text": ""}], self._usage(e))) + b"\n\n"
        return b""

    def error(self, code: str, message: str) -> bytes:
        return b"data: " + go_json({"error": {"code": 502, "message": message, "status": code}}) + b"\n\n"

    def body(self, events: list[dict]) -> dict:
        parts: list[dict] = []
        usage: dict = {}
        for e in events:
            et = e["event_type"]
            if et == "interaction.created":
                self.id, self.model = e["interaction"]["id"], e["interaction"]["model"]
            elif et == "step.delta" and (part := self._part(e)) is not None:
                if parts and parts[-1].get("thought") == part.get("thought"):
                    parts[-1]["text"] += part["text"]
                else:
                    parts.append(part)
            elif et == "interaction.completed":
                usage = self._usage(e)
        return self._obj(parts or [{"text": ""}], usage)


TRANSLATORS = {"responses": ResponsesOut, "chat": ChatOut, "messages": MessagesOut, "gemini": GeminiOut}
ROUTES = {"/v1/responses": "responses", "/v1/chat/completions": "chat", "/v1/messages": "messages"}
GEMINI_ROUTE = "/v1beta/models/{action}"
"""``/v1beta/models/MODEL:streamGenerateContent`` (streamed) or ``:generateContent``."""


class UpstreamError(Exception):
    def __init__(self, code: str, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


# --- the server ----------------------------------------------------------------------


class Standin:
    def __init__(self, devin: str, proxy: str | None, cafile: str | None = None, log_requests: bool = False) -> None:
        self.devin = devin.rstrip("/")
        self.proxy, self.proxy_headers = _proxy(proxy)
        self.ssl: ssl.SSLContext | bool = ssl.create_default_context(cafile=cafile) if cafile else True
        self.session: aiohttp.ClientSession | None = None
        self.log_requests = log_requests
        self.handled = 0

    def log(self, n: int, text: str) -> None:
        """One line per step of request ``n`` on stdout, with ``--log-requests`` (tests
        show it when they fail)."""
        if self.log_requests:
            print(f"CPA stand-in #{n}: {text}", flush=True)

    async def start(self, app: web.Application) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=300)
        )

    async def stop(self, app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()

    async def devin_events(self, api: str, body: dict, n: int = 0):
        """Yield interactions events for one client request, raising UpstreamError."""
        req = build_request(api, body)
        users = [p.prompt for p in req.prompts if p.source == pb.CHAT_MESSAGE_SOURCE_USER]
        knob = _USAGE_MARK.search(users[-1]) if users else None
        ex = Executor(str(body.get("model", "devin/swe-2")), knob.group(1) if knob else "")
        assert self.session is not None
        headers = {"content-type": "application/connect+proto", "connect-protocol-version": "1", "accept": "*/*",
                   "authorization": "Basic standin-token-standin-token",
                   "sentry-trace": f"{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-1"}  # fmt: skip
        # Go sends proxy credentials on CONNECT (https) and on each plain-HTTP request
        plain_proxy_auth = self.proxy_headers if self.proxy_headers and self.devin.startswith("http:") else {}
        try:
            resp = await self.session.post(self.devin + CHAT_PATH, data=encode_frame(req.SerializeToString()),
                                           headers={**headers, **plain_proxy_auth}, proxy=self.proxy, ssl=self.ssl,
                                           proxy_headers=self.proxy_headers)  # fmt: skip
        except aiohttp.ClientError as e:
            raise UpstreamError("upstream_unreachable", f"devin request failed: {type(e).__name__}") from None
        if self.log_requests:
            conn = resp.connection
            local = conn.transport.get_extra_info("sockname") if conn and conn.transport else None
            self.log(n, f"Devin answered HTTP {resp.status} (connection from {local[0]}:{local[1]})" if local
                     else f"Devin answered HTTP {resp.status}")  # fmt: skip
        async with resp:
            if resp.status != 200:
                raise UpstreamError("upstream_status", f"devin returned HTTP {resp.status}", resp.status)
            yield ex.created()
            dec = ConnectDecoder()
            async for chunk in resp.content.iter_any():
                for f in dec.feed(chunk):
                    if f.end_stream:
                        t = f.trailer()
                        if not t.ok:
                            yield [{"event_type": "response.failed", "error": {"code": t.error_code,
                                                                                "message": t.error_message}}]  # fmt: skip
                            raise UpstreamError(t.error_code or "unknown", t.error_message or "devin stream failed")
                        yield ex.completed()
                        return
                    yield ex.frame(pb.GetChatMessageResponse.FromString(f.payload))
            end = dec.close()
            if end.error and not end.truncated:
                raise UpstreamError("stream_error", end.error)
            raise UpstreamError("stream_truncated", "devin stream terminated prematurely before EOS trailer")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.handled += 1
        n = self.handled
        try:
            resp = await self._handle(request, n)
        except BaseException as e:
            self.log(n, f"failed: {type(e).__name__}")
            raise
        self.log(n, f"done, HTTP {resp.status}")
        return resp

    async def _handle(self, request: web.Request, n: int) -> web.StreamResponse:
        api = ROUTES.get(request.path, "gemini")
        self.log(n, f"{request.method} {request.path}, calling Devin")
        try:
            body = orjson.loads(await request.read())
            assert isinstance(body, dict)
        except (orjson.JSONDecodeError, AssertionError):
            return web.json_response({"error": {"message": "invalid JSON body"}}, status=400)
        out = TRANSLATORS[api]()
        streaming = request.path.endswith(":streamGenerateContent") if api == "gemini" else body.get("stream")
        if not streaming:
            events: list[dict] = []
            try:
                async for evs in self.devin_events(api, body, n):
                    events += evs
            except UpstreamError as e:
                self.log(n, f"upstream error {e.code}")
                return web.json_response({"error": {"message": e.message, "code": e.code}}, status=e.status)
            return web.Response(body=go_json(out.body(events)), content_type="application/json")
        resp: web.StreamResponse | None = None
        try:
            async for evs in self.devin_events(api, body, n):
                if resp is None:
                    resp = web.StreamResponse(
                        headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
                    )
                    await resp.prepare(request)
                data = b"".join(out.event(e) for e in evs if e["event_type"] != "response.failed")
                if data:
                    await resp.write(data)
        except UpstreamError as e:
            self.log(n, f"upstream error {e.code}")
            if resp is None:
                return web.json_response({"error": {"message": e.message, "code": e.code}}, status=e.status)
            await resp.write(out.error(e.code, e.message))
        assert resp is not None
        await resp.write_eof()
        return resp

    async def handle_ws(self, request: web.Request) -> web.StreamResponse:
        """``GET /v1/responses`` upgraded, as CPA serves it (websocket.md section 1): each
        ``response.create`` is a turn whose Responses events go out one per text message
        (the SSE ``data:`` JSON; ``event:`` lines dropped); the socket stays open after a
        ``response.completed`` and is dropped without a close frame otherwise."""
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            self.handled += 1
            n = self.handled
            body = orjson.loads(msg.data)
            if not isinstance(body, dict) or body.pop("type", None) != "response.create":
                await ws.send_str('{"type":"error","status":400,"error":{"message":"unsupported request"}}')
                continue
            body["stream"] = True
            self.log(n, "WebSocket response.create, calling Devin")
            out, completed = ResponsesOut(), False
            try:
                async for evs in self.devin_events("responses", body, n):
                    for e in evs:
                        if e["event_type"] == "response.failed":
                            continue
                        for line in out.event(e).split(b"\n"):
                            if line.startswith(b"data: "):
                                completed |= b'"type":"response.completed"' in line
                                await ws.send_str(line[6:].decode())
            except UpstreamError as e:
                self.log(n, f"upstream error {e.code}")
            self.log(n, "WebSocket turn done" + ("" if completed else ", no response.completed: dropped"))
            if not completed:
                request.transport.abort()  # CPA's closeWithoutError: no close frame
                break
        return ws

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/responses", self.handle_ws)
        for path in ROUTES:
            app.router.add_post(path, self.handle)
        app.router.add_post(GEMINI_ROUTE, self.handle)
        app.on_startup.append(self.start)
        app.on_cleanup.append(self.stop)
        return app


def _proxy(url: str | None) -> tuple[str | None, dict[str, str] | None]:
    """CPA's proxy-url may carry USER:PASS@ (Go's http.Transport sends it as
    Proxy-Authorization, on CONNECT and on plain-HTTP requests): the URL without it, and
    the header."""
    if not url:
        return url, None
    from urllib.parse import unquote, urlsplit, urlunsplit

    u = urlsplit(url)
    if u.username is None:
        return url, None
    netloc = u.hostname + (f":{u.port}" if u.port else "")
    cred = base64.b64encode(f"{unquote(u.username)}:{unquote(u.password or '')}".encode()).decode()
    return urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment)), {"Proxy-Authorization": f"Basic {cred}"}


async def serve(
    devin: str,
    proxy: str | None,
    host: str = "127.0.0.1",
    port: int = 0,
    cafile: str | None = None,
    log_requests: bool = False,
) -> tuple[web.AppRunner, int]:
    return await start_app(Standin(devin, proxy, cafile, log_requests).app(), host, port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python tests/support/standins/cpa_standin.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--devin", required=True, help="Devin base URL (e.g. http://devin.test:PORT)")
    ap.add_argument(
        "--proxy", help="HTTP proxy for the Devin call, like CPA's proxy-url (the sidecar's regular listener)"
    )
    ap.add_argument("--ca", help="CA bundle to trust for an https Devin URL (e.g. mitmproxy's CA)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 (default) picks a free port")
    ap.add_argument("--log-requests", action="store_true", help="print a line per step of each request")
    a = ap.parse_args(argv)

    return serve_forever(
        lambda: serve(a.devin, a.proxy, a.host, a.port, a.ca, a.log_requests),
        f"CPA stand-in listening on http://{a.host}:{{port}}",
    )


if __name__ == "__main__":
    sys.exit(main())
