"""End to end: real mitmdump with addons/repair.py in reverse mode in front of the replay
upstream (python -m streamfix.replay), read through it by a streaming HTTP/1.1 client.

The recordings tests are generic over ``streamfix.recordings.all_recordings()``: each
recording's expected body (hand-checked; a clean one's own body) is what the client must
receive, however the upstream delivers it (paced, gzip-encoded, burst and closed), and
what the buffered paths (``mitmdump -nr``, ``--server-replay``) must produce.

One replay upstream and one mitmdump per module (per xdist worker), on ports the OS
picks; every wait is bounded; both are stopped at teardown.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from mitmproxy import io
from support import (
    REPAIR_ADDON,
    ROOT,
    SUPPORT,
    ProxyStack,
    Received,
    assert_same,
    fetch,
    live_expected,
    no_crash_during,
    replay_and_proxy,
    run_mitmdump,
    start_mitmdump,
)

from streamfix import bench
from streamfix.bench.inprocess import repair_in_process
from streamfix.recordings import ROOT as RECORDINGS
from streamfix.recordings import Recording, all_recordings, to_flow
from streamfix.replay import sse_pieces

pytestmark = pytest.mark.e2e

INJECT_ADDON = SUPPORT / "e2e_inject.py"
RECS = all_recordings()
ALL = [r.name for r in RECS]
STREAMING = [r.name for r in RECS if r.streaming]

TEXT = "zz-e2e-text-on-api-path"
BIG_CHAT = "zz-e2e-big-chat"


def _per_api_longest() -> list[str]:
    """For each API, its streaming recording with the most events (buggy ones first)."""
    best: dict[str, Recording] = {}
    for r in RECS:
        if not r.streaming or len(bench.events_of(r.body)) < 3:
            continue
        key = (r.kind == "buggy", len(bench.events_of(r.body)))
        cur = best.get(r.api)
        if cur is None or key > (cur.kind == "buggy", len(bench.events_of(cur.body))):
            best[r.api] = r
    return sorted(r.name for r in best.values())


# --- the stack ----------------------------------------------------------------------
def _write_recording(root: Path, name: str, meta: dict, body: bytes) -> None:
    d = root / name
    d.mkdir()
    (d / "recording.json").write_bytes(orjson.dumps(meta, option=orjson.OPT_INDENT_2))
    (d / "response.body").write_bytes(body)


def _synthetic(root: Path) -> None:
    """Recordings only these tests use (written next to a copy of recordings/)."""
    _write_recording(
        root,
        TEXT,
        {
            "description": "a text/plain 200 on an API path (a gateway's odd answer): must pass untouched",
            "api": "responses",
            "kind": "clean",
            "source": "tests/e2e/test_e2e.py",
            "request": {"method": "POST", "path": "/v1/responses", "body": {"model": "m", "stream": True}},
            "response": {"status": 200, "headers": {"content-type": "text/plain; charset=utf-8"}},
        },
        b'not a stream\ndata: {"type":"response.completed"}\n\n\xff\xfe raw bytes\n',
    )
    _write_recording(
        root,
        BIG_CHAT,
        {
            "description": "a long Devin chat turn (~8k events, ~2 MB) for the burst-and-close test",
            "api": "chat",
            "kind": "buggy",
            "source": "streamfix.bench.devin_chat_stream",
            "request": {"method": "POST", "path": "/v1/chat/completions", "body": bench.CHAT_REQUEST},
            "response": {"status": 200, "headers": {"content-type": "text/event-stream"}},
            "pacing": {"delay_ms": 0},
        },
        bench.devin_chat_stream(calls=(6000, 1500)),
    )


class Stack(ProxyStack):
    def send(
        self,
        rec: Recording,
        *,
        delay_ms: float = 0,
        base: str | None = None,
        path: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Received:
        """The recording's request, answered by that recording, through the proxy."""
        r = rec.request
        h = {
            k: v
            for k, v in r.get("headers", {}).items()
            if k.lower() not in ("host", "content-length", "connection", "transfer-encoding", "accept-encoding")
        }
        h.setdefault("content-type", "application/json")
        h["accept-encoding"] = "identity"
        h["x-streamfix-recording"] = rec.name
        h["x-streamfix-delay-ms"] = str(delay_ms)
        h.update(headers or {})
        return fetch(
            (base or self.proxy) + (path or r["path"]),
            method=r.get("method", "POST"),
            body=rec.request_body,
            headers=h,
            timeout=timeout,
        )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("e2e")
    root = tmp / "recordings"
    shutil.copytree(RECORDINGS, root)  # a snapshot: recordings may land while we run
    _synthetic(root)
    with replay_and_proxy(root, tmp / "confdir", addons=(REPAIR_ADDON, INJECT_ADDON)) as (
        replay,
        upstream,
        mitm,
        proxy,
    ):
        yield Stack(root, replay, upstream, mitm, proxy)


