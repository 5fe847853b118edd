"""Devin through a real CPA build, both sidecar legs, as a user runs it:

    client -> sidecar reverse listener -> real CPA (PR #5111 build, a Devin auth file,
    proxy-url = the sidecar's regular listener, SSL_CERT_FILE = system roots + mitmproxy's CA)
    -> sidecar upstream leg (intercepts server.codeium.com, the default streamfix_upstream_hosts)
    -> fake Devin (tests/support/standins/fake_devin.py over TLS)

The sidecar is started with the command ``scripts/sidecar --upstream ... --upstream-proxy ...``
builds (:func:`streamfix.sidecar.mitm_command`); the test adds only its own confdir, ``-w``,
and ``tests/support/e2e_hostmap.py``, which sends ``server.codeium.com`` (and ``cpa.test``) to local
ports inside mitmdump: nothing in the product learns a test address. CPA runs unchanged.

The build: CPA v7.3.4, the Devin report's, cannot be installed (the Go module proxy
refuses every CPA module, and no public tag has the Devin executor). The nearest source is
PR #5111's head, which differs from what the report describes (see the docs,
docs/upstream-leg.md "Devin executor (PR 5111 build)"); each test says what this build does,
straight and through the sidecar. Without the binary the module skips with one line.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import uuid
from pathlib import Path

import httpx
import orjson
import pytest
import realcpa_devin as rd
from streamfix.wire.sse import SseParser
from support import SUPPORT, Proc, child_env, free_port, show_logs_on_failure

from streamfix.sidecar import mitm_command

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(rd.realcpa.binary(rd.BUILD) is None, reason=rd.missing_reason()),
]

HOSTMAP = SUPPORT / "e2e_hostmap.py"
FAKE_DEVIN = SUPPORT / "standins" / "fake_devin.py"
TIMEOUT = 60.0
TOKEN = "devin-session-token$fake-" + uuid.uuid4().hex
"""The Devin session token in CPA's auth file: must never reach a log or a saved flow."""

# the report's two requests, as written (its curl bodies)
REPORT_CHAT = {
    "model": "devin/swe-2", "stream": True, "max_tokens": 400,
    "messages": [{"role": "user", "content": "Use write_file to create notes.md with a 2000-word essay about the "
                  "history of Go. Do not answer in text, call the tool."}],
    "tools": [{"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"]}}}],
}  # fmt: skip
REPORT_RESPONSES = {
    "model": "devin/swe-2", "stream": True,
    "input": [{"role": "user", "content": "Use write_file to create poem.txt with a 30-line poem. Do not answer in "
               "text, call the tool."}],
    "tools": [{"type": "function", "name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"]}}],
}  # fmt: skip


def report_chat(conv: str) -> dict:
    """The report's chat request, its prompt tagged with a conversation id for the fake."""
    (msg,) = REPORT_CHAT["messages"]
    return dict(REPORT_CHAT, messages=[{"role": "user", "content": msg["content"] + f" [conv:{conv}]"}])


