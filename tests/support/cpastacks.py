"""A real CPA build per (version, provider) with a sidecar in front of each, started on first use
(the real-CPA tests' stacks), and what they send and read."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson
import pytest
import realcpa
from standins.fake_providers import Running
from streamfix.wire.contract import check
from streamfix.wire.invariants import json_events
from support import Proc, fetch, show_logs_on_failure, start_mitmdump

VERSIONS = realcpa.VERSIONS


PROVIDERS = ("claude", "interactions", "openai")


APIS = ("responses", "chat", "messages")


PATHS = {"responses": "/v1/responses", "chat": "/v1/chat/completions", "messages": "/v1/messages"}


HEADERS = {"authorization": f"Bearer {realcpa.CLIENT_KEY}", "content-type": "application/json"}


TIMEOUT = 30.0


TOOL_DEFS = [
    ("exec_command", {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}),
    ("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    ("write_file", {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}),
]


def request_body(api: str, script: str, stream: bool = True, cap: int | None = None) -> dict:
    """A client request whose text names the fake's script (``[script:NAME]``)."""
    text = f"Do the task. [script:{script}]"
    if api == "responses":
        body: dict = {"model": realcpa.MODEL, "stream": stream,
                      "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}],
                      "tools": [{"type": "function", "name": n, "description": n, "parameters": p} for n, p in TOOL_DEFS]}  # fmt: skip
        if cap:
            body["max_output_tokens"] = cap
    elif api == "chat":
        body = {"model": realcpa.MODEL, "stream": stream, "messages": [{"role": "user", "content": text}],
                "tools": [{"type": "function", "function": {"name": n, "description": n, "parameters": p}}
                          for n, p in TOOL_DEFS]}  # fmt: skip
        if stream:
            body["stream_options"] = {"include_usage": True}
        if cap:
            body["max_tokens"] = cap
    else:
        body = {"model": realcpa.MODEL, "stream": stream, "max_tokens": cap or 4096,
                "messages": [{"role": "user", "content": text}],
                "tools": [{"name": n, "description": n, "input_schema": p} for n, p in TOOL_DEFS]}  # fmt: skip
    return body


@dataclass
class Stack:
    cpa: realcpa.Cpa
    mitm: Proc
    proxy: str

    def post(self, via: str, api: str, script: str, stream: bool = True, cap: int | None = None) -> bytes:
        base = self.proxy if via == "sidecar" else self.cpa.url
        r = fetch(base + PATHS[api], body=orjson.dumps(request_body(api, script, stream, cap)), headers=HEADERS,
                  timeout=TIMEOUT)  # fmt: skip
        assert r.status == 200, (r.status, r.body[:500])
        return r.body


class Stacks:
    """One real CPA per (version, provider) and one mitmdump in front of each, started on
    first use and kept for the module."""

    def __init__(self, fakes: Running, tmp: Path) -> None:
        self.fakes = fakes
        self.tmp = tmp
        self.started: dict[tuple[str, str], Stack] = {}

    def get(self, request: pytest.FixtureRequest, version: str, provider: str) -> Stack:
        if realcpa.binary(version) is None:
            pytest.skip(realcpa.missing_reason(version))
        key = (version, provider)
        if key not in self.started:
            cpa = realcpa.start(version, provider, self.fakes.url)
            try:
                confdir = self.tmp / f"conf-{version}-{provider}"
                confdir.mkdir(parents=True, exist_ok=True)
                mitm, port = start_mitmdump(cpa.url, confdir)
            except BaseException:
                cpa.stop()
                raise
            self.started[key] = Stack(cpa, mitm, f"http://127.0.0.1:{port}")
        st = self.started[key]
        show_logs_on_failure(request, {f"CPA {version} ({provider})": st.cpa.proc, "mitmdump": st.mitm})
        return st

    def close(self) -> None:
        for st in self.started.values():
            st.mitm.stop()
            st.cpa.stop()


def rules(api: str, body: bytes) -> set[str]:
    return {v.rule for v in check(api, body)}


def events(body: bytes) -> list[dict]:
    return json_events(body)


def types(body: bytes) -> list[str]:
    return [e.get("type", "") for e in events(body)]


async def ws_turn(base: str, script: str) -> list[bytes]:
    body = request_body("responses", script)
    body.pop("stream")
    body["type"] = "response.create"
    out: list[bytes] = []
    async with aiohttp.ClientSession() as session, session.ws_connect(
        base.replace("http://", "ws://") + "/v1/responses", headers={"authorization": HEADERS["authorization"]},
        timeout=aiohttp.ClientWSTimeout(ws_close=TIMEOUT),
    ) as ws:  # fmt: skip
        await ws.send_str(orjson.dumps(body).decode())
        while True:
            msg = await asyncio.wait_for(ws.receive(), TIMEOUT)
            if msg.type != aiohttp.WSMsgType.TEXT:
                break
            out.append(msg.data.encode())
            if orjson.loads(msg.data).get("type") in ("response.completed", "response.incomplete", "response.failed",
                                                       "error"):  # fmt: skip
                break
    return out


def as_sse(msgs: list[bytes]) -> bytes:
    return b"".join(b"event: " + orjson.loads(m)["type"].encode() + b"\ndata: " + m + b"\n\n" for m in msgs)
