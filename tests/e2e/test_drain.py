"""Graceful drain on SIGTERM (addons/drain.py), on the full chain (tests/e2e/test_full_chain.py):
client -> sidecar -> CPA stand-in -> sidecar -> fake Devin, Devin pacing its frames so that
the turns are still streaming when mitmdump gets SIGTERM.

* SSE turns on chat, Responses and messages and two WebSocket turns in progress all
  complete with the terminal their StopReason implies (none cut); a new connection during
  the drain is refused, a new request on a connection that was already open gets 503 and
  ``Connection: close``; mitmdump exits 0 only after the last one, and the turn log has
  one line per turn;
* a second SIGTERM exits at once (the stream in flight is cut);
* ``streamfix_drain_timeout`` bounds the wait.
"""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import time

import httpx
import orjson
import pytest
from chain import EXPECT, PATHS, TIMEOUT, Chain, request_body, terminal
from support import show_logs_on_failure

pytestmark = pytest.mark.e2e

FRAME_MS = 150
"""Fake Devin's pause between envelopes: a turn takes a few seconds."""


@pytest.fixture
def chain(tmp_path, request):
    c = Chain(tmp_path)
    c.turns = tmp_path / "turns.jsonl"
    c.extra = ["--set", f"streamfix_log={c.turns}", "--set", "streamfix_metrics=127.0.0.1:0",
               *getattr(request, "param", [])]  # fmt: skip
    try:
        c.up()
        c.metrics = c.mitm.wait_for(r"streamfix: metrics at (http://\S+)/metrics", TIMEOUT).group(1)
        show_logs_on_failure(request, c.procs)
        yield c
    finally:
        c.down()


def gauge(text: str, series: str) -> float:
    return float(next(line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith(series + " ")))


def refused(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) != 0


async def sse_turn(client: httpx.AsyncClient, chain: Chain, api: str, scenario: str, conv: str,
                   started: asyncio.Event) -> bytes:  # fmt: skip
    body = request_body(api, f"Please do it. [scenario:{scenario}] [conv:{conv}] [delay:{FRAME_MS}]")
    async with client.stream("POST", chain.base + PATHS[api], json=body) as r:
        assert r.status_code == 200
        out = b""
        async for chunk in r.aiter_raw():
            out += chunk
            started.set()
        return out


async def ws_turn(chain: Chain, scenario: str, conv: str, started: asyncio.Event, go_on: asyncio.Event):
    """One turn on a new socket; then (once ``go_on`` is set, during the drain) a second
    ``response.create`` on the same socket. Returns the turn's terminal type and what the
    second request got."""
    import aiohttp

    url = chain.base.replace("http://", "ws://", 1) + "/v1/responses"
    async with aiohttp.ClientSession(trust_env=False) as s, s.ws_connect(url) as ws:

        def create(sc: str, cv: str) -> str:
            return orjson.dumps(
                {
                    "type": "response.create",
                    "model": "devin/swe-2",
                    "input": [{"role": "user", "content": f"Go. [scenario:{sc}] [conv:{cv}] [delay:{FRAME_MS}]"}],
                }
            ).decode()

        await ws.send_str(create(scenario, conv))
        while True:
            m = await asyncio.wait_for(ws.receive(), TIMEOUT)
            assert m.type == aiohttp.WSMsgType.TEXT, m
            started.set()
            t = orjson.loads(m.data).get("type")
            if t in ("response.completed", "response.incomplete", "response.failed"):
                break
        await go_on.wait()
        await ws.send_str(create("stop", conv + "-late"))
        m = await asyncio.wait_for(ws.receive(), TIMEOUT)
        return t, m.type


