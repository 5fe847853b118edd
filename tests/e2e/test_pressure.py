"""Under pressure: one real mitmdump with addons/repair.py in front of the replay upstream.

- many concurrent model-paced streams, each checked byte for byte against its own
  upstream (repaired where buggy, identical where clean; every stream's content is
  unique, so crossed bytes would show);
- client aborts at random points (before the request is complete, after the headers,
  mid-body; FIN or RST), then the proxy still serves and its per-flow state is gone;
- upstream faults (``streamfix.replay``'s ``X-Streamfix-Cut``/``-Stall`` knobs): reset
  mid-event, reset and close right where a repairer holds events, close without a
  terminal, a 500 JSON error, a 5 s stall: never a synthesized success (no terminal the
  upstream did not send, and the client's body is not ended as if complete), no
  complete upstream event lost, and the client's partial stream passes the contract's
  prefix rules (``wire.contract.check(..., prefix=True)``: every rule a cut stream can
  satisfy, held events included);
- garbage bodies (random bytes, invalid UTF-8, NUL, a 10 MB line with no newline, JSON
  arrays and numbers as data) pass unchanged, with no traceback in mitmdump's log;
- burst and close (an upstream that writes 2 MB at once and closes) loses nothing, with
  several such flows at once.

The CI form is short (tens of streams and aborts); ``just pressure`` runs the long form
(``STREAMFIX_PRESSURE=long``: 200 streams, 500 aborts). Nothing here is timed: latency
and capacity are ``just bench``'s and ``python -m streamfix.pressure``'s business.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest
from pressure_probe import PATH as PROBE_PATH
from streamfix.wire.apis import stream_repairer
from streamfix.wire.contract import check
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.sse import SseParser
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict
from support import REPAIR_ADDON, SUPPORT, ProxyStack, Received, live_expected, no_crash_during, replay_and_proxy

from streamfix import bench
from streamfix.bench.inprocess import repair_in_process
from streamfix.recordings import ROOT as RECORDINGS
from streamfix.recordings import Recording, all_recordings

pytestmark = pytest.mark.e2e

LONG = os.environ.get("STREAMFIX_PRESSURE") == "long"
STREAMS = 200 if LONG else 30
"""Concurrent model-paced streams."""
ABORTS = 500 if LONG else 60
"""Client aborts at random points."""
BURSTS = (4, 2) if LONG else (2, 1)
"""Burst-and-close upstreams at once, rounds (each ~2 MB of 8k events: seconds each)."""
PACE_MS = 20.0
"""Pause between a stream's events: 50 events/s, a fast model."""
PROBE_ADDON = SUPPORT / "pressure_probe.py"
REPO = [r for r in all_recordings() if r.streaming]
API_PATHS = {"responses": "/v1/responses", "chat": "/v1/chat/completions", "messages": "/v1/messages"}


# --- recordings only these tests use ----------------------------------------------
def _write(root: Path, name: str, api: str, kind: str, body: bytes, *, status: int = 200, ctype: str, chunk="event"):
    d = root / name
    d.mkdir()
    request = {"model": "m", "stream": True}
    if api == "responses":
        request = bench.RESPONSES_REQUEST
    elif api == "chat":
        request = bench.CHAT_REQUEST
    meta = {
        "description": f"tests/e2e/test_pressure.py: {name}",
        "api": api,
        "kind": kind,
        "source": "tests/e2e/test_pressure.py (synthetic)",
        "request": {"method": "POST", "path": API_PATHS[api], "body": request},
        "response": {"status": status, "headers": {"content-type": ctype}},
        "pacing": {"delay_ms": 0, "chunk": chunk},
    }
    (d / "recording.json").write_bytes(orjson.dumps(meta))
    (d / "response.body").write_bytes(body)


def _unique_stream(i: int) -> tuple[str, bytes]:
    """Stream ``i``: a short Devin turn (about 60 events) of its own (seeded) content."""
    small = {"calls": (20, 8), "reasoning": 8, "text": 16, "seed": 1000 + i, "keepalive_every": 25}
    if i % 2:
        return "chat", bench.devin_chat_stream(**small)
    return "responses", bench.devin_responses_stream(**small)