@pytest.fixture(autouse=True)
def no_crash(request: pytest.FixtureRequest):
    """mitmproxy logs "has crashed" when a stream callable raises: it must never. A failing
    test's report shows what mitmdump and the replay upstream printed meanwhile."""
    if "stack" not in request.fixturenames:
        yield
        return
    st: Stack = request.getfixturevalue("stack")
    yield from no_crash_during(request, st.mitm, st.replay)


# --- the replay upstream does what the tests below rely on --------------------------
def test_upstream_knobs(stack: Stack) -> None:
    """gzip, burst-and-close and pacing really happen upstream (direct, no proxy)."""
    rec = stack.rec(BIG_CHAT)
    got = stack.send(rec, base=stack.upstream, headers={"x-streamfix-encoding": "gzip"})
    assert got.headers["content-encoding"] == "gzip"
    assert gzip.decompress(got.body) == rec.body
    got = stack.send(rec, base=stack.upstream, headers={"x-streamfix-close": "1"})
    assert got.headers.get("connection", "").lower() == "close"
    assert got.body == rec.body
    got = stack.send(rec, base=stack.upstream, headers={"x-streamfix-framing": "length"})
    assert int(got.headers["content-length"]) == len(rec.body)
    assert got.body == rec.body


# --- every recording ----------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_recording(stack: Stack, name: str) -> None:
    rec = stack.rec(name)
    got = stack.send(rec)
    assert got.status == rec.expected_status
    assert_same(got.body, live_expected(rec, got))
    if rec.streaming:
        assert "content-length" not in got.headers or int(got.headers["content-length"]) == len(got.body)


@pytest.mark.parametrize("name", _per_api_longest())
def test_events_arrive_as_sent(stack: Stack, name: str) -> None:
    """Paced upstream: repaired events reach the client while the upstream still sends.

    With a pause of ``d`` between the upstream's ``n`` writes, the last write leaves at
    least ``(n-1)*d`` after the request. A proxy that buffered would deliver everything
    at once after that; a streaming one delivers the first events early and spreads the
    rest over the schedule. Both bounds are half the schedule, so a slow machine (which
    only adds latency) does not make the test flaky.
    """
    rec = stack.rec(name)
    writes = len(sse_pieces(rec.body, rec.meta.get("pacing", {}).get("chunk", "event")))
    delay_ms = min(300.0, max(40.0, 2000.0 / (writes - 1)))
    schedule = (writes - 1) * delay_ms / 1000
    got = stack.send(rec, delay_ms=delay_ms, timeout=30 + schedule)
    assert_same(got.body, live_expected(rec, got))
    times = got.event_times()
    assert len(times) >= 2
    first, last = times[0] - got.sent_at, times[-1] - got.sent_at
    assert last >= schedule - delay_ms / 1000, "the upstream cannot have finished before its schedule"
    assert first < schedule / 2, f"first event after {first:.2f}s of a {schedule:.2f}s schedule: buffered?"
    assert last - first >= schedule / 2, f"events arrived within {last - first:.2f}s of each other: buffered?"
    assert len({t for t in times}) >= min(len(times), writes) // 2, "events arrived in a few lumps"


@pytest.mark.parametrize("name", STREAMING)
def test_gzip_upstream(stack: Stack, name: str) -> None:
    rec = stack.rec(name)
    got = stack.send(rec, headers={"x-streamfix-encoding": "gzip", "accept-encoding": "gzip"})
    assert got.status == rec.expected_status
    assert "content-encoding" not in got.headers, "the client must get identity"
    assert_same(got.body, live_expected(rec, got))