class DevinChain:
    def __init__(self, d: Path) -> None:
        self.dir = d
        self.procs: dict[str, Proc] = {}

    def up(self) -> DevinChain:
        d = self.dir
        ca, cert, key = rd.make_certs(d)
        self.hostmap = d / "hosts.json"
        self.hostmap.write_text("{}")
        self.flows = d / "flows.mitm"
        for attempt in range(3):
            reg = free_port()
            cmd = mitm_command("http://cpa.test:9", "127.0.0.1:0", f"127.0.0.1:{reg}", False, False, [
                "--set", f"confdir={d / 'conf'}", "-s", str(HOSTMAP), "--set", f"e2e_hostmap_file={self.hostmap}",
                "--set", f"ssl_verify_upstream_trusted_ca={ca}", "-w", str(self.flows)])  # fmt: skip
            self.mitm = Proc(cmd, env=child_env())
            try:
                m = self.mitm.wait_for(r"reverse proxy to \S+ listening at 127\.0\.0\.1:(\d+)", TIMEOUT)
                self.mitm.wait_for(rf"HTTP\(S\) proxy listening at 127\.0\.0\.1:{reg}\b", TIMEOUT)
                break
            except RuntimeError:
                self.mitm.stop()
                if attempt == 2 or "address already in use" not in self.mitm.output.lower():
                    raise
        self.procs["mitmdump"] = self.mitm
        self.side = f"http://127.0.0.1:{m.group(1)}"
        self.proxy = f"http://127.0.0.1:{reg}"
        devin = Proc([sys.executable, str(FAKE_DEVIN), "--port", "0",
                      "--delay-ms", "2", "--log-requests", "--tls-cert", str(cert), "--tls-key", str(key),
                      "--default-scenario", "long_tool"], env=child_env())  # fmt: skip
        self.procs["fake Devin"] = devin
        self.devin = devin.wait_for(r"fake Devin listening on (\S+)", TIMEOUT).group(1)
        bundle = rd.ca_bundle(d / "conf" / "mitmproxy-ca-cert.pem", d / "ca-bundle.pem")
        self.cpa = rd.start(self.proxy, bundle, TOKEN)
        self.procs["CPA"] = self.cpa.proc
        devin_port = int(self.devin.rsplit(":", 1)[1])
        self.hostmap.write_text(json.dumps({rd.DEVIN_HOST: devin_port, "cpa.test": self.cpa.port}))
        time.sleep(0.05)  # a fresh mtime for the map
        return self

    def down(self) -> None:
        if getattr(self, "cpa", None) is not None:
            self.cpa.stop()
        for name, p in reversed(self.procs.items()):
            if name != "CPA":
                p.stop()

    def seen(self, conv: str | None = None) -> list[dict]:
        got = httpx.get(f"{self.devin}/_requests", verify=False, timeout=10, trust_env=False).json()
        return [r for r in got if conv is None or r["conv"] == conv]


@pytest.fixture(scope="module")
def chain_procs(tmp_path_factory):
    c = DevinChain(tmp_path_factory.mktemp("devin-chain"))
    try:
        yield c.up()
    finally:
        c.down()


@pytest.fixture
def chain(chain_procs: DevinChain, request: pytest.FixtureRequest) -> DevinChain:
    show_logs_on_failure(request, chain_procs.procs)
    return chain_procs


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=TIMEOUT, trust_env=False, headers={"authorization": "Bearer test-key"})


def chunks(body: bytes) -> list[dict]:
    p = SseParser()
    return [orjson.loads(e.data) for e in p.feed(body) + p.close() if e.data and e.data != b"[DONE]"]


def chat_view(body: bytes) -> dict:
    """What a chat client learns from a stream: tool_calls indexes, finish reasons, the
    usage objects, the assembled arguments of each index, [DONE]."""
    objs = chunks(body)
    indexes, args, finishes, usages = [], {}, [], []
    for o in objs:
        if isinstance(o.get("usage"), dict):
            usages.append(o["usage"])
        for ch in o.get("choices", []):
            if ch.get("finish_reason"):
                finishes.append(ch["finish_reason"])
            for tc in (ch.get("delta") or {}).get("tool_calls") or []:
                indexes.append(tc.get("index"))
                piece = (tc.get("function") or {}).get("arguments") or ""
                args[tc.get("index")] = args.get(tc.get("index"), "") + piece
    return {"indexes": sorted(set(indexes)), "finishes": finishes, "usages": usages, "args": args,
            "done": body.rstrip().endswith(b"data: [DONE]")}  # fmt: skip


def parses(s: str) -> bool:
    try:
        json.loads(s)
        return True
    except ValueError:
        return False


