"""The upstream-leg matrix through a REAL CPA: every provider path x client API x
turn kind, raw and through both legs of the sidecar.

    client -> sidecar reverse listener (client leg) -> real CPA
        -> proxy-url = the sidecar's regular listener (upstream leg, streamfix_upstream_hosts=127.0.0.1)
        -> tests/support/standins/fake_upstreams.py (every provider on one port)

Raw, the same CPA build runs with every provider entry ``proxy-url: direct`` and the
clients call it directly. One CPA config holds every provider, each under its own model
alias (:data:`PROVIDERS`). :func:`truth` reads what a client learns of a turn (how it
ended, in its API's terms, and the usage it was told), :func:`expected` what the
provider said (tests/support/standins/fake_upstreams.py's rules), and ``python tests/
upstream_matrix.py VERSION...`` prints the table.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import realcpa
from standins import fake_providers as fp
from standins import fake_upstreams as fu
from streamfix.wire.sse import SseParser
from support import Proc, child_env, free_port

from streamfix.sidecar import mitm_command

TIMEOUT = 30.0
PROVIDERS: dict[str, tuple[str, str]] = {
    # alias: (config key, upstream model name)
    "up-claude": ("claude-api-key", "claude-sonnet-4-5-20250929"),
    "up-gemini": ("gemini-api-key", "gemini-2.5-flash"),
    "up-vertex": ("vertex-api-key", "gemini-2.5-flash-lite"),
    "up-interactions": ("interactions-api-key", "gemini-2.5-pro"),
    "up-openai": ("openai-compatibility", "fake-gpt"),
    "up-codex": ("codex-api-key", "gpt-5-codex"),
    "up-antigravity": ("antigravity", "gemini-3-flash"),  # an OAuth credential file (write_auths)
}
PROVIDER_OF = {"up-claude": "anthropic", "up-gemini": "gemini", "up-vertex": "gemini",
               "up-interactions": "interactions", "up-openai": "openai_chat", "up-codex": "responses",
               "up-antigravity": "gemini"}  # fmt: skip
APIS = ("responses", "responses_ws", "chat", "messages", "gemini")
KINDS = fu.KINDS
BODIES: dict[tuple[str, bool, bool], dict[tuple[str, str, str], bytes]] = {}
"""The last run's client bodies, for a failing test to show."""


def config(
    port: int, d: Path, base: str, proxy: str, retries: int = 0, primary: str | tuple[str, ...] | None = None
) -> str:
    """One CPA config.yaml with every provider entry; ``proxy``: each entry's proxy-url;
    ``retries``: CPA's ``request-retry``; ``primary``: the alias (or aliases) whose entry also serves
    the model the real clients ask for (:data:`realcpa.MODEL`)."""
    head = realcpa.config_head(port, d / "auths", "").replace("request-retry: 0", f"request-retry: {retries}")
    px = proxy or "direct"
    out = [head]
    keys = (1, 2) if retries else (1,)  # with retries, a second key to fail over to
    for alias, (key, name) in PROVIDERS.items():
        models = f'models: [{{name: "{name}", alias: "{alias}"}}'
        models += f', {{name: "{name}", alias: "{realcpa.MODEL}"}}]' if alias in _aliases(primary) else "]"
        if key == "antigravity":  # the credential is a file in auth-dir (write_auths); the alias here
            out.append(f'oauth-model-alias:\n  antigravity:\n    - {{name: "{name}", alias: "{alias}", fork: true}}\n'
                       + (f'    - {{name: "{name}", alias: "{realcpa.MODEL}", fork: true}}\n' if alias in _aliases(primary) else ""))  # fmt: skip
        elif key == "openai-compatibility":
            entries = ", ".join(f'{{api-key: "fake-openai-{k}", proxy-url: "{px}"}}' for k in keys)
            out.append(f'{key}:\n  - name: "fakeoai"\n    base-url: "{base}/v1"\n'
                       f"    api-key-entries: [{entries}]\n    {models}\n")  # fmt: skip
        else:
            url = base + ("/codex" if key == "codex-api-key" else "")
            out.append(f"{key}:\n" + "".join(f'  - api-key: "fake-{key}-{k}"\n    base-url: "{url}"\n'
                                             f'    proxy-url: "{px}"\n    {models}\n' for k in keys))  # fmt: skip
    return "".join(out)


def _aliases(primary: str | tuple[str, ...] | None) -> tuple[str, ...]:
    return (primary,) if isinstance(primary, str) else tuple(primary or ())


