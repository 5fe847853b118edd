"""Fake model providers for a real CPA to call: Anthropic Messages, Gemini Interactions and
an OpenAI-compatible chat API, on one 127.0.0.1 server (tests/e2e/realcpa/test_real_cpa.py).

Written from the providers' documented wire, not from CPA:

- **Anthropic Messages** (``POST /v1/messages``, ``?beta=true`` ignored): with
  ``"stream": true`` the SSE events ``message_start`` (``message.id``, ``model``,
  ``usage``), ``content_block_start`` / ``content_block_delta`` (``thinking_delta``,
  ``signature_delta``, ``text_delta``, ``input_json_delta``) / ``content_block_stop`` per
  block, ``message_delta`` (``stop_reason`` ``end_turn``, ``tool_use`` or ``max_tokens``,
  ``usage.output_tokens``) and ``message_stop``, each as ``event: TYPE`` + ``data: JSON``;
  a mid-stream failure is ``event: error`` with ``{"type":"error","error":{...}}``.
  Without it, one Messages JSON object. ``POST /v1/messages/count_tokens`` answers
  ``{"input_tokens": N}`` (CPA v7.2.89 forwards it; later builds estimate locally).
- **Gemini Interactions** (``POST /v1beta/interactions``): SSE frames ``data: JSON`` with
  ``event_type`` ``interaction.created``, ``step.start`` / ``step.delta`` (``thought_summary``,
  ``text``, ``arguments_delta``) / ``step.stop`` per step, ``interaction.completed``
  (``status`` ``completed``, ``requires_action`` after function calls, ``incomplete`` when
  cut at ``generation_config.max_output_tokens``; ``usage`` with ``total_input_tokens``,
  ``total_output_tokens``, ``total_tokens``), then ``event: done``; a failure is an
  ``error`` event. Without ``stream``, one Interaction JSON (``steps`` at top level).
- **OpenAI chat** (``POST /v1/chat/completions``): ``chat.completion.chunk`` SSE with
  ``tool_calls[].index`` 0..n-1, ``finish_reason`` ``stop``/``tool_calls``/``length``, a
  usage-only chunk (``choices: []``) when ``stream_options.include_usage``, ``[DONE]``; a
  failure is ``data: {"error":{...}}`` and the stream ends. Without ``stream``, one
  ``chat.completion``.

Every provider plays a named :class:`Script` (``SCRIPTS``): the server's ``default``, or
the one a ``[script:NAME]`` marker in the request's text names. A request that carries
a tool result (``tool_result`` block, ``role: tool``, an interactions ``function_result``)
gets the script's ``followup`` instead (an agent's second turn: Codex's). The output cap
of the request (Anthropic ``max_tokens``, chat ``max_tokens``/``max_completion_tokens``,
interactions ``generation_config.max_output_tokens``) is honoured: one token is 4
characters of text or arguments; a script longer than the cap is cut there and ends the
way the provider says so. Every request is kept in ``requests`` (path, headers, body) so
a test can see what CPA forwarded.
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

from standins.frames import Frames, ended
from standins.provider_gemini import code_assist_frames, gemini_array, gemini_chunks, gemini_frames, gemini_json
from standins.provider_responses import CREATED, responses_events, responses_frames, responses_json
from streamfix.aioserve import start_app

CHARS_PER_TOKEN = 4
INPUT_TOKENS = 42
"""The input tokens every script reports unless it says otherwise."""
_MARK = re.compile(rb"\[script:([a-z0-9_]+)\]")


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    args: tuple[str, ...]
    """The arguments' JSON text, in the fragments it streams in."""


