"""The smallest fake providers the upstream-leg matrix needs, on one 127.0.0.1
server, for a real CPA to call (tests/e2e/test_real_cpa_upstream_matrix.py).

Two are new here, written from the providers' documented wire (to be reconciled with the
fuller fakes of the real-CPA matrix):

- **Gemini** ``POST .../models/M:streamGenerateContent?alt=sse`` (AI Studio
  ``/v1beta/models/...``, Vertex ``/v1/publishers/google/models/...``) and
  ``:generateContent``: ``GenerateContentResponse`` objects, one per ``data:`` line
  (CRLF framing, as Google sends it), text parts, ``thought: true`` parts, whole
  ``functionCall`` parts (several in one chunk for parallel calls), the last chunk with
  ``finishReason`` (``STOP``, ``MAX_TOKENS``, ``SAFETY``) and ``usageMetadata``
  (``promptTokenCount``, ``candidatesTokenCount`` without thoughts, ``thoughtsTokenCount``,
  ``totalTokenCount``); a failure is ``data: {"error": {"code", "message", "status"}}``.
  ``/v1internal:streamGenerateContent`` (the Gemini CLI / Antigravity) wraps each object
  in ``{"response": ...}``.
- **Codex / OpenAI Responses** ``POST .../responses``: ``response.created``,
  ``response.in_progress``, ``output_item.added`` / ``content_part.added`` /
  ``output_text.delta`` / ``*.done`` per message, ``function_call_arguments.delta`` /
  ``.done`` per call, reasoning items with ``reasoning_summary_text.delta``, then
  ``response.completed`` or ``response.incomplete`` (``incomplete_details.reason``
  ``max_output_tokens`` / ``content_filter``) with ``usage`` (``input_tokens``,
  ``output_tokens`` with ``output_tokens_details.reasoning_tokens``); a failure is
  ``response.failed``.

Anthropic, Gemini Interactions and OpenAI chat reuse tests/support/standins/fake_providers.py's
event builders, changed per turn kind below.

The turn kind is a ``[turn:KIND]`` marker in the request's text (default ``text_tool``):

=============== ======================================================================
``text_tool``   text, then one tool call
``thoughts``    thinking (thought parts, reasoning), text, a tool call
``parallel``    text, then two tool calls (Gemini: both in one chunk)
``max_tokens``  cut by the output budget (the provider's own truncation stop)
``safety``      Gemini ``SAFETY``, chat ``content_filter``, Codex ``incomplete /
                content_filter``, Anthropic ``refusal``
``refusal``     Anthropic ``refusal`` (others: as ``safety``)
``context``     Anthropic ``model_context_window_exceeded`` (others: as ``max_tokens``)
``error``       an in-band error after two content deltas, in a 200 stream
``no_finish``   the body ends cleanly with no finish (chat: ``[DONE]`` without a
                ``finish_reason``; Anthropic: no ``message_delta``/``message_stop``)
``cut``         the body is cut inside an HTTP chunk (a chunk announced longer than sent,
                then the connection closes)
=============== ======================================================================

``[conv:N]`` gives the turn its own text and usage (input tokens ``1000 + N``) so that
concurrent conversations can be told apart. Every request is kept in ``requests``, with
what was answered: ``status``, ``response_headers``, ``response`` (the body bytes as
written, a cut one up to the cut) and ``ended`` (``complete`` or ``cut``); request headers
only from :data:`KEPT_HEADERS` (never a credential), ``raw`` the request body's bytes.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from aiohttp import web

from standins import fake_providers as fp
from streamfix.aioserve import start_app

KINDS = ("text_tool", "thoughts", "parallel", "max_tokens", "safety", "refusal", "context", "error", "no_finish", "cut")
_TURN = re.compile(rb"\[turn:([a-z_]+)\]")
_CONV = re.compile(rb"\[conv:(\d+)\]")
KEPT_HEADERS = frozenset({"content-type", "accept", "anthropic-version", "api-revision", "openai-beta"})
"""The request headers a request record keeps (no credential: keys, tokens, cookies)."""
_RECORD = web.RequestKey("streamfix_fake_record", dict)
"""A request's record in ``requests``, where its answer is written."""
THOUGHT_TOKENS = 50
"""Thought tokens the Gemini and Codex fakes report on a ``thoughts`` turn."""


def script_for(kind: str, conv: int | None) -> fp.Script:
    name = {"thoughts": "thinking_text_tool", "parallel": "two_tools", "max_tokens": "cut_tool",
            "context": "cut_tool", "error": "error_mid", "safety": "text", "refusal": "text"}.get(kind, "text_tool")  # fmt: skip
    s = fp.SCRIPTS[name]
    if conv is not None:
        s = replace(s, text=(f"Conversation {conv}: ", *s.text), usage_in=(1000 + conv, 0))
    return s