def devin_usage(chain: DevinChain, conv: str) -> dict:
    """Devin's numbers as the chat API states them (CPA's mapping: prompt = 7.2 + 7.5)."""
    (u,) = [r["usage"] for r in chain.seen(conv)]
    return {"prompt_tokens": u["input_tokens"], "completion_tokens": u["output_tokens"],
            "total_tokens": u["input_tokens"] + u["output_tokens"],
            "prompt_tokens_details": {"cached_tokens": u["cached_tokens"]}}  # fmt: skip


def ask_body(prompt: str, stream: bool = True, **extra) -> dict:
    return {"model": rd.MODEL, "stream": stream, "messages": [{"role": "user", "content": prompt}], **extra}


# --- the chain itself ------------------------------------------------------------------
async def test_cpa_sends_its_devin_call_through_the_sidecar_and_trusts_its_ca(chain):
    """proxy-url carries the executor's Connect-RPC call (CONNECT server.codeium.com:443),
    CPA accepts mitmproxy's certificate through SSL_CERT_FILE, the upstream leg taps it."""
    conv = f"via-{uuid.uuid4().hex[:6]}"
    start = len(chain.mitm.lines)
    async with client() as c:
        r = await c.post(chain.side + "/v1/chat/completions", json=ask_body(f"hi [scenario:stop] [conv:{conv}]"))
    assert r.status_code == 200
    (seen,) = chain.seen(conv)
    assert (seen["host"], seen["path"], seen["content_type"]) == (
        rd.DEVIN_HOST,
        "/exa.api_server_pb.ApiServerService/GetChatMessage",
        "application/connect+proto",
    )
    assert seen["authorization"] and seen["token_in_metadata"] and seen["model"] == rd.UPSTREAM_MODEL
    chain.mitm.wait_for(r"streamfix: upstream GetChatMessage: Devin StopReason 2 STOP_PATTERN", 10, start)


# --- the report's chat repro -----------------------------------------------------------
async def test_report_chat_repro_straight_to_cpa(chain):
    """The report (v7.3.4) saw index 1, finish_reason "stop" and completion_tokens 400. This
    build: index 0, finish_reason "length" (it maps StopReason 3), the cap reaches Devin,
    and no usage at all (Devin's usage frame has no field 1, and the executor writes a
    chunk only for frames with an id, text, thinking, a StopReason or tool calls)."""
    conv = f"rchat-{uuid.uuid4().hex[:6]}"
    body = report_chat(conv)
    async with client() as c:
        r = await c.post(chain.cpa.url + "/v1/chat/completions", json=body)
    v = chat_view(r.content)
    assert (v["indexes"], v["finishes"], v["usages"], v["done"]) == ([0], ["length"], [], True)
    assert not parses(v["args"][0])  # cut mid-string at the budget
    (seen,) = chain.seen(conv)
    assert (seen["max_tokens"], seen["tools"], seen["usage"]["output_tokens"]) == (400, ["write_file"], 400)


async def test_report_chat_repro_through_the_sidecar(chain):
    conv = f"rchat-side-{uuid.uuid4().hex[:6]}"
    body = report_chat(conv)
    async with client() as c:
        r = await c.post(chain.side + "/v1/chat/completions", json=body)
    v = chat_view(r.content)
    assert (v["indexes"], v["finishes"], v["done"]) == ([0], ["length"], True)
    assert v["usages"] == [devin_usage(chain, conv)]  # filled from Devin's field 7
    assert not parses(v["args"][0])
    assert chain.seen(conv)[0]["max_tokens"] == 400


# --- the report's Responses repro (and messages, Gemini): what this build does ----------
@pytest.mark.parametrize("cap", [None, 400])
async def test_report_responses_repro_fails_on_this_build(chain, cap):
    """The executor parses every request as chat completions (it does no request
    translation): /v1/responses is HTTP 500 "messages field is required", before any
    Devin call. Through the sidecar: the same error, unchanged (never a synthesized success)."""
    body = dict(REPORT_RESPONSES, **({"max_output_tokens": cap} if cap else {}))
    before = len(chain.seen())
    async with client() as c:
        direct = await c.post(chain.cpa.url + "/v1/responses", json=body)
        side = await c.post(chain.side + "/v1/responses", json=body)
    for r in (direct, side):
        assert r.status_code == 500, r.text
        assert "devin: failed to parse request: messages field is required" in r.json()["error"]["message"]
    assert len(chain.seen()) == before  # Devin never called