@pytest.mark.parametrize("name", STREAMING)
def test_content_length_upstream(stack: Stack, name: str) -> None:
    """An SSE body with a Content-Length (a buffering gateway): the repaired body has
    another length, so the old header must not reach the client (it would cut the body)."""
    rec = stack.rec(name)
    got = stack.send(rec, headers={"x-streamfix-framing": "length"})
    assert got.status == rec.expected_status
    assert "content-length" not in got.headers or int(got.headers["content-length"]) == len(got.body)
    assert got.headers.get("transfer-encoding") == "chunked", "chunked keeps the connection alive"
    assert_same(got.body, live_expected(rec, got))


@pytest.mark.parametrize("client_close", [False, True], ids=["keep-alive", "client-close"])
@pytest.mark.parametrize("name", STREAMING)
def test_burst_and_close(stack: Stack, name: str, client_close: bool) -> None:
    rec = stack.rec(name)
    headers = {"x-streamfix-close": "1"}
    if client_close:
        headers["connection"] = "close"
    got = stack.send(rec, headers=headers)
    assert_same(got.body, live_expected(rec, got))


@pytest.fixture(scope="module")
def big_chat_expected(stack: Stack) -> bytes:
    rec = stack.rec(BIG_CHAT)
    out, s = repair_in_process("chat", rec.request["body"], bench.events_of(rec.body))
    assert s.error is None, s.error
    assert out != rec.body, "the long chat stream has defects to repair"
    return out


@pytest.mark.parametrize("client_close", [False, True], ids=["keep-alive", "client-close"])
def test_burst_and_close_large(stack: Stack, big_chat_expected: bytes, client_close: bool) -> None:
    """~2 MB written at once and the connection closed (the tail a proxy can lose when the upstream closes at once): the
    client still gets every repaired byte, the terminal events included."""
    rec = stack.rec(BIG_CHAT)
    headers = {"x-streamfix-close": "1"}
    if client_close:
        headers["connection"] = "close"
    for _ in range(3):
        got = stack.send(rec, headers=headers)
        assert len(got.body) == len(big_chat_expected)
        assert_same(got.body, big_chat_expected)


# --- untouched ----------------------------------------------------------------------
def test_text_body_on_api_path_untouched(stack: Stack) -> None:
    rec = stack.rec(TEXT)
    got = stack.send(rec)
    assert got.headers["content-type"].startswith("text/plain")
    assert got.body == rec.body


def test_non_api_path_untouched(stack: Stack) -> None:
    """A buggy SSE body on a path that is no API passes byte-identical (not repaired)."""
    rec = stack.rec(BIG_CHAT)
    got = stack.send(rec, path=f"/rec/{rec.name}/v1/not-an-api")
    assert got.headers["content-type"].startswith("text/event-stream")
    assert got.body == rec.body


def test_index_and_errors_untouched(stack: Stack) -> None:
    for method, path, headers in (
        ("GET", "/", {}),
        ("POST", "/v1/responses", {"x-streamfix-recording": "no-such-recording"}),  # 404 JSON
        ("POST", "/v1/chat/completions", {"x-streamfix-recording": "no-such-recording"}),
    ):
        direct = fetch(stack.upstream + path, method=method, body=b"{}", headers=headers)
        got = fetch(stack.proxy + path, method=method, body=b"{}", headers=headers)
        assert (got.status, got.body) == (direct.status, direct.body)
        assert got.body