def input_tokens(s: fp.Script) -> int:
    return s.usage_in[0] + s.usage_in[1]


def out_tokens(s: fp.Script) -> int:
    chars = sum(map(len, s.thinking + s.text + s.text_after)) + sum(len("".join(c.args)) for c in s.calls)
    return max(-(-chars // fp.CHARS_PER_TOKEN), 1)


# --- Gemini generateContent ----------------------------------------------------------


def gemini_chunks(s: fp.Script, kind: str, model: str) -> tuple[list[dict], dict | None]:
    """(the ``GenerateContentResponse`` objects, the error object of an ``error`` turn)."""
    rid = "resp-fake-gemini"

    def chunk(parts: list[dict], **extra: Any) -> dict:
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0, **extra}],
                "modelVersion": model, "responseId": rid}  # fmt: skip

    out: list[dict] = [chunk([{"text": t, "thought": True}]) for t in s.thinking]
    for deltas, t in enumerate(s.text):
        if kind == "error" and deltas >= 2:
            break
        out.append(chunk([{"text": t}]))
    if kind == "error":
        return out, {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    calls = [{"functionCall": {"name": c.name, "args": orjson.loads("".join(c.args))}} for c in s.calls
             if kind not in ("max_tokens", "context", "safety", "refusal")]  # fmt: skip
    if kind == "parallel":
        out.append(chunk(calls))
    else:
        out += [chunk([c]) for c in calls]
    thoughts = THOUGHT_TOKENS if s.thinking else 0
    cand = out_tokens(s)
    fr = {"max_tokens": "MAX_TOKENS", "context": "MAX_TOKENS", "safety": "SAFETY", "refusal": "SAFETY"}.get(
        kind, "STOP"
    )
    usage = {
        "promptTokenCount": input_tokens(s),
        "candidatesTokenCount": cand,
        "totalTokenCount": input_tokens(s) + cand + thoughts,
    }
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    if kind not in ("no_finish", "cut"):
        out.append(chunk([{"text": ""}], finishReason=fr) | {"usageMetadata": usage})
    return out, None


def gemini_json(s: fp.Script, kind: str, model: str) -> dict:
    chunks, _ = gemini_chunks(s, kind, model)
    parts: list[dict] = []
    final: dict = {}
    for c in chunks:
        cand = c["candidates"][0]
        parts += [p for p in cand["content"]["parts"] if p.get("text") != ""]
        if "finishReason" in cand:
            final = {"finishReason": cand["finishReason"], "usageMetadata": c["usageMetadata"]}
    body: dict = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}], "modelVersion": model}
    if final:
        body["candidates"][0]["finishReason"] = final["finishReason"]
        body["usageMetadata"] = final["usageMetadata"]
    return body


# --- Codex / OpenAI Responses -------------------------------------------------------------