@dataclass(frozen=True)
class Script:
    """What one model turn says, provider-neutral."""

    thinking: tuple[str, ...] = ()
    text: tuple[str, ...] = ()
    calls: tuple[Call, ...] = ()
    usage: bool = True
    """False: no usage anywhere (the providers always send it; a gateway's drop)."""
    error_after: int | None = None
    """Fail after this many content deltas (Anthropic ``overloaded_error``, ...)."""
    followup: str | None = None
    """The script that answers a request carrying a tool result."""
    cut: bool = False
    """The model's own budget ran out here, whatever the request's cap: the turn ends as
    truncated (``max_tokens``, ``incomplete``, ``length``)."""
    text_after: tuple[str, ...] = ()
    """A second text block after the calls (Claude's text, tool_use, text)."""
    msg_id: str = ""
    """The response id (default: from the script's name)."""
    model: str = ""
    """The model the provider reports (default: the one asked for)."""
    signature: str = "EqQBCkYIARgCKkBmYWtlLXNpZ25hdHVyZQ=="
    """The thinking block's signature (Anthropic ``signature_delta``)."""
    usage_in: tuple[int, int] = (INPUT_TOKENS, 0)
    """Input tokens: (uncached, cache read)."""
    out_tokens: int | None = None
    """Output tokens to report (default: the streamed characters / 4)."""
    stop: str = ""
    """How the model stopped when not naturally (``cut`` is the budget, ``max_tokens``):
    ``safety`` (a content filter stopped it), ``recitation``, ``refusal`` (the model refused;
    :attr:`refusal` holds what it said), ``context_window`` (the context window is full),
    ``pause`` (a paused server-tool turn). Each provider says it in its own terms;
    :data:`SUPPORTS` says which provider has no word for which."""
    ending: str = "clean"
    """How the body ends (``frames.ENDINGS``): ``clean``; ``no_finish`` (after the last content
    delta the provider closes the body cleanly, without its finish); ``done_no_finish`` (the
    same, then the provider's end-of-stream marker: chat's ``[DONE]``); ``cut`` (the last
    content frame is cut in half and the connection dropped inside the HTTP body)."""
    groups: tuple[int, ...] = ()
    """Calls per provider chunk where the provider groups them (Gemini's parts: ``(1, 2)``
    sends ``[A]``, then ``[B, C]``); default one call per chunk."""
    refusal: tuple[str, ...] = ()
    """What the model said refusing (OpenAI's ``refusal`` deltas; Anthropic's text before
    its ``stop_reason: refusal``)."""
    vendor: bool = False
    """The Codex backend's own events around the turn (``codex.rate_limits``,
    ``codex.response.metadata``, ``keepalive``): provider_responses.py only."""
    joined: bool = False
    """Gemini: the finish (``finishReason``, the whole ``usageMetadata``) rides on the chunk
    with the last parts, as Gemini sends a turn that ends in a call, instead of a chunk of
    its own."""
    reasoning_tokens: int | None = None
    """Reasoning tokens to report where the provider splits them out (default: the
    thinking's characters / 4); the output tokens include them."""

    def capped(self, cap: int | None) -> tuple[Script, bool, int]:
        """The script cut at ``cap`` tokens: (script, cut, output tokens)."""
        budget = None if cap is None else cap * CHARS_PER_TOKEN
        used = 0
        cut = False

        def take(parts: tuple[str, ...]) -> tuple[str, ...]:
            nonlocal used, cut
            out = []
            for p in parts:
                if budget is not None and used + len(p) > budget:
                    rest = budget - used
                    if rest > 0:
                        out.append(p[:rest])
                    used = budget
                    cut = True
                    break
                out.append(p)
                used += len(p)
            return tuple(out)

        thinking = take(self.thinking)
        text = take(self.text) if not cut else ()
        calls = []
        for c in self.calls:
            if cut:
                break
            args = take(c.args)
            calls.append(replace(c, args=args))
        text_after = take(self.text_after) if not cut else ()
        refusal = take(self.refusal) if not cut else ()
        tokens = -(-used // CHARS_PER_TOKEN) if not cut else cap
        if self.out_tokens is not None and not cut:
            tokens = self.out_tokens
        return (replace(self, thinking=thinking, text=text, calls=tuple(calls), text_after=text_after,
                        refusal=refusal),
                cut or self.cut, max(int(tokens or 0), 1))  # fmt: skip


PROBE_CMD = '{"cmd":"echo probe-ok > probe-marker.txt"}'
SCRIPTS: dict[str, Script] = {
    "text": Script(text=("Hello ", "from the ", "fake model.")),
    "text_tool": Script(
        text=("I'll list ", "the files first."),
        calls=(Call("toolu_01fake0001", "exec_command", ('{"cmd":', '"ls -la"}')),),
    ),
    "thinking_text_tool": Script(
        thinking=("The user wants ", "the files."),
        text=("Listing them ", "now."),
        calls=(Call("toolu_01fake0002", "exec_command", ('{"cmd":"ls', ' <dir> && echo \\"ok\\""}')),),
    ),
    "two_tools": Script(
        text=("Two commands.",),
        calls=(
            Call("toolu_01fake0003", "exec_command", ('{"cmd":', '"pwd"}')),
            Call("toolu_01fake0004", "exec_command", ('{"cmd":', '"date"}')),
        ),
    ),
    "tool_only": Script(calls=(Call("toolu_01fake0005", "get_weather", ('{"city":', '"Paris"}')),)),
    "probe": Script(
        text=("Running the probe.",),
        calls=(Call("toolu_01fakeprobe", "exec_command", (PROBE_CMD[:12], PROBE_CMD[12:])),),
        followup="done",
    ),
    "done": Script(
        text=(
            "ALL ",
            "DONE",
        )
    ),
    "probe_no_usage": Script(
        text=("Running the probe.",),
        calls=(Call("toolu_01fakeprobe", "exec_command", (PROBE_CMD[:12], PROBE_CMD[12:])),),
        followup="done_no_usage",
        usage=False,
    ),
    "done_no_usage": Script(
        text=(
            "ALL ",
            "DONE",
        ),
        usage=False,
    ),
    "long_tool": Script(
        text=("Writing the page.",),
        calls=(
            Call(
                "toolu_01fake0006",
                "write_file",
                ('{"path":"index.html","content":"', *(f"<p>line {i:02d} of a long page</p>" for i in range(40)), '"}'),
            ),
        ),
    ),
    "cut_tool": Script(
        text=("Writing index.html now.",),
        calls=(Call("toolu_01fake0008", "write_file", ('{"path":"index.html","content":"', "<h1>Launch")),),
        cut=True,
    ),
    # the Claude turns of recordings/responses-claude-* (re-captured from real v7.2.89)
    "rec_claude_text_then_tool": Script(
        text=("I'll list the files", " first."),
        calls=(Call("toolu_01Xk7bQ2mN9pL4sV8tR3yW6z", "exec_command", ('{"cmd":', '"ls -la"}')),),
        msg_id="msg_01HqA9ZkT3vF8w2bXyR7cD4e",
        model="claude-sonnet-4-6",
        usage_in=(2188, 20992),
        out_tokens=87,
    ),
    "rec_claude_text_tool_text": Script(
        text=("I'll look for the test directory", " first."),
        calls=(Call("toolu_01Dk4Rw8Nq2Ls6Vb9Yh3Tc7M", "exec_command", ('{"cmd":', '"ls tests"}')),),
        text_after=("Once I see the layout,", " I'll check how pytest is configured."),
        msg_id="msg_01Pq7WmX2kR9dT4vB8nC3sJe",
        model="claude-sonnet-4-6",
        usage_in=(1840, 21504),
        out_tokens=112,
    ),
    "rec_claude_thinking_text_tool": Script(
        thinking=("The user wants the tests run. ", "I should call exec_command with pytest."),
        text=("Running the test suite.",),
        calls=(Call("toolu_01Pq4Wm7Zx2Kc9Vb5Nr8Ty3L", "exec_command", ('{"cmd":"pytest -q"}',)),),
        signature="EqQBCkYIBxgCKkCx3f9sZ0m1Tq8vWn4yLr2uJd6oPa5bHc7kNg1eXi0RtMwVz3QpLf2Ys9AaKo4Uj8Ed5Gn6Cb1Vh7Tx0Ir2Mu3wEgyHqZ4nLp8Ws0Ek5Jb2QaAh",
        msg_id="msg_01Tz8KqW3nVb6Yc2Hd9Lf5Rx",
        model="claude-sonnet-4-6",
        usage_in=(412, 18944),
        out_tokens=96,
    ),
    "no_usage": Script(
        text=("No usage ", "here."), calls=(Call("toolu_01fake0007", "exec_command", ('{"cmd":"id"}',)),), usage=False
    ),
    "error_mid": Script(text=("Starting ", "the work ", "and then"), error_after=2),
    # --- the turn kinds of the real-CPA matrix (tests/support/realcpa_matrix.py): one script each;
    # text_tool above is "text then tool"
    "thoughts": Script(
        thinking=("The user asks for the answer; ", "I should think it through first ", "and then say it plainly."),
        text=("The answer ", "is 42."),
        reasoning_tokens=22,
    ),
    "parallel": Script(
        text=("Three commands.",),
        calls=(
            Call("call_fakepar0001", "exec_command", ('{"cmd":"pwd"}',)),
            Call("call_fakepar0002", "exec_command", ('{"cmd":"date"}',)),
            Call("call_fakepar0003", "exec_command", ('{"cmd":"id"}',)),
        ),
        groups=(1, 2),
    ),
    "max_tokens": Script(
        text=("The tides rise and fall twice ", "a day because the moon pulls ", "on th"),
        cut=True,
        out_tokens=16,
    ),
    "safety": Script(text=("Here is how ", "to make"), stop="safety"),
    "refusal": Script(refusal=("I can't help ", "with that."), stop="refusal"),
    "context_window": Script(text=("Reading the ", "whole log"), stop="context_window"),
    "pause": Script(text=("Searching the web ", "first."), stop="pause"),
    "inband_error": Script(text=("Starting ", "the work ", "and then"), error_after=2),
    "error_first": Script(text=("Never ", "sent."), error_after=0),
    "no_finish": Script(text=("Two chunks ", "and then nothing"), ending="no_finish"),
    "cut_body": Script(text=("Two chunks ", "and then the wire"), ending="cut"),
    "zero_items": Script(),
    "vendor": Script(text=("Hello ", "from the Codex backend."), vendor=True),
    # --- the gateway matrix's two more turns (tests/support/gateway_matrix.py)
    "done_no_finish": Script(text=("Two chunks ", "and then the end marker"), ending="done_no_finish"),
    "cap_call": Script(
        text=("Writing the essay.",),
        calls=(Call("call_fakecap0001", "write_file", ('{"path":', '"essay.md"}')),),
        cut=True,
        joined=True,
        # an agent told the turn ended normally runs the call and asks again (Codex: "unsupported
        # call" as the tool's output); that second turn ends, so the agent does too
        followup="done",
    ),
}
TURNS = ("text_tool", "thoughts", "parallel", "max_tokens", "safety", "refusal", "context_window", "pause",
         "inband_error", "error_first", "no_finish", "cut_body", "zero_items", "vendor")  # fmt: skip
"""The turn kinds of the real-CPA matrix, each a script of :data:`SCRIPTS`."""
TURN_CAPS = {"max_tokens": 16, "cap_call": 10}
"""The output cap a client asks for on a turn (the budget the provider reports it ran out of)."""
_NO_PAUSE = "only Anthropic pauses a turn (stop_reason pause_turn, a server-tool loop)"
_NO_VENDOR = "the Codex backend's own events (codex.rate_limits, ...) come only from provider_responses.py"
_NO_MARKER = (
    "the stream has no end-of-stream marker of its own after the finish: it ends with the body (that is the "
    "no_finish turn)"
)
SUPPORTS: dict[str, dict[str, str]] = {
    # provider API -> script -> why the provider has no such turn (absent: it has)
    "anthropic": {
        "safety": "Anthropic has no safety stop of its own: its classifiers end a turn with stop_reason "
        "refusal (the refusal turn)",
        "vendor": _NO_VENDOR,
    },
    "interactions": {
        "safety": "no content-filter status in an Interactions stream (completed, requires_action, incomplete, failed)",
        "refusal": "the Interactions API has no refusal stop",
        "context_window": "an overlong input is an HTTP 400 before any event, not a stop",
        "pause": _NO_PAUSE,
        "vendor": _NO_VENDOR,
    },
    "chat": {
        "context_window": "OpenAI chat refuses an overlong input with HTTP 400 before any chunk; no finish_reason "
        "says it",
        "pause": _NO_PAUSE,
        "vendor": _NO_VENDOR,
    },
    "gemini": {
        "refusal": "Gemini has no refusal stop: a blocked answer is finishReason SAFETY (the safety turn)",
        "context_window": "an overlong input is an HTTP 400 (INVALID_ARGUMENT) before any chunk, not a finishReason",
        "pause": _NO_PAUSE,
        "vendor": _NO_VENDOR,
        "done_no_finish": _NO_MARKER,
    },
    "responses": {"pause": _NO_PAUSE, "done_no_finish": _NO_MARKER},
}
"""What a provider cannot say: ``SUPPORTS[api][script]`` is why (a turn not listed is played)."""
SUPPORTS["antigravity"] = SUPPORTS["gemini"]  # the Code Assist envelope of Gemini's chunks


def unsupported(api: str, script: str) -> str | None:
    """Why the provider API ``api`` has no turn like ``script`` (None: it plays it)."""
    return SUPPORTS.get(api, {}).get(script)


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def _sse(event: str | None, obj: Any) -> bytes:
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + (obj if isinstance(obj, bytes) else _dumps(obj)) + b"\n\n"


# --- Anthropic Messages -------------------------------------------------------------


ANTHROPIC_STOP = {"refusal": "refusal", "context_window": "model_context_window_exceeded", "pause": "pause_turn"}
"""A script's stop -> Anthropic's ``stop_reason`` (beside ``max_tokens``, ``tool_use``, ``end_turn``)."""


def anthropic_stop(s: Script, cut: bool) -> str:
    return "max_tokens" if cut else ANTHROPIC_STOP.get(s.stop) or ("tool_use" if s.calls else "end_turn")


def anthropic_events(s: Script, model: str, cut: bool, out_tokens: int, msg_id: str) -> Frames:
    usage_start = {"input_tokens": s.usage_in[0], "cache_creation_input_tokens": 0,
                   "cache_read_input_tokens": s.usage_in[1], "output_tokens": 1}  # fmt: skip
    msg: dict[str, Any] = {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
                           "stop_reason": None, "stop_sequence": None}  # fmt: skip
    if s.usage:
        msg["usage"] = usage_start
    ev = Frames([_sse("message_start", {"type": "message_start", "message": msg}), _sse("ping", {"type": "ping"})])
    deltas = 0

    def failed() -> bool:
        return s.error_after is not None and deltas >= s.error_after

    def error() -> bytes:
        return _sse("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})

    blocks: list[tuple[dict, list[dict]]] = []
    if s.thinking:
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""},
                       [{"type": "thinking_delta", "thinking": t} for t in s.thinking]
                       + [{"type": "signature_delta", "signature": s.signature}]))  # fmt: skip
    text = s.text + s.refusal  # a refusal is said as text, then stop_reason refusal
    if text:
        blocks.append(({"type": "text", "text": ""}, [{"type": "text_delta", "text": t} for t in text]))
    for c in s.calls:
        blocks.append(({"type": "tool_use", "id": c.id, "name": c.name, "input": {}},
                       [{"type": "input_json_delta", "partial_json": a} for a in c.args]))  # fmt: skip
    if s.text_after:
        blocks.append(({"type": "text", "text": ""}, [{"type": "text_delta", "text": t} for t in s.text_after]))
    for block, (start, deltas_of) in enumerate(blocks):
        ev.append(_sse("content_block_start", {"type": "content_block_start", "index": block, "content_block": start}))
        for d in deltas_of:
            if failed():
                ev.append(error())
                return ev
            ev.append(_sse("content_block_delta", {"type": "content_block_delta", "index": block, "delta": d}))
            deltas += 1
            ev.mark()
        ev.append(_sse("content_block_stop", {"type": "content_block_stop", "index": block}))
    if failed():
        ev.append(error())
        return ev
    stop = anthropic_stop(s, cut)
    md: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
    if s.usage:
        md["usage"] = {"output_tokens": out_tokens}
    ev.append(_sse("message_delta", md))
    ev.append(_sse("message_stop", {"type": "message_stop"}))
    return ev