async def test_messages_on_this_build_get_raw_chat_chunks_and_pass_unchanged(chain):
    """/v1/messages: the executor's OpenAI chat chunks go to the Anthropic client as they
    are, without SSE framing (no event:/data: lines) under text/event-stream. Not a
    Messages stream at all: the sidecar leaves it as it came (fail open)."""
    conv = f"msg-{uuid.uuid4().hex[:6]}"
    body = {"model": rd.MODEL, "stream": True, "max_tokens": 400,
            "messages": [{"role": "user", "content": f"hi [scenario:stop] [conv:{conv}]"}]}  # fmt: skip
    async with client() as c:
        side = await c.post(chain.side + "/v1/messages", json=body)
    assert side.status_code == 200 and side.headers["content-type"].startswith("text/event-stream")
    assert side.content.startswith(b'{"id":"chatcmpl-')
    assert b"data:" not in side.content and b"event:" not in side.content
    assert b'"finish_reason":"stop"' in side.content and b"message_start" not in side.content


# --- every StopReason, stream and JSON (chat: the only API this build serves) ---------
CHAT_EXPECT = {
    # scenario, stop override: (CPA alone, through the sidecar)
    ("stop", None): ("stop", "stop"),
    ("max_tokens", None): ("length", "length"),
    ("max_tokens_text", None): ("length", "length"),
    ("stop", 1): ("length", "length"),  # INCOMPLETE
    ("stop", 5): ("length", "length"),  # MAX_NEWLINES: this build's own "length" (the sidecar says unknown)
    ("content_filter", None): ("stop", "content_filter"),  # the executor maps 11 to "stop"
    ("tool", None): ("stop", "stop"),  # 10 FUNCTION_CALL -> "stop"; no sidecar rule (see docs)
}


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize(("scenario", "stop"), list(CHAT_EXPECT))
async def test_each_stop_reason_on_chat(chain, scenario, stop, stream):
    want_cpa, want_side = CHAT_EXPECT[(scenario, stop)]
    got = []
    for base in (chain.cpa.url, chain.side):
        conv = f"sr-{scenario}-{stop}-{'sse' if stream else 'json'}-{uuid.uuid4().hex[:6]}"
        marks = f"[scenario:{scenario}] [conv:{conv}]" + (f" [stop:{stop}]" if stop else "")
        async with client() as c:
            r = await c.post(base + "/v1/chat/completions", json=ask_body(f"go {marks}", stream))
        assert r.status_code == 200, r.text
        if stream:
            v = chat_view(r.content)
            assert len(v["finishes"]) == 1 and v["done"], r.text[-500:]
            got.append(v["finishes"][0])
        else:
            got.append(r.json()["choices"][0]["finish_reason"])
    assert tuple(got) == (want_cpa, want_side)


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize("scenario", ["error", "truncated"])
async def test_devin_failures_on_this_build(chain, scenario, stream):
    """The executor skips the end-of-stream envelope and ignores a read that ends without
    one: a trailer error (resource_exhausted, after StopReason 2) reaches the client as
    finish_reason "stop" + [DONE], a body cut before the trailer as chunks + [DONE] with
    no finish at all (a JSON body: 200 with finish_reason "stop" in both). Neither can be told
    from the client leg; through the sidecar the upstream leg's record of Devin's failure
    (its log line names it) ends the client's turn as chat's failure: the error chunk
    naming Devin's evidence and no [DONE] (a JSON body: HTTP 502 with chat's error)."""
    what = "trailer error resource_exhausted" if scenario == "error" else "truncated"
    for name, base in (("cpa", chain.cpa.url), ("side", chain.side)):
        conv = f"fail-{scenario}-{name}-{'sse' if stream else 'json'}-{uuid.uuid4().hex[:6]}"
        start = len(chain.mitm.lines)
        async with client() as c:
            r = await c.post(
                base + "/v1/chat/completions", json=ask_body(f"go [scenario:{scenario}] [conv:{conv}]", stream)
            )
        if name == "cpa":
            assert r.status_code == 200, r.text
            if stream:
                v = chat_view(r.content)
                assert v["done"] and v["finishes"] == (["stop"] if scenario == "error" else []), r.text[-500:]
            else:
                assert r.json()["choices"][0]["finish_reason"] == "stop"  # measured: both scenarios
            continue
        chain.mitm.wait_for(rf"streamfix: upstream GetChatMessage: Devin StopReason \d+ \w+, {what}", 10, start)
        if stream:
            assert r.status_code == 200
            v = chat_view(r.content)
            errors = [o["error"] for o in chunks(r.content) if isinstance(o.get("error"), dict)]
            assert v["finishes"] == [] and not v["done"], r.text[-500:]
            assert len(errors) == 1 and errors[0]["type"] == "server_error", r.text[-500:]
            assert re.search(rf"Devin StopReason \d+ \w+, {what}", errors[0]["message"]), errors[0]
        else:
            assert r.status_code == 502, r.text
            err = r.json()["error"]
            assert re.search(rf"Devin StopReason \d+ \w+, {what}", err["message"]), err