def write_auths(d: Path, base: str, proxy: str) -> None:
    """The Antigravity credential (``realcpa.antigravity_auth``) in ``d/auths``: CPA posts
    ``{base}/v1internal:streamGenerateContent?alt=sse`` through the credential's own
    ``proxy_url`` (it wins over the config's), here ``proxy`` (the sidecar's upstream
    listener) or ``direct``."""
    auth = realcpa.antigravity_auth(base) | {"proxy_url": proxy or "direct"}
    (d / "auths" / "antigravity-fake.json").write_text(json.dumps(auth))


@dataclass
class Stack:
    version: str
    fakes: Any
    cpa_raw: Any = None
    cpa_legs: Any = None
    mitm: Proc | None = None
    side: str = ""
    procs: dict[str, Proc] = field(default_factory=dict)
    dirs: list[Path] = field(default_factory=list)

    def url(self, legs: bool) -> str:
        return self.side if legs else self.cpa_raw

    def stop(self) -> None:
        for p in self.procs.values():
            p.stop()
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)


def _cpa(
    version: str, base: str, proxy: str, name: str, retries: int = 0, primary: str | tuple[str, ...] | None = None
) -> tuple[Proc, int, Path]:
    exe = realcpa.binary(version)
    if exe is None:
        raise FileNotFoundError(realcpa.missing_reason(version))

    def write(d: Path, port: int) -> dict[str, str]:
        (d / "config.yaml").write_text(config(port, d, base, proxy, retries, primary))
        write_auths(d, base, proxy)
        return {}

    return realcpa.launch(exe, f"{version}-{name}", write, 30.0)


def start(version: str, fakes: Any, confdir: Path, extra: list[str] | None = None, retries: int = 0,
          direct: bool = False, primary: str | tuple[str, ...] | None = None) -> Stack:  # fmt: skip
    """CPA raw, and CPA behind both legs of a sidecar (its own mitmdump); ``retries``: CPA's
    request-retry (both); ``direct``: the second CPA's entries bypass the sidecar's upstream
    listener (proxy-url: direct) while the clients still go through its client leg."""
    st = Stack(version, fakes)
    try:
        proc, port, d = _cpa(version, fakes.url, "", "raw", retries, primary)
        st.procs["CPA raw"], st.cpa_raw = proc, f"http://127.0.0.1:{port}"
        st.dirs.append(d)
        reg = free_port()
        cpa_port = free_port()
        cmd = mitm_command(f"http://127.0.0.1:{cpa_port}", "127.0.0.1:0", f"127.0.0.1:{reg}", False, False,
                           ["--set", f"confdir={confdir}", "--set", "streamfix_upstream_hosts=127.0.0.1",
                            *(extra or [])])  # fmt: skip
        st.mitm = Proc(cmd, env=child_env())
        st.procs["mitmdump"] = st.mitm
        m = st.mitm.wait_for(r"reverse proxy to \S+ listening at 127\.0\.0\.1:(\d+)", 60)
        st.mitm.wait_for(rf"HTTP\(S\) proxy listening at 127\.0\.0\.1:{reg}\b", 60)
        st.side = f"http://127.0.0.1:{m.group(1)}"
        exe = realcpa.binary(version)
        assert exe is not None
        d = Path(tempfile.mkdtemp(prefix=f"cpa-{version}-legs-"))
        (d / "auths").mkdir()
        (d / "home").mkdir()
        legs_proxy = "" if direct else f"http://127.0.0.1:{reg}"
        (d / "config.yaml").write_text(config(cpa_port, d, fakes.url, legs_proxy, retries, primary))
        write_auths(d, fakes.url, legs_proxy)
        proc = Proc([str(exe), "-config", str(d / "config.yaml"), "-local-model"], cwd=d,
                    env=realcpa.clean_env({"HOME": str(d / "home")}))  # fmt: skip
        st.procs["CPA legs"] = proc
        st.dirs.append(d)
        proc.wait_for(r"API server started successfully on", 30)
        realcpa._healthz(cpa_port, proc, 30)
        st.cpa_legs = f"http://127.0.0.1:{cpa_port}"
        return st
    except BaseException:
        st.stop()
        raise


# --- one turn -------------------------------------------------------------------------------

TOOLS_RESPONSES = [{"type": "function", "name": n, "parameters": {"type": "object", "properties": {}}}
                   for n in ("exec_command", "get_weather", "write_file")]  # fmt: skip