def anthropic_json(s: Script, model: str, cut: bool, out_tokens: int, msg_id: str) -> dict:
    content: list[dict] = []
    if s.thinking:
        content.append({"type": "thinking", "thinking": "".join(s.thinking), "signature": "EqQBCkYIARgCKkBmYWtl"})
    if s.text or s.refusal:
        content.append({"type": "text", "text": "".join(s.text + s.refusal)})
    for c in s.calls:
        try:
            inp = orjson.loads("".join(c.args))
        except orjson.JSONDecodeError:
            inp = {}
        content.append({"type": "tool_use", "id": c.id, "name": c.name, "input": inp})
    if s.text_after:
        content.append({"type": "text", "text": "".join(s.text_after)})
    body: dict[str, Any] = {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": content,
                            "stop_reason": anthropic_stop(s, cut), "stop_sequence": None}  # fmt: skip
    if s.usage:
        body["usage"] = {"input_tokens": s.usage_in[0], "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": s.usage_in[1], "output_tokens": out_tokens}  # fmt: skip
    return body


# --- Gemini Interactions ------------------------------------------------------------


def interactions_events(s: Script, model: str, cut: bool, out_tokens: int, iid: str) -> Frames:
    """The interactions events of a turn (also fed to the stand-in's translators)."""
    ev = Frames([{"event_type": "interaction.created",
                  "interaction": {"id": iid, "model": model, "status": "in_progress"}}])  # fmt: skip
    deltas = 0
    steps: list[tuple[dict, list[dict]]] = []
    if s.thinking:
        steps.append(({"type": "thought"},
                      [{"type": "thought_summary", "content": {"type": "text", "text": t}} for t in s.thinking]))  # fmt: skip
    if s.text:
        steps.append(({"type": "model_output"}, [{"type": "text", "text": t} for t in s.text]))
    for c in s.calls:
        steps.append(({"type": "function_call", "id": c.id, "name": c.name, "arguments": {}},
                      [{"type": "arguments_delta", "arguments": a} for a in c.args]))  # fmt: skip
    if s.text_after:
        steps.append(({"type": "model_output"}, [{"type": "text", "text": t} for t in s.text_after]))
    overloaded = {"event_type": "error", "error": {"code": 503, "message": "The model is overloaded."}}
    for index, (step, ds) in enumerate(steps):
        ev.append({"event_type": "step.start", "index": index, "step": step})
        for d in ds:
            if s.error_after is not None and deltas >= s.error_after:
                ev.append(overloaded)
                return ev
            ev.append({"event_type": "step.delta", "index": index, "delta": d})
            deltas += 1
            ev.mark()
        ev.append({"event_type": "step.stop", "index": index})
    if s.error_after is not None and deltas >= s.error_after:
        ev.append(overloaded)
        return ev
    inter: dict[str, Any] = {"id": iid, "model": model,
                             "status": "incomplete" if cut else "requires_action" if s.calls else "completed"}  # fmt: skip
    if s.usage:
        inp = s.usage_in[0] + s.usage_in[1]
        # total_output_tokens counts the answer, total_thought_tokens the thoughts, total_tokens
        # both (the scripts that report thought tokens apart; the others count them as output)
        thoughts = min(s.reasoning_tokens, out_tokens) if s.reasoning_tokens is not None and s.thinking else 0
        inter["usage"] = {
            "total_input_tokens": inp,
            "total_output_tokens": out_tokens - thoughts,
            "total_tokens": inp + out_tokens,
        }
        if s.usage_in[1]:
            inter["usage"]["total_cached_tokens"] = s.usage_in[1]
        if thoughts:
            inter["usage"]["total_thought_tokens"] = thoughts
    ev.append({"event_type": "interaction.completed", "interaction": inter})
    return ev