# --- usage -----------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize("usage", ["field7", "field28", "zero7"])
async def test_usage_is_devins_where_cpa_drops_it(chain, usage, stream):
    """This build drops Devin's usage on chat: a stream gets no usage object (the usage
    frame makes no chunk), a JSON body zeros; it never reads field 28. Through the
    sidecar the client gets Devin's numbers, every field."""
    got = {}
    for name, base in (("cpa", chain.cpa.url), ("side", chain.side)):
        conv = f"use-{usage}-{name}-{'sse' if stream else 'json'}-{uuid.uuid4().hex[:6]}"
        extra = {"stream_options": {"include_usage": True}} if stream else {}
        async with client() as c:
            r = await c.post(base + "/v1/chat/completions",
                             json=ask_body(f"go [scenario:stop] [conv:{conv}] [usage:{usage}] [prompt_tokens:1234]",
                                           stream, **extra))  # fmt: skip
        assert r.status_code == 200
        us = chat_view(r.content)["usages"] if stream else [r.json()["usage"]]
        got[name] = (us, devin_usage(chain, conv))
    us, _ = got["cpa"]
    assert us == ([] if stream else [{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}])
    us, want = got["side"]
    assert us == [want]


async def test_twenty_conversations_each_matched_to_its_own_devin_call(chain):
    """20 chat turns at once, differing only late in the stream, each with its own Devin
    numbers and a StopReason only the upstream leg knows (11) or a plain stop: every
    client gets its own."""
    run = uuid.uuid4().hex[:6]
    jobs = [(f"c20-{run}-{i}", ("content_filter", "stop")[i % 2], 2000 + 97 * i) for i in range(20)]

    async def one(c, conv, scenario, pt):
        prompt = f"go [scenario:{scenario}] [conv:{conv}] [prompt_tokens:{pt}] [delay:10]"
        r = await c.post(chain.side + "/v1/chat/completions", json=ask_body(prompt))
        return chat_view(r.content)

    async with client() as c:
        views = await asyncio.gather(*(one(c, *j) for j in jobs))
    got = [(v["finishes"], v["usages"]) for v in views]
    want = [([{"content_filter": "content_filter", "stop": "stop"}[sc]], [devin_usage(chain, conv)])
            for conv, sc, _ in jobs]  # fmt: skip
    assert got == want


