"""RSS flat under client aborts: the sidecar as an operator runs it (the launcher,
its demo upstream replaying the recordings at their own pace), eight clients at a time
sending a recording's request and going away after 0 to 0.4 s (FIN or RST: in the
request, before the headers, mid-stream). After a warm-up of 1,300 aborts, the resident
memory of its mitmdump, read from /proc from outside, may grow by at most 1 MB per 1,000
further aborts; and no flow state outlives its client (tests/support/pressure_probe.py).

The cause it guards against: addons/gateway.py's connection check (``connection_strategy
=lazy``) waited up to 10 s for a gateway slow to accept, and mitmproxy does not cancel a
pending hook when its client goes, so each aborted client's flow, connection handler and
layers stayed alive meanwhile: 220-240 of them at once in a round of 1,000 aborts here,
+12.5 MB of RSS in that round (which the allocator then keeps). The check now ends when
the client disconnects. A measurement with a bound, not a timing: RSS is what the issue
measures, and the bound is about 3x this machine's worst round after the fix.
"""

from __future__ import annotations

import random
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from support import SUPPORT, Proc, child_env, free_port

from streamfix.recordings import all_recordings

pytestmark = pytest.mark.e2e

PROBE = SUPPORT / "pressure_probe.py"
WARMUP = 1300
ROUNDS = 2
PER_ROUND = 1000
MAX_MB_PER_1000 = 1.0
CLIENTS = 8


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def abort(port: int, rec, seconds: float, how: str) -> None:
    """The recording's request, read for ``seconds``, then gone (FIN, or RST)."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        return
    try:
        body = rec.request_body
        head = (
            f"POST /rec/{rec.name}{rec.request['path']} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode()
        s.sendall(head + body)
        s.settimeout(0.05)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                if not s.recv(65536):
                    break
            except TimeoutError:
                pass
        if how == "rst":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    finally:
        s.close()


def aborts(port: int, n: int, rnd: random.Random, recs: list) -> None:
    jobs = iter([(rnd.choice(recs), rnd.uniform(0, 0.4), rnd.choice(("fin", "rst"))) for _ in range(n)])
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                job = next(jobs, None)
            if job is None:
                return
            abort(port, *job)

    threads = [threading.Thread(target=worker) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(3)  # the last flows end (the replay upstream notices its closed connections)


def test_rss_is_flat_under_client_aborts(tmp_path: Path) -> None:
    recs = [r for r in all_recordings() if r.request.get("method", "POST") == "POST"]
    port = free_port()
    proc = Proc(
        [sys.executable, "-m", "streamfix.sidecar", "--listen", f"127.0.0.1:{port}", "--",
         "--set", f"confdir={tmp_path}", "-s", str(PROBE)],
        env=child_env(HOME=str(tmp_path)), new_session=True,
    )  # fmt: skip
    try:
        proc.wait_for(rf"listening at 127\.0\.0\.1:{port}", 120)
        kids = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        (mitm,) = [int(k) for k in kids if b"mitmdump" in Path(f"/proc/{k}/cmdline").read_bytes()]

        def state() -> dict:
            return httpx.get(f"http://127.0.0.1:{port}/__streamfix/state", timeout=60, trust_env=False).json()

        rnd = random.Random(32)
        aborts(port, WARMUP, rnd, recs)
        rss = [rss_kb(mitm)]
        held = []
        for _ in range(ROUNDS):
            aborts(port, PER_ROUND, rnd, recs)
            rss.append(rss_kb(mitm))
            s = state()
            held.append((s["flows"], s["pending"]))
        per_1000 = (rss[-1] - rss[0]) / 1024 / (ROUNDS * PER_ROUND / 1000)
        print(f"RSS after warm-up and each {PER_ROUND} aborts (KB): {rss}; {per_1000:+.2f} MB per 1,000")
        assert held == [(0, 0)] * ROUNDS, f"flow state held after the aborts (flows, pending): {held}"
        assert per_1000 <= MAX_MB_PER_1000, f"RSS {rss} KB: {per_1000:+.2f} MB per 1,000 aborts"
        assert "Traceback" not in proc.output and "has crashed" not in proc.output, proc.tail()
    finally:
        proc.stop()