def interactions_json(s: Script, model: str, cut: bool, out_tokens: int, iid: str) -> dict:
    steps: list[dict] = []
    if s.thinking:
        steps.append({"type": "thought", "content": [{"type": "text", "text": "".join(s.thinking)}]})
    if s.text:
        steps.append({"type": "model_output", "content": [{"type": "text", "text": "".join(s.text)}]})
    for c in s.calls:
        try:
            args = orjson.loads("".join(c.args))
        except orjson.JSONDecodeError:
            args = {}
        steps.append({"type": "function_call", "id": c.id, "name": c.name, "arguments": args})
    body: dict[str, Any] = {"id": iid, "model": model,
                            "status": "incomplete" if cut else "requires_action" if s.calls else "completed",
                            "steps": steps}  # fmt: skip
    if s.usage:
        body["usage"] = {"total_input_tokens": INPUT_TOKENS, "total_output_tokens": out_tokens,
                         "total_tokens": INPUT_TOKENS + out_tokens}  # fmt: skip
    return body


# --- OpenAI chat --------------------------------------------------------------------


CHAT_FINISH = {"safety": "content_filter"}
"""A script's stop -> OpenAI's ``finish_reason`` (beside ``length``, ``tool_calls``, ``stop``; a
refusal ends ``stop``, as OpenAI's do)."""