# --- the client's cap ------------------------------------------------------------------
async def test_max_completion_tokens_reaches_devin_through_the_request_patch(chain):
    """This build forwards only max_tokens (chat, and Responses' max_output_tokens would
    be mapped to it); max_completion_tokens (openai-python's newer field) is dropped and
    Devin gets 128000. The sidecar lowers field 8.2 to the client's cap."""
    got = {}
    start = len(chain.mitm.lines)
    for name, base in (("cpa", chain.cpa.url), ("side", chain.side)):
        conv = f"mct-{name}-{uuid.uuid4().hex[:6]}"
        async with client() as c:
            r = await c.post(base + "/v1/chat/completions",
                             json=ask_body(f"go [scenario:long] [conv:{conv}]", max_completion_tokens=12))  # fmt: skip
        got[name] = (chain.seen(conv)[0]["max_tokens"], chat_view(r.content)["finishes"])
    assert got == {"cpa": (128000, ["stop"]), "side": (12, ["length"])}
    chain.mitm.wait_for(r"Devin max_tokens 128000 -> 12 \(client /v1/chat/completions max_completion_tokens=12\)",
                        10, start)  # fmt: skip


# --- Responses over WebSocket ------------------------------------------------------------
async def test_responses_websocket_turn_gets_cpas_error(chain):
    """A Codex-style WebSocket turn runs the same executor: the request is not chat, so
    the turn fails; CPA sends no event at all and drops the connection without a close
    frame (mitmproxy logs ABNORMAL_CLOSURE). Through the sidecar the client gets no event
    either, never a completed response; mitmproxy closes the client's socket with code
    1000 (it has no frame to forward: the client cannot tell this from a normal close)."""
    import aiohttp

    create = {"type": "response.create", "model": rd.MODEL,
              "input": [{"role": "user", "content": "hi [scenario:stop]"}]}  # fmt: skip
    got = {}
    for name, base in (("cpa", chain.cpa.url), ("side", chain.side)):
        msgs: list = []
        url = base.replace("http://", "ws://", 1) + "/v1/responses"
        async with aiohttp.ClientSession(trust_env=False, headers={"authorization": "Bearer test-key"}) as s, \
                s.ws_connect(url) as ws:  # fmt: skip
            await ws.send_str(orjson.dumps(create).decode())
            while not msgs or msgs[-1].get("type") not in ("error", "response.failed", "response.completed"):
                m = await asyncio.wait_for(ws.receive(), TIMEOUT)
                if m.type != aiohttp.WSMsgType.TEXT:
                    msgs.append({"type": f"ws {m.type.name}", "data": m.data, "extra": m.extra})
                    break
                msgs.append(orjson.loads(m.data))
        got[name] = msgs
    assert [m["type"] for m in got["cpa"]] == ["ws CLOSED"], got
    assert [(m["type"], m["data"]) for m in got["side"]] == [("ws CLOSE", 1000)], got
    chain.mitm.wait_for(r"WebSocket Error: ABNORMAL_CLOSURE", 10)


# --- secrets -----------------------------------------------------------------------------
async def test_devin_session_token_never_in_saved_flows_or_logs(chain):
    conv = f"secret-{uuid.uuid4().hex[:6]}"
    async with client() as c:
        r = await c.post(chain.side + "/v1/chat/completions", json=ask_body(f"hi [scenario:stop] [conv:{conv}]"))
    assert r.status_code == 200 and chain.seen(conv)[0]["token_in_metadata"]
    secret = TOKEN.split("$", 1)[1].encode()
    deadline = time.monotonic() + 10
    while True:  # -w writes the Devin flow when it is done
        saved = chain.flows.read_bytes() if chain.flows.exists() else b""
        if conv.encode() in saved and b"GetChatMessage" in saved:
            break
        assert time.monotonic() < deadline, "the Devin flow never reached the -w file"
        await asyncio.sleep(0.2)
    assert secret not in saved
    assert secret.decode() not in chain.mitm.output
    from mitmproxy import io

    with chain.flows.open("rb") as f:
        flows = [fl for fl in io.FlowReader(f).stream() if getattr(fl, "request", None)]
    devin = [fl for fl in flows if fl.request.host == rd.DEVIN_HOST]
    assert devin and all(fl.request.headers["authorization"].startswith("Basic <redacted:") for fl in devin)
    # inside the CONNECT tunnel this build offers h2 (Go's default); the sidecar, lazy
    # (scripts/sidecar's connection_strategy), accepts it: the leg reads frames either way
    assert {fl.request.http_version for fl in devin} == {"HTTP/2.0"}