async def test_sigterm_lets_every_stream_finish_and_refuses_new_work(chain):
    jobs = [("chat", "stop"), ("chat", "max_tokens"), ("responses", "tool"), ("responses", "content_filter"),
            ("messages", "stop"), ("messages", "max_tokens_text")]  # fmt: skip
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as kept, \
            httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as c:  # fmt: skip
        # a keep-alive connection opened before the drain
        r = await kept.post(chain.base + PATHS["chat"], json=request_body("chat", "Hi. [scenario:stop] [conv:drain-k]"))
        assert r.status_code == 200
        flags = [asyncio.Event() for _ in range(len(jobs) + 1)]
        tasks = [asyncio.create_task(sse_turn(c, chain, api, sc, f"drain-{i}", flags[i]))
                 for i, (api, sc) in enumerate(jobs)]  # fmt: skip
        flags.append(asyncio.Event())
        draining = asyncio.Event()
        ws = [asyncio.create_task(ws_turn(chain, sc, f"drain-ws{i}", flags[-1 - i], draining))
              for i, sc in enumerate(["stop", "max_tokens_text"])]  # fmt: skip
        await asyncio.wait_for(asyncio.gather(*(f.wait() for f in flags)), TIMEOUT)
        assert not any(t.done() for t in tasks), "the turns must still be streaming at SIGTERM"
        m = (await kept.get(chain.metrics + "/metrics")).text
        assert gauge(m, 'streamfix_streams_in_flight{transport="sse"}') == len(jobs)
        assert gauge(m, 'streamfix_streams_in_flight{transport="websocket"}') == 2
        t0 = time.monotonic()
        chain.mitm.signal(signal.SIGTERM)
        chain.mitm.wait_for(r"streamfix: SIGTERM: draining", TIMEOUT)
        assert refused(chain.client_port), "a new connection during the drain must be refused"
        ready = await kept.get(chain.metrics + "/readyz")  # the metrics listener stays up
        assert ready.status_code == 503 and ready.json()["why"] == "draining"
        assert gauge((await kept.get(chain.metrics + "/metrics")).text, "streamfix_draining") == 1
        r = await kept.post(chain.base + PATHS["chat"], json=request_body("chat", "Hi. [scenario:stop] [conv:drain-n]"))
        assert r.status_code == 503 and r.headers["connection"] == "close" and "draining" in r.text
        # counted as a drain refusal, never as a gateway error (which would fire StreamfixGatewayErrors)
        m = (await kept.get(chain.metrics + "/metrics")).text
        assert re.search(
            r'^streamfix_turns_total\{api="chat",ended="draining",[^}]*transport="json"\} 1\.0$', m, re.MULTILINE
        ), m
        assert 'ended="upstream_error"' not in m
        assert chain.mitm.p.poll() is None, "mitmdump must wait for the streams in flight"
        draining.set()
        bodies = await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
        ends = await asyncio.wait_for(asyncio.gather(*ws), TIMEOUT)
    for (api, scenario), body in zip(jobs, bodies):
        assert terminal(api, body) == EXPECT[api][scenario], (api, scenario, body[-300:])
    import aiohttp

    # both WebSocket turns in flight completed; a new turn on their socket during the drain
    # was not forwarded: the socket was closed instead
    assert [e[0] for e in ends] == ["response.completed", "response.incomplete"]
    assert all(e[1] in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR) for e in ends)
    rc = chain.mitm.wait(TIMEOUT)
    took = time.monotonic() - t0
    assert rc == 0, chain.mitm.tail()
    assert "every stream in flight finished" in chain.mitm.output
    assert took >= FRAME_MS / 1000, took
    lines = [orjson.loads(x) for x in chain.turns.read_bytes().splitlines()]
    sse = [t for t in lines if t["transport"] == "sse"]
    assert len(sse) == 1 + len(jobs)  # the keep-alive one, and each turn in flight; not the refused one
    assert sorted(t["ended"] for t in sse) == sorted(
        ["complete"] + ["truncated" if s in ("max_tokens", "max_tokens_text", "content_filter") else "complete"
                        for _, s in jobs]
    )  # fmt: skip
    (refusal,) = [t for t in lines if t["transport"] == "json"]
    assert (refusal["ended"], refusal["status"], refusal["path"]) == ("draining", 503, PATHS["chat"]), refusal
    wsl = [t for t in lines if t["transport"] == "websocket"]
    assert sorted(t["ended"] for t in wsl) == ["complete", "draining", "draining", "truncated"]
    for t in (t for t in wsl if t["ended"] == "draining"):  # each socket's refused second turn
        assert (t["model"], t["path"], t["bytes"]) == ("devin/swe-2", "/v1/responses", {"in": None, "out": None}), t
        assert "not forwarded" in t["error"] and "the gateway was not asked" in t["error"], t
    late = [r for r in chain.seen() if r["conv"].endswith("-late") or r["conv"] == "drain-n"]
    assert late == [], "no work refused during the drain reached Devin"


async def test_a_second_sigterm_exits_at_once(chain):
    started = asyncio.Event()
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as c:
        body = request_body("chat", "Long. [scenario:stop] [conv:drain-2nd] [delay:2000]")
        task = asyncio.create_task(_read(c, chain.base + PATHS["chat"], body, started))
        await asyncio.wait_for(started.wait(), TIMEOUT)
        chain.mitm.signal(signal.SIGTERM)
        chain.mitm.wait_for(r"streamfix: SIGTERM: draining", TIMEOUT)
        t0 = time.monotonic()
        chain.mitm.signal(signal.SIGTERM)
        rc = chain.mitm.wait(TIMEOUT)
        took = time.monotonic() - t0
        with pytest.raises(httpx.HTTPError):
            await asyncio.wait_for(task, TIMEOUT)  # cut
    assert rc == 0 and took < 10, (rc, took)
    assert "second SIGTERM: exiting now (1 stream(s) in flight cut)" in chain.mitm.output


@pytest.mark.parametrize("chain", [["--set", "streamfix_drain_timeout=1"]], indirect=True)
async def test_the_drain_is_bounded_by_its_timeout(chain):
    started = asyncio.Event()
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as c:
        body = request_body("chat", "Long. [scenario:stop] [conv:drain-to] [delay:2000]")
        task = asyncio.create_task(_read(c, chain.base + PATHS["chat"], body, started))
        await asyncio.wait_for(started.wait(), TIMEOUT)
        t0 = time.monotonic()
        chain.mitm.signal(signal.SIGTERM)
        rc = chain.mitm.wait(TIMEOUT)
        took = time.monotonic() - t0
        with pytest.raises(httpx.HTTPError):
            await asyncio.wait_for(task, TIMEOUT)
    assert rc == 0 and 1 <= took < 10, (rc, took)
    assert "streamfix: drain timeout after" in chain.mitm.output and "1 stream(s) still in flight" in chain.mitm.output


async def _read(c: httpx.AsyncClient, url: str, body: dict, started: asyncio.Event) -> bytes:
    out = b""
    async with c.stream("POST", url, json=body) as r:
        async for chunk in r.aiter_raw():
            out += chunk
            started.set()
    return out