def chat_finish(s: Script, cut: bool) -> str:
    return "length" if cut else CHAT_FINISH.get(s.stop) or ("tool_calls" if s.calls else "stop")


def chat_chunks(s: Script, model: str, cut: bool, out_tokens: int, cid: str, include_usage: bool) -> Frames:
    created = CREATED

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return _sse(None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})  # fmt: skip

    out = Frames([chunk({"role": "assistant", "content": ""})])
    deltas = 0

    def failed() -> bool:
        return s.error_after is not None and deltas >= s.error_after

    err = _sse(None, {"error": {"message": "The server is overloaded.", "type": "server_error", "code": None}})
    for t in s.thinking:
        out.append(chunk({"reasoning_content": t}))
        out.mark()
    for key, pieces in (("content", s.text), ("refusal", s.refusal)):
        for t in pieces:
            if failed():
                out.append(err)
                return out
            out.append(chunk({key: t}))
            deltas += 1
            out.mark()
    for i, c in enumerate(s.calls):
        out.append(chunk({"tool_calls": [{"index": i, "id": c.id, "type": "function",
                                          "function": {"name": c.name, "arguments": ""}}]}))  # fmt: skip
        for a in c.args:
            if failed():
                out.append(err)
                return out
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": a}}]}))
            deltas += 1
            out.mark()
    if failed():
        out.append(err)
        return out
    out.append(chunk({}, chat_finish(s, cut)))
    if include_usage and s.usage:
        out.append(_sse(None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                               "choices": [], "usage": _chat_usage(out_tokens, s)}))  # fmt: skip
    out.append(b"data: [DONE]\n\n")
    return out