GARBAGE: dict[str, tuple[bytes, str]] = {
    # name -> (body, how it is cut into writes)
    "random": (random.Random(12).randbytes(256 * 1024), "bytes:4096"),
    "invalid-utf8": (
        (
            b'data: {"type":"response.output_text.delta","delta":"\xff\xfe\xc3"}\n\n'
            b"event: \xe2\x82\ndata: \xed\xa0\x80 lone surrogate\n\n"
            b'data: {"choices":[{"index":0,"delta":{"content":"\xc0\xaf"}}]}\n\n'
        ),
        "bytes:7",
    ),
    "nul": (
        b'data: {"type":"x","a":"\x00"}\n\n\x00\x00\ndata: \x00\n\n: \x00 comment\n\ndata: {"\x00":1}\n\n',
        "event",
    ),
    "10mb-line": (b"data: " + b"x" * (10 * 1024 * 1024), "bytes:65536"),
    "json-non-objects": (
        (
            b'data: [1,2,3]\n\ndata: 42\n\ndata: "text"\n\ndata: null\n\ndata: true\n\n'
            b'data: [{"type":"response.completed"}]\n\ndata: 1e999\n\ndata: {"a":1}garbage\n\n'
        ),
        "event",
    ),
}
ERROR_500 = b'{"error":{"message":"upstream exploded","type":"server_error","code":"internal_error"}}'
BIG = "pz-big-chat"


def _synthetic(root: Path) -> None:
    for i in range(STREAMS):
        api, body = _unique_stream(i)
        _write(root, f"pz-stream-{i}", api, "buggy", body, ctype="text/event-stream")
    for name, (body, chunk) in GARBAGE.items():
        for api in API_PATHS:
            _write(root, f"pz-garbage-{name}-{api}", api, "clean", body, ctype="text/event-stream", chunk=chunk)
    for api in API_PATHS:
        _write(root, f"pz-500-{api}", api, "clean", ERROR_500, status=500, ctype="application/json")
    _write(root, BIG, "chat", "buggy", bench.devin_chat_stream(calls=(6000, 1500)), ctype="text/event-stream")


# --- the stack --------------------------------------------------------------------
class Stack(ProxyStack):
    @property
    def port(self) -> int:
        return int(self.proxy.rsplit(":", 1)[1])

    def state(self, collect: bool = False) -> dict:
        r = httpx.get(self.proxy + PROBE_PATH + ("?collect=1" if collect else ""), timeout=30, trust_env=False)
        r.raise_for_status()
        return r.json()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("pressure")
    root = tmp / "recordings"
    shutil.copytree(RECORDINGS, root)
    _synthetic(root)
    with replay_and_proxy(root, tmp / "confdir", addons=(REPAIR_ADDON, PROBE_ADDON)) as (replay, up, mitm, proxy):
        yield Stack(root, replay, up, mitm, proxy)


@pytest.fixture(autouse=True)
def no_traceback(request: pytest.FixtureRequest):
    """No traceback, no "has crashed" in mitmdump's log while a test runs."""
    st: Stack = request.getfixturevalue("stack")
    yield from no_crash_during(request, st.mitm, st.replay)


def _headers(rec: Recording, **extra: str) -> dict[str, str]:
    h = {
        "content-type": "application/json",
        "accept-encoding": "identity",
        "x-streamfix-recording": rec.name,
        "x-streamfix-delay-ms": "0",
    }
    h.update(extra)
    return h


@dataclass
class Got:
    status: int
    body: bytes
    complete: bool
    """The body ended as HTTP says a body ends (not cut off)."""
    reads: list[tuple[float, bytes]]
    wall: tuple[float, float]

    def received(self) -> Received:
        return Received(self.status, {}, self.reads[0][0] if self.reads else 0.0, self.reads, self.wall)


def get(stack: Stack, rec: Recording, timeout: float = 60.0, **headers: str) -> Got:
    """The recording's request through the proxy; a body cut off is kept, not raised."""
    reads: list[tuple[float, bytes]] = []
    w0 = time.time()
    url = stack.proxy + rec.request["path"]
    with (
        httpx.Client(timeout=timeout, trust_env=False) as client,
        client.stream("POST", url, content=rec.request_body, headers=_headers(rec, **headers)) as r,
    ):
        complete = True
        try:
            for chunk in r.iter_raw():
                reads.append((time.monotonic(), chunk))
        except (httpx.RemoteProtocolError, httpx.ReadError):
            complete = False
        return Got(r.status_code, b"".join(c for _, c in reads), complete, reads, (w0, time.time()))


