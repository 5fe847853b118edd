"""A fake Devin: serves GetChatMessage over Connect with scripted, schema-built frames.

    python tests/support/standins/fake_devin.py --port 0          # prints "fake Devin listening on URL"

``POST /exa.api_server_pb.ApiServerService/GetChatMessage`` takes a GetChatMessageRequest
(one envelope, as CPA sends it) and streams GetChatMessageResponse envelopes built from
``wire/devin.proto``, then the end-of-stream trailer. What it says is picked by markers in
the **last user prompt** (so a test selects it through any client API):

``[scenario:NAME]``
    ``stop`` (default): thinking, text, StopReason 2 STOP_PATTERN.
    ``tool``: thinking, text, one ``write_file`` call with complete JSON arguments,
    StopReason 10 FUNCTION_CALL.
    ``max_tokens``: thinking, text, a call whose arguments stop mid-string, StopReason 3
    MAX_TOKENS (the budget ran out, whatever the request's cap).
    ``max_tokens_text``: thinking and text only, StopReason 3 (nothing on the client leg
    shows the cut: only the upstream StopReason can).
    ``content_filter``: a little text, StopReason 11 CONTENT_FILTER.
    ``gzip``: like ``tool`` but every envelope gzip-compressed (flag 0x01, trailer 0x03).
    ``error``: a little text, then a trailer error ``resource_exhausted``.
    ``truncated``: a little text, then the body ends without a trailer.
    ``long``: 60 text deltas (about 600 characters), StopReason 2: a cap cuts it.
    ``long_tool``: the Devin bug report's turns (a short text, then one ``write_file``
    call whose ``content`` is a long essay, about 10,000 characters of arguments in
    ~85-character fragments, 2,500 tokens), StopReason 10 FUNCTION_CALL; a cap below
    that (the report's 400) cuts the arguments mid-string with StopReason 3 MAX_TOKENS.
    ``two_tools``: text, then two ``write_file`` calls one after the other (a.txt, b.txt),
    StopReason 10.
``--default-scenario NAME`` picks the scenario for a prompt without a marker (so a
client request can be sent exactly as a bug report wrote it).
``[conv:ID]``
    Woven into the generated text and arguments late in the stream, so concurrent
    conversations differ only near their end.
``[stop:N]``
    The StopReason the turn ends with when no cap cut it (any value, e.g. 1 INCOMPLETE or
    5 MAX_NEWLINES), instead of the scenario's own.
``[delay:MS]``
    Pause between envelopes (default ``--delay-ms``).
``[usage:MODE]``
    Where the usage goes: ``field7`` (default: the usage message, model ``swe-fake``),
    ``field28`` (no field 7, only the "Token Usage" display group), ``zero7`` (a field 7
    with zero counts but the model, then the group: CPA falls back to the group),
    ``none`` (no usage at all).
``[prompt_tokens:N]``
    The uncached prompt tokens to report (default: the prompts' length / 4 + 10); the
    cache read is always half of it.

The request's max tokens (field 8.2) are honoured: one token is 4 characters of text or
arguments; when the script would exceed the cap, the output is cut at the cap and the
stream ends with StopReason 3 MAX_TOKENS (usage output = cap). ``GET /_requests`` lists
what each request asked for (max tokens, scenario, conversation, model), newest last,
and the usage it sent (``input_tokens`` = prompt + cache read, ``output_tokens``,
``cached_tokens``, ``model``), so tests can check the sidecar's request patch and usage fill.

Listens on 127.0.0.1 (plain HTTP, or HTTPS with ``--tls-cert``/``--tls-key``).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import ssl
import sys
import time
from collections import deque
from dataclasses import dataclass, field

from aiohttp import web
from streamfix.wire import devin_pb2 as pb
from streamfix.wire.connect import decode_body, encode_end_stream, encode_frame
from streamfix.wire.devin import CHAT_PATH, read_request

from streamfix.aioserve import serve_forever, start_app

CHARS_PER_TOKEN = 4
_MARK = re.compile(r"\[(scenario|conv|delay|usage|prompt_tokens|stop):([^\]\s]+)\]")
USAGE_MODES = ("field7", "field28", "zero7", "none")
MODEL = "swe-fake"
SCENARIOS = (
    "stop",
    "tool",
    "max_tokens",
    "max_tokens_text",
    "content_filter",
    "gzip",
    "error",
    "truncated",
    "long",
    "long_tool",
    "two_tools",
)

ESSAY_SENTENCES = (
    "Go was designed at Google in 2007 by Robert Griesemer, Rob Pike and Ken Thompson.",
    "It was announced in November 2009 and reached version 1.0 in March 2012.",
    "Its authors wanted fast builds, simple concurrency and a language that scales to large teams.",
    "Goroutines and channels made concurrent servers easy to write.",
    "The compatibility promise of Go 1 let programs keep building release after release.",
    "Modules replaced GOPATH in Go 1.11 and became the default in Go 1.16.",
    "Generics arrived in Go 1.18 after more than a decade of design work.",
)


@dataclass
class Script:
    """What one response says, before the cap is applied."""

    thinking: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    call: tuple[str, str, list[str]] | None = None  # id, name, argument fragments
    stop_reason: int = pb.STOP_REASON_STOP_PATTERN
    trailer_error: tuple[str, str] | None = None
    truncate: bool = False
    gzip: bool = False
    more_calls: list[tuple[str, str, list[str]]] = field(default_factory=list)
    """Calls after ``call`` (dropped when a cap cuts the output)."""


def script_for(scenario: str, conv: str) -> Script:
    s = Script(thinking=["Let me think", " about this."])
    if scenario in ("stop", "long"):
        s.text = ["Here is ", "the answer ", f"for {conv}."]
        if scenario == "long":
            s.text = [f"word{i:02d} of a long answer; " for i in range(60)] + [f"end {conv}."]
    elif scenario in ("tool", "gzip"):
        s.text = ["Writing ", "the file."]
        s.call = ("write_file_0#a1", "write_file",
                  ['{"path":"index.html",', '"content":"<h1>Hello</h1>', f"<p>{conv}</p>", '"}'])  # fmt: skip
        s.stop_reason = pb.STOP_REASON_FUNCTION_CALL
        s.gzip = scenario == "gzip"
    elif scenario == "max_tokens":
        s.text = ["Writing ", "index.html now."]
        s.call = ("write_file_0#a1", "write_file",
                  ['{"path":"index.html","content":"', "<!doctype html>\\n<h1>", f"Launch {conv}"])  # fmt: skip
        s.stop_reason = pb.STOP_REASON_MAX_TOKENS
    elif scenario == "two_tools":
        s.text = ["Writing ", "two files."]
        s.call = ("write_file_0#a1", "write_file", ['{"path":"a.txt",', f'"content":"first {conv}"}}'])
        s.more_calls = [("write_file_1#b2", "write_file", ['{"path":"b.txt",', f'"content":"second {conv}"}}'])]
        s.stop_reason = pb.STOP_REASON_FUNCTION_CALL
    elif scenario == "long_tool":
        s.text = ["I'll write ", "the file now."]
        sentences = [f"{ESSAY_SENTENCES[i % len(ESSAY_SENTENCES)]} ({i + 1})\\n" for i in range(120)]
        s.call = ("write_file_0#a1", "write_file",
                  ['{"path":"notes.md","content":"# The history of Go\\n\\n', *sentences, f"{conv}", '"}'])  # fmt: skip
        s.stop_reason = pb.STOP_REASON_FUNCTION_CALL
    elif scenario == "max_tokens_text":
        s.text = ["The answer ", "starts here and ", f"is cut {conv} mid"]
        s.stop_reason = pb.STOP_REASON_MAX_TOKENS
    elif scenario == "content_filter":
        s.thinking = []
        s.text = ["I cannot ", f"continue {conv}"]
        s.stop_reason = pb.STOP_REASON_CONTENT_FILTER
    elif scenario == "error":
        s.text = [f"Starting {conv}"]
        s.trailer_error = ("resource_exhausted", "fake Devin: quota exhausted")
    elif scenario == "truncated":
        s.text = [f"Starting {conv}"]
        s.truncate = True
    else:
        raise ValueError(f"unknown scenario {scenario!r}")
    return s


def apply_cap(s: Script, cap: int) -> tuple[Script, int]:
    """Cut text and arguments (in stream order) at ``cap`` tokens; (script, output tokens)."""
    budget = cap * CHARS_PER_TOKEN if cap > 0 else None
    used = 0
    cut = False

    def take(parts: list[str]) -> list[str]:
        nonlocal used, cut
        out: list[str] = []
        for p in parts:
            if cut:
                break
            if budget is not None and used + len(p) > budget:
                p = p[: budget - used]
                cut = True
            used += len(p)
            if p:
                out.append(p)
        return out

    text = take(s.text)
    call = s.call
    if call is not None:
        args = take(call[2])
        call = (call[0], call[1], args) if (args or not cut) else None
    if cut:
        s = Script(s.thinking, text, call, pb.STOP_REASON_MAX_TOKENS, None, False, s.gzip)
        return s, cap
    more = s.more_calls
    if more and budget is not None and used + sum(len(a) for _, _, args in more for a in args) > budget:
        more, cut = [], True
    if cut:
        return Script(s.thinking, text, call, pb.STOP_REASON_MAX_TOKENS, None, False, s.gzip), cap
    used += sum(len(a) for _, _, args in more for a in args)
    s = Script(s.thinking, text, call, s.stop_reason, s.trailer_error, s.truncate, s.gzip, list(more))
    return s, -(-used // CHARS_PER_TOKEN)


def usage_frames(mode: str, prompt_tokens: int, output_tokens: int) -> list[pb.GetChatMessageResponse]:
    """The usage as ``[usage:MODE]`` puts it (see the module docstring)."""
    R = pb.GetChatMessageResponse
    cache = prompt_tokens // 2
    DM, DV = pb.DimensionMetric, pb.DimensionValue
    group = pb.DimensionGroup(title=b"Token Usage", metrics=[
        DM(key=b"input_tokens", value=DV(value=prompt_tokens + cache)),
        DM(key=b"output_tokens", value=DV(value=output_tokens)),
        DM(key=b"cached_input_tokens", value=DV(value=cache))])  # fmt: skip
    display = R(dimension_groups=[pb.DimensionGroup(title=b"Latency"), group])
    if mode == "field28":
        return [display]
    if mode == "zero7":
        return [R(usage=pb.ModelUsage(model=MODEL.encode())), display]
    if mode == "none":
        return []
    return [R(usage=pb.ModelUsage(prompt_tokens=prompt_tokens, output_tokens=output_tokens, cache_read_tokens=cache,
                                  model=MODEL.encode()))]  # fmt: skip


def frames_for(s: Script, output_tokens: int, prompt_tokens: int, usage: str = "field7") -> list[bytes]:
    """The response body as a list of envelopes (the trailer last, unless truncated)."""
    R = pb.GetChatMessageResponse

    def env(msg: pb.GetChatMessageResponse) -> bytes:
        return encode_frame(msg.SerializeToString(), compress=s.gzip)

    out = [env(R(output_id=b"bot-fake", timestamp=pb.Timestamp(seconds=int(time.time())), message_id=b"msg-fake"))]
    out += [env(R(thinking=t.encode())) for t in s.thinking]
    out += [env(R(text=t.encode())) for t in s.text]
    if s.call is not None:
        cid, name, args = s.call
        TC = pb.ChatToolCall
        first = args[0] if args else ""
        out.append(env(R(tool_calls=[TC(id=cid.encode(), name=name.encode(), arguments_json=first.encode())])))
        out += [env(R(tool_calls=[TC(arguments_json=a.encode())])) for a in args[1:]]
        for cid, name, args in s.more_calls:
            out.append(env(R(tool_calls=[TC(id=cid.encode(), name=name.encode(), arguments_json=args[0].encode())])))
            out += [env(R(tool_calls=[TC(arguments_json=a.encode())])) for a in args[1:]]
    if s.truncate:
        return out
    out.append(env(R(stop_reason=s.stop_reason, delta_tokens=output_tokens)))
    out += [env(m) for m in usage_frames(usage, prompt_tokens, output_tokens)]
    code, msg = s.trailer_error or (None, None)
    out.append(encode_end_stream(code, msg, compress=s.gzip))
    return out


class FakeDevin:
    def __init__(self, delay_ms: float = 5.0, log_requests: bool = False, default_scenario: str = "stop") -> None:
        self.delay_ms = delay_ms
        self.default_scenario = default_scenario
        self.requests: deque[dict] = deque(maxlen=1000)
        self.log_requests = log_requests
        self.handled = 0

    def log(self, n: int, text: str) -> None:
        """One line per step of request ``n`` on stdout, with ``--log-requests`` (tests
        show it when they fail)."""
        if self.log_requests:
            print(f"fake Devin #{n}: {text}", flush=True)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.handled += 1
        n = self.handled
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.log(n, f"GetChatMessage from {peer[0]}:{peer[1]}" if peer else "GetChatMessage")
        try:
            resp = await self._chat(request, n)
        except BaseException as e:
            self.log(n, f"failed: {type(e).__name__}")
            raise
        self.log(n, f"done, HTTP {resp.status}")
        return resp

    async def _chat(self, request: web.Request, n: int) -> web.StreamResponse:
        body = await request.read()
        info = read_request(body)
        if info is None:
            resp = web.StreamResponse(status=200, headers={"content-type": "application/connect+proto"})
            await resp.prepare(request)
            await resp.write(encode_end_stream("invalid_argument", "fake Devin: not a GetChatMessageRequest"))
            await resp.write_eof()
            return resp
        users = info.user_texts()
        last = users[-1] if users else ""
        marks = dict(_MARK.findall(last))
        scenario = marks.get("scenario", self.default_scenario)
        conv = marks.get("conv", "conv")
        delay = float(marks.get("delay", self.delay_ms)) / 1000
        usage = marks.get("usage", "field7")
        req = pb.GetChatMessageRequest.FromString(decode_body(body)[0][0].payload)
        seen = {"max_tokens": info.max_tokens, "scenario": scenario, "conv": conv, "model": info.model,
                "prompts": len(info.prompts), "authorization": bool(request.headers.get("authorization")),
                "tools": [t.name for t in req.tools], "path": request.path, "host": request.host,
                "content_type": request.headers.get("content-type", ""),
                "token_in_metadata": bool(req.metadata.api_key),
                "proxy_authorization": bool(request.headers.get("proxy-authorization"))}  # fmt: skip
        self.requests.append(seen)
        if scenario not in SCENARIOS or usage not in USAGE_MODES:
            return web.Response(status=400, text=f"unknown scenario {scenario} or usage {usage}")
        self.log(n, f"scenario {scenario}, conv {conv}, max_tokens {info.max_tokens}")
        script = script_for(scenario, conv)
        if marks.get("stop", "").isdigit():
            script.stop_reason = int(marks["stop"])
        s, out_tokens = apply_cap(script, info.max_tokens or 0)
        prompt_tokens = sum(len(t) for _, t in info.prompts) // CHARS_PER_TOKEN + 10
        if marks.get("prompt_tokens", "").isdigit():
            prompt_tokens = int(marks["prompt_tokens"])
        if usage != "none" and not s.truncate:
            cache = prompt_tokens // 2
            seen["usage"] = {"input_tokens": prompt_tokens + cache, "output_tokens": out_tokens,
                             "cached_tokens": cache, "model": MODEL, "source": usage}  # fmt: skip
        resp = web.StreamResponse(status=200, headers={"content-type": "application/connect+proto"})
        await resp.prepare(request)
        for i, env in enumerate(frames_for(s, out_tokens, prompt_tokens, usage)):
            if i and delay:
                await asyncio.sleep(delay)
            await resp.write(env)
        if s.truncate:  # end the body (and the connection) without a trailer
            resp.force_close()
        await resp.write_eof()
        return resp

    async def seen(self, request: web.Request) -> web.Response:
        return web.json_response(list(self.requests))

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(CHAT_PATH, self.chat)
        app.router.add_get("/_requests", self.seen)
        return app


async def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    delay_ms: float = 5.0,
    ssl_context: ssl.SSLContext | None = None,
    log_requests: bool = False,
    default_scenario: str = "stop",
) -> tuple[web.AppRunner, int, FakeDevin]:
    fake = FakeDevin(delay_ms, log_requests, default_scenario)
    runner, port = await start_app(fake.app(), host, port, ssl_context)
    return runner, port, fake


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tests/support/standins/fake_devin.py", description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 (default) picks a free port")
    ap.add_argument("--delay-ms", type=float, default=5.0, help="pause between envelopes")
    ap.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM)")
    ap.add_argument("--tls-key", help="... and this key (PEM)")
    ap.add_argument("--log-requests", action="store_true", help="print a line per step of each request")
    ap.add_argument("--default-scenario", default="stop", choices=SCENARIOS,
                    help="the scenario of a prompt without a [scenario:NAME] marker")  # fmt: skip
    a = ap.parse_args(argv)
    ctx = None
    if a.tls_cert:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)

    async def start():
        runner, port, _ = await serve(a.host, a.port, a.delay_ms, ctx, a.log_requests, a.default_scenario)
        return runner, port

    scheme = "https" if ctx else "http"
    return serve_forever(start, f"fake Devin listening on {scheme}://{a.host}:{{port}}")


if __name__ == "__main__":
    sys.exit(main())