def _chat_usage(out_tokens: int, s: Script | None = None) -> dict:
    u: dict[str, Any] = {"prompt_tokens": INPUT_TOKENS, "completion_tokens": out_tokens,
                         "total_tokens": INPUT_TOKENS + out_tokens}  # fmt: skip
    if s is not None and s.reasoning_tokens is not None and s.thinking:
        u["completion_tokens_details"] = {"reasoning_tokens": min(s.reasoning_tokens, out_tokens)}
    return u


def chat_json(s: Script, model: str, cut: bool, out_tokens: int, cid: str) -> dict:
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(s.text) or None}
    if s.refusal:
        msg["refusal"] = "".join(s.refusal)
    if s.thinking:
        msg["reasoning_content"] = "".join(s.thinking)
    if s.calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": "".join(c.args)}}
                             for c in s.calls]  # fmt: skip
    body: dict[str, Any] = {"id": cid, "object": "chat.completion", "created": CREATED, "model": model,
                            "choices": [{"index": 0, "message": msg, "logprobs": None,
                                         "finish_reason": chat_finish(s, cut)}]}  # fmt: skip
    if s.usage:
        body["usage"] = _chat_usage(out_tokens, s)
    return body


# --- the server -----------------------------------------------------------------------


def _has_tool_result(api: str, body: dict) -> bool:
    if api == "anthropic":
        for m in body.get("messages") or []:
            c = m.get("content") if isinstance(m, dict) else None
            if isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c):
                return True
        return False
    if api == "chat":
        return any(isinstance(m, dict) and m.get("role") == "tool" for m in body.get("messages") or [])
    if api in ("gemini", "antigravity"):  # proto3 JSON: either spelling of the field (LiteLLM sends snake_case)
        raw = orjson.dumps(body.get("contents") or (body.get("request") or {}).get("contents"))
        return b'"functionResponse"' in raw or b'"function_response"' in raw
    if api == "responses":
        return b'"function_call_output"' in orjson.dumps(body.get("input"))
    return b"function_result" in orjson.dumps(body.get("input"))


def _cap(api: str, body: dict) -> int | None:
    if api == "interactions":
        v = (body.get("generation_config") or {}).get("max_output_tokens")
    elif api == "chat":
        v = body.get("max_completion_tokens") or body.get("max_tokens")
    elif api == "gemini":
        v = (body.get("generationConfig") or {}).get("maxOutputTokens")
    elif api == "antigravity":
        v = ((body.get("request") or {}).get("generationConfig") or {}).get("maxOutputTokens")
    elif api == "responses":
        v = body.get("max_output_tokens")
    else:
        v = body.get("max_tokens")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


GEMINI_ACTION = re.compile(r"^(?P<model>[^:/]+):(?P<action>streamGenerateContent|generateContent|countTokens)$")
ERROR_STATUS = {"anthropic": 529, "interactions": 503, "chat": 503, "gemini": 503, "responses": 500}
"""The HTTP status of a non-streamed turn that fails (the providers' overloaded / server error)."""


def provider_body(api: str, name: str, model: str, rid: str, cap: int | None = None) -> tuple[list[bytes], int, str]:
    """What the fake streams for script ``name`` on provider API ``api`` (``anthropic``,
    ``interactions``, ``chat``, ``gemini``, ``responses``): (frames as written, how many
    carry content, the script's ending). A request's ``cap`` cuts the script as the
    server does. Deterministic (every clock is ``provider_responses.CREATED``): the
    provider body of a cell is well defined, for decoders of CPA's upstream leg."""
    s, cut, tokens = SCRIPTS[name].capped(cap)
    frames: list[bytes]
    if api == "anthropic":
        frames = anthropic_events(s, model, cut, tokens, rid)
        end = frames.content_end
    elif api == "interactions":
        evs = interactions_events(s, model, cut, tokens, rid)
        frames = [_sse("error" if e["event_type"] == "error" else None, e) for e in evs]
        if not frames[-1].startswith(b"event: error"):
            frames.append(b"event: done\ndata: [DONE]\n\n")
        end = evs.content_end
    elif api == "chat":
        frames = chat_chunks(s, model, cut, tokens, rid, True)
        end = frames.content_end
    elif api == "gemini":
        chunks = gemini_chunks(s, model, cut, tokens, rid)
        frames, end = gemini_frames(chunks), chunks.content_end
    elif api == "antigravity":
        chunks = gemini_chunks(s, model, cut, tokens, rid)
        frames, end = code_assist_frames(chunks, f"trace-{rid}"), chunks.content_end
    elif api == "responses":
        evs = responses_events(s, model, cut, tokens, rid)
        frames, end = responses_frames(evs), evs.content_end
    else:
        raise ValueError(api)
    return list(frames), end, s.ending