def responses_events(s: fp.Script, kind: str, model: str) -> list[tuple[str, dict]]:
    rid = "resp_fake_codex"
    seq = 0
    ev: list[tuple[str, dict]] = []

    def add(typ: str, **fields: Any) -> None:
        nonlocal seq
        ev.append((typ, {"type": typ, "sequence_number": seq, **fields}))
        seq += 1

    base = {"id": rid, "object": "response", "created_at": 1767000000, "model": model, "output": []}
    add("response.created", response={**base, "status": "in_progress"})
    add("response.in_progress", response={**base, "status": "in_progress"})
    items: list[dict] = []
    idx = 0
    if s.thinking:
        it = {"id": "rs_fake_0", "type": "reasoning", "summary": []}
        add("response.output_item.added", output_index=idx, item=it)
        for t in s.thinking:
            add(
                "response.reasoning_summary_text.delta", item_id="rs_fake_0", output_index=idx, summary_index=0, delta=t
            )
        done = {**it, "summary": [{"type": "summary_text", "text": "".join(s.thinking)}]}
        add("response.output_item.done", output_index=idx, item=done)
        items.append(done)
        idx += 1
    mid = "msg_fake_1"
    add("response.output_item.added", output_index=idx,
        item={"id": mid, "type": "message", "status": "in_progress", "role": "assistant", "content": []})  # fmt: skip
    add("response.content_part.added", item_id=mid, output_index=idx, content_index=0,
        part={"type": "output_text", "annotations": [], "text": ""})  # fmt: skip
    for deltas, t in enumerate(s.text):
        if kind == "error" and deltas >= 2:
            break
        add("response.output_text.delta", item_id=mid, output_index=idx, content_index=0, delta=t, logprobs=[])
    if kind == "error":
        add("response.failed", response={**base, "status": "failed", "output": items,
                                         "error": {"code": "server_error", "message": "The model is overloaded."}})  # fmt: skip
        return ev
    if kind in ("no_finish", "cut"):
        return ev
    text = "".join(s.text)
    part = {"type": "output_text", "annotations": [], "text": text}
    add("response.output_text.done", item_id=mid, output_index=idx, content_index=0, text=text, logprobs=[])
    add("response.content_part.done", item_id=mid, output_index=idx, content_index=0, part=part)
    msg = {"id": mid, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
    add("response.output_item.done", output_index=idx, item=msg)
    items.append(msg)
    idx += 1
    if kind not in ("safety", "refusal"):
        for i, c in enumerate(s.calls):
            fid = f"fc_fake_{i}"
            item = {
                "id": fid,
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": c.id,
                "name": c.name,
            }
            add("response.output_item.added", output_index=idx, item=item)
            for a in c.args:
                add("response.function_call_arguments.delta", item_id=fid, output_index=idx, delta=a)
            args = "".join(c.args)
            cut_call = kind in ("max_tokens", "context")
            add("response.function_call_arguments.done", item_id=fid, output_index=idx, arguments=args)
            done = {**item, "status": "incomplete" if cut_call else "completed", "arguments": args}
            add("response.output_item.done", output_index=idx, item=done)
            items.append(done)
            idx += 1
    thoughts = THOUGHT_TOKENS if s.thinking else 0
    out = out_tokens(s) + thoughts
    usage = {"input_tokens": input_tokens(s), "input_tokens_details": {"cached_tokens": 0}, "output_tokens": out,
             "output_tokens_details": {"reasoning_tokens": thoughts}, "total_tokens": input_tokens(s) + out}  # fmt: skip
    reason = {"max_tokens": "max_output_tokens", "context": "max_output_tokens", "safety": "content_filter",
              "refusal": "content_filter"}.get(kind)  # fmt: skip
    if reason:
        add("response.incomplete", response={**base, "status": "incomplete", "output": items, "usage": usage,
                                             "incomplete_details": {"reason": reason}})  # fmt: skip
    else:
        add("response.completed", response={**base, "status": "completed", "output": items, "usage": usage,
                                            "incomplete_details": None})  # fmt: skip
    return ev


def responses_json(s: fp.Script, kind: str, model: str) -> dict:
    last = responses_events(s, kind, model)[-1][1]
    return last.get("response", {})


# --- the other three: the shared builders, changed per kind -----------------------------

_ANTHROPIC_STOP = {"refusal": "refusal", "safety": "refusal", "context": "model_context_window_exceeded"}


def anthropic_frames(s: fp.Script, kind: str, model: str, cut: bool, tokens: int) -> list[bytes]:
    frames = fp.anthropic_events(s, model, cut, tokens, "msg_01FakeUpstream")
    if kind in _ANTHROPIC_STOP:
        stop = _ANTHROPIC_STOP[kind]
        frames = [re.sub(rb'"stop_reason":"(end_turn|tool_use|max_tokens)"', b'"stop_reason":"' + stop.encode() + b'"', f)
                  if f.startswith(b"event: message_delta") else f for f in frames]  # fmt: skip
    if kind in ("no_finish", "cut"):
        frames = [f for f in frames if not f.startswith((b"event: message_delta", b"event: message_stop"))]
    return frames


def chat_frames(s: fp.Script, kind: str, model: str, cut: bool, tokens: int, include_usage: bool) -> list[bytes]:
    frames = fp.chat_chunks(s, model, cut, tokens, "chatcmpl-fakeupstream", include_usage)
    if input_tokens(s) != fp.INPUT_TOKENS:  # the conversation's own input count in the usage chunk
        frames = [_chat_input(f, input_tokens(s)) if b'"usage"' in f else f for f in frames]
    if kind in ("safety", "refusal"):
        frames = [f.replace(b'"finish_reason":"stop"', b'"finish_reason":"content_filter"') for f in frames]
    if kind in ("no_finish", "cut"):
        frames = [f for f in frames if b'"finish_reason":null' in f or b'"choices":[' not in f]
        frames = [f for f in frames if b'"choices":[]' not in f]
        if kind == "cut":
            frames = [f for f in frames if f != b"data: [DONE]\n\n"]
    return frames


def _chat_input(frame: bytes, n: int) -> bytes:
    obj = orjson.loads(frame[len(b"data: ") :])
    u = obj["usage"]
    u["prompt_tokens"] = n
    u["total_tokens"] = n + u["completion_tokens"]
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def interactions_frames(s: fp.Script, kind: str, model: str, cut: bool, tokens: int) -> list[bytes]:
    evs = fp.interactions_events(s, model, cut, tokens, "v1_fakeupstream")
    if kind in ("no_finish", "cut"):
        evs = [e for e in evs if e["event_type"] != "interaction.completed"]
    frames = [fp._sse("error" if e["event_type"] == "error" else None, e) for e in evs]
    if kind not in ("no_finish", "cut", "error"):
        frames.append(b"event: done\ndata: [DONE]\n\n")
    return frames


# --- the server ---------------------------------------------------------------------------


def _kind(raw: bytes, default: str = "text_tool") -> tuple[str, int | None]:
    kinds = _TURN.findall(raw)
    convs = _CONV.findall(raw)
    kind = kinds[-1].decode() if kinds else default
    return (kind if kind in KINDS else "text_tool"), (int(convs[-1]) if convs else None)


@dataclass
class FakeUpstreams:
    delay_ms: float = 1.0
    last_pause_ms: float = 0.0
    """A pause before a stream's last frame (``[DONE]``, ``message_stop``, the terminal):
    what CPA writes on the frames before it reaches its client before the provider's
    stream ends (tests/e2e/test_real_cpa_upstream_matrix.py's race test)."""
    requests: deque = field(default_factory=lambda: deque(maxlen=2000))
    default_kind: str = "text_tool"
    """The turn kind of a request without a ``[turn:KIND]`` marker (the real clients' prompts)."""
    fail_next: dict[str, int] = field(default_factory=dict)
    """Provider -> how many of its next calls answer HTTP 503 (a call CPA retries)."""

    async def _stream(self, request: web.Request, frames: list[bytes], cut: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
        await resp.prepare(request)
        rec = request.get(_RECORD)
        if rec is not None:
            rec.update(status=resp.status, response_headers=dict(resp.headers), response=b"", ended="complete")
        try:
            sent = frames[:-1] if cut else frames
            for i, f in enumerate(sent):
                if self.last_pause_ms and i == len(sent) - 1 and i > 0 and not cut:
                    await asyncio.sleep(self.last_pause_ms / 1000)
                await resp.write(f)
                if rec is not None:
                    rec["response"] += f
                if self.delay_ms:
                    await asyncio.sleep(self.delay_ms / 1000)
            if cut:
                half = frames[-1][: max(len(frames[-1]) // 2, 1)] if frames else b"data: {"
                tr = request.transport
                if tr is not None:  # a chunk announced longer than what is sent, then the close
                    tr.write(b"%x\r\n" % (len(half) + 64) + half)
                    if rec is not None:
                        rec["response"] += half
                        rec["ended"] = "cut"
                    await asyncio.sleep(0.01)
                    tr.close()
                return resp
            await resp.write_eof()
        except ConnectionError:
            pass
        return resp

    async def _read(self, request: web.Request, api: str) -> tuple[dict, str, int | None] | web.Response:
        raw = await request.read()
        body = orjson.loads(raw) if raw else {}
        kind, conv = _kind(raw, self.default_kind)
        rec = {"api": api, "path": request.path_qs, "body": body, "kind": kind, "conv": conv, "raw": raw,
               "headers": {k.lower(): v for k, v in request.headers.items() if k.lower() in KEPT_HEADERS}}  # fmt: skip
        request[_RECORD] = rec
        self.requests.append(rec)
        if self.fail_next.get(api):
            self.fail_next[api] -= 1
            return web.json_response(
                {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}, status=503
            )
        return body, kind, conv

    async def gemini(self, request: web.Request) -> web.StreamResponse:
        got = await self._read(request, "gemini")
        if isinstance(got, web.Response):
            return got
        _body, kind, conv = got
        path = request.path
        model = path.rsplit("/models/", 1)[-1].split(":", 1)[0] if "/models/" in path else "gemini-fake"
        s = script_for(kind, conv)
        envelope = "/v1internal:" in path
        if path.endswith(":generateContent"):
            obj = gemini_json(s, kind, model)
            return web.Response(
                body=orjson.dumps({"response": obj} if envelope else obj), content_type="application/json"
            )
        chunks, err = gemini_chunks(s, kind, model)
        frames = [b"data: " + orjson.dumps({"response": c} if envelope else c) + b"\r\n\r\n" for c in chunks]
        if err is not None:
            frames.append(b"data: " + orjson.dumps(err) + b"\r\n\r\n")
        return await self._stream(request, frames, kind == "cut")

    async def responses(self, request: web.Request) -> web.StreamResponse:
        got = await self._read(request, "responses")
        if isinstance(got, web.Response):
            return got
        body, kind, conv = got
        s = script_for(kind, conv)
        model = str(body.get("model", "gpt-5-codex"))
        if not body.get("stream", True):
            return web.Response(body=orjson.dumps(responses_json(s, kind, model)), content_type="application/json")
        frames = [
            b"event: " + t.encode() + b"\ndata: " + orjson.dumps(o) + b"\n\n"
            for t, o in responses_events(s, kind, model)
        ]
        return await self._stream(request, frames, kind == "cut")

    async def messages(self, request: web.Request) -> web.StreamResponse:
        got = await self._read(request, "anthropic")
        if isinstance(got, web.Response):
            return got
        body, kind, conv = got
        s, cut, tokens = script_for(kind, conv).capped(fp._cap("anthropic", body))
        model = str(body.get("model", "claude"))
        if not body.get("stream"):
            obj = fp.anthropic_json(s, model, cut, tokens, "msg_01FakeUpstream")
            if kind in _ANTHROPIC_STOP:
                obj["stop_reason"] = _ANTHROPIC_STOP[kind]
            return web.Response(body=orjson.dumps(obj), content_type="application/json")
        return await self._stream(request, anthropic_frames(s, kind, model, cut, tokens), kind == "cut")

    async def count_tokens(self, request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"input_tokens": fp.INPUT_TOKENS})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        got = await self._read(request, "openai_chat")
        if isinstance(got, web.Response):
            return got
        body, kind, conv = got
        s, cut, tokens = script_for(kind, conv).capped(fp._cap("chat", body))
        model = str(body.get("model", "gpt"))
        if not body.get("stream"):
            obj = fp.chat_json(s, model, cut, tokens, "chatcmpl-fakeupstream")
            if "usage" in obj:
                obj["usage"]["prompt_tokens"] = input_tokens(s)
                obj["usage"]["total_tokens"] = input_tokens(s) + obj["usage"]["completion_tokens"]
            if kind in ("safety", "refusal"):
                obj["choices"][0]["finish_reason"] = "content_filter"
            return web.Response(body=orjson.dumps(obj), content_type="application/json")
        inc = bool((body.get("stream_options") or {}).get("include_usage"))
        return await self._stream(request, chat_frames(s, kind, model, cut, tokens, inc), kind == "cut")

    async def interactions(self, request: web.Request) -> web.StreamResponse:
        got = await self._read(request, "interactions")
        if isinstance(got, web.Response):
            return got
        body, kind, conv = got
        s, cut, tokens = script_for(kind, conv).capped(fp._cap("interactions", body))
        model = str(body.get("model", "gemini"))
        if not body.get("stream"):
            return web.Response(body=orjson.dumps(fp.interactions_json(s, model, cut, tokens, "v1_fakeupstream")),
                                content_type="application/json")  # fmt: skip
        return await self._stream(request, interactions_frames(s, kind, model, cut, tokens), kind == "cut")

    async def route(self, request: web.Request) -> web.StreamResponse:
        resp = await self._route(request)
        rec = request.get(_RECORD)
        if rec is not None and "status" not in rec and isinstance(resp, web.Response):  # a whole body
            rec.update(status=resp.status, response_headers=dict(resp.headers), response=bytes(resp.body or b""),
                       ended="complete")  # fmt: skip
        return resp

    async def _route(self, request: web.Request) -> web.StreamResponse:
        p = request.path
        if p.endswith((":streamGenerateContent", ":generateContent")):
            return await self.gemini(request)
        if p.endswith("/messages/count_tokens"):
            return await self.count_tokens(request)
        if p.endswith("/messages"):
            return await self.messages(request)
        if p.endswith("/chat/completions"):
            return await self.chat(request)
        if p.endswith("/interactions"):
            return await self.interactions(request)
        if p.endswith("/responses"):
            return await self.responses(request)
        return web.json_response({"error": {"message": f"no fake for {p}"}}, status=404)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/{tail:.*}", self.route)
        return app


class Running:
    """The fakes served from a thread of this process; ``.url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, delay_ms: float = 1.0) -> None:
        self.fake = FakeUpstreams(delay_ms=delay_ms)
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fake-upstreams")
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("fake upstreams did not start")
        self.url = f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.runner, self.port = self.loop.run_until_complete(start_app(self.fake.app()))
        self._ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        async def down() -> None:
            await self.runner.cleanup()

        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(down(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