def _masked(body: bytes) -> bytes:
    """created_at is the flow's start second (the repairer fills it)."""
    return re.sub(rb'"created_at":\d+', b'"created_at":0', body)


def _events(body: bytes) -> list[bytes]:
    p = SseParser()
    return [e.raw for e in p.feed(body) + p.close()]


def _repairer(rec: Recording) -> StreamRepair:
    req = rec.request.get("body") or {}
    verdict = Verdict()
    verdict.request(req)
    model = req.get("model")
    fctx = FlowContext(model=model if isinstance(model, str) else None, request=req)
    return StreamRepair(stream_repairer(rec.api, Rules(), fctx, verdict))


def expected_stream(rec: Recording) -> bytes:
    """What the client must receive for a whole stream: the repo's hand-checked expected
    body, or, for a synthetic stream, the in-process repair (the same code path, checked
    against the hand-made expectations by the repairers' own tests)."""
    if rec.name.startswith("pz-"):
        out, s = repair_in_process(rec.api, rec.request["body"], bench.events_of(rec.body))
        assert s.error is None, s.error
        return out
    return rec.expected


# --- many streams at once ---------------------------------------------------------
async def _astream(client: httpx.AsyncClient, url: str, rec: Recording, delay_ms: float, **extra: str) -> Got:
    reads: list[tuple[float, bytes]] = []
    w0 = time.time()
    async with client.stream(
        "POST", url, content=rec.request_body, headers=_headers(rec, **{"x-streamfix-delay-ms": str(delay_ms)}, **extra)
    ) as r:
        async for chunk in r.aiter_raw():
            reads.append((time.monotonic(), chunk))
        return Got(r.status_code, b"".join(c for _, c in reads), True, reads, (w0, time.time()))


