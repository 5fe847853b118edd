"""Redaction in a real mitmweb: what the browser is sent, what its Save gives, what the
upstream gets.

An in-test upstream waits before answering (the time a gateway takes to its first byte),
records the credentials it received, then streams a chat completion. A WebSocket client
listens to mitmweb's ``/updates`` like the browser does. The flow mitmweb pushes when the
request arrives, every later update, the flow list and ``/flows/dump`` (mitmweb's Save)
carry no credential, and the upstream got every one of them.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from aiohttp import web
from streamfix.wire import redact
from support import ROOT, Proc, child_env, free_port, show_logs_on_failure, tool

pytestmark = pytest.mark.e2e

KEY = "sk-web-SECRET-5150"
COOKIE = "session=web-cookie-SECRET"
QKEY = "query-SECRET-6060"
CHAT = (b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
        b'"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
        b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')  # fmt: skip


def _finished(msg: dict) -> bool:
    resp = msg.get("payload", {}).get("flow", {}).get("response") if msg.get("type") == "flows/update" else None
    return bool(resp and resp.get("timestamp_end"))


async def test_mitmweb_never_shows_or_saves_the_credentials(tmp_path, request):
    got: list[dict] = []

    async def handle(req: web.Request) -> web.StreamResponse:
        got.append({"authorization": req.headers.get("authorization"), "cookie": req.headers.get("cookie"),
                    "query": req.query.get("key")})  # fmt: skip
        await asyncio.sleep(1.0)  # time to first byte: mitmweb has shown the new flow by now
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(req)
        for part in CHAT.split(b"\n\n")[:-1]:
            await resp.write(part + b"\n\n")
            await asyncio.sleep(0.05)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    up_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    web_port = free_port()
    cmd = [tool("mitmweb"), "--set", f"confdir={tmp_path / 'conf'}", "--mode", f"reverse:http://127.0.0.1:{up_port}@127.0.0.1:0",
           "--set", "web_host=127.0.0.1", "--set", f"web_port={web_port}", "--set", "web_open_browser=false",
           "--set", "web_password=probe", "--set", "streamfix_keep_bodies=true",
           "-s", str(ROOT / "addons" / "repair.py")]  # fmt: skip
    mitm = Proc(cmd, env=child_env())
    show_logs_on_failure(request, {"mitmweb": mitm})
    try:
        m = await asyncio.to_thread(mitm.wait_for, r"reverse proxy to \S+ listening at 127\.0\.0\.1:(\d+)")
        port = int(m.group(1))
        await asyncio.to_thread(mitm.wait_for, r"Web server listening")
        base = f"http://127.0.0.1:{web_port}"
        async with aiohttp.ClientSession() as s:
            async with s.ws_connect(f"{base}/updates?token=probe") as ws:
                r = await s.post(f"http://127.0.0.1:{port}/v1/chat/completions?alt=sse&key={QKEY}",
                                 json={"model": "m", "stream": True, "messages": []},
                                 headers={"authorization": f"Bearer {KEY}", "cookie": COOKIE})  # fmt: skip
                body = await r.read()
                assert r.status == 200 and b"[DONE]" in body
                pushed = []
                while not any(_finished(m) for m in pushed):  # every push up to the flow's last
                    msg = await ws.receive(timeout=10)
                    pushed.append(json.loads(msg.data))
            listing = await (await s.get(f"{base}/flows?token=probe")).text()
            dump = await (await s.get(f"{base}/flows/dump?token=probe")).read()
    finally:
        mitm.stop()
        await runner.cleanup()

    # the upstream got the credentials as the client sent them
    assert got == [{"authorization": f"Bearer {KEY}", "cookie": COOKIE, "query": QKEY}]
    add = next(m for m in pushed if m["type"] == "flows/add")
    headers = dict(add["payload"]["flow"]["request"]["headers"])
    assert headers["authorization"] == f"Bearer <redacted:{redact.key_id(KEY)}>"
    assert headers["cookie"].startswith("<redacted:")
    for where, text in {"pushed to the browser": json.dumps(pushed), "flow list": listing,
                        "mitmweb's save": dump.decode("latin-1")}.items():  # fmt: skip
        for secret in (KEY, COOKIE, QKEY):
            assert secret not in text, f"{secret} in the {where}"
    assert "<redacted:" in listing and b"<redacted:" in dump
    assert len([m for m in pushed if m["type"] == "flows/update"]) >= 3  # requestheaders, request, response