TOOLS_CHAT = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
              for n in ("exec_command", "get_weather", "write_file")]  # fmt: skip
TOOLS_CLAUDE = [{"name": n, "input_schema": {"type": "object", "properties": {}}}
                for n in ("exec_command", "get_weather", "write_file")]  # fmt: skip
TOOLS_GEMINI = [{"functionDeclarations": [{"name": n, "parameters": {"type": "object", "properties": {}}}
                                          for n in ("exec_command", "get_weather", "write_file")]}]  # fmt: skip
HEADERS = {"authorization": f"Bearer {realcpa.CLIENT_KEY}", "content-type": "application/json"}


def prompt(kind: str, conv: int | None = None, tag: str = "") -> str:
    """The turn's text; ``tag``: a marker the fake ignores (a capture finds its calls by it)."""
    c = f" [conv:{conv}]" if conv is not None else ""
    return f"Please do the task. [turn:{kind}]{c}" + (f" [cell:{tag}]" if tag else "")


def request(
    api: str, alias: str, kind: str, conv: int | None = None, stream: bool = True, tag: str = ""
) -> tuple[str, dict]:
    text = prompt(kind, conv, tag)
    if api in ("responses", "responses_ws"):
        body = {"model": alias, "stream": stream, "tools": TOOLS_RESPONSES,
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]}  # fmt: skip
        return "/v1/responses", body
    if api == "chat":
        body = {"model": alias, "stream": stream, "tools": TOOLS_CHAT, "messages": [{"role": "user", "content": text}]}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return "/v1/chat/completions", body
    if api == "messages":
        body = {"model": alias, "stream": stream, "max_tokens": 4096, "tools": TOOLS_CLAUDE,
                "messages": [{"role": "user", "content": text}]}  # fmt: skip
        return "/v1/messages", body
    action = "streamGenerateContent?alt=sse" if stream else "generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": text}]}], "tools": TOOLS_GEMINI}
    return f"/v1beta/models/{alias}:{action}", body