def test_concurrent_model_paced_streams(stack: Stack) -> None:
    """STREAMS streams at once, 50 events/s each: every one gets exactly its own repaired
    (or, if clean, untouched) bytes."""
    recs = []
    for i in range(STREAMS):
        recs.append(stack.rec(f"pz-stream-{i}") if i % 3 else stack.rec(REPO[(i // 3) % len(REPO)].name))

    async def run() -> list[Got]:
        limits = httpx.Limits(max_connections=STREAMS + 10, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=300, limits=limits, trust_env=False) as client:
            return await asyncio.gather(
                *(_astream(client, stack.proxy + rec.request["path"], rec, PACE_MS) for rec in recs)
            )

    results = asyncio.run(run())
    bad = []
    for rec, got in zip(recs, results):
        if rec.name.startswith("pz-"):
            ok = _masked(got.body) == _masked(expected_stream(rec))
        else:
            ok = got.body == live_expected(rec, got.received())
        if not ok or got.status != rec.status:
            bad.append(rec.name)
    assert not bad, f"{len(bad)} of {len(recs)} streams differ from their own upstream's repair: {bad[:10]}"
    assert stack.state()["flows"] == 0


# --- client aborts ----------------------------------------------------------------
def _raw_request(rec: Recording, delay_ms: float) -> bytes:
    body = rec.request_body
    head = (
        f"POST {rec.request['path']} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"accept-encoding: identity\r\nx-streamfix-recording: {rec.name}\r\nx-streamfix-delay-ms: {delay_ms}\r\n"
        "connection: close\r\n"  # a reader that wants more than the body gets EOF, not a wait
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _abort(port: int, rec: Recording, rng: random.Random) -> str:
    """One client that goes away at a random point; returns where."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    req = _raw_request(rec, delay_ms=rng.choice([0, 5, 10]))
    where = rng.choice(["in-request", "after-request", "after-headers", "mid-body", "mid-body", "mid-body"])
    try:
        if where == "in-request":
            writer.write(req[: rng.randrange(1, len(req))])
            await writer.drain()
        else:
            writer.write(req)
            await writer.drain()
            if where == "after-headers":
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            elif where == "mid-body":
                want, got = rng.randrange(1, max(2, len(rec.body))), 0
                while got < want:
                    chunk = await asyncio.wait_for(reader.read(want - got), 30)
                    if not chunk:
                        break
                    got += len(chunk)
    finally:
        if rng.random() < 0.5:  # RST instead of FIN
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
    return where


def test_client_aborts_leave_no_state(stack: Stack) -> None:
    rng = random.Random(7)
    names = [r.name for r in REPO] + [f"pz-stream-{i}" for i in range(min(STREAMS, 20))]
    recs = [stack.rec(n) for n in names]

    async def run() -> list[str]:
        out: list[str] = []
        for start in range(0, ABORTS, 50):  # 50 at a time
            out += await asyncio.gather(
                *(_abort(stack.port, rng.choice(recs), rng) for _ in range(min(50, ABORTS - start)))
            )
        return out

    wheres = asyncio.run(run())
    assert len(set(wheres)) == 4, "every abort point was exercised"
    # the proxy still serves, and serves correctly
    rec = stack.rec("chat-devin-late-header")
    got = get(stack, rec)
    assert got.complete and got.body == rec.expected
    # mitmproxy notices each abort when it next reads or writes that connection: bounded wait
    deadline = time.monotonic() + 30
    while (state := stack.state())["flows"] or state["pending"]:
        assert time.monotonic() < deadline, f"per-flow state left after {ABORTS} aborts: {state}"
        time.sleep(0.2)
    state = stack.state(collect=True)
    assert state["live_flows"] <= 2, state  # the probe's own flow (and at most one other)


# --- upstream faults --------------------------------------------------------------
_TERMINALS = (
    rb'"type":"response\.(?:completed|incomplete|failed)"',
    rb'"finish_reason":"',
    rb"data: \[DONE\]",
    rb'"type":"message_stop"',
    rb'"stop_reason":"',
    rb'"finishReason":"',
)


def _terminals(body: bytes) -> list[int]:
    return [len(re.findall(p, body)) for p in _TERMINALS]


def _boundaries(body: bytes) -> list[int]:
    """Byte offsets where each event ends."""
    out, n = [], 0
    for raw in _events(body):
        n += len(raw)
        out.append(n)
    return out


def _fault_cases() -> list[tuple[str, int, str, str]]:
    """(recording, byte offset, close|reset, why): right after every event where a
    repairer holds events back, mid-event, and just before the terminal."""
    cases = []
    by_api: dict[str, Recording] = {}
    for rec in REPO:
        s = _repairer(rec)
        ends = _boundaries(rec.body)
        for k, raw in enumerate(_events(rec.body)):
            s.feed(raw)
            if s.repairer.held:
                for how in ("close", "reset"):
                    cases.append((rec.name, ends[k], how, f"holding after event {k}"))
        if rec.kind == "buggy" and rec.api in API_PATHS and len(ends) > 4:
            by_api.setdefault(rec.api, rec)
    for api, rec in sorted(by_api.items()):
        ends = _boundaries(rec.body)
        mid = (ends[len(ends) // 2 - 1] + ends[len(ends) // 2]) // 2
        cases.append((rec.name, mid, "reset", "mid-event"))
        cases.append((rec.name, mid, "close", "mid-event"))
        last = next(i for i, raw in reversed(list(enumerate(_events(rec.body)))) if any(_terminals(raw)))
        cases.append((rec.name, ends[last - 1], "close", "before the terminal"))
    return cases


FAULTS = _fault_cases()


@pytest.mark.parametrize(
    ("name", "at", "how", "why"), FAULTS, ids=[f"{n}-{a}-{h}-{w.replace(' ', '_')}" for n, a, h, w in FAULTS]
)
def test_upstream_cut(stack: Stack, name: str, at: int, how: str, why: str) -> None:
    rec = stack.rec(name)
    prefix = rec.body[:at]
    s = _repairer(rec)
    sent = s.feed(prefix)  # what the repair sends for the bytes the upstream got out
    held = len(s.repairer.held)
    dropped = getattr(s.repairer, "dropped", 0)
    # the parser's unfinished bytes: the event the cut stops in (see below); an event a
    # held-back CR ended is whole at the cut (no LF can follow it) and goes through the rules
    probe = _repairer(rec)
    probe.feed(prefix)
    pending = probe.parser.close() if probe.parser is not None else []
    unfinished = b"".join(ev.raw for ev in pending if not ev.complete)
    held += sum(1 for ev in pending if ev.complete)
    salvaged = s.salvage()  # the held events, repaired as far as a cut stream allows, and the half event
    dropped = (
        getattr(s.repairer, "dropped", 0) - dropped
    )  # by a rule, on purpose (e.g. the message_stop of a hidden failure)
    got = get(stack, rec, **{"x-streamfix-cut": f"{at}:{how}", "x-streamfix-delay-ms": "5"})

    assert got.status == rec.status
    assert not got.complete, "the upstream was cut: the client's body must not end as if complete"
    assert all(g <= u for g, u in zip(_terminals(got.body), _terminals(prefix))), (
        "a terminal the upstream never sent (a synthesized success)"
    )
    assert _masked(got.body).startswith(_masked(sent)), "events before the cut were lost or changed"
    # what the repairer held at the cut arrives repaired, the unfinished event as it came
    # (addons/salvage.py): the client has every event the upstream sent (the parser's
    # unfinished bytes: the event the cut stops in), but those a rule drops on purpose
    assert salvaged.endswith(unfinished)
    assert _masked(got.body) == _masked(sent + salvaged)
    lost = len(_events(sent)) + held - dropped - len(_events(got.body[: len(got.body) - len(unfinished)]))
    assert lost <= 0, f"{lost} complete upstream event(s) never reached the client"
    # the partial stream satisfies every rule its prefix can; a first tool-call
    # header whose name never came stays nameless (no repair makes one up), only where
    # the gateway sent one
    bad = {v.rule for v in check(rec.api, got.body, prefix=True)} if rec.api in API_PATHS else set()
    assert bad <= {"chat.tool_name"}, f"the client's partial stream breaks {sorted(bad)}"
    if bad:
        assert "chat.tool_name" in {v.rule for v in check(rec.api, prefix, prefix=True)}


@pytest.mark.parametrize("api", sorted(API_PATHS))
def test_upstream_500_json_error_unchanged(stack: Stack, api: str) -> None:
    rec = stack.rec(f"pz-500-{api}")
    got = get(stack, rec)
    assert (got.status, got.body, got.complete) == (500, ERROR_500, True)


def test_upstream_stall(stack: Stack) -> None:
    """A 5 s stall mid-stream: what came before it reaches the client during the stall,
    the rest after it, nothing is lost and nothing is made up meanwhile."""
    rec = stack.rec("chat-devin-truncated-toolcall")
    ends = _boundaries(rec.body)
    at = ends[len(ends) // 2]
    before = _repairer(rec).feed(rec.body[:at])
    got = get(stack, rec, **{"x-streamfix-stall": f"{at}:5000"})
    assert got.complete and got.body == rec.expected
    # the events before the stall arrived at least 4 s before the last byte
    t_end = got.reads[-1][0]
    n, early = 0, b""
    for t, chunk in got.reads:
        if t < t_end - 4:
            early += chunk
        n += len(chunk)
    assert early == before, "the events sent before the stall waited for it"


# --- garbage ----------------------------------------------------------------------
@pytest.mark.parametrize("api", sorted(API_PATHS))
@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_passes_unchanged(stack: Stack, kind: str, api: str) -> None:
    rec = stack.rec(f"pz-garbage-{kind}-{api}")
    got = get(stack, rec)
    assert got.complete
    assert len(got.body) == len(rec.body) and got.body == rec.body


# --- burst and close --------------------------------------------------------------
def test_burst_and_close_concurrent(stack: Stack) -> None:
    """Several upstreams at once each write ~2 MB in one burst and close: every client
    gets every repaired byte, terminal included (the tail a proxy can lose on such a close)."""
    rec = stack.rec(BIG)
    want = expected_stream(rec)

    async def run() -> list[Got]:
        async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
            return await asyncio.gather(
                *(
                    _astream(client, stack.proxy + rec.request["path"], rec, 0, **{"x-streamfix-close": "1"})
                    for _ in range(BURSTS[0])
                )
            )

    for _ in range(BURSTS[1]):
        for got in asyncio.run(run()):
            assert len(got.body) == len(want)
            assert got.body == want