@dataclass
class FakeProviders:
    default: str = "text"
    delay_ms: float = 2.0
    requests: deque = field(default_factory=lambda: deque(maxlen=500))
    counter: int = 0
    ids: str = ""
    """Goes into every response id with the script's name (ids are the same for the same
    script, so two runs of one script compare byte for byte)."""

    def pick(self, api: str, raw: bytes, body: dict) -> tuple[str, Script]:
        marks = _MARK.findall(raw)
        name = marks[-1].decode() if marks else self.default
        s = SCRIPTS[name]
        if s.followup and _has_tool_result(api, body):
            name = s.followup
            s = SCRIPTS[name]
        return name, s

    def _record(self, request: web.Request, api: str, raw: bytes, body: dict, script: str) -> dict[str, Any]:
        rec = {"api": api, "path": request.path_qs, "headers": dict(request.headers), "body": body, "script": script,
               "raw": raw, "status": 200, "response": b"", "ended": "clean", "done": False}  # fmt: skip
        self.requests.append(rec)
        return rec

    async def _stream(
        self, request: web.Request, frames: list[bytes], rec: dict[str, Any] | None = None, content_end: int = 0,
        ending: str = "clean", content_type: str = "text/event-stream",
    ) -> web.StreamResponse:  # fmt: skip
        """Write ``frames`` as one streamed body, the way the script's ``ending`` says
        (``frames.ended``); ``rec`` (the request's record) gets the bytes written."""
        frames, drop = ended(frames, content_end, ending)
        if rec is not None:
            rec["content_type"] = content_type
        resp = web.StreamResponse(headers={"content-type": content_type, "cache-control": "no-cache"})
        await resp.prepare(request)
        written: list[bytes] = []
        try:
            for f in frames:
                await resp.write(f)
                written.append(f)
                if self.delay_ms:
                    await asyncio.sleep(self.delay_ms / 1000)
            # recorded before the end reaches the peer: a test that has read the whole body
            # finds the record whole (it raced the handler's last lines before)
            _sent(rec, written, ending)
            if drop:
                # the connection is lost inside the body: no last chunk of the chunked encoding
                await asyncio.sleep(0.05)  # the bytes written reach the peer first
                if request.transport is not None:
                    request.transport.close()
            else:
                await resp.write_eof()
        except ConnectionError:  # CPA went away (its client aborted): nothing to tell
            pass
        _sent(rec, written, ending)
        return resp

    def _json(self, rec: dict[str, Any], obj: Any, status: int = 200) -> web.Response:
        body = _dumps(obj)
        rec["response"], rec["status"], rec["done"] = body, status, True
        rec["content_type"] = "application/json"
        return web.Response(body=body, status=status, content_type="application/json")

    async def _read(self, request: web.Request, api: str) -> tuple[dict, dict, str, Script, bool, int]:
        """(the request's record, its body, the script's name, the script cut at the
        request's cap, whether it was cut, the output tokens)."""
        raw = await request.read()
        body = orjson.loads(raw)
        name, script = self.pick(api, raw, body)
        rec = self._record(request, api, raw, body, name)
        s, cut, tokens = script.capped(_cap(api, body))
        self.counter += 1
        return rec, body, name, s, cut, tokens

    async def messages(self, request: web.Request) -> web.StreamResponse:
        rec, body, name, s, cut, tokens = await self._read(request, "anthropic")
        model = s.model or str(body.get("model", "claude"))
        mid = s.msg_id or f"msg_01Fake{self.ids}{name}"
        if body.get("stream"):
            frames, end, ending = provider_body("anthropic", name, model, mid, _cap("anthropic", body))
            return await self._stream(request, frames, rec, end, ending)
        return self._json(rec, anthropic_json(s, model, cut, tokens, mid))

    async def count_tokens(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body = orjson.loads(raw)
        self._record(request, "anthropic_count", raw, body, "")
        return web.json_response({"input_tokens": INPUT_TOKENS})

    async def interactions(self, request: web.Request) -> web.StreamResponse:
        rec, body, name, s, cut, tokens = await self._read(request, "interactions")
        model = str(body.get("model", "gemini"))
        iid = f"v1_fake{self.ids}{name}"
        if body.get("stream"):
            frames, end, ending = provider_body("interactions", name, model, iid, _cap("interactions", body))
            return await self._stream(request, frames, rec, end, ending)
        return self._json(rec, interactions_json(s, model, cut, tokens, iid))

    async def chat(self, request: web.Request) -> web.StreamResponse:
        rec, body, name, s, cut, tokens = await self._read(request, "chat")
        model = str(body.get("model", "gpt"))
        cid = f"chatcmpl-fake{self.ids}{name}"
        if body.get("stream"):
            inc = bool((body.get("stream_options") or {}).get("include_usage"))
            frames = chat_chunks(s, model, cut, tokens, cid, inc)
            return await self._stream(request, list(frames), rec, frames.content_end, s.ending)
        return self._json(rec, chat_json(s, model, cut, tokens, cid))

    async def gemini(self, request: web.Request) -> web.StreamResponse:
        """``/v1beta/models/{model}:{action}`` (AI Studio) and ``/v1/publishers/google/models/
        {model}:{action}`` (Vertex)."""
        m = GEMINI_ACTION.match(request.match_info["tail"])
        if m is None:
            return web.json_response({"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}},
                                     status=404)  # fmt: skip
        if m["action"] == "countTokens":
            raw = await request.read()
            self._record(request, "gemini_count", raw, orjson.loads(raw), "")
            return web.json_response({"totalTokens": INPUT_TOKENS})
        rec, _body, name, s, cut, tokens = await self._read(request, "gemini")
        model = m["model"]
        rid = f"fake{self.ids}{name}"
        if m["action"] == "generateContent":
            if s.error_after is not None:
                return self._json(rec, {"error": _gemini_overloaded()}, ERROR_STATUS["gemini"])
            return self._json(rec, gemini_json(s, model, cut, tokens, rid))
        chunks = gemini_chunks(s, model, cut, tokens, rid)
        if request.query.get("alt") == "sse":
            return await self._stream(request, gemini_frames(chunks), rec, chunks.content_end, s.ending)
        return await self._stream(request, gemini_array(chunks), rec, chunks.content_end + 1, s.ending,
                                  content_type="application/json")  # fmt: skip

    async def code_assist(self, request: web.Request) -> web.StreamResponse:
        """``/v1internal:{action}``: the Gemini Code Assist API (CPA's Antigravity path):
        ``streamGenerateContent`` / ``generateContent`` with the request under ``request``
        and each response under ``response``; ``fetchAvailableModels`` answers no model
        (CPA then keeps its own catalog), ``countTokens`` a count."""
        action = request.match_info["action"]
        if action not in ("streamGenerateContent", "generateContent"):
            raw = await request.read()
            self._record(request, f"antigravity_{action}", raw, orjson.loads(raw or b"{}"), "")
            if action == "countTokens":
                return web.json_response({"totalTokens": INPUT_TOKENS})
            return web.json_response({"models": {}})
        rec, body, name, s, cut, tokens = await self._read(request, "antigravity")
        model = str(body.get("model", "gemini"))
        rid = f"fake{self.ids}{name}"
        if action == "generateContent":
            if s.error_after is not None:
                return self._json(rec, {"error": _gemini_overloaded()}, ERROR_STATUS["gemini"])
            return self._json(rec, {"response": gemini_json(s, model, cut, tokens, rid), "traceId": f"trace-{rid}"})
        frames, end, ending = provider_body("antigravity", name, model, rid, _cap("antigravity", body))
        return await self._stream(request, frames, rec, end, ending)

    async def responses(self, request: web.Request) -> web.StreamResponse:
        """``/responses`` (a ``codex-api-key`` base URL) and ``/v1/responses``."""
        rec, body, name, s, cut, tokens = await self._read(request, "responses")
        model = str(body.get("model", "gpt-5-codex"))
        rid = f"resp_fake{self.ids}{name}"
        if body.get("stream"):
            evs = responses_events(s, model, cut, tokens, rid)
            return await self._stream(request, responses_frames(evs), rec, evs.content_end, s.ending)
        if s.error_after is not None:
            return self._json(rec, {"error": {"message": "The server had an error processing your request.",
                                              "type": "server_error", "param": None, "code": None}},
                              ERROR_STATUS["responses"])  # fmt: skip
        return self._json(rec, responses_json(s, model, cut, tokens, rid))

    def last(self, api: str) -> dict:
        for r in reversed(self.requests):
            if r["api"] == api:
                return r
        raise LookupError(f"no {api} request reached the fake")

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_post("/v1/messages/count_tokens", self.count_tokens)
        app.router.add_post("/v1beta/interactions", self.interactions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1beta/models/{tail}", self.gemini)
        app.router.add_post("/v1/publishers/google/models/{tail}", self.gemini)
        app.router.add_post("/v1internal:{action}", self.code_assist)
        app.router.add_post("/responses", self.responses)
        app.router.add_post("/v1/responses", self.responses)
        return app


def _gemini_overloaded() -> dict:
    from standins.provider_gemini import OVERLOADED

    return dict(OVERLOADED)


class Running:
    """The fakes served from a thread of this process (so a test sets ``fake.default`` and
    reads ``fake.requests`` directly): ``.url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, delay_ms: float = 2.0, ssl_context=None) -> None:
        """``ssl_context``: serve HTTPS with it (``.url`` is then ``https://``)."""
        self.fake = FakeProviders(delay_ms=delay_ms)
        self.ssl_context = ssl_context
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fake-providers")
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("fake providers did not start")
        self.url = f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.runner, self.port = self.loop.run_until_complete(start_app(self.fake.app(), ssl_context=self.ssl_context))
        self._ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        async def down() -> None:
            await self.runner.cleanup()

        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(down(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def _sent(rec: dict[str, Any] | None, written: list[bytes], ending: str) -> None:
    """The request's record gets the bytes written to the body so far and how it ended."""
    if rec is not None:
        rec["response"] = b"".join(written)
        rec["ended"] = ending
        rec["done"] = True