async def turn(session: aiohttp.ClientSession, base: str, api: str, alias: str, kind: str, conv: int | None = None,
               stream: bool = True, tag: str = "") -> tuple[int, bytes]:  # fmt: skip
    """(HTTP status, body); a WebSocket turn's messages as SSE events."""
    path, body = request(api, alias, kind, conv, stream, tag)
    if api == "responses_ws":
        body.pop("stream")
        body["type"] = "response.create"
        out: list[bytes] = []
        try:
            async with session.ws_connect(base.replace("http://", "ws://") + path, headers={"authorization": HEADERS["authorization"]},
                                          timeout=aiohttp.ClientWSTimeout(ws_close=TIMEOUT)) as ws:  # fmt: skip
                await ws.send_str(orjson.dumps(body).decode())
                while True:
                    msg = await asyncio.wait_for(ws.receive(), TIMEOUT)
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        break
                    out.append(msg.data.encode())
                    t = orjson.loads(msg.data).get("type")
                    if t in ("response.completed", "response.incomplete", "response.failed", "error"):
                        break
        except (TimeoutError, aiohttp.ClientError) as e:
            return 0, f"websocket: {type(e).__name__}".encode()
        return 101, b"".join(
            b"event: " + orjson.loads(m).get("type", "").encode() + b"\ndata: " + m + b"\n\n" for m in out
        )
    try:
        async with session.post(base + path, data=orjson.dumps(body), headers=HEADERS,
                                timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as r:  # fmt: skip
            data = b""
            try:
                async for chunk in r.content.iter_any():
                    data += chunk
            except aiohttp.ClientPayloadError:
                data += b"\n<connection broken>"
            return r.status, data
    except (TimeoutError, aiohttp.ClientError) as e:
        return 0, f"{type(e).__name__}".encode()


# --- what the client learned ---------------------------------------------------------------


def _objs(body: bytes) -> list[tuple[str | None, Any]]:
    p = SseParser()
    out = []
    for e in p.feed(body) + p.close():
        if e.data is None or not e.complete:
            continue
        d = e.data.strip()
        if d == b"[DONE]":
            out.append((e.event, "[DONE]"))
            continue
        try:
            out.append((e.event, orjson.loads(d)))
        except orjson.JSONDecodeError:
            pass
    return out


def truth(api: str, status: int, body: bytes, stream: bool = True) -> dict[str, Any]:
    """How the turn ended as the client sees it: ``ended`` (complete, max_tokens,
    content_filter, failed, or what is not one of these: ``no_finish``), the raw word
    (``said``) and the usage (``output``, ``input``)."""
    if status == 101 and not any(t in body for t in (b"response.completed", b"response.incomplete",
                                                     b"response.failed", b"event: error")):  # fmt: skip
        return {"ended": "failed", "said": "socket closed, no terminal", "output": None, "input": None}
    if status not in (200, 101):
        return {"ended": "failed", "said": f"HTTP {status}", "output": None, "input": None}
    if not stream:
        return _json_truth(api, body)
    objs = _objs(body)
    said, ended, out, inp = None, "no_finish", None, None
    if api in ("responses", "responses_ws"):
        for ev, o in objs:
            if not isinstance(o, dict):
                continue
            t = o.get("type")
            if t in ("response.completed", "response.incomplete", "response.failed"):
                r = o.get("response") or {}
                reason = (r.get("incomplete_details") or {}).get("reason")
                said = t.removeprefix("response.") + (f"/{reason}" if reason else "")
                ended = {"response.completed": "complete", "response.failed": "failed"}.get(t) or (
                    "max_tokens"
                    if reason == "max_output_tokens"
                    else "content_filter"
                    if reason == "content_filter"
                    else "unknown"
                )
                u = r.get("usage") or {}
                out, inp = u.get("output_tokens"), u.get("input_tokens")
            elif t == "error" or ev == "error":
                said, ended = "error", "failed"
    elif api == "chat":
        for _ev, o in objs:
            if o == "[DONE]":
                said = said or "[DONE] only"
                continue
            if not isinstance(o, dict):
                continue
            if o.get("error") is not None:
                said, ended = "error chunk", "failed"
            for ch in o.get("choices") or []:
                fr = ch.get("finish_reason")
                if fr:
                    said = fr
                    ended = {"stop": "complete", "tool_calls": "complete", "length": "max_tokens",
                             "content_filter": "content_filter"}.get(fr, "unknown")  # fmt: skip
            u = o.get("usage")
            if isinstance(u, dict):
                out, inp = u.get("completion_tokens"), u.get("prompt_tokens")
    elif api == "messages":
        start: dict[str, Any] = {}  # message_start's usage: a client's input when message_delta leaves it out
        for ev, o in objs:
            if not isinstance(o, dict):
                continue
            t = o.get("type")
            if t == "message_start":
                m0 = o.get("message")
                start = (m0.get("usage") if isinstance(m0, dict) else None) or {}
            elif t == "message_delta":
                sr = (o.get("delta") or {}).get("stop_reason")
                said = sr
                ended = {"end_turn": "complete", "tool_use": "complete", "stop_sequence": "complete",
                         "max_tokens": "max_tokens", "refusal": "content_filter",
                         "model_context_window_exceeded": "max_tokens"}.get(sr, "unknown") if sr else "no_finish"  # fmt: skip
                u = o.get("usage") or {}
                out = u.get("output_tokens")
                if "input_tokens" not in u and isinstance(start, dict):
                    u = {**start, **u}
                inp = (u.get("input_tokens") or 0) + (u.get("cache_read_input_tokens") or 0) or None
            elif t == "error" or ev == "error":
                said, ended = "error", "failed"
            elif t == "message_stop" and said is None:
                said = "message_stop only"
    else:
        for _ev, o in objs:
            if not isinstance(o, dict):
                continue
            if o.get("error") is not None:
                said, ended = "error", "failed"
            for c in o.get("candidates") or []:
                fr = c.get("finishReason")
                if fr:
                    said = fr
                    ended = {"STOP": "complete", "MAX_TOKENS": "max_tokens", "SAFETY": "content_filter"}.get(
                        fr, "unknown"
                    )
            um = o.get("usageMetadata")
            if isinstance(um, dict) and um.get("candidatesTokenCount") is not None:
                out = (um.get("candidatesTokenCount") or 0) + (um.get("thoughtsTokenCount") or 0)
                inp = um.get("promptTokenCount")
    return {"ended": ended, "said": said or "nothing", "output": out, "input": inp}


def _json_truth(api: str, body: bytes) -> dict[str, Any]:
    try:
        o = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {"ended": "failed", "said": "not JSON", "output": None, "input": None}
    if not isinstance(o, dict) or o.get("error") is not None or o.get("type") == "error":
        return {"ended": "failed", "said": "error", "output": None, "input": None}
    if api in ("responses", "responses_ws"):
        st = o.get("status")
        reason = (o.get("incomplete_details") or {}).get("reason")
        ended = {"completed": "complete", "failed": "failed"}.get(st) or (
            "max_tokens"
            if reason == "max_output_tokens"
            else "content_filter"
            if reason == "content_filter"
            else "unknown"
        )
        u = o.get("usage") or {}
        return {"ended": ended, "said": f"{st}/{reason}" if reason else st, "output": u.get("output_tokens"),
                "input": u.get("input_tokens")}  # fmt: skip
    if api == "chat":
        fr = ((o.get("choices") or [{}])[0]).get("finish_reason")
        u = o.get("usage") or {}
        ended = {
            "stop": "complete",
            "tool_calls": "complete",
            "length": "max_tokens",
            "content_filter": "content_filter",
        }
        return {"ended": ended.get(fr, "unknown"), "said": fr, "output": u.get("completion_tokens"),
                "input": u.get("prompt_tokens")}  # fmt: skip
    if api == "messages":
        sr = o.get("stop_reason")
        u = o.get("usage") or {}
        ended = {"end_turn": "complete", "tool_use": "complete", "max_tokens": "max_tokens", "refusal": "content_filter",
                 "model_context_window_exceeded": "max_tokens"}  # fmt: skip
        inp = (u.get("input_tokens") or 0) + (u.get("cache_read_input_tokens") or 0) or None
        return {"ended": ended.get(sr, "unknown"), "said": sr, "output": u.get("output_tokens"), "input": inp}
    c = (o.get("candidates") or [{}])[0]
    fr = c.get("finishReason")
    um = o.get("usageMetadata") or {}
    out = (um.get("candidatesTokenCount") or 0) + (um.get("thoughtsTokenCount") or 0) if um else None
    return {"ended": {"STOP": "complete", "MAX_TOKENS": "max_tokens", "SAFETY": "content_filter"}.get(fr, "unknown"),
            "said": fr, "output": out, "input": um.get("promptTokenCount")}  # fmt: skip


# --- what the provider said ------------------------------------------------------------------


def applies(alias: str, kind: str) -> bool:
    """Turn kinds a provider has: Interactions has no safety stop; only Claude refuses or
    overflows its context window by name (the others' rows would repeat safety / max_tokens)."""
    p = PROVIDER_OF[alias]
    if kind == "safety" and p == "interactions":
        return False
    return not (kind in ("refusal", "context") and p != "anthropic")


def expected(alias: str, kind: str, conv: int | None = None) -> dict[str, Any]:
    """The provider's truth for a turn: how it ended and its output/input token counts
    (None where there is none to compare: a failed turn)."""
    ended = {"max_tokens": "max_tokens", "context": "max_tokens", "safety": "content_filter",
             "refusal": "content_filter", "error": "failed", "no_finish": "failed", "cut": "failed"}.get(kind, "complete")  # fmt: skip
    if ended == "failed":
        return {"ended": "failed", "output": None, "input": None}
    p = PROVIDER_OF[alias]
    s = fu.script_for(kind, conv)
    if p in ("gemini", "responses"):
        thoughts = fu.THOUGHT_TOKENS if s.thinking else 0
        return {"ended": ended, "output": fu.out_tokens(s) + thoughts, "input": fu.input_tokens(s)}
    s2, _cut, tokens = s.capped(None)
    return {"ended": ended, "output": tokens, "input": fu.input_tokens(s2)}


# What each build does raw, measured (tests/support/upstream_matrix.py's cell labels: what the
# client heard where it is not the provider's truth; "usage": the output tokens differ).
# Every cell not named is the provider's truth already (Antigravity: the Gemini classes). The classes (cpa-defects round 4):
# N1 (v7.2.102 and later: a Gemini cut, error frame or finish-less end becomes
# response.completed; v7.2.89: no terminal at all, "nothing"), N2/N3 (message_stop only,
# [DONE] only), N5/N6 (Gemini MAX_TOKENS/SAFETY as completed, max_tokens, stop, end_turn),
# N7 (thought tokens missing from output), N9/N10 (Claude refusal, context window,
# max_tokens as completed / stop), N11/N12/N14 (OpenAI and Codex -> messages, OpenAI ->
# Responses), OpenAI -> Responses length/content_filter as completed before v7.2.132.
RAW_BOTH = {
    "up-antigravity/chat/error": "[DONE] only",
    "up-antigravity/chat/max_tokens": "max_tokens",
    "up-antigravity/chat/no_finish": "[DONE] only",
    "up-antigravity/chat/safety": "stop",
    "up-antigravity/chat/thoughts": "usage",
    "up-antigravity/gemini/error": "nothing",
    "up-antigravity/gemini/no_finish": "nothing",
    "up-antigravity/messages/error": "end_turn",
    "up-antigravity/messages/no_finish": "tool_use",
    "up-antigravity/messages/safety": "end_turn",
    "up-antigravity/responses/max_tokens": "completed",
    "up-antigravity/responses/safety": "completed",
    "up-antigravity/responses/thoughts": "usage",
    "up-antigravity/responses_ws/max_tokens": "completed",
    "up-antigravity/responses_ws/safety": "completed",
    "up-antigravity/responses_ws/thoughts": "usage",
    "up-claude/chat/context": "stop",
    "up-claude/chat/no_finish": "[DONE] only",
    "up-claude/gemini/context": "STOP",
    "up-claude/gemini/max_tokens": "STOP",
    "up-claude/gemini/no_finish": "STOP",
    "up-claude/gemini/refusal": "STOP",
    "up-claude/gemini/safety": "STOP",
    "up-claude/messages/cut": "nothing",
    "up-claude/messages/no_finish": "nothing",
    "up-claude/responses/context": "completed",
    "up-claude/responses/max_tokens": "completed",
    "up-claude/responses/refusal": "completed",
    "up-claude/responses/safety": "completed",
    "up-claude/responses_ws/context": "completed",
    "up-claude/responses_ws/max_tokens": "completed",
    "up-claude/responses_ws/refusal": "completed",
    "up-claude/responses_ws/safety": "completed",
    "up-codex/messages/max_tokens": "tool_use",
    "up-gemini/chat/error": "[DONE] only",
    "up-gemini/chat/max_tokens": "max_tokens",
    "up-gemini/chat/no_finish": "[DONE] only",
    "up-gemini/chat/safety": "stop",
    "up-gemini/chat/thoughts": "usage",
    "up-gemini/gemini/no_finish": "nothing",
    "up-gemini/messages/error": "message_stop only",
    "up-gemini/messages/no_finish": "message_stop only",
    "up-gemini/messages/safety": "end_turn",
    "up-gemini/responses/max_tokens": "completed",
    "up-gemini/responses/safety": "completed",
    "up-gemini/responses/thoughts": "usage",
    "up-gemini/responses_ws/max_tokens": "completed",
    "up-gemini/responses_ws/safety": "completed",
    "up-gemini/responses_ws/thoughts": "usage",
    "up-interactions/chat/error": "[DONE] only",
    "up-interactions/chat/max_tokens": "tool_calls",
    "up-interactions/chat/no_finish": "[DONE] only",
    "up-interactions/gemini/error": "nothing",
    "up-interactions/gemini/max_tokens": "STOP",
    "up-interactions/gemini/no_finish": "nothing",
    "up-interactions/messages/error": "nothing",
    "up-interactions/messages/max_tokens": "tool_use",
    "up-interactions/messages/no_finish": "nothing",
    "up-interactions/responses/max_tokens": "completed",
    "up-interactions/responses_ws/max_tokens": "completed",
    "up-openai/chat/no_finish": "[DONE] only",
    "up-openai/gemini/no_finish": "STOP",
    "up-openai/messages/max_tokens": "tool_use",
    "up-openai/messages/no_finish": "message_stop only",
    "up-openai/messages/safety": "end_turn",
    "up-vertex/chat/error": "[DONE] only",
    "up-vertex/chat/max_tokens": "max_tokens",
    "up-vertex/chat/no_finish": "[DONE] only",
    "up-vertex/chat/safety": "stop",
    "up-vertex/chat/thoughts": "usage",
    "up-vertex/gemini/no_finish": "nothing",
    "up-vertex/messages/error": "message_stop only",
    "up-vertex/messages/no_finish": "message_stop only",
    "up-vertex/messages/safety": "end_turn",
    "up-vertex/responses/max_tokens": "completed",
    "up-vertex/responses/safety": "completed",
    "up-vertex/responses/thoughts": "usage",
    "up-vertex/responses_ws/max_tokens": "completed",
    "up-vertex/responses_ws/safety": "completed",
    "up-vertex/responses_ws/thoughts": "usage",
}
RAW_89 = {
    "up-antigravity/responses/error": "nothing",
    "up-antigravity/responses/no_finish": "nothing",
    "up-claude/chat/refusal": "stop",
    "up-claude/chat/safety": "stop",
    "up-claude/responses/error": "nothing",
    "up-claude/responses/no_finish": "nothing",
    "up-gemini/responses/error": "nothing",
    "up-gemini/responses/no_finish": "nothing",
    "up-interactions/responses/error": "nothing",
    "up-interactions/responses/no_finish": "nothing",
    "up-openai/gemini/error": "STOP",
    "up-openai/messages/error": "message_stop only",
    "up-openai/responses/error": "nothing",
    "up-openai/responses/max_tokens": "completed",
    "up-openai/responses/no_finish": "nothing",
    "up-openai/responses/safety": "completed",
    "up-openai/responses_ws/max_tokens": "completed",
    "up-openai/responses_ws/safety": "completed",
    "up-vertex/responses/error": "nothing",
    "up-vertex/responses/no_finish": "nothing",
}
RAW_140 = {
    "up-antigravity/responses/cut": "completed",
    "up-antigravity/responses/error": "completed",
    "up-antigravity/responses/no_finish": "completed",
    "up-antigravity/responses_ws/cut": "completed",
    "up-antigravity/responses_ws/error": "completed",
    "up-antigravity/responses_ws/no_finish": "completed",
    "up-gemini/responses/cut": "completed",
    "up-gemini/responses/error": "completed",
    "up-gemini/responses/no_finish": "completed",
    "up-gemini/responses_ws/cut": "completed",
    "up-gemini/responses_ws/error": "completed",
    "up-gemini/responses_ws/no_finish": "completed",
    "up-openai/responses/no_finish": "completed",
    "up-openai/responses_ws/no_finish": "completed",
    "up-vertex/responses/cut": "completed",
    "up-vertex/responses/error": "completed",
    "up-vertex/responses/no_finish": "completed",
    "up-vertex/responses_ws/cut": "completed",
    "up-vertex/responses_ws/error": "completed",
    "up-vertex/responses_ws/no_finish": "completed",
}


def raw_expected(version: str) -> dict[str, str]:
    return {**RAW_BOTH, **(RAW_89 if version == "v7.2.89" else RAW_140)}


def normalized(bad: dict[str, str]) -> dict[str, str]:
    # a usage cell's numbers depend on the conversation number the cell got in the run
    return {k: ("usage" if v.startswith("usage ") else v) for k, v in bad.items()}


def cell(got: dict[str, Any], want: dict[str, Any]) -> str:
    """``ok`` when the client heard the provider's truth (the ending and, when there are
    any, the output tokens), else what it heard."""
    ok = got["ended"] == want["ended"]
    if ok and want["output"] is not None and got["output"] != want["output"]:
        return f"usage {got['output']}!={want['output']}"
    return "ok" if ok else f"{got['said']}"


def _cells(aliases=tuple(PROVIDERS), apis=APIS, kinds=KINDS) -> list[tuple[str, str, str]]:
    return [(a, api, k) for a in aliases for api in apis for k in kinds if applies(a, k)]


def cells() -> list[tuple[str, str, str]]:
    """Every (alias, API, turn kind) cell of the streaming matrix."""
    return _cells()


# --- the non-streaming (JSON) cells ---------------------------------------------------------

JSON_APIS = ("responses", "chat", "messages", "gemini")
JSON_KINDS = ("text_tool", "thoughts", "max_tokens", "safety", "refusal", "context")
JSON_BROKEN = {f"{a}/gemini/{k}": "not JSON" for a, k in
               (("up-claude", "max_tokens"), ("up-claude", "context"), ("up-codex", "max_tokens"))}  # fmt: skip
"""CPA's Claude and Codex -> Gemini JSON translators copy a tool call cut by the budget into
functionCall.args as the raw fragment: the body is not JSON, the client fails to read it (no
success); nothing a repair can parse, so it goes out as it came, through both legs too."""
RAW_JSON_BOTH = {
    "up-antigravity/chat/max_tokens": "max_tokens",
    "up-antigravity/chat/safety": "safety",
    "up-antigravity/chat/thoughts": "usage",
    "up-antigravity/messages/safety": "end_turn",
    "up-antigravity/responses/max_tokens": "completed",
    "up-antigravity/responses/safety": "completed",
    "up-antigravity/responses/thoughts": "usage",
    "up-claude/chat/context": "tool_calls",
    "up-claude/chat/max_tokens": "tool_calls",
    "up-claude/gemini/context": "not JSON",
    "up-claude/gemini/max_tokens": "not JSON",
    "up-claude/gemini/refusal": "STOP",
    "up-claude/gemini/safety": "STOP",
    "up-claude/responses/context": "completed",
    "up-claude/responses/max_tokens": "completed",
    "up-claude/responses/refusal": "completed",
    "up-claude/responses/safety": "completed",
    "up-codex/gemini/max_tokens": "not JSON",
    "up-codex/messages/max_tokens": "tool_use",
    "up-gemini/chat/max_tokens": "max_tokens",
    "up-gemini/chat/safety": "safety",
    "up-gemini/chat/thoughts": "usage",
    "up-gemini/messages/safety": "end_turn",
    "up-gemini/responses/max_tokens": "completed",
    "up-gemini/responses/safety": "completed",
    "up-gemini/responses/thoughts": "usage",
    "up-interactions/chat/max_tokens": "tool_calls",
    "up-interactions/gemini/max_tokens": "STOP",
    "up-interactions/messages/max_tokens": "tool_use",
    "up-interactions/responses/max_tokens": "completed",
    "up-openai/messages/safety": "end_turn",
    "up-vertex/chat/max_tokens": "max_tokens",
    "up-vertex/chat/safety": "safety",
    "up-vertex/chat/thoughts": "usage",
    "up-vertex/messages/safety": "end_turn",
    "up-vertex/responses/max_tokens": "completed",
    "up-vertex/responses/safety": "completed",
    "up-vertex/responses/thoughts": "usage",
}
"""What each build's JSON bodies tell raw, measured (as RAW_BOTH; both builds)."""
RAW_JSON_89 = {
    "up-claude/chat/refusal": "stop",
    "up-claude/chat/safety": "stop",
    "up-openai/responses/max_tokens": "completed",
    "up-openai/responses/safety": "completed",
}
"""v7.2.89 only (v7.2.140 tells these true: Claude refusal/safety on chat, OpenAI length/content_filter on Responses)."""


def raw_json_expected(version: str) -> dict[str, str]:
    return {**RAW_JSON_BOTH, **(RAW_JSON_89 if version == "v7.2.89" else {})}


def json_cells() -> list[tuple[str, str, str]]:
    """Every (alias, API, turn kind) cell of the non-streaming matrix."""
    return _cells(apis=JSON_APIS, kinds=JSON_KINDS)


async def run_matrix(stack: Stack, legs: bool, apis=APIS, kinds=KINDS, aliases=tuple(PROVIDERS), parallel: int = 6,
                     stream: bool = True) -> dict[tuple[str, str, str], tuple[dict, dict]]:  # fmt: skip
    base = stack.url(legs)
    sem = asyncio.Semaphore(parallel)
    bodies = BODIES.setdefault((stack.version, legs, stream), {})
    out: dict[tuple[str, str, str], tuple[dict, dict]] = {}

    async def one(session, alias, api, kind, conv):
        async with sem:
            status, body = await turn(session, base, api, alias, kind, conv, stream=stream)
        out[(alias, api, kind)] = (truth(api, status, body, stream), expected(alias, kind, conv))
        bodies[(alias, api, kind)] = body

    todo = _cells(aliases, apis, kinds)
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(one(session, a, api, k, n) for n, (a, api, k) in enumerate(todo)))
    return out


