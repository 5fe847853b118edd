"""End to end: Responses over WebSocket (Codex's transport) through real mitmdump.

The replay upstream (python -m streamfix.replay) serves every streaming Responses recording
over a WebSocket as CPA does (one text message per SSE ``data:`` JSON); mitmdump with
addons/repair.py in reverse mode in front of it; an aiohttp WebSocket client sends
``response.create`` messages and reads each turn up to its terminal event. What a turn
must receive is the recording's hand-checked ``expected.body`` in WebSocket form (each
``data:`` JSON as one message), byte for byte: the same repair as on SSE.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import time
from pathlib import Path

import aiohttp
import orjson
import pytest
from support import ProxyStack, no_crash_during, replay_and_proxy, show_logs_on_failure, start_mitmdump
from wsturns import BUGGY, RESPONSES, TERMINALS, expected

from streamfix.recordings import ROOT as RECORDINGS
from streamfix.recordings import load
from streamfix.replay import ws_messages

pytestmark = pytest.mark.e2e


TIMEOUT = 60.0


Stack = ProxyStack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("ws")
    root = tmp / "recordings"
    shutil.copytree(RECORDINGS, root)  # a snapshot: recordings may land while we run
    with replay_and_proxy(root, tmp / "confdir") as (replay, upstream, mitm, proxy):
        yield Stack(root, replay, upstream, mitm, proxy)


@pytest.fixture(autouse=True)
def no_crash(request: pytest.FixtureRequest):
    if "stack" not in request.fixturenames:
        yield
        return
    st: Stack = request.getfixturevalue("stack")
    yield from no_crash_during(request, st.mitm, st.replay)


# --- helpers ------------------------------------------------------------------------
def create(name: str, **extra) -> str:
    """The recording's request as a response.create, naming the recording in ``metadata``."""
    rec = load(name)
    body = {k: v for k, v in rec.request.get("body", {}).items() if k != "stream"}
    meta = {"streamfix_recording": name}
    return orjson.dumps({"type": "response.create", **body, "metadata": meta, **extra}).decode()


async def read_turn(ws: aiohttp.ClientWebSocketResponse) -> tuple[list[bytes], bool]:
    """Messages up to and including a terminal event; (messages, whether a terminal came)."""
    out: list[bytes] = []
    while True:
        msg = await asyncio.wait_for(ws.receive(), TIMEOUT)
        if msg.type != aiohttp.WSMsgType.TEXT:
            return out, False
        data = msg.data.encode()
        out.append(data)
        if orjson.loads(data).get("type") in TERMINALS:
            return out, True


async def run_turns(
    url: str, names: list[str], headers: dict[str, str] | None = None
) -> list[tuple[list[bytes], tuple[float, float]]]:
    """One socket, one turn per name: each turn's messages and wall-clock bounds."""
    out = []
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            url + "/v1/responses", headers=headers or {}, timeout=aiohttp.ClientWSTimeout(ws_close=TIMEOUT)
        ) as ws,
    ):
        for name in names:
            t0 = time.time()
            await ws.send_str(create(name))
            msgs, _ = await read_turn(ws)
            out.append((msgs, (t0, time.time())))
    return out


def assert_turn(stack: Stack, name: str, got: list[bytes], wall) -> None:
    want = expected(stack.rec(name), got, wall)
    assert [m.decode() for m in got] == [m.decode() for m in want], name


def assert_sequence(msgs: list[bytes]) -> None:
    seqs = [orjson.loads(m).get("sequence_number") for m in msgs]
    seqs = [s for s in seqs if isinstance(s, int)]
    assert all(a < b for a, b in itertools.pairwise(seqs)), seqs


# --- the upstream really speaks WebSocket ----------------------------------------------
def test_replay_serves_websocket(stack: Stack) -> None:
    """Straight at the replay upstream: the raw data JSONs, one message each, logged."""
    n0 = len(stack.replay.lines)
    name = BUGGY[0]
    [(got, _)] = asyncio.run(run_turns(stack.upstream, [name]))
    assert got == ws_messages(stack.rec(name).body)
    stack.replay.wait_for(rf"websocket turn 1 on /v1/responses: recording {name}", 10, start=n0)


# --- every recording, repaired exactly as its SSE form -------------------------------
@pytest.mark.parametrize("name", RESPONSES)
def test_recording_over_websocket(stack: Stack, name: str) -> None:
    [(got, wall)] = asyncio.run(run_turns(stack.proxy, [name]))
    assert_turn(stack, name, got, wall)
    assert_sequence(got)


def test_buggy_recordings_need_repair() -> None:
    """The comparison above can fail: raw, every buggy recording differs from its expected form."""
    for name in BUGGY:
        rec = load(name)
        assert ws_messages(rec.body) != ws_messages(rec.expected), name


