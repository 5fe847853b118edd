"""scripts/sidecar, the README's run command: starts from a fresh state, serves repaired
streams on its listen port, and stops cleanly, leaving no replay upstream behind.

"Fresh state": its own empty HOME, so mitmproxy creates a new CA in ``~/.mitmproxy``.
The sidecar is stopped the three ways it meets in practice: Ctrl-C in a terminal (SIGINT
to its foreground process group: here the new session the test started it in), ``kill
-INT`` of the launcher only, and ``kill`` (SIGTERM) of the launcher only. Each time it
must exit 0 after mitmdump's own clean shutdown, and the replay upstream must be gone.
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest
from support import (
    ROOT,
    Proc,
    alive,
    assert_same,
    child_env,
    children,
    fetch,
    free_port,
    kill_pids,
    live_expected,
    port_open,
    wait_gone,
)

from streamfix.recordings import Recording, all_recordings

pytestmark = pytest.mark.e2e

STOP_TIMEOUT = 20.0


def _demo_recording() -> Recording | None:
    """A buggy streamed recording (the repair must show), preferring a chat one (README)."""
    buggy = [r for r in all_recordings() if r.streaming and r.kind == "buggy" and r.expected != r.body]
    buggy.sort(key=lambda r: (r.api != "chat", r.name))
    return buggy[0] if buggy else None


class Sidecar:
    def __init__(self, tmp: Path) -> None:
        home = tmp / "home"
        home.mkdir()
        self.home = home
        for attempt in range(3):  # the port is free when picked; retry if someone takes it
            self.port = free_port()
            self.proc = Proc(
                [str(ROOT / "scripts" / "sidecar"), "--listen", f"127.0.0.1:{self.port}"],
                env=child_env(HOME=str(home)),
                new_session=True,
                default_sigint=True,  # Ctrl-C reaches it as in a terminal, however this test runs
            )
            try:
                # bootstrap may have to install the venv first: generous
                self.proc.wait_for(rf"listening at 127\.0\.0\.1:{self.port}", timeout=180)
                break
            except (RuntimeError, TimeoutError):
                self.proc.stop()
                if attempt == 2 or "Address already in use" not in self.proc.output:
                    raise
        self.kids = children(self.proc.pid)

    def close(self) -> None:
        """Teardown: whatever is still running of ours goes, by pid."""
        self.proc.stop()
        kill_pids(self.kids)


@pytest.fixture
def sidecar(tmp_path: Path):
    s = Sidecar(tmp_path)
    try:
        yield s
    finally:
        s.close()


def test_serves_repaired_stream(sidecar: Sidecar) -> None:
    assert len(sidecar.kids) == 2, f"replay upstream and mitmdump, got {sidecar.kids}"
    rec = _demo_recording()
    if rec is None:
        pytest.skip("no buggy streamed recording yet")
    got = fetch(
        f"http://127.0.0.1:{sidecar.port}{rec.request['path']}",
        body=rec.request_body,
        headers={"content-type": "application/json", "accept-encoding": "identity", "x-streamfix-recording": rec.name},
    )
    assert got.status == 200
    assert got.headers["content-type"].startswith("text/event-stream")
    assert_same(got.body, live_expected(rec, got))
    assert got.body != rec.body
    assert (sidecar.home / ".mitmproxy" / "mitmproxy-ca-cert.pem").exists(), "a fresh mitmproxy CA in the new HOME"


@pytest.mark.parametrize("how", ["ctrl-c", "sigint", "sigterm"])
def test_stops_cleanly(sidecar: Sidecar, how: str) -> None:
    kids = list(sidecar.kids)
    assert len(kids) == 2 and all(alive(k) for k in kids)
    if how == "ctrl-c":  # a terminal sends SIGINT to the foreground process group
        assert os.getpgid(sidecar.proc.pid) == sidecar.proc.pid  # the session this test made
        os.killpg(sidecar.proc.pid, signal.SIGINT)
    else:
        sidecar.proc.signal(signal.SIGINT if how == "sigint" else signal.SIGTERM)
    rc = sidecar.proc.wait(STOP_TIMEOUT)
    left = wait_gone(kids, STOP_TIMEOUT)
    assert left == [], f"still running after the sidecar exited: {left}"
    assert not port_open(sidecar.port)
    assert rc == 0, sidecar.proc.tail()
    assert "Traceback" not in sidecar.proc.output, sidecar.proc.tail()


@pytest.mark.parametrize("how", ["sigint", "sigterm"])
def test_an_idle_keep_alive_connection_at_exit_ends_quietly(sidecar: Sidecar, how: str) -> None:
    """A connection still open when the sidecar stops (a client's, or CPA's idle keep-alive
    connection to the upstream listener) is cancelled at exit; on CPython 3.12.1 asyncio
    printed ``Exception in callback ... CancelledError`` with a traceback for it."""
    rec = next(r for r in all_recordings() if r.name == "chat-devin-nonstream")
    with socket.create_connection(("127.0.0.1", sidecar.port), timeout=30) as s:
        head = (f"POST {rec.request['path']} HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                f"x-streamfix-recording: {rec.name}\r\ncontent-length: {len(rec.request_body)}\r\n\r\n")  # fmt: skip
        s.sendall(head.encode() + rec.request_body)
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(65536)
        assert got.startswith(b"HTTP/1.1 200"), got[:200]
        # the connection stays open (keep-alive), idle, while the sidecar stops
        sidecar.proc.signal(signal.SIGINT if how == "sigint" else signal.SIGTERM)
        rc = sidecar.proc.wait(STOP_TIMEOUT)
    assert rc == 0, sidecar.proc.tail()
    assert "Traceback" not in sidecar.proc.output and "CancelledError" not in sidecar.proc.output, sidecar.proc.tail()


def test_sigterm_lets_a_stream_in_flight_finish(sidecar: Sidecar) -> None:
    """SIGTERM to the launcher (systemd, docker stop) drains: the paced stream in flight is
    delivered whole and repaired, then everything exits 0."""
    import threading

    import httpx

    rec = _demo_recording()
    if rec is None:
        pytest.skip("no buggy streamed recording yet")
    first = threading.Event()
    out: dict = {}

    def read() -> None:
        h = {"content-type": "application/json", "accept-encoding": "identity",
             "x-streamfix-recording": rec.name, "x-streamfix-delay-ms": "150"}  # fmt: skip
        with httpx.stream("POST", f"http://127.0.0.1:{sidecar.port}{rec.request['path']}", content=rec.request_body,
                          headers=h, timeout=STOP_TIMEOUT, trust_env=False) as r:  # fmt: skip
            body = b""
            for chunk in r.iter_raw():
                body += chunk
                first.set()
            out["body"], out["status"] = body, r.status_code

    t = threading.Thread(target=read, daemon=True)
    t.start()
    assert first.wait(STOP_TIMEOUT)
    sidecar.proc.signal(signal.SIGTERM)
    t.join(STOP_TIMEOUT * 2)
    assert out.get("status") == 200, sidecar.proc.tail()
    assert out["body"] == rec.expected, "the stream in flight was delivered whole and repaired"
    rc = sidecar.proc.wait(STOP_TIMEOUT)
    assert rc == 0, sidecar.proc.tail()
    assert "every stream in flight finished" in sidecar.proc.output
    assert wait_gone(sidecar.kids, STOP_TIMEOUT) == []