# --- a repairer that raises ---------------------------------------------------------
@pytest.mark.parametrize("name", STREAMING + [BIG_CHAT])
def test_repairer_exception_passes_rest_through(stack: Stack, name: str) -> None:
    rec = stack.rec(name)
    raw = bench.events_of(rec.body)
    n0 = len(stack.mitm.lines)
    if not raw:  # *-empty-stream: no event to raise on; raising in end(), it passes as it came
        got = stack.send(rec, headers={"x-e2e-raise-at": "end"})
        assert got.headers.get("x-e2e-injected") == "1" and got.body == rec.body
        stack.mitm.wait_count(r"streamfix: .*repairer failed \(RuntimeError: injected", 1, start=n0)
        return

    got = stack.send(rec, headers={"x-e2e-raise-at": "0"})
    assert got.headers.get("x-e2e-injected") == "1", "the repair addon did not stream this flow"
    assert got.body == rec.body, "raising on the first event: every byte as it came"

    k = len(raw) // 2
    got = stack.send(rec, headers={"x-e2e-raise-at": str(k)})
    assert got.headers.get("x-e2e-injected") == "1"
    assert got.body.endswith(b"".join(raw[k:])), "from the failing event on, every byte as it came"

    got = stack.send(rec, headers={"x-e2e-raise-at": "end"})
    assert got.headers.get("x-e2e-injected") == "1"
    if rec.kind == "clean":
        assert got.body == rec.body
    else:
        # (the repaired stream's first byte: a rule may comment the first event out)
        assert got.body.startswith(rec.expected[:1]) and len(bench.events_of(got.body)) >= len(raw) // 2

    stack.mitm.wait_count(r"streamfix: .*repairer failed \(RuntimeError: injected", 3, start=n0)


# --- buffered paths -----------------------------------------------------------------
def _flows(path: Path) -> list:
    with path.open("rb") as f:
        return list(io.FlowReader(f).stream())


def _flow_file(tmp: Path, recs: list[Recording]) -> Path:
    """One .flow with every recording, the first converted by the CLI (the documented
    route), the rest in process (same function, without a process per recording)."""
    parts = []
    for i, rec in enumerate(recs):
        part = tmp / f"{i}.flow"
        if i == 0:
            subprocess.run(
                [sys.executable, "-m", "streamfix.recordings", "to-flow", rec.name, str(part)],
                cwd=ROOT,
                check=True,
                timeout=60,
                capture_output=True,
            )
        else:
            to_flow(rec, part)
        parts.append(part.read_bytes())
    out = tmp / "all.flow"
    out.write_bytes(b"".join(parts))  # a .flow file is a stream of flows: concatenation works
    return out


@pytest.mark.skipif(not RECS, reason="no recordings yet")
def test_offline_repair(tmp_path: Path) -> None:
    """``mitmdump -nr in.flow -s addons/repair.py -w out.flow`` repairs every recording."""
    recs = all_recordings()
    src = _flow_file(tmp_path, recs)
    out = tmp_path / "out.flow"
    r = run_mitmdump(tmp_path / "confdir", "-nr", str(src), "-w", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    flows = _flows(out)
    assert [f.comment.split("\n")[0] for f in flows] == [f"streamfix recording {rec.name}" for rec in recs]
    for rec, f in zip(recs, flows):
        assert f.response is not None
        assert_same(f.response.raw_content, rec.expected)


@pytest.mark.skipif(not RECS, reason="no recordings yet")
def test_server_replay(tmp_path: Path) -> None:
    """``--server-replay`` of a raw recording serves the repaired body (in one piece)."""
    seen, recs = set(), []
    for rec in all_recordings():  # server replay matches on method, path and body
        key = (rec.request.get("method", "POST"), rec.request["path"], rec.request_body)
        if key not in seen:
            seen.add(key)
            recs.append(rec)
    src = _flow_file(tmp_path, recs)
    mitm, port = start_mitmdump(
        "http://127.0.0.1:8317",
        tmp_path / "confdir",
        "--set",
        "connection_strategy=lazy",
        "--server-replay",
        str(src),
        "--set",
        "server_replay_extra=kill",
    )
    try:
        for rec in recs:
            got = fetch(
                f"http://127.0.0.1:{port}" + rec.request["path"],
                method=rec.request.get("method", "POST"),
                body=rec.request_body,
                headers={**rec.request.get("headers", {}), "accept-encoding": "identity"},
            )
            assert got.status == rec.expected_status, rec.name
            assert_same(got.body, live_expected(rec, got))
    finally:
        mitm.stop()
    assert "has crashed" not in mitm.output and "Traceback" not in mitm.output, mitm.output