def test_several_turns_on_one_socket(stack: Stack) -> None:
    names = BUGGY + list(reversed(RESPONSES))
    n0 = len(stack.mitm.lines)
    turns = asyncio.run(run_turns(stack.proxy, names))
    for name, (got, wall) in zip(names, turns):
        assert_turn(stack, name, got, wall)
        assert_sequence(got)
    # one receipt per repaired turn, numbered (every buggy recording needs a repair)
    stack.mitm.wait_for(rf"WebSocket turn {len(BUGGY)}: (verdict \w+; )?fixed ", 10, start=n0)
    stack.mitm.wait_count(r"WebSocket turn \d+: (verdict \w+; )?fixed ", 2 * len(BUGGY), 10, start=n0)


@pytest.mark.parametrize(
    "knobs",
    [
        {"x-streamfix-ws-fragment": "7"},
        {"x-streamfix-ws-coalesce": "1"},
        {"x-streamfix-ws-fragment": "50", "x-streamfix-ws-coalesce": "1"},
    ],
    ids=["fragmented", "coalesced", "both"],
)
def test_framing(stack: Stack, knobs: dict[str, str]) -> None:
    """Messages split into continuation frames, and a whole turn in one TCP write."""
    turns = asyncio.run(run_turns(stack.proxy, BUGGY, {**knobs, "x-streamfix-delay-ms": "0"}))
    for name, (got, wall) in zip(BUGGY, turns):
        assert_turn(stack, name, got, wall)


def test_fifty_concurrent_sockets(stack: Stack) -> None:
    """50 sockets at once, each its own sequence of turns, no pauses upstream: every
    message in its place, sequence_number strictly increasing per turn."""
    plans = [[RESPONSES[(i + j * (1 + i % 3)) % len(RESPONSES)] for j in range(3)] for i in range(50)]

    async def main():
        return await asyncio.gather(*(run_turns(stack.proxy, plan, {"x-streamfix-delay-ms": "0"}) for plan in plans))

    results = asyncio.run(main())
    for plan, turns in zip(plans, results):
        for name, (got, wall) in zip(plan, turns):
            assert_turn(stack, name, got, wall)
            assert_sequence(got)


def test_upstream_closes_mid_turn(stack: Stack) -> None:
    """The upstream drops the connection after some messages (no close frame, as CPA does):
    the client gets a prefix of the repaired turn, no terminal, and a closed socket."""
    name = "responses-devin-two-calls" if "responses-devin-two-calls" in BUGGY else BUGGY[0]
    k = len(ws_messages(stack.rec(name).body)) - 1  # everything but the terminal

    async def main():
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                stack.proxy + "/v1/responses",
                headers={"x-streamfix-ws-close-after": str(k)},
                timeout=aiohttp.ClientWSTimeout(ws_close=TIMEOUT),
            ) as ws,
        ):
            await ws.send_str(create(name))
            msgs, terminal = await read_turn(ws)
            return msgs, terminal

    t0 = time.time()
    got, terminal = asyncio.run(main())
    want = expected(stack.rec(name), got, (t0, time.time()))
    assert not terminal
    assert got, "the messages before the drop arrive"
    assert not any(orjson.loads(m)["type"] in TERMINALS for m in got), "no synthesized terminal"
    assert got == want[: len(got)]


# --- policy ---------------------------------------------------------------------------
@pytest.fixture
def policy_mitm(stack: Stack, tmp_path: Path, request: pytest.FixtureRequest):
    proc, port = start_mitmdump(stack.upstream, tmp_path / "confdir", "--set", f"streamfix_websocket={request.param}")
    show_logs_on_failure(request, {"mitmdump " + request.param: proc})
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        proc.stop()


@pytest.mark.parametrize("policy_mitm", ["pass"], indirect=True)
def test_pass_leaves_messages_untouched(stack: Stack, policy_mitm) -> None:
    _, proxy = policy_mitm
    turns = asyncio.run(run_turns(proxy, BUGGY))
    for name, (got, _) in zip(BUGGY, turns):
        assert got == ws_messages(stack.rec(name).body)


@pytest.mark.parametrize("policy_mitm", ["refuse"], indirect=True)
def test_refuse_answers_426(stack: Stack, policy_mitm) -> None:
    proc, proxy = policy_mitm
    n0 = len(stack.replay.lines)
    with pytest.raises(aiohttp.WSServerHandshakeError) as e:
        asyncio.run(run_turns(proxy, BUGGY[:1]))
    assert e.value.status == 426
    proc.wait_for(r"WebSocket upgrade refused with 426", 10)
    assert not any("websocket turn" in line for line in stack.replay.lines[n0:])