def table(results: dict[tuple[str, str, str], tuple[dict, dict]], title: str) -> str:
    kinds = [k for k in KINDS if any(key[2] == k for key in results)]
    lines = [f"### {title}", "", "| provider | API | " + " | ".join(kinds) + " |", "|---|---|" + "---|" * len(kinds)]
    for alias in PROVIDERS:
        for api in APIS:
            row = [cell(*results[(alias, api, k)]) if (alias, api, k) in results else "-" for k in kinds]
            if any(c != "-" for c in row):
                lines.append(f"| {alias} | {api} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    versions = argv or ["v7.2.89", "v7.2.140"]
    fakes = fu.Running()
    try:
        for v in versions:
            d = Path(tempfile.mkdtemp(prefix="upmatrix-"))
            st = start(v, fakes, d / "conf")
            try:
                for legs in (False, True):
                    t0 = time.monotonic()
                    res = asyncio.run(run_matrix(st, legs))
                    print(table(res, f"{v}, {'both legs' if legs else 'raw'} ({time.monotonic() - t0:.0f} s)"))
                    (d / f"matrix-{'legs' if legs else 'raw'}.json").write_text(
                        json.dumps({"|".join(k): v for k, v in res.items()}, indent=1)
                    )
            finally:
                st.stop()
    finally:
        fakes.stop()
    _ = fp
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