# --- real clients ----------------------------------------------------------------------
WRITE_FILE = {"name": "write_file", "description": "Write a file",
              "parameters": REPORT_CHAT["tools"][0]["function"]["parameters"]}  # fmt: skip


@pytest.mark.clients
async def test_real_clients_on_the_report_turns(chain, tmp_path):
    """The report's clients on its turns (the fake answers with the long write_file call):
    AI SDK 5 chat (opencode's), capped at 400 and uncapped; AI SDK 5 Responses (ZCode's);
    openai-python's chat stream helper; codex exec. Each either completes the tool call or
    reports why not (truncation, or the build's HTTP 500 on Responses), straight to CPA
    and through the sidecar alike: this build's chat stream needs no repair for it."""
    from runners import CLIENTS, run_aisdk_batch, run_codex

    install = CLIENTS / "aisdk5"
    assert (install / ".streamfix-installed").exists(), "run scripts/install-clients"
    prompt = REPORT_CHAT["messages"][0]["content"]
    cases = []
    for name, base in (("cpa", chain.cpa.url), ("side", chain.side)):
        for api, cap in (("chat", 400), ("chat", None), ("responses", None)):
            cases.append({"id": f"{name}-{api}-{cap}", "api": api, "baseURL": base + "/v1", "tools": [WRITE_FILE],
                          "prompt": f"{prompt} [conv:aisdk-{name}-{api}-{cap}]",
                          **({"maxOutputTokens": cap} if cap else {})})  # fmt: skip
    results = await asyncio.to_thread(run_aisdk_batch, install, cases)
    for name in ("cpa", "side"):
        capped, whole, resp = (results[f"{name}-{k}"] for k in ("chat-400", "chat-None", "responses-None"))
        assert capped["finishReason"] == "length" and not capped.get("thrown"), capped  # truncation reported
        assert [c for c in capped["toolCalls"] if not c["invalid"]] == [], capped  # no half call as a success
        ((call,),) = [whole["toolCalls"]]
        assert call["toolName"] == "write_file" and not call["invalid"], whole
        assert call["input"]["path"] == "notes.md" and len(call["input"]["content"]) > 9000
        assert "messages field is required" in json.dumps(resp.get("errors")), resp  # an error part
        assert not resp.get("toolCalls") and resp.get("finishReason") in (None, "error"), resp

    import openai

    for name, base in (("cpa", chain.cpa.url), ("side", chain.side)):
        oa = openai.OpenAI(base_url=base + "/v1", api_key="test-key", max_retries=0, timeout=TIMEOUT)

        def capped_stream(oa=oa):
            with oa.chat.completions.stream(model=rd.MODEL, max_tokens=400, tools=REPORT_CHAT["tools"],
                                            messages=[{"role": "user", "content": prompt}]) as s:  # fmt: skip
                return s.get_final_completion()

        with pytest.raises(openai.LengthFinishReasonError):
            await asyncio.to_thread(capped_stream)

    out = await asyncio.to_thread(run_codex, chain.side + "/v1", tmp_path)
    # Codex shows a 5xx as "We're currently experiencing high demand...": a failed turn
    assert out["rc"] != 0 and "turn.failed" in out["events"] and "turn.completed" not in out["events"], out


@pytest.mark.parametrize("scenario", ["error", "truncated"])
async def test_real_clients_on_devin_failures(chain, scenario):
    """The real chat clients on Devin's failures (a trailer error; a body cut before it):
    straight to CPA neither client hears an error (the trailer error as "stop", the cut as a
    stream that just ends without a finish); through the sidecar the AI SDK
    (opencode's) reports an error part and no "stop", and openai-python's stream helper
    raises ``APIError`` naming Devin's evidence."""
    import openai
    from runners import CLIENTS, run_aisdk_batch

    install = CLIENTS / "aisdk5"
    assert (install / ".streamfix-installed").exists(), "run scripts/install-clients"
    tag = uuid.uuid4().hex[:6]
    cases = [{"id": name, "api": "chat", "baseURL": base + "/v1", "tools": [WRITE_FILE],
              "prompt": f"go [scenario:{scenario}] [conv:aisdk-fail-{name}-{tag}]"}
             for name, base in (("cpa", chain.cpa.url), ("side", chain.side))]  # fmt: skip
    results = await asyncio.to_thread(run_aisdk_batch, CLIENTS / "aisdk5", cases)
    cpa, side = results["cpa"], results["side"]
    raw = "stop" if scenario == "error" else "unknown"  # measured: no finish chunk, [DONE], no error
    assert cpa.get("finishReason") == raw and not cpa.get("errors") and not cpa.get("thrown"), cpa
    assert side.get("finishReason") != "stop" and (side.get("errors") or side.get("thrown")), side
    assert "Devin StopReason" in json.dumps([side.get("errors"), side.get("thrown")]), side

    def final(base: str, conv: str):
        oa = openai.OpenAI(base_url=base + "/v1", api_key="test-key", max_retries=0, timeout=TIMEOUT)
        with oa.chat.completions.stream(model=rd.MODEL, messages=[{"role": "user", "content": f"go [scenario:{scenario}] [conv:{conv}]"}]) as s:  # fmt: skip
            return s.get_final_completion()

    done = await asyncio.to_thread(final, chain.cpa.url, f"oa-fail-cpa-{tag}")
    assert done.choices[0].finish_reason == ("stop" if scenario == "error" else None), done
    with pytest.raises(openai.APIError, match="Devin StopReason"):
        await asyncio.to_thread(final, chain.side, f"oa-fail-side-{tag}")


async def test_two_tool_calls_in_one_turn(chain):
    """This build writes index 0 on every tool-call delta, so a turn with two calls puts
    both at index 0: a client that assembles by index (the spec's way) merges them into
    one call whose arguments are two JSON texts glued together. Through the sidecar the
    second call (a new id at a known index) gets index 1: two whole calls."""
    got = {}
    for name, base in (("cpa", chain.cpa.url), ("side", chain.side)):
        conv = f"two-{name}-{uuid.uuid4().hex[:6]}"
        async with client() as c:
            r = await c.post(base + "/v1/chat/completions", json=ask_body(f"go [scenario:two_tools] [conv:{conv}]"))
        v = chat_view(r.content)
        got[name] = (v["indexes"], [parses(a) for _, a in sorted(v["args"].items())])
        # openai-python's own stream assembly (what chat.completions.stream() builds)
        from openai.lib.streaming.chat._completions import ChatCompletionStreamState
        from openai.types.chat import ChatCompletionChunk

        state = ChatCompletionStreamState()
        for o in chunks(r.content):
            state.handle_chunk(ChatCompletionChunk.model_validate(o))
        calls = state.current_completion_snapshot.choices[0].message.tool_calls or []
        got[name + " openai-python"] = [(tc.id, parses(tc.function.arguments)) for tc in calls]
    assert got == {"cpa": ([0], [False]), "side": ([0, 1], [True, True]),
                   "cpa openai-python": [("write_file_0#a1write_file_1#b2", False)],
                   "side openai-python": [("write_file_0#a1", True), ("write_file_1#b2", True)]}  # fmt: skip
